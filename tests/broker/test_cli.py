"""The `samsa` command line: a bad config refuses to start, and `samsa topics` works."""
from __future__ import annotations

import re
import subprocess
import sys
import uuid

from broker.cli import COMMANDS
from tests.support.broker_process import REPO_ROOT


def _samsa(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "broker", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_bad_config_value_refuses_to_start_naming_the_key(tmp_path):
    p = _samsa("server", str(REPO_ROOT / "server.properties"), "--override", f"log.dirs={tmp_path}",
               "--override", "log.segment.bytes=lots")
    assert p.returncode == 2
    assert "log.segment.bytes" in p.stderr and "lots" in p.stderr
    assert "Traceback" not in p.stderr


def test_missing_config_file_is_a_clear_error(tmp_path):
    p = _samsa("server", str(tmp_path / "nope.properties"))
    assert p.returncode == 2
    assert "nope.properties" in p.stderr
    assert "Traceback" not in p.stderr


def test_topics_create_list_describe_alter_delete(broker):
    topic = f"cli-{uuid.uuid4().hex[:6]}"
    b = ["--bootstrap-server", broker.bootstrap]
    p = _samsa("topics", *b, "--create", "--topic", topic, "--partitions", "2",
               "--config", "retention.ms=60000")
    assert p.returncode == 0, p.stderr
    assert topic in _samsa("topics", *b, "--list").stdout.split()
    out = _samsa("topics", *b, "--describe", "--topic", topic).stdout
    assert "PartitionCount: 2" in out and "retention.ms=60000" in out
    assert out.count(f"Topic: {topic}\tPartition:") == 2
    assert _samsa("topics", *b, "--alter", "--topic", topic, "--partitions", "3").returncode == 0
    assert "PartitionCount: 3" in _samsa("topics", *b, "--describe", "--topic", topic).stdout
    again = _samsa("topics", *b, "--create", "--topic", topic)
    assert again.returncode == 1 and "TOPIC_ALREADY_EXISTS" in again.stderr
    assert _samsa("topics", *b, "--delete", "--topic", topic).returncode == 0
    assert topic not in _samsa("topics", *b, "--list").stdout.split()


def test_topics_against_no_broker_is_a_clear_error():
    p = _samsa("topics", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert p.returncode == 1 and "samsa topics:" in p.stderr
    assert "Traceback" not in p.stderr


def _listed_in_help() -> list[str]:
    """The command names `samsa --help` shows, in its order."""
    p = _samsa("--help")
    assert p.returncode == 0, p.stderr
    return re.findall(r"^    ([a-z][a-z-]*)(?: |$)", p.stdout, re.M)


def test_help_lists_every_command_and_each_one_runs():
    assert _listed_in_help() == list(COMMANDS)
    for name in COMMANDS:
        p = _samsa(name, "--help")
        assert p.returncode == 0 and p.stdout.startswith(f"usage: samsa {name} "), (name, p)


def _readme_section(title: str) -> str:
    readme = (REPO_ROOT / "README.md").read_text()
    start = readme.index(f"\n## {title}\n")
    end = readme.find("\n## ", start + 1)
    return readme[start:end if end >= 0 else None]


def test_readme_shows_every_command_and_no_other():
    shown = re.findall(r"\bsamsa ([a-z][a-z-]*)", _readme_section("Using it"))
    assert set(shown) == set(COMMANDS)
