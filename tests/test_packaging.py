"""One import namespace: everything samsa installs is under `samsa.`, and the project's
own code imports it that way (issue 25).

The source tree keeps its folders at the top (broker/, protocol/, ...; samsa/<folder>
links to each), so a bare `import protocol` still works from the repository root. It
must not be used: it would load a second copy of the module beside samsa.protocol
(two classes for one error, two registries), and it breaks where samsa is installed.
"""
from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("broker", "client", "config", "pipeline", "protocol", "storage", "testing", "tools")
# Everything of ours that imports samsa: the packages, and what sits around them
CODE = (*FOLDERS, "samsa", "tests", "bench", "scripts", "deploy")


def _python_files():
    for top in CODE:
        base = ROOT / top
        if base.is_symlink() or not base.is_dir():
            continue
        for path in base.rglob("*.py"):
            if "__pycache__" not in path.parts:
                yield path


def test_the_project_imports_its_packages_only_through_the_samsa_namespace():
    bare = []
    for path in _python_files():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                if name.split(".")[0] in FOLDERS:
                    bare.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}")
    assert not bare, "import these as samsa.<name>:\n" + "\n".join(bare)


# Code run as text (a child process's -c program, a `python -m` command line): the same rule
_NAMES = "|".join(FOLDERS)
_BARE_IN_TEXT = re.compile(
    rf"""(?:^|[;"'])\s*from\s+(?:{_NAMES})(?:\.\w+)*\s+import\s"""
    rf"""|(?:^|[;"'])\s*import\s+(?:{_NAMES})(?:\.\w+)*\s*(?:$|;|,|\bas\b)"""
    rf"""|["']-m["'],\s*["'](?:{_NAMES})\b""", re.M)


def test_code_in_strings_and_module_commands_use_the_samsa_namespace_too():
    bare = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            elif isinstance(node, ast.List):  # [sys.executable, "-m", "broker", ...]
                text = ", ".join(repr(e.value) for e in node.elts
                                 if isinstance(e, ast.Constant) and isinstance(e.value, str))
            else:
                continue
            if _BARE_IN_TEXT.search(text):
                bare.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:80]!r}")
    assert not bare, "use samsa.<name> (and `-m samsa`) here too:\n" + "\n".join(bare)


def test_the_source_tree_links_each_folder_under_samsa():
    for folder in FOLDERS:
        link = ROOT / "samsa" / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), link


@pytest.mark.integration  # builds the wheel with pip, in a process of its own
def test_the_wheel_installs_nothing_but_the_samsa_package(tmp_path):
    # pip builds in the tree it is given: a copy, so the checkout gets no build/ folder
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".venv", "data", "build", "wheelhouse", "*.egg-info", "__pycache__", ".*cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w",
                    str(tmp_path), str(source)], check=True, timeout=600, capture_output=True)
    (wheel,) = tmp_path.glob("samsa-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top_level = {n.split("/")[0] for n in names}
    assert top_level == {"samsa", "-".join(wheel.name.split("-")[:2]) + ".dist-info"}, top_level
    # the folders are there under samsa/, with their data, and no tests or benchmarks
    for folder in FOLDERS:
        assert f"samsa/{folder}/__init__.py" in names, folder
    assert any(n.startswith("samsa/protocol/messages/schemas/") and n.endswith(".json")
               for n in names)
    assert not any(n.startswith(("samsa/tests/", "samsa/bench/")) for n in names)
    # what type checkers in users' projects read (PEP 561): the marker and the generated stubs
    assert {"samsa/py.typed", "samsa/protocol/messages/__init__.pyi",
            "samsa/protocol/records/_walker.pyi", "samsa/protocol/records/_columns.pyi"
            } <= set(names)
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    entry_text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "samsa = samsa.tools.cli:main" in entry_text
    # the test kit: its modules and its pytest plugin, found by pytest in users' projects
    assert {"samsa/testing/plugin.py", "samsa/testing/forkserver.py",
            "samsa/testing/faults.py"} <= set(names)
    assert "[pytest11]\nsamsa = samsa.testing.plugin" in entry_text
    # the kit never reaches into the repository's tests/ (they are not installed)
    kit = [n for n in names if n.startswith("samsa/testing/") and n.endswith(".py")]
    imports_tests = re.compile(r"^\s*(?:from|import)\s+tests\b", re.M)
    assert not [n for n in kit if imports_tests.search(zipfile.ZipFile(wheel).read(n).decode())]
    metadata = next(n for n in names if n.endswith("METADATA"))
    assert "Provides-Extra: testing" in zipfile.ZipFile(wheel).read(metadata).decode()
