"""Every version of the group APIs on the wire, request by request (samsa's own codecs
as the client): the version-specific shapes that no single real client covers
(JoinGroup v0-v3 without MEMBER_ID_REQUIRED, LeaveGroup v0-v2's single member,
OffsetFetch v8's several groups, FindCoordinator v4's batched keys...).
"""
from __future__ import annotations

import shutil
import socket
import struct
import tempfile
import uuid
from pathlib import Path

import pytest

from samsa.protocol.errors import ErrorCode as E
from samsa.protocol.messages import (API_BY_KEY, DeleteGroupsRequest, DescribeGroupsRequest,
                               FindCoordinatorRequest, HeartbeatRequest, JoinGroupRequest,
                               LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest,
                               OffsetDeleteRequest, OffsetFetchRequest, RequestHeader,
                               SyncGroupRequest, decode_response, encode_request)
from tests.support.broker_process import BrokerProcess
from tests.support.waiting import wait_until

TOPIC = "wire-topic"


@pytest.fixture(scope="module")
def wbroker():
    work = Path(tempfile.mkdtemp(prefix="samsa-groups-wire-"))
    b = BrokerProcess(work, overrides={"group.initial.rebalance.delay.ms": "0",
                                       "offsets.topic.num.partitions": "3",
                                       "num.partitions": "2"})
    try:
        b.start()
        _create_topic(b, TOPIC)
        yield b
    finally:
        b.stop()
        shutil.rmtree(work, ignore_errors=True)


def _create_topic(broker, name, partitions=2):
    from samsa.protocol.messages import CreateTopicsRequest as R
    with Client(broker) as c:
        resp = c.call(19, 4, R(topics=[R.CreatableTopic(name=name, num_partitions=partitions,
                                                         replication_factor=1)],
                               timeout_ms=10000))
    assert resp.topics[0].error_code == 0


