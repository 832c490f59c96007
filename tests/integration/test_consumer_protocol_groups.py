"""KIP-848 consumer groups (group.protocol=consumer) with confluent-kafka
(librdkafka 2.16) and the Java client 4.3: members get disjoint assignments
that cover the topic (subscribed by name or by a regex the broker resolves),
a member's partitions move when it leaves, every record is read once with
synchronous commits, and a broker restart keeps the group (its members, their
epochs and the committed offsets)."""
from __future__ import annotations

import contextlib
import io
import uuid

import pytest
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import ConsumerGroupDescribeRequest
from samsa.protocol.model import ApiKey
from samsa.tools import consumer_groups
from tests.support.kafka_wire import free_port
from tests.support.metrics import sample, scrape
from tests.support.waiting import wait_until

PARTITIONS = 6
OVERRIDES = {"offsets.topic.num.partitions": "3",
             # members hear of a new assignment within a second
             "group.consumer.heartbeat.interval.ms": "500",
             "group.consumer.min.heartbeat.interval.ms": "100"}


@pytest.fixture
def cbroker(broker_factory):
    return broker_factory(OVERRIDES)


def _topic(bootstrap: str, partitions: int = PARTITIONS) -> str:
    name = f"kip848-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(timeout=30)
    return name


def _produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(start, start + count):
        p.produce(topic, b"%d" % i, partition=i % PARTITIONS)
    assert p.flush(30) == 0


def _consumer(bootstrap: str, group: str, topic: str) -> Consumer:
    """A member subscribed to ``topic`` (a name, or a "^regex" librdkafka
    sends as SubscribedTopicRegex for the broker to resolve)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "group.protocol": "consumer", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    c.subscribe([topic])
    return c


class Reading:
    """Polls the members in turn, committing each record before the next poll."""

    def __init__(self, consumers: list[Consumer]):
        self.consumers = consumers
        self.seen: dict[tuple[int, int], int] = {}  # (partition, offset) -> times read

    def poll_round(self) -> None:
        for c in self.consumers:
            m = c.poll(0.05)
            if m is None or m.error():
                continue
            key = (m.partition(), m.offset())
            self.seen[key] = self.seen.get(key, 0) + 1
            c.commit(m, asynchronous=False)

    def until(self, predicate, timeout: float = 60.0, what: str = "") -> None:
        def step():
            self.poll_round()
            return predicate()
        wait_until(step, timeout=timeout, interval=0, what=what or "reading")

    def assignments(self) -> list[set[int]]:
        return [{tp.partition for tp in c.assignment()} for c in self.consumers]

    def covered(self) -> bool:
        """Every partition held by exactly one member."""
        held = self.assignments()
        return sorted(p for ps in held for p in ps) == list(range(PARTITIONS))


def test_three_members_share_the_topic_and_a_leavers_partitions_move(broker_factory):
    port = free_port()
    bs = broker_factory({**OVERRIDES, "metrics.port": str(port),
                         "metrics.host": "127.0.0.1"}).bootstrap
    topic = _topic(bs)
    _produce(bs, topic, 0, 600)
    group = f"g-{uuid.uuid4().hex[:6]}"
    reading = Reading([_consumer(bs, group, topic) for _ in range(3)])
    try:
        reading.until(lambda: reading.covered() and all(reading.assignments())
                      and len(reading.seen) >= 300, what="three members covering the topic")
        held = reading.assignments()
        assert all(len(ps) == 2 for ps in held), held
        text = scrape(port)
        assert sample(text, "kafka_server_group_coordinator_metrics_group_count",
                      '{protocol="consumer"}') == 1
        assert sample(text, "kafka_server_group_coordinator_metrics_consumer_group_count",
                      '{state="stable"}') + sample(
            text, "kafka_server_group_coordinator_metrics_consumer_group_count",
            '{state="reconciling"}') == 1
        leaver = reading.consumers.pop()
        leaver.close()
        reading.until(lambda: reading.covered() and len(reading.seen) >= 600,
                      what="the leaver's partitions moving and every record read")
        assert set().union(*reading.assignments()) == set(range(PARTITIONS))
        assert set().union(*reading.assignments()) >= held[2]
        assert len(reading.seen) == 600
        assert set(reading.seen.values()) == {1}, "a record was read twice"
    finally:
        for c in reading.consumers:
            c.close()


def _described(bootstrap: str, group: str):
    """ConsumerGroupDescribe's answer for the group, as the broker gives it."""
    client = SimpleClient(bootstrap)
    try:
        res = client.call(ApiKey.CONSUMER_GROUP_DESCRIBE,
                          ConsumerGroupDescribeRequest(group_ids=[group],
                                                       include_authorized_operations=False))
    finally:
        client.close()
    return res.groups[0]


