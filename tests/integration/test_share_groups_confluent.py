"""KIP-932 share groups with confluent-kafka 2.16's ShareConsumer (librdkafka's
share consumer, "preview"): two members on one partition, explicit
acknowledgements (accept, release, reject) and the delivery-count limit; the
group, with no members left, kept across a restart (its records in
__consumer_offsets) for `samsa share-groups` to list, describe and delete."""
from __future__ import annotations

import contextlib
import io
import time
import uuid
from collections import Counter

import pytest
from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration.test_share_groups_java import OVERRIDES, _members_assigned
from samsa.tools import share_groups

pytestmark = pytest.mark.timeout(180)


def test_two_share_consumers_split_a_partition_and_archive_a_poison_record(broker_factory):
    broker = broker_factory(OVERRIDES)
    b = broker.bootstrap
    topic, group = f"sq-{uuid.uuid4().hex[:8]}", f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": b})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    members = [ShareConsumer({"bootstrap.servers": b, "group.id": group,
                              "share.acknowledgement.mode": "explicit",
                              "max.poll.records": 5}) for _ in range(2)]
    received: list[tuple[int, str]] = []  # (member, value), in order
    actions: Counter[tuple[str, str]] = Counter()

    def poll_all() -> None:
        for i, c in enumerate(members):
            msgs = [m for m in c.poll(0.1) if m.error() is None]
            for m in msgs:
                value = m.value().decode()
                received.append((i, value))
                kind = ("release" if value.startswith("poison") else
                        "reject" if value.startswith("bad") else "accept")
                actions[(value, kind)] += 1
                c.acknowledge(m, {"release": AcknowledgeType.RELEASE,
                                  "reject": AcknowledgeType.REJECT,
                                  "accept": AcknowledgeType.ACCEPT}[kind])
            if msgs:
                c.commit_sync()

    try:
        for c in members:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # join (heartbeats need polls)
            poll_all()
            try:
                _members_assigned(b, group, 2)
                break
            except AssertionError:
                continue
        oks = [f"ok-{i}" for i in range(30)]
        p = Producer({"bootstrap.servers": b})
        for v in [*oks[:15], "poison-0", "bad-0", *oks[15:]]:
            p.produce(topic, v.encode(), partition=0)
        assert p.flush(30) == 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                actions[("poison-0", "release")] >= 3 and all(actions[(v, "accept")] for v in oks)
                and actions[("bad-0", "reject")]):
            poll_all()
        settle = time.monotonic() + 2 * int(OVERRIDES["group.share.record.lock.duration.ms"]) / 1000
        while time.monotonic() < settle:  # nothing more may come
            poll_all()
    finally:
        for c in members:
            c.close()
    counts = Counter(v for _, v in received)
    assert {v: counts[v] for v in oks} == {v: 1 for v in oks}  # each to one member, once
    assert counts["bad-0"] == 1                                 # rejected: never again
    assert counts["poison-0"] == 3                              # the limit, then archived
    assert len({m for m, _ in received}) == 2                   # both members got records

    _the_empty_group_outlives_a_restart(broker, topic, group)


def _share_groups(*args: str) -> list[str]:
    """`samsa share-groups ARGS`' lines (in this process: the tool's own
    output is tests/tools/test_share_groups_cli.py's, here it is what the
    broker answers after a restart)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert share_groups.main(list(args)) == 0
    return out.getvalue().split("\n")


def _the_empty_group_outlives_a_restart(broker, topic: str, group: str) -> None:
    """Nothing of the group is in memory after a restart (no member, no
    share-partition served): its records bring it back, Empty, with its
    offsets (every one of the 32 records acknowledged or archived)."""
    broker.restart()
    b = ("--bootstrap-server", broker.bootstrap)
    assert group in _share_groups(*b, "--list")
    widths = (15, 15, 10, 13)
    row = " ".join([*(str(v).ljust(w) for v, w in zip((group, topic, 0, 32), widths)), "0"])
    assert _share_groups(*b, "--describe", "--group", group)[2:] == [row, ""]
    assert _share_groups(*b, "--delete", "--group", group) == [
        f"Deletion of requested share groups ('{group}') was successful.", ""]
    assert group not in _share_groups(*b, "--list")
    assert _share_groups(*b, "--describe", "--group", group) == [
        "", f"Error: Share group '{group}' does not exist.", ""]
