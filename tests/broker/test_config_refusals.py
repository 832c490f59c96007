"""Config mistakes refuse `samsa server` in one line naming the key, never a
traceback, never a broker running on defaults (issue 24, item 15)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.broker_process import REPO_ROOT
from tests.support.kafka_wire import free_port

# The server and tools refuse bad settings as child processes, where a user sees it.
pytestmark = pytest.mark.integration


def _server(config, *overrides: str, tmp_path):
    args = [sys.executable, "-m", "samsa", "server", str(config),
            "--override", f"listeners=PLAINTEXT://127.0.0.1:{free_port()}",
            "--override", f"log.dirs={tmp_path / 'data'}"]
    for kv in overrides:
        args += ["--override", kv]
    return subprocess.run(args, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)


def _one_line(proc) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("samsa:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.mark.parametrize("connect, why", [
    ("bogus:abc", "not a number"),
    ("127.0.0.1:99999", "outside 1-65535"),
])
def test_a_bad_zookeeper_connect_names_the_key(tmp_path, connect, why):
    proc = _server(REPO_ROOT / "server.properties", f"zookeeper.connect={connect}",
                   tmp_path=tmp_path)
    assert proc.returncode == 2
    line = _one_line(proc)
    assert "zookeeper.connect" in line and why in line and connect in line


@pytest.mark.parametrize("connect", ["bogus", "h1.invalid:2181,h2.invalid"])
def test_an_unresolvable_zookeeper_host_is_one_line_too(tmp_path, connect):
    # Valid as ZooKeeper reads it (port 2181 by default); nobody answers there.
    proc = _server(REPO_ROOT / "server.properties", f"zookeeper.connect={connect}",
                   "zookeeper.connection.timeout.ms=1000", tmp_path=tmp_path)
    assert proc.returncode == 1
    line = _one_line(proc)
    assert "could not connect to ZooKeeper" in line and "zookeeper.connect" in line


def test_a_config_file_without_a_broker_key_refuses_to_start(tmp_path):
    wrong = tmp_path / "producer.properties"
    wrong.write_text("bootstrap.servers=localhost:9092\nacks=all\n")
    proc = _server(wrong, tmp_path=tmp_path)
    assert proc.returncode == 2
    line = _one_line(proc)
    assert str(wrong) in line and "no broker config key" in line
    assert not (tmp_path / "data").exists()


def test_the_acls_tool_reads_zookeeper_connect_by_the_same_rule():
    proc = subprocess.run([sys.executable, "-m", "samsa", "acls", "--authorizer-properties",
                           "zookeeper.connect=bogus:abc", "--list"],
                          capture_output=True, text=True, timeout=60, cwd=REPO_ROOT)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "zookeeper.connect" in lines[0] and "not a number" in lines[0]