def test_a_broker_restart_keeps_the_group_and_its_offsets(cbroker):
    bs = cbroker.bootstrap
    topic = _topic(bs)
    _produce(bs, topic, 0, 300)
    group = f"g-{uuid.uuid4().hex[:6]}"
    # subscribed by regex: the broker resolves it (KIP-848)
    reading = Reading([_consumer(bs, group, f"^{topic}$") for _ in range(3)])
    admin = AdminClient({"bootstrap.servers": bs})
    try:
        reading.until(lambda: reading.covered() and all(reading.assignments()),
                      what="three members covering the topic")
        reading.consumers.pop().close()
        reading.until(lambda: reading.covered() and len(reading.seen) >= 300,
                      what="two members reading everything")
        before = admin.describe_consumer_groups([group])[group].result(timeout=30)
        members = {m.member_id for m in before.members}
        assert len(members) == 2
        described = _described(bs, group)
        # three joins and a leave: epoch 4 (a group made anew by two rejoining
        # members would be at 2)
        assert described.group_epoch >= 4
        cbroker.stop()
        cbroker.start()
        again = _described(bs, group)
        assert (again.group_epoch, again.assignment_epoch) == (
            described.group_epoch, described.assignment_epoch)
        assert {m.member_id: m.assignment for m in again.members} == \
            {m.member_id: m.assignment for m in described.members}
        _produce(bs, topic, 300, 300)
        reading.until(lambda: len(reading.seen) >= 600, what="reading on after the restart")
        assert set(reading.seen.values()) == {1}, "a record was read twice"
        admin = AdminClient({"bootstrap.servers": bs})
        after = admin.describe_consumer_groups([group])[group].result(timeout=30)
        # the same members, not new ones: the group was loaded back
        assert {m.member_id for m in after.members} == members
        assert str(after.type).endswith("CONSUMER")
    finally:
        for c in reading.consumers:
            c.close()


def test_the_java_client_shares_the_topic_and_a_leavers_partitions_move(cbroker, java_tools):
    bs = cbroker.bootstrap
    topic = _topic(bs)
    _produce(bs, topic, 0, 600)
    result = java_tools.run("ConsumerProtocolGroup", "--bootstrap-server", bs, "--topic", topic,
                            "--group", f"g-{uuid.uuid4().hex[:6]}",
                            "--partitions", PARTITIONS, "--records", 600,
                            "--deadline-ms", 60000, timeout=90).check()
    three, two, done = result.lines[-3:]
    held = [set(map(int, ps.split(","))) for ps in three.split(": ")[1].split(";")]
    assert three.startswith("members 3") and [len(ps) for ps in held] == [2, 2, 2]
    assert two.startswith("members 2") and \
        sorted(int(p) for ps in two.split(": ")[1].split(";") for p in ps.split(",")) == \
        list(range(PARTITIONS))
    assert done == "read 600 twice 0"


def test_the_java_client_rolls_a_classic_group_to_the_consumer_protocol_and_back(
        cbroker, java_tools):
    """Online migration (group.consumer.migration.policy=bidirectional, the
    default): three classic Java members restarted one by one with
    group.protocol=consumer turn the group into a consumer group with no
    committed offset lost, then one by one back to classic turn it back; the
    members always end up covering the topic, every record read once."""
    bs = cbroker.bootstrap
    topic = _topic(bs)
    records = 4000
    _produce(bs, topic, 0, records)
    result = java_tools.run("MigrateGroup", "--bootstrap-server", bs, "--topic", topic,
                            "--group", f"g-{uuid.uuid4().hex[:6]}",
                            "--partitions", PARTITIONS, "--records", records,
                            "--deadline-ms", 150000, timeout=200).check()
    steps = [line.split(":")[0] for line in result.lines if line.startswith(("start", "rolled"))]
    assert steps == ["start classic,classic,classic",
                     "rolled consumer,classic,classic", "rolled consumer,consumer,classic",
                     "rolled consumer,consumer,consumer",
                     "rolled classic,consumer,consumer", "rolled classic,classic,consumer",
                     "rolled classic,classic,classic"]
    assert result.lines[-1] == f"read {records} twice 0"
    # the group changed type twice: up with the first consumer-protocol
    # member, back down when the last one left
    log = cbroker.log_path.read_text(errors="replace")
    assert log.count("upgraded from classic to consumer group") == 1
    assert log.count("downgraded from consumer to classic group") == 1


