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

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import FindCoordinatorRequest, ShareGroupDescribeRequest
from samsa.protocol.model import ApiKey
from samsa.tools import share_groups
from tests.integration.test_share_groups_java import OVERRIDES, _members_assigned

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
        _state_and_members_are_kafkas_lines(b, group, topic)
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


def _state_and_members_are_kafkas_lines(bootstrap: str, group: str, topic: str) -> None:
    """`--describe --state/--members --verbose` of the two members, as
    ShareGroupCommand.printStates/printMembers print them: "%-Gs %-Cs %-15s
    %-12s %-17s %s" (the coordinator "host:port  (id)", at least 25 wide) and
    "%-Gs %-Is %-Hs %-Ls %-12s %-13s %s" (consumer id, host, client id as wide
    as the longest, at least 15), each after a blank line."""
    with SimpleClient(bootstrap) as c:
        coord = c.call(ApiKey.FIND_COORDINATOR, FindCoordinatorRequest(key=group, key_type=0),
                       highest=3)
        [g] = c.call(ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(
            group_ids=[group], include_authorized_operations=False)).groups
    coordinator = f"{coord.host}:{coord.port}  ({coord.node_id})"
    gw, cw = max(15, len(group)), max(25, len(coordinator))
    assert _share_groups("--bootstrap-server", bootstrap, "--describe", "--group", group,
                         "--state", "--verbose") == [
        "",
        f"{'GROUP'.ljust(gw)} {'COORDINATOR (ID)'.ljust(cw)} {'STATE'.ljust(15)} "
        f"{'GROUP-EPOCH'.ljust(12)} {'ASSIGNMENT-EPOCH'.ljust(17)} #MEMBERS",
        f"{group.ljust(gw)} {coordinator.ljust(cw)} {'Stable'.ljust(15)} "
        f"{str(g.group_epoch).ljust(12)} {str(g.assignment_epoch).ljust(17)} 2", ""]
    members = sorted(g.members, key=lambda m: m.member_id)
    iw = max(15, *(len(m.member_id) for m in members))
    hw = max(15, *(len(m.client_host) for m in members))
    lw = max(15, *(len(m.client_id) for m in members))
    assert _share_groups("--bootstrap-server", bootstrap, "--describe", "--group", group,
                         "--members", "--verbose") == [
        "",
        f"{'GROUP'.ljust(gw)} {'CONSUMER-ID'.ljust(iw)} {'HOST'.ljust(hw)} "
        f"{'CLIENT-ID'.ljust(lw)} {'#PARTITIONS'.ljust(12)} {'MEMBER-EPOCH'.ljust(13)} ASSIGNMENT",
        *(f"{group.ljust(gw)} {m.member_id.ljust(iw)} {m.client_host.ljust(hw)} "
          f"{m.client_id.ljust(lw)} {'1'.ljust(12)} {str(m.member_epoch).ljust(13)} {topic}:0"
          for m in members), ""]


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
