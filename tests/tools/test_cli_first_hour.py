"""A new user's first hour with the command line (issue 15): every mistake
gets one clear line and the right exit code, never a traceback."""
from __future__ import annotations

import hashlib
import os
import re
import shlex
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from samsa.config.topic import TopicConfig
from samsa.storage.log import Log
from tests.storage.helpers import batch_of
from tests.support.broker_process import REPO_ROOT, BrokerProcess
from tests.support.kafka_wire import free_port
from tests.support.process import ManagedProcess

# A newcomer's first hour: the commands, setup.sh and the server as child processes
# (the README and licence checks beside them go along for company).
pytestmark = pytest.mark.integration


def _samsa(*args, stdout=subprocess.PIPE, cwd=None, timeout=60, input=None):
    return subprocess.run([sys.executable, "-m", "samsa", *args], stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=timeout,
                          cwd=cwd or REPO_ROOT, input=input)


def _readme_commands() -> list[str]:
    """The shell lines of README.md's code blocks, continuation lines joined
    and comments dropped, as a user pastes them."""
    readme = (REPO_ROOT / "README.md").read_text()
    lines = []
    for block in re.findall(r"```sh\n(.*?)```", readme, re.S):
        lines += [re.sub(r"\s+#.*", "", line).strip()
                  for line in block.replace("\\\n", " ").splitlines()]
    return lines


def _as_run_here(command: str, bootstrap: str) -> list[str]:
    """A README ``.venv/bin/samsa ...`` line's arguments, pointed at ``bootstrap``."""
    words = shlex.split(command)
    assert words[0] == ".venv/bin/samsa", command
    return [bootstrap if w == "localhost:9092" else w for w in words[1:]]


def _into_closed_pipe(*args):
    """Run with stdout a pipe whose reader has already gone (``| head`` that
    finished): every write fails with EPIPE."""
    r, w = os.pipe()
    os.close(r)
    try:
        return _samsa(*args, stdout=w)
    finally:
        os.close(w)


def test_server_needs_its_config_file():
    p = _samsa("server")
    assert p.returncode == 2
    assert "required: config" in p.stderr and "Traceback" not in p.stderr


def test_version():
    p = _samsa("--version")
    assert p.returncode == 0
    assert re.fullmatch(r"samsa \d+\.\d+\.\d+\n", p.stdout)


def test_dump_log_mistakes_get_one_line(tmp_path):
    odd = tmp_path / "notes.log"
    odd.write_bytes(b"")
    p = _samsa("dump-log", "--files", str(odd))
    assert p.returncode == 1 and "not a segment file" in p.stderr
    assert "Traceback" not in p.stderr
    missing = tmp_path / "00000000000000000000.log"
    p = _samsa("dump-log", "--files", str(missing))
    assert p.returncode == 1 and "No such file" in p.stderr


def test_output_into_a_closed_pipe_ends_quietly(tmp_path, broker):
    lg = Log.open(str(tmp_path / "t-0"), TopicConfig())
    for _ in range(200):
        lg.append(batch_of(20))
    lg.close()
    p = _into_closed_pipe("dump-log", "--files", str(tmp_path / "t-0" / "00000000000000000000.log"),
                          "--print-data-log")
    assert p.returncode == 0 and p.stderr == ""
    p = _into_closed_pipe("topics", "--bootstrap-server", broker.bootstrap, "--describe")
    assert p.returncode == 0 and p.stderr == ""


def test_topics_names_the_address_it_could_not_reach():
    port = free_port()
    p = _samsa("topics", "--bootstrap-server", f"127.0.0.1:{port}", "--list")
    assert p.returncode == 1
    assert f"cannot reach the broker at 127.0.0.1:{port}" in p.stderr
    assert "Traceback" not in p.stderr


def test_a_port_in_use_fails_before_the_log_dirs_are_touched(tmp_path):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    data = tmp_path / "never-created"
    try:
        p = _samsa("server", str(REPO_ROOT / "server.properties"),
                   "--override", f"listeners=PLAINTEXT://127.0.0.1:{port}",
                   "--override", f"log.dirs={data}")
    finally:
        taken.close()
    assert p.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in p.stderr and "Traceback" not in p.stderr
    assert not data.exists()
    # ... and says, in the same one line, how to run on another port
    lines = [line for line in p.stderr.splitlines() if line.startswith("samsa:")]
    assert len(lines) == 1 and "--override listeners=PLAINTEXT://127.0.0.1:PORT" in lines[0]


@pytest.mark.parametrize("make_bad", ["a file", "under a file"])
def test_log_dirs_errors_name_the_key(tmp_path, make_bad):
    a_file = tmp_path / "plain-file"
    a_file.write_text("x")
    bad = a_file if make_bad == "a file" else a_file / "data"
    p = _samsa("server", str(REPO_ROOT / "server.properties"),
               "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
               "--override", f"log.dirs={bad}")
    assert p.returncode == 1
    assert "log.dirs" in p.stderr and str(bad) in p.stderr and "Traceback" not in p.stderr


