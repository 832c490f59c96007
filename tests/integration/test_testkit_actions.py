"""One-off faults on a test broker's state (broker/faults/actions.py), with real clients:
a consumer group rebalances after a member's session is expired, a producer follows a
moved leader without losing a record, an ISR shrunk by hand grows back as followers
keep up (all as on Kafka)."""
from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from samsa.testing.waiting import wait_until


def _members(bootstrap: str, group: str) -> set[str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_consumer_groups([group])[group].result(timeout=30)
    return {m.member_id for m in desc.members}


def test_a_group_rebalances_after_a_member_is_expired(samsa_broker):
    samsa_broker.create_topic("t", partitions=2)
    assignments: dict[str, list] = {"a": [], "b": []}
    consumers = {}
    for name in ("a", "b"):
        c = Consumer({"bootstrap.servers": samsa_broker.bootstrap_servers, "group.id": "g",
                      "session.timeout.ms": 30000, "heartbeat.interval.ms": 200})
        c.subscribe(["t"], on_assign=lambda _c, parts, n=name: assignments[n].append(len(parts)))
        consumers[name] = c
    try:
        def poll_all():
            for c in consumers.values():
                c.poll(0.05)
        wait_until(lambda: (poll_all(), assignments["a"] and assignments["b"]
                            and assignments["a"][-1] + assignments["b"][-1] == 2)[1], 60,
                   "both consumers assigned")
        before = _members(samsa_broker.bootstrap_servers, "g")
        expired = samsa_broker.expire_member("g")
        assert expired in before
        # the expired member learns it is gone (UNKNOWN_MEMBER_ID) and joins again as a
        # new member; the group settles with two members, the expired one replaced
        wait_until(lambda: (poll_all(), expired not in (m := _members(samsa_broker.bootstrap_servers, "g"))
                            and len(m) == 2)[1], 60, "the group with a new member in place of the expired one")
        assert f"member {expired} session expired" in samsa_broker.log_text()
        assert f"fault: expired member {expired} of group g" in samsa_broker.log_text()
    finally:
        for c in consumers.values():
            c.close()


def test_a_producer_follows_a_moved_leader_and_an_isr_shrinks_and_grows_back(samsa_cluster):
    samsa_cluster.create_topic("t", partitions=1, replication_factor=3)
    p = Producer({"bootstrap.servers": samsa_cluster.bootstrap_servers, "acks": "all",
                  "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 1000})
    reports = []

    def produce(n):
        for i in range(n):
            p.produce("t", f"r{len(reports) + i}".encode(), on_delivery=lambda err, msg: reports.append(err))
        assert p.flush(60) == 0
    produce(5)
    old = samsa_cluster.leaders("t")[0]
    new = (old + 1) % 3
    samsa_cluster.move_leader("t", 0, new)
    produce(5)  # NOT_LEADER_OR_FOLLOWER from the old leader, metadata refreshed, sent to the new
    assert reports == [None] * 10
    state = samsa_cluster.partition_state("t", 0)
    assert state["leader"] == new

    samsa_cluster.shrink_isr("t", 0, [new])
    assert "fault: shrank the ISR of t-0 to [" + str(new) + "]" in samsa_cluster.node(new).log_text()
    # followers still fetching catch up and are taken back, as Kafka's leader does
    wait_until(lambda: len((samsa_cluster.partition_state("t", 0) or {}).get("isr", [])) == 3, 60,
               "the ISR grown back to 3")
    produce(2)
    c = Consumer({"bootstrap.servers": samsa_cluster.bootstrap_servers, "group.id": "hw"})
    try:
        from confluent_kafka import TopicPartition
        assert c.get_watermark_offsets(TopicPartition("t", 0), timeout=30)[1] == 12
    finally:
        c.close()
