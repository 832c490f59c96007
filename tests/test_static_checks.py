"""The linter and the type checker, run by the README's test command (and so by .ci/run).

Both read their configuration from pyproject.toml ([tool.ruff], [tool.mypy]): which rules,
which modules are strict, which third-party packages have no stubs. They run on the whole
tree from the repository root with this interpreter, so the versions are the test extra's.
A failure shows the checker's own report (a missing checker: ./scripts/setup.sh --test).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# ruff is a program of its own, and mypy runs as one too: they start processes
pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)


def test_ruff_finds_nothing():
    result = _run("ruff", "check", "--output-format", "concise", ".")
    assert result.returncode == 0, f"ruff check . found problems:\n{result.stdout}{result.stderr}"


def test_mypy_finds_nothing():
    # The modules and their strictness come from [tool.mypy] in pyproject.toml.
    result = _run("mypy")
    assert result.returncode == 0, f"mypy found type errors:\n{result.stdout}{result.stderr}"