def test_metrics_bind_where_the_listener_is(tmp_path):
    metrics_port = free_port()
    broker = BrokerProcess(tmp_path, overrides={"metrics.port": metrics_port})
    try:
        broker.start()  # listener on 127.0.0.1
        with socket.create_connection(("127.0.0.1", metrics_port), timeout=5):
            pass
        # Another loopback address reaches a socket bound to all interfaces,
        # not one bound to 127.0.0.1.
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.2", metrics_port), timeout=5)
    finally:
        broker.stop()


def test_license_matches_pyproject():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    license_field = project["license"]
    spdx = license_field if isinstance(license_field, str) else license_field.get("text")
    assert spdx == "Apache-2.0"
    text = (REPO_ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_readme_links_only_to_files_in_the_repository():
    readme = (REPO_ROOT / "README.md").read_text()
    for target in re.findall(r"\]\(([^)#]+)", readme) + re.findall(r"`(\.\./[^`]+)`", readme):
        if "://" in target:
            continue
        path = (REPO_ROOT / target).resolve()
        assert REPO_ROOT in path.parents or path == REPO_ROOT, target
        assert path.exists(), target


def test_the_readme_produce_and_consume_lines_end_and_print_the_record(broker):
    commands = _readme_commands()
    produce = next(c for c in commands if c.startswith("echo ") and "console-producer" in c)
    echo, _, produce = produce.partition(" | ")
    p = _samsa(*_as_run_here(produce, broker.bootstrap), input=shlex.split(echo)[1] + "\n")
    assert p.returncode == 0, p.stderr
    consume = next(c for c in commands if "console-consumer" in c and "my-topic" in c)
    # Before: --max-messages 10 after producing one record waited forever.
    p = _samsa(*_as_run_here(consume, broker.bootstrap), timeout=30)
    assert (p.returncode, p.stdout) == (0, "k1\thello\n"), p.stderr
    # The console producer created my-topic (num.partitions=1): the broker says so in English.
    assert "created topic my-topic with 1 partition\n" in broker.log_path.read_text()


def test_the_readme_says_how_to_start_on_another_port(tmp_path):
    line = re.search(r"`(\./scripts/start\.sh --override listeners=[^`]*)`",
                     (REPO_ROOT / "README.md").read_text()).group(1)
    port = free_port()
    args = [re.sub(r":\d+$", f":{port}", w) for w in shlex.split(line)[1:]]
    # start.sh's command, with the data in the test's directory rather than ./data
    server = ManagedProcess(
        "samsa broker", [sys.executable, "-m", "samsa", "server", "server.properties", *args,
                         "--override", f"log.dirs={tmp_path / 'data'}"],
        "127.0.0.1", port, tmp_path / "broker.log", cwd=REPO_ROOT)
    server.start()
    try:
        p = _samsa("topics", "--bootstrap-server", f"127.0.0.1:{port}", "--list")
        assert p.returncode == 0, p.stderr
    finally:
        server.stop()


# What setup.sh's install stamp hashes, in its order: a change to any of them reinstalls.
# What setup.sh hashes to decide whether to reinstall, read from its own line so the
# list lives in one place.
_INSTALL_SOURCES = tuple(re.search(r'want="\$\(cat ([^|]+)\|', (REPO_ROOT / "scripts/setup.sh").read_text())
                         .group(1).split())


def _setup_in(tmp_path: Path, python: str) -> subprocess.CompletedProcess:
    """scripts/setup.sh in a copy of what it reads, with PYTHON=python."""
    for name in ("scripts/setup.sh", *_INSTALL_SOURCES):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes((REPO_ROOT / name).read_bytes())
    return subprocess.run(["bash", "scripts/setup.sh"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=60, env={**os.environ, "PYTHON": python})


def test_setup_says_what_its_first_run_does(tmp_path):
    # A Python that cannot make the venv ends the run early, right after the line.
    p = _setup_in(tmp_path, "false")
    assert p.returncode == 1
    assert p.stderr.splitlines() == [
        "setup: creating .venv and installing samsa (first run, a minute or more)...",
        "setup: could not create .venv with false; on Debian: apt-get install python3-venv"]


def test_setup_is_quiet_when_there_is_nothing_to_do(tmp_path):
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    # The test run's own venv stands in for a set-up one (a symlink would lose the
    # venv: Python finds pyvenv.cfg beside the path it was started by).
    python = tmp_path / ".venv" / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    digest = hashlib.sha256(b"".join((REPO_ROOT / name).read_bytes()
                                     for name in _INSTALL_SOURCES)).hexdigest()
    (tmp_path / ".venv" / ".samsa-installed").write_text(f"{digest} [base]\n")
    p = _setup_in(tmp_path, "false")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
