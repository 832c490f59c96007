"""Integration tests in the shape of confluent-kafka-python's (producer/, consumer/, admin/)."""
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AdminClient, ResourcePatternType, ResourceType)


def test_produce_then_consume(kafka_cluster):
    topic = kafka_cluster.create_topic("test_produce_then_consume", {"num_partitions": 2})
    p = kafka_cluster.cimpl_producer()
    for i in range(10):
        p.produce(topic, f"v{i}".encode(), partition=i % 2)
    assert p.flush(30) == 0
    c = kafka_cluster.cimpl_consumer()
    c.subscribe([topic])
    got = []
    while len(got) < 10:
        m = c.poll(10)
        assert m is not None and m.error() is None, m and m.error()
        got.append(m.value())
    c.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(10))


def test_transactions_commit_and_abort(kafka_cluster):
    topic = kafka_cluster.create_topic("test_transactions")
    p = kafka_cluster.cimpl_producer({"transactional.id": topic})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"aborted")
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"committed")
    p.commit_transaction(30)
    c = kafka_cluster.cimpl_consumer({"isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, 0)])
    m = c.poll(30)
    assert m is not None and m.value() == b"committed"
    c.close()


def test_admin_describes_the_cluster(kafka_cluster):
    admin = AdminClient(kafka_cluster.client_conf())
    md = admin.list_topics(timeout=30)
    assert len(md.brokers) >= 1
    topic = kafka_cluster.create_topic("test_admin")
    assert topic in admin.list_topics(timeout=30).topics


def test_admin_creates_and_deletes_acls(kafka_cluster):
    # trivup's brokers have an authorizer: the suite's admin tests create ACLs
    admin = AdminClient(kafka_cluster.client_conf())
    binding = AclBinding(ResourceType.TOPIC, "acl-topic", ResourcePatternType.LITERAL,
                         "User:someone", "*", AclOperation.READ, AclPermissionType.ALLOW)
    for f in admin.create_acls([binding]).values():
        f.result()
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY,
                                  None, None, AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(everything).result() == [binding]
    assert admin.delete_acls([everything])[everything].result() == [binding]
