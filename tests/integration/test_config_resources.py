"""ListConfigResources (API 74, KIP-1142, Kafka 4.1): the Java Admin client's
listConfigResources lists this cluster's topics, brokers, broker loggers and
groups, filtered by type; v0 (the former ListClientMetricsResources) lists
client-metrics resources, of which samsa has none."""
from __future__ import annotations

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ListConfigResourcesRequest
from tests.support.waiting import wait_until


def _setup(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("a", 1, 1), NewTopic("b", 2, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    producer.produce("a", b"x")
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g1",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe(["a"])
        msg = wait_until(lambda: (m := consumer.poll(0.5)) is not None and not m.error() and m,
                         what="the record")
        consumer.commit(msg, asynchronous=False)
    finally:
        consumer.close()


def test_java_admin_lists_config_resources(broker, java_tools):
    _setup(broker)

    def listed(*types):
        args = [x for t in types for x in ("--type", t)]
        return java_tools.run("LogDirs", "--bootstrap-server", broker.bootstrap,
                              "--list-config-resources", *args).check().lines

    topics = ["TOPIC\t__consumer_offsets", "TOPIC\ta", "TOPIC\tb"]
    assert listed() == sorted(["BROKER\t0", "BROKER_LOGGER\t0", "GROUP\tg1", *topics])
    assert listed("TOPIC") == topics
    assert listed("GROUP", "BROKER") == ["BROKER\t0", "GROUP\tg1"]
    assert listed("CLIENT_METRICS") == []


def test_list_config_resources_on_the_wire(broker):
    _setup(broker)
    with SimpleClient(broker.bootstrap) as client:
        v0 = client.call(74, ListConfigResourcesRequest(), highest=0)
        assert (v0.error_code, v0.config_resources) == (0, [])
        v1 = client.call(74, ListConfigResourcesRequest(resource_types=[2, 32]), highest=1)
        assert v1.error_code == 0
        assert sorted((r.resource_type, r.resource_name) for r in v1.config_resources) == [
            (2, "__consumer_offsets"), (2, "a"), (2, "b"), (32, "g1")]
        # a type Kafka does not list (0 is UNKNOWN)
        bad = client.call(74, ListConfigResourcesRequest(resource_types=[2, 0]), highest=1)
        assert (bad.error_code, bad.config_resources) == (ErrorCode.UNSUPPORTED_VERSION, [])
