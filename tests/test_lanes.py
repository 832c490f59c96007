"""The fast lane (-m "not integration") holds only tests that start no process: the
marking in tests/conftest.py and its guard, checked here."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PROCESS_FIXTURES


def test_every_process_fixture_exists():
    # A renamed fixture would silently stop marking its tests integration.
    conftests = "".join(p.read_text() for p in Path(__file__).parent.rglob("conftest.py"))
    # and the test kit's plugin, which tests/conftest.py loads
    conftests += (Path(__file__).parent.parent / "testing" / "plugin.py").read_text()
    defined = set(re.findall(r"@pytest\.fixture[^\n]*\ndef (\w+)\(", conftests))
    assert PROCESS_FIXTURES <= defined, sorted(PROCESS_FIXTURES - defined)


def test_a_test_not_marked_integration_cannot_start_a_process():
    with pytest.raises(AssertionError, match="starts a process .* but is not marked integration"):
        subprocess.run(["true"], check=True)
