"""`samsa share-groups --reset-offsets / --delete-offsets / --delete`, line by
line as kafka-share-groups prints them (facts from Kafka's ShareGroupCommand:
printOffsetsToReset's "%-Gs %-Ts %-10s %s" after a blank line, deleteOffsets'
TOPIC/STATUS table, deleteShareGroups' messages), against a running broker.
"""
from __future__ import annotations

import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import REPO_ROOT

pytestmark = pytest.mark.integration


def _samsa(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "samsa", "share-groups", *args],
                          capture_output=True, text=True, timeout=90, cwd=REPO_ROOT)


def _ok(*args: str) -> list[str]:
    p = _samsa(*args)
    assert p.returncode == 0, p
    return p.stdout.split("\n")


def _row(*values: object, widths=(15, 15, 10)) -> str:
    cells = [str(v).ljust(w) for v, w in zip(values[:-1], widths)]
    return " ".join([*cells, str(values[-1])])


def test_reset_delete_offsets_and_delete_print_kafkas_lines(broker):
    b = broker.bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic("shq", 2, 1)])["shq"].result(30)
    producer = Producer({"bootstrap.servers": b})
    for i in range(3):
        producer.produce("shq", b"x", partition=0)
    assert producer.flush(30) == 0
    g = ("--bootstrap-server", b, "--group", "sg")

    # a dry run plans and changes nothing: the group does not exist yet
    assert _ok(*g, "--reset-offsets", "--topic", "shq", "--to-earliest", "--dry-run") == [
        "", _row("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"),
        _row("sg", "shq", 0, 0), _row("sg", "shq", 1, 0), ""]
    assert _ok(*g, "--describe") == ["", "Error: Share group 'sg' does not exist.", ""]
    # --execute: the group is created at those offsets
    _ok(*g, "--reset-offsets", "--topic", "shq", "--to-earliest", "--execute")
    assert _ok(*g, "--describe") == [
        "", _row("GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG", widths=(15, 15, 10, 13)),
        _row("sg", "shq", 0, 0, 3, widths=(15, 15, 10, 13)),
        _row("sg", "shq", 1, 0, 0, widths=(15, 15, 10, 13)), ""]
    # --to-offset past the log end moves to the log end, as Kafka's tool does
    assert _ok(*g, "--reset-offsets", "--topic", "shq:0", "--to-offset", "99",
               "--execute")[2:] == [_row("sg", "shq", 0, 3), ""]
    assert _ok(*g, "--reset-offsets", "--all-topics", "--to-latest", "--execute")[2:] == [
        _row("sg", "shq", 0, 3), _row("sg", "shq", 1, 0), ""]

    assert _ok(*g, "--delete-offsets", "--topic", "shq", "--topic", "nosuch") == [
        "", _row("TOPIC", "STATUS", widths=(15,)),
        _row("nosuch", "Error: This server does not host this topic-partition.",
             widths=(15,)),
        _row("shq", "Successful", widths=(15,)), ""]
    assert _ok(*g, "--describe") == ["", "Share group 'sg' has no offset information.", ""]

    assert _ok(*g, "--delete") == ["Deletion of requested share groups ('sg') was successful.",
                                   ""]
    assert _ok(*g, "--delete") == [
        "", "Error: Deletion of some share groups failed:",
        "* Group 'sg' could not be deleted due to: "
        "org.apache.kafka.common.errors.GroupIdNotFoundException: Group 'sg' is not a share group.",
        ""]
    assert _ok(*g, "--delete-offsets", "--topic", "shq") == [
        "", "Error: The group id does not exist.", "",
        _row("TOPIC", "STATUS", widths=(15,)),
        _row("shq", "Error: The group id does not exist.", widths=(15,)), ""]


def test_reset_offsets_needs_kafkas_options(broker):
    b = broker.bootstrap
    for args, why in ((("--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest"),
                       "[execute] or [dry-run]"),
                      (("--reset-offsets", "--group", "g", "--topic", "t", "--execute"),
                       "scenarios"),
                      (("--delete-offsets", "--group", "g"), "[group], [topic]"),
                      (("--delete",), "[group] or [all-groups]")):
        p = _samsa("--bootstrap-server", b, *args)
        assert p.returncode != 0 and why in p.stderr, p
        assert "Traceback" not in p.stderr
