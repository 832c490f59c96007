"""The `samsa` command line: a bad config refuses to start, and `samsa topics` works."""
from __future__ import annotations

import re
import subprocess
import sys
import uuid

import pytest

from samsa.tools.cli import COMMANDS
from tests.support.broker_process import REPO_ROOT

# The commands run as `python -m samsa ...` child processes, as a user runs them
# (the README check beside them goes along for company).
pytestmark = pytest.mark.integration


def _samsa(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "samsa", *args], capture_output=True,
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


def _placement(describe_out: str) -> dict[int, tuple[str, str]]:
    """Partition -> (Leader, Replicas) from kafka-topics --describe lines."""
    return {int(m["p"]): (m["leader"], m["replicas"]) for m in re.finditer(
        r"Partition: (?P<p>\d+)\tLeader: (?P<leader>\S+)\tReplicas: (?P<replicas>\S+)",
        describe_out)}


def test_topics_replica_assignment_on_one_broker(broker):
    b = ["--bootstrap-server", broker.bootstrap]
    p = _samsa("topics", *b, "--create", "--topic", "placed", "--replica-assignment", "0,0")
    assert (p.returncode, p.stdout) == (0, "Created topic placed.\n"), p.stderr
    out = _samsa("topics", *b, "--describe", "--topic", "placed").stdout
    assert "PartitionCount: 2\tReplicationFactor: 1" in out
    assert _placement(out) == {0: ("0", "0"), 1: ("0", "0")}
    # --alter: the list names every partition, the existing ones first (as Kafka's)
    p = _samsa("topics", *b, "--alter", "--topic", "placed", "--partitions", "3",
               "--replica-assignment", "0,0,0")
    assert p.returncode == 0, p.stderr
    assert len(_placement(_samsa("topics", *b, "--describe", "--topic", "placed").stdout)) == 3
    # A broker that is not there: the broker's refusal, in one line.
    p = _samsa("topics", *b, "--create", "--topic", "nowhere", "--replica-assignment", "0:7")
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert p.stderr.startswith("Error while executing topic command: INVALID_REPLICA_ASSIGNMENT")
    assert len(p.stderr.splitlines()) == 1, p.stderr
    assert "nowhere" not in _samsa("topics", *b, "--list").stdout.split()


@pytest.mark.parametrize("value, message", [
    ("0:x", "'x' is not a broker id (partitions separated by commas, their broker ids "
            "by colons, e.g. 0:1:2,1:2:0)"),
    ("0:1,", "'' is not a broker id"),
    ("1:0:1", "Partition replica lists may not contain duplicate entries: 1"),
    ("0:1,2", "Partition 1 has different replication factor: [2]"),
])
def test_topics_replica_assignment_syntax_is_one_line(value, message):
    # Refused before any broker is asked: nothing listens on port 1.
    p = _samsa("topics", "--bootstrap-server", "127.0.0.1:1", "--create", "--topic", "t",
               "--replica-assignment", value)
    assert p.returncode == 1 and p.stdout == "", p.stderr
    assert p.stderr.startswith("Error while executing topic command: ")
    assert message in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr


@pytest.mark.parametrize("other", [["--partitions", "2"], ["--replication-factor", "1"]])
def test_topics_replica_assignment_excludes_counts_on_create(other):
    p = _samsa("topics", "--bootstrap-server", "127.0.0.1:1", "--create", "--topic", "t",
               "--replica-assignment", "0", *other)
    assert p.returncode == 2 and "Traceback" not in p.stderr
    errors = [line for line in p.stderr.splitlines() if "error:" in line]
    assert errors == [f'samsa topics: error: Option "[replica-assignment]" can\'t be used '
                      f'with option "[{other[0][2:]}]"'], p.stderr


def test_topics_replica_assignment_on_a_cluster(tmp_path):
    """Three brokers in ZooKeeper mode: the replicas land where the assignment
    says, its first broker leads, as --describe shows."""
    from tests.support.cluster import Cluster
    from tests.support.waiting import wait_until
    from tests.support.zookeeper import zookeeper_installed

    if not zookeeper_installed():
        pytest.fail("ZooKeeper is not installed (scripts/setup.sh --test installs it)")
    cluster = Cluster(tmp_path / "cluster", size=3, offsets_partitions=3)
    b = ["--bootstrap-server", None]

    def describe(topic: str) -> str:
        return _samsa("topics", *b, "--describe", "--topic", topic).stdout

    try:
        cluster.start()
        b[1] = cluster.broker(2).bootstrap
        p = _samsa("topics", *b, "--create", "--topic", "placed",
                   "--replica-assignment", "0:1:2,1:2:0")
        assert p.returncode == 0, p.stderr
        # (the broker asked may learn of the leaders a moment after the answer)
        expected = {0: ("0", "0,1,2"), 1: ("1", "1,2,0")}
        wait_until(lambda: _placement(describe("placed")) == expected, 30,
                   f"placed described as {expected}")
        assert "PartitionCount: 2\tReplicationFactor: 3" in describe("placed")

        p = _samsa("topics", *b, "--create", "--topic", "single", "--replica-assignment", "2,1")
        assert p.returncode == 0, p.stderr
        p = _samsa("topics", *b, "--alter", "--topic", "single", "--partitions", "3",
                   "--replica-assignment", "2,1,0")
        assert p.returncode == 0, p.stderr
        expected = {0: ("2", "2"), 1: ("1", "1"), 2: ("0", "0")}
        wait_until(lambda: _placement(describe("single")) == expected, 30,
                   f"single described as {expected}")
    finally:
        cluster.stop()