class CommittedReading(Reading):
    """Reading, counting a record only once its commit is accepted: a classic
    member's commit racing a rebalance is refused (ILLEGAL_GENERATION,
    REBALANCE_IN_PROGRESS...), as Kafka refuses it, and the record's next
    owner reads it again (MigrateGroup.java counts the same way)."""

    refused = 0

    def poll_round(self) -> None:
        for c in self.consumers:
            m = c.poll(0.05)
            if m is None or m.error():
                continue
            try:
                c.commit(m, asynchronous=False)
            except KafkaException:
                self.refused += 1
                continue
            key = (m.partition(), m.offset())
            self.seen[key] = self.seen.get(key, 0) + 1


def _listed_type(bootstrap: str, group: str) -> str:
    """The group's TYPE as `samsa consumer-groups --list --type` prints it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert consumer_groups.main(["--bootstrap-server", bootstrap, "--list", "--type"]) == 0
    [line] = [x for x in out.getvalue().splitlines() if x.split()[:1] == [group]]
    return line.split()[1]


def test_librdkafka_rolls_a_classic_group_to_the_consumer_protocol_and_back(cbroker):
    """The Java test above with confluent-kafka (librdkafka 2.16) members:
    three classic members (librdkafka's eager range assignor) restarted one by
    one with group.protocol=consumer, then one by one back; the group's type
    changes with the first consumer-protocol member and with the last one's
    leaving (group.consumer.migration.policy=bidirectional, the default)."""
    bs = cbroker.bootstrap
    topic = _topic(bs)
    records = 1200
    _produce(bs, topic, 0, records)
    group = f"g-{uuid.uuid4().hex[:6]}"

    def member(protocol: str) -> Consumer:
        c = Consumer({"bootstrap.servers": bs, "group.id": group, "group.protocol": protocol,
                      "auto.offset.reset": "earliest", "enable.auto.commit": False})
        c.subscribe([topic])
        return c

    reading = CommittedReading([member("classic") for _ in range(3)])
    steps: list[tuple[list[str], str]] = []
    protocols = ["classic"] * 3
    try:
        for i, protocol in [(None, None), (0, "consumer"), (1, "consumer"), (2, "consumer"),
                            (0, "classic"), (1, "classic"), (2, "classic")]:
            if i is not None:
                reading.consumers[i].close()  # leaves the group
                reading.consumers[i] = member(protocol)
                protocols[i] = protocol
            read = len(reading.seen)
            # the members cover the topic again and read on (a step of at most
            # 150 records; the last one reads the rest)
            reading.until(lambda: reading.covered() and all(reading.assignments())
                          and len(reading.seen) >= min(records, read + 150),
                          what=f"members {protocols} covering the topic and reading on")
            steps.append((list(protocols), _listed_type(bs, group)))
        reading.until(lambda: len(reading.seen) >= records, what="every record read")
    finally:
        for c in reading.consumers:
            c.close()
    assert steps == [(["classic"] * 3, "Classic"),
                     (["consumer", "classic", "classic"], "Consumer"),
                     (["consumer", "consumer", "classic"], "Consumer"),
                     (["consumer"] * 3, "Consumer"),
                     (["classic", "consumer", "consumer"], "Consumer"),
                     (["classic", "classic", "consumer"], "Consumer"),
                     (["classic"] * 3, "Classic")]
    assert len(reading.seen) == records
    assert set(reading.seen.values()) == {1}, "a record was read twice"
    log = cbroker.log_path.read_text(errors="replace")
    assert log.count("upgraded from classic to consumer group") == 1
    assert log.count("downgraded from consumer to classic group") == 1