class Client:
    def __init__(self, broker):
        self.sock = socket.create_connection((broker.host, broker.port), timeout=20)
        self.corr = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()

    def _recv(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return buf

    def call(self, key, version, request):
        self.corr += 1
        self.sock.sendall(encode_request(RequestHeader(key, version, self.corr, "wire-test"),
                                         request))
        (size,) = struct.unpack(">i", self._recv(4))
        corr, resp = decode_response(self._recv(size), key, version)
        assert corr == self.corr
        return resp


def _gid():
    return f"wire-{uuid.uuid4().hex[:8]}"


def test_group_apis_advertised_at_all_versions(wbroker):
    from samsa.protocol.messages import ApiVersionsRequest
    with Client(wbroker) as c:
        resp = c.call(18, 3, ApiVersionsRequest(client_software_name="t",
                                                client_software_version="1"))
    got = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    for key in (8, 9, 10, 11, 12, 13, 14, 15, 16, 42, 47):
        assert got[key] == (API_BY_KEY[key].min_version, API_BY_KEY[key].max_version)


@pytest.mark.parametrize("version", range(7))
def test_find_coordinator(wbroker, version):
    R = FindCoordinatorRequest
    with Client(wbroker) as c:
        if version < 4:
            resp = c.call(10, version, R(key="g1", key_type=0))
            assert (resp.error_code, resp.node_id, resp.host, resp.port) == (
                0, 0, wbroker.host, wbroker.port)
            if version >= 1:
                # __transaction_state is created on the first ask (retriable
                # COORDINATOR_NOT_AVAILABLE meanwhile), then this broker answers
                txn = wait_until(lambda: _found(c.call(10, version, R(key="tx", key_type=1))),
                                 what="the transaction coordinator")
                assert (txn.node_id, txn.port) == (0, wbroker.port)
                empty = c.call(10, version, R(key="", key_type=1))
                assert empty.error_code == E.INVALID_REQUEST
        else:
            resp = c.call(10, version, R(key_type=0, coordinator_keys=["g1", "g2"]))
            assert [(x.key, x.error_code, x.node_id, x.port) for x in resp.coordinators] == [
                ("g1", 0, 0, wbroker.port), ("g2", 0, 0, wbroker.port)]
            txn = wait_until(lambda: _found(c.call(10, version, R(key_type=1,
                                                                  coordinator_keys=["t1"]))),
                             what="the transaction coordinator")
            assert [(x.key, x.error_code, x.node_id, x.port) for x in txn.coordinators] == [
                ("t1", 0, 0, wbroker.port)]


def _found(resp):
    """The FindCoordinator answer once it names a coordinator, else None."""
    if hasattr(resp, "coordinators") and resp.coordinators:
        return resp if all(x.error_code == 0 for x in resp.coordinators) else None
    if resp.error_code == E.COORDINATOR_NOT_AVAILABLE:
        return None
    return resp


@pytest.mark.parametrize("version", range(10))
def test_membership_cycle(wbroker, version):
    """Join (v4+: MEMBER_ID_REQUIRED first), Sync, Heartbeat, Describe, Leave at the
    matching versions of each API."""
    sync_v, hb_v, leave_v, desc_v = min(version, 5), min(version, 4), min(version, 5), \
        min(version, 6)
    group = _gid()
    J = JoinGroupRequest
    join = J(group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=6000, member_id="",
             protocol_type="wire", protocols=[J.JoinGroupRequestProtocol(name="p1",
                                                                          metadata=b"meta")])
    with Client(wbroker) as c:
        resp = c.call(11, version, join)
        if version >= 4:
            assert resp.error_code == E.MEMBER_ID_REQUIRED
            assert resp.member_id
            join.member_id = resp.member_id
            resp = c.call(11, version, join)
        assert resp.error_code == 0
        member = resp.member_id
        assert member and resp.leader == member and resp.generation_id == 1
        assert resp.protocol_name == "p1"
        assert [(m.member_id, bytes(m.metadata)) for m in resp.members] == [(member, b"meta")]

        S = SyncGroupRequest
        sync = c.call(14, sync_v, S(group_id=group, generation_id=1, member_id=member,
                                    protocol_type="wire", protocol_name="p1",
                                    assignments=[S.SyncGroupRequestAssignment(
                                        member_id=member, assignment=b"mine")]))
        assert (sync.error_code, bytes(sync.assignment)) == (0, b"mine")
        if sync_v >= 5:
            assert (sync.protocol_type, sync.protocol_name) == ("wire", "p1")

        hb = c.call(12, hb_v, HeartbeatRequest(group_id=group, generation_id=1,
                                                member_id=member))
        assert hb.error_code == 0
        bad = c.call(12, hb_v, HeartbeatRequest(group_id=group, generation_id=7,
                                                 member_id=member))
        assert bad.error_code == E.ILLEGAL_GENERATION

        d = c.call(15, desc_v, DescribeGroupsRequest(groups=[group]))
        g = d.groups[0]
        assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == (
            0, "Stable", "wire", "p1")
        assert [(m.member_id, m.client_id, m.client_host, bytes(m.member_metadata),
                 bytes(m.member_assignment)) for m in g.members] == [
            (member, "wire-test", "/127.0.0.1", b"meta", b"mine")]

        L = LeaveGroupRequest
        if leave_v <= 2:
            left = c.call(13, leave_v, L(group_id=group, member_id=member))
            assert left.error_code == 0
            again = c.call(13, leave_v, L(group_id=group, member_id=member))
            assert again.error_code == E.UNKNOWN_MEMBER_ID
        else:
            left = c.call(13, leave_v, L(group_id=group, members=[
                L.MemberIdentity(member_id=member), L.MemberIdentity(member_id="nobody")]))
            assert left.error_code == 0
            assert [(m.member_id, m.error_code) for m in left.members] == [
                (member, 0), ("nobody", E.UNKNOWN_MEMBER_ID)]
        d = c.call(15, desc_v, DescribeGroupsRequest(groups=[group]))
        assert (d.groups[0].group_state, d.groups[0].members) == ("Empty", [])


def _join(c, group):
    """JoinGroup v3 of a new member of ``group`` (protocol type "wire")."""
    J = JoinGroupRequest
    return c.call(11, 3, J(group_id=group, session_timeout_ms=6000, rebalance_timeout_ms=6000,
                           member_id="", protocol_type="wire",
                           protocols=[J.JoinGroupRequestProtocol(name="p", metadata=b"")]))


def _commit_request(version, group, partitions, generation=-1, member=""):
    R = OffsetCommitRequest
    topics = {}
    for topic, p, off in partitions:
        topics.setdefault(topic, []).append(R.OffsetCommitRequestPartition(
            partition_index=p, committed_offset=off, committed_metadata=f"m{off}"))
    return R(group_id=group, generation_id_or_member_epoch=generation, member_id=member,
             topics=[R.OffsetCommitRequestTopic(name=t, partitions=ps)
                     for t, ps in topics.items()])


def _fetched(resp, version):
    """{(topic, partition): (offset, metadata, error)} from any OffsetFetch version."""
    topics = resp.groups[0].topics if version >= 8 else resp.topics
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in topics for p in t.partitions}


