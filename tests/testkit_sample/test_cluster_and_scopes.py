"""A 3-broker cluster, a module-scoped broker, a configured one."""
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from record import record


def test_a_cluster_of_three_replicates_a_topic(samsa_cluster):
    record(samsa_cluster)
    samsa_cluster.create_topic("replicated", partitions=2, replication_factor=3)
    admin = AdminClient({"bootstrap.servers": samsa_cluster.bootstrap_servers})
    md = admin.list_topics(timeout=30)
    assert sorted(md.brokers) == [0, 1, 2]
    assert all(len(p.replicas) == 3 for p in md.topics["replicated"].partitions.values())
    p = Producer({"bootstrap.servers": samsa_cluster.bootstrap_servers, "acks": "all"})
    p.produce("replicated", b"x")
    assert p.flush(30) == 0


def test_the_module_broker_is_shared_1(samsa_broker_module):
    record(samsa_broker_module)
    samsa_broker_module.create_topic("shared")


def test_the_module_broker_is_shared_2(samsa_broker_module):
    md = AdminClient({"bootstrap.servers": samsa_broker_module.bootstrap_servers}).list_topics(timeout=30)
    assert "shared" in md.topics


@pytest.mark.samsa_broker(num_partitions=4)
def test_configs_come_from_the_marker(samsa_broker):
    record(samsa_broker)
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers})
    p.produce("auto-created", b"x")
    assert p.flush(30) == 0
    md = AdminClient({"bootstrap.servers": samsa_broker.bootstrap_servers}).list_topics(timeout=30)
    assert len(md.topics["auto-created"].partitions) == 4


def test_the_factory_takes_configs(samsa_broker_factory):
    b = samsa_broker_factory(auto_create_topics_enable=False)
    record(b)
    md = AdminClient({"bootstrap.servers": b.bootstrap_servers}).list_topics("nope", timeout=30)
    assert md.topics["nope"].error is not None
