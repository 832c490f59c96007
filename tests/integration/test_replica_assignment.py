"""Explicit replica assignments in CreateTopics and CreatePartitions (issue
15, item 4): accepted when they name live brokers, INVALID_REPLICA_ASSIGNMENT
otherwise, through librdkafka's admin client as a user would send them."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _partitions(admin, topic):
    return len(admin.list_topics(topic, timeout=10).topics[topic].partitions)


def _error(future):
    with pytest.raises(KafkaException) as info:
        future.result(30)
    return info.value.args[0]


def test_assignment_on_live_brokers_is_accepted(admin):
    admin.create_topics([NewTopic("assigned", 3, replica_assignment=[[0], [0], [0]])])[
        "assigned"].result(30)
    assert _partitions(admin, "assigned") == 3
    admin.create_partitions([NewPartitions("assigned", 5, replica_assignment=[[0], [0]])])[
        "assigned"].result(30)
    assert _partitions(admin, "assigned") == 5


def test_unknown_brokers_are_refused(admin):
    err = _error(admin.create_topics([NewTopic("t1", 1, replica_assignment=[[5]])])["t1"])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "5" in err.str()
    err = _error(admin.create_topics([NewTopic("t2", 1, replica_assignment=[[0, 1]])])["t2"])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert "t1" not in admin.list_topics(timeout=10).topics


def test_bad_shapes_are_refused(admin):
    err = _error(admin.create_topics([NewTopic("dup", 1, replica_assignment=[[0, 0]])])["dup"])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    admin.create_topics([NewTopic("grow", 1, 1)])["grow"].result(30)
    # Two new partitions, one assignment.
    err = _error(admin.create_partitions([NewPartitions("grow", 3, replica_assignment=[[0]])])[
        "grow"])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    err = _error(admin.create_partitions([NewPartitions("grow", 2, replica_assignment=[[7]])])[
        "grow"])
    assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT
    assert _partitions(admin, "grow") == 1