def _fetch_request(version, group, partitions):
    R = OffsetFetchRequest
    if version >= 8:
        topics = None if partitions is None else [
            R.OffsetFetchRequestTopics(name=t, partition_indexes=ps)
            for t, ps in partitions.items()]
        return R(groups=[R.OffsetFetchRequestGroup(group_id=group, topics=topics)])
    topics = None if partitions is None else [
        R.OffsetFetchRequestTopic(name=t, partition_indexes=ps) for t, ps in partitions.items()]
    return R(group_id=group, topics=topics)


@pytest.mark.parametrize("version", range(10))
def test_offset_commit_and_fetch(wbroker, version):
    group = _gid()
    with Client(wbroker) as c:
        resp = c.call(8, version, _commit_request(version, group, [
            (TOPIC, 0, 11), (TOPIC, 1, 22), (TOPIC, 9, 5), ("no-such-topic", 0, 1)]))
        codes = {(t.name, p.partition_index): p.error_code
                 for t in resp.topics for p in t.partitions}
        assert codes == {(TOPIC, 0): 0, (TOPIC, 1): 0,
                         (TOPIC, 9): E.UNKNOWN_TOPIC_OR_PARTITION,
                         ("no-such-topic", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        fetched = _fetched(c.call(9, version, _fetch_request(
            version, group, {TOPIC: [0, 1], "other": [3]})), version)
        assert fetched == {(TOPIC, 0): (11, "m11", 0), (TOPIC, 1): (22, "m22", 0),
                           ("other", 3): (-1, "", 0)}
        if version >= 2:  # null topics = every committed offset
            everything = _fetched(c.call(9, version, _fetch_request(version, group, None)),
                                  version)
            assert everything == {(TOPIC, 0): (11, "m11", 0), (TOPIC, 1): (22, "m22", 0)}
        # a commit from outside the group while it has a member is refused
        joined = _join(c, group)
        assert joined.error_code == 0
        if version >= 1:
            stale = c.call(8, version, _commit_request(version, group, [(TOPIC, 0, 1)]))
            assert stale.topics[0].partitions[0].error_code == E.UNKNOWN_MEMBER_ID
            # the member itself commits (CompletingRebalance until it syncs)
            mine = c.call(8, version, _commit_request(version, group, [(TOPIC, 0, 12)],
                                                      generation=1, member=joined.member_id))
            assert mine.topics[0].partitions[0].error_code == E.REBALANCE_IN_PROGRESS
        c.call(13, 0, LeaveGroupRequest(group_id=group, member_id=joined.member_id))


def test_offset_fetch_v8_several_groups(wbroker):
    g1, g2, g3 = _gid(), _gid(), _gid()
    R = OffsetFetchRequest
    G = R.OffsetFetchRequestGroup
    with Client(wbroker) as c:
        c.call(8, 8, _commit_request(8, g1, [(TOPIC, 0, 1)]))
        c.call(8, 8, _commit_request(8, g2, [(TOPIC, 1, 2)]))
        resp = c.call(9, 8, R(groups=[
            G(group_id=g1, topics=None),
            G(group_id=g2, topics=[R.OffsetFetchRequestTopics(name=TOPIC,
                                                              partition_indexes=[0, 1])]),
            G(group_id=g3, topics=None)]))
    got = {g.group_id: {(t.name, p.partition_index): p.committed_offset
                        for t in g.topics for p in t.partitions} for g in resp.groups}
    assert got == {g1: {(TOPIC, 0): 1}, g2: {(TOPIC, 0): -1, (TOPIC, 1): 2}, g3: {}}
    assert all(g.error_code == 0 for g in resp.groups)


@pytest.mark.parametrize("version", range(6))
def test_list_groups_with_states_filter(wbroker, version):
    empty, active = _gid(), _gid()
    J = JoinGroupRequest
    with Client(wbroker) as c:
        c.call(8, 2, _commit_request(2, empty, [(TOPIC, 0, 1)]))
        joined = c.call(11, 3, J(group_id=active, session_timeout_ms=6000,
                                 rebalance_timeout_ms=6000, member_id="", protocol_type="consumer",
                                 protocols=[J.JoinGroupRequestProtocol(name="range",
                                                                       metadata=b"")]))
        try:
            resp = c.call(16, version, ListGroupsRequest())
            listed = {g.group_id: g for g in resp.groups}
            assert resp.error_code == 0 and {empty, active} <= set(listed)
            assert listed[active].protocol_type == "consumer"
            if version >= 4:
                assert (listed[empty].group_state, listed[active].group_state) == (
                    "Empty", "CompletingRebalance")
                only_empty = c.call(16, version, ListGroupsRequest(states_filter=["empty"]))
                ids = {g.group_id for g in only_empty.groups}
                assert empty in ids and active not in ids
            if version >= 5:
                assert listed[empty].group_type == "classic"
                none = c.call(16, version, ListGroupsRequest(types_filter=["consumer"]))
                assert none.groups == []
        finally:
            c.call(13, 0, LeaveGroupRequest(group_id=active, member_id=joined.member_id))


@pytest.mark.parametrize("version", range(3))
def test_delete_groups(wbroker, version):
    empty, active, unknown = _gid(), _gid(), _gid()
    with Client(wbroker) as c:
        c.call(8, 2, _commit_request(2, empty, [(TOPIC, 0, 1)]))
        joined = _join(c, active)
        resp = c.call(42, version, DeleteGroupsRequest(groups_names=[empty, active, unknown]))
        assert {r.group_id: r.error_code for r in resp.results} == {
            empty: 0, active: E.NON_EMPTY_GROUP, unknown: E.GROUP_ID_NOT_FOUND}
        gone = _fetched(c.call(9, 2, _fetch_request(2, empty, {TOPIC: [0]})), 2)
        assert gone == {(TOPIC, 0): (-1, "", 0)}
        c.call(13, 0, LeaveGroupRequest(group_id=active, member_id=joined.member_id))


def test_offset_delete(wbroker):
    group = _gid()
    R = OffsetDeleteRequest
    with Client(wbroker) as c:
        c.call(8, 2, _commit_request(2, group, [(TOPIC, 0, 5), (TOPIC, 1, 6)]))
        resp = c.call(47, 0, R(group_id=group, topics=[R.OffsetDeleteRequestTopic(
            name=TOPIC, partitions=[R.OffsetDeleteRequestPartition(partition_index=0),
                                    R.OffsetDeleteRequestPartition(partition_index=7)])]))
        assert resp.error_code == 0
        assert [(p.partition_index, p.error_code) for p in resp.topics[0].partitions] == [
            (0, 0), (7, E.UNKNOWN_TOPIC_OR_PARTITION)]
        left = _fetched(c.call(9, 2, _fetch_request(2, group, None)), 2)
        assert left == {(TOPIC, 1): (6, "m6", 0)}
        missing = c.call(47, 0, R(group_id=_gid(), topics=[]))
        assert missing.error_code == E.GROUP_ID_NOT_FOUND


@pytest.mark.parametrize("version", [0, 5, 6])
def test_describe_unknown_group(wbroker, version):
    with Client(wbroker) as c:
        resp = c.call(15, version, DescribeGroupsRequest(groups=["never-seen"]))
    g = resp.groups[0]
    assert g.group_state == "Dead"
    assert g.error_code == (E.GROUP_ID_NOT_FOUND if version >= 6 else 0)


def test_offsets_topic_is_compacted_and_keeps_its_partition_count(broker_factory):
    """__consumer_offsets is created at start-up (compacted, offsets.topic.num.partitions);
    a restart with another partition count keeps the existing topic, because a group's
    partition is hash(group) % count: changing it would lose every commit."""
    from confluent_kafka.admin import AdminClient, ConfigResource

    b = broker_factory({"offsets.topic.num.partitions": "4"})
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    meta = admin.list_topics(timeout=30)
    assert len(meta.topics["__consumer_offsets"].partitions) == 4
    res = ConfigResource(ConfigResource.Type.TOPIC, "__consumer_offsets")
    configs = admin.describe_configs([res])[res].result(timeout=30)
    assert configs["cleanup.policy"].value == "compact"

    groups = [_gid() for _ in range(8)]  # spread over the partitions
    with Client(b) as c:
        for i, g in enumerate(groups):
            c.call(8, 2, _commit_request(2, g, [("__consumer_offsets", 0, 100 + i)]))
    b.stop()
    b.argv = ["offsets.topic.num.partitions=7" if a == "offsets.topic.num.partitions=4" else a
              for a in b.argv]
    assert "offsets.topic.num.partitions=7" in b.argv
    b.start()
    admin = AdminClient({"bootstrap.servers": b.bootstrap})
    assert len(admin.list_topics(timeout=30).topics["__consumer_offsets"].partitions) == 4
    with Client(b) as c:
        for i, g in enumerate(groups):
            got = _fetched(c.call(9, 2, _fetch_request(2, g, None)), 2)
            assert got == {("__consumer_offsets", 0): (100 + i, f"m{100 + i}", 0)}


def test_clients_cannot_produce_to_the_offsets_topic(wbroker):
    from confluent_kafka import KafkaError, Producer

    errors = []
    p = Producer({"bootstrap.servers": wbroker.bootstrap, "acks": 1, "retries": 0,
                  "enable.idempotence": False})
    p.produce("__consumer_offsets", b"not a commit", partition=0,
              on_delivery=lambda err, msg: errors.append(err))
    p.flush(30)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]


def test_commits_survive_compaction_of_the_offsets_topic(broker_factory):
    """Many commits roll small __consumer_offsets segments; once the cleaner has
    compacted them, a restarted coordinator still loads the latest commit per key."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as CTP

    b = broker_factory({"offsets.topic.num.partitions": "1", "offsets.topic.segment.bytes": "2048",
                        "log.cleaner.backoff.ms": "50"})
    group, commits = _gid(), 400
    _create_topic(b, TOPIC)
    with Client(b) as c:
        for i in range(commits):
            c.call(8, 2, _commit_request(2, group, [(TOPIC, 0, i),
                                                    (TOPIC, 1, 2 * i)]))

    def records_in_offsets_topic():
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "unused",
                             "enable.auto.commit": False, "enable.partition.eof": True})
        try:
            consumer.assign([CTP("__consumer_offsets", 0, 0)])
            n = 0
            while True:
                m = consumer.poll(10)
                assert m is not None, "no end of partition"
                if m.error():
                    return n
                n += 1
        finally:
            consumer.close()

    wait_until(lambda: records_in_offsets_topic() <= commits, 60,  # 2 records per commit before cleaning
               "the cleaner to compact __consumer_offsets", interval=0.2)
    b.restart()
    with Client(b) as c:
        got = _fetched(c.call(9, 2, _fetch_request(2, group, None)), 2)
    last = commits - 1
    assert got == {(TOPIC, 0): (last, f"m{last}", 0),
                   (TOPIC, 1): (2 * last, f"m{2 * last}", 0)}


@pytest.mark.parametrize("version", [1, 2])
def test_commit_with_generation_minus_one_and_own_member_id(wbroker, version):
    """The ZooKeeper-era balanced consumers (pykafka) commit with generation -1
    and a member id of their own making: Kafka takes it while the group has no
    members (unknown or Empty), and refuses it while a live group has members."""
    group = _gid()
    made_up = f"pykafka-{uuid.uuid4().hex[:6]}"
    with Client(wbroker) as c:
        first = c.call(8, version, _commit_request(version, group, [(TOPIC, 0, 31)],
                                                   member=made_up))
        assert first.topics[0].partitions[0].error_code == 0  # unknown group
        again = c.call(8, version, _commit_request(version, group, [(TOPIC, 1, 32)],
                                                   member=made_up))
        assert again.topics[0].partitions[0].error_code == 0  # now an Empty group
        fetched = _fetched(c.call(9, 1, _fetch_request(1, group, {TOPIC: [0, 1]})), 1)
        assert fetched == {(TOPIC, 0): (31, "m31", 0), (TOPIC, 1): (32, "m32", 0)}

        joined = _join(c, group)
        assert joined.error_code == 0
        try:
            live = c.call(8, version, _commit_request(version, group, [(TOPIC, 0, 40)],
                                                      member=made_up))
            assert live.topics[0].partitions[0].error_code == E.UNKNOWN_MEMBER_ID
            # the member itself, with generation -1, is not of this generation
            own = c.call(8, version, _commit_request(version, group, [(TOPIC, 0, 41)],
                                                     member=joined.member_id))
            assert own.topics[0].partitions[0].error_code == E.ILLEGAL_GENERATION
            fetched = _fetched(c.call(9, 1, _fetch_request(1, group, {TOPIC: [0]})), 1)
            assert fetched == {(TOPIC, 0): (31, "m31", 0)}
        finally:
            c.call(13, 0, LeaveGroupRequest(group_id=group, member_id=joined.member_id))
