"""Configs as Kafka takes them (issue 15, item 5), through librdkafka's admin
client: an emptied list config, keys Kafka 4 removed, dynamic broker configs
changed, applied and kept without a restart, and the cluster's authorized
operations."""
from __future__ import annotations

import os

import pytest
from confluent_kafka import KafkaException, Producer
from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from confluent_kafka.admin import (AclOperation, AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, ConfigSource, NewTopic, ResourceType)


@pytest.fixture
def admin(broker):
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def _describe(admin, rtype, name):
    return admin.describe_configs([ConfigResource(rtype, name)])[
        ConfigResource(rtype, name)].result(30)


def _incremental(admin, rtype, name, *entries):
    res = ConfigResource(rtype, name, incremental_configs=list(entries))
    return admin.incremental_alter_configs([res])[res].result(30)


def _set(key, value):
    return ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET)


def _set_cluster_default(broker, key, value):
    """IncrementalAlterConfigs SET on the cluster-wide default (resource name
    "", which librdkafka cannot address: sent as kafka-configs --entity-default
    sends it); the resource's answer."""
    with SimpleClient(broker.bootstrap) as client:
        R = IncrementalAlterConfigsRequest
        return client.call(44, R(validate_only=False, resources=[R.AlterConfigsResource(
            resource_type=4, resource_name="", configs=[R.AlterableConfig(
                name=key, config_operation=0, value=value)])])).responses[0]


def _segments(broker, topic):
    return sorted(f for f in os.listdir(broker.data_dir / f"{topic}-0") if f.endswith(".log"))


def test_removing_the_last_cleanup_policy_is_accepted(admin):
    admin.create_topics([NewTopic("t", 1, 1, config={"cleanup.policy": "delete"})])["t"].result(30)
    _incremental(admin, ResourceType.TOPIC, "t", ConfigEntry(
        "cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
    assert _describe(admin, ResourceType.TOPIC, "t")["cleanup.policy"].value == ""


def test_append_and_subtract_start_from_the_default_of_a_key_not_set(admin):
    """Kafka appends to (and subtracts from) a list key's default when the
    resource does not set it: cleanup.policy APPEND compact is delete,compact."""
    def op(key, value, kind):
        return ConfigEntry(key, value, incremental_operation=kind)
    A, S = AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT
    admin.create_topics([NewTopic("appended", 1, 1)])["appended"].result(30)
    _incremental(admin, ResourceType.TOPIC, "appended", op("cleanup.policy", "compact", A))
    assert _describe(admin, ResourceType.TOPIC, "appended")["cleanup.policy"].value == \
        "delete,compact"
    admin.create_topics([NewTopic("subtracted", 1, 1)])["subtracted"].result(30)
    _incremental(admin, ResourceType.TOPIC, "subtracted", op("cleanup.policy", "delete", S))
    assert _describe(admin, ResourceType.TOPIC, "subtracted")["cleanup.policy"].value == ""

    _incremental(admin, ResourceType.BROKER, "0", op("log.cleanup.policy", "compact", A))
    entry = _describe(admin, ResourceType.BROKER, "0")["log.cleanup.policy"]
    assert (entry.value, entry.source) == ("delete,compact",
                                           ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    # a list key samsa keeps without using it starts from Kafka's default too
    _incremental(admin, ResourceType.BROKER, "0",
                 op("sasl.kerberos.principal.to.local.rules", "RULE:x", A))
    assert _describe(admin, ResourceType.BROKER, "0")[
        "sasl.kerberos.principal.to.local.rules"].value == "DEFAULT,RULE:x"
    # a key that is not a list cannot be appended to, as Kafka answers
    with pytest.raises(KafkaException,
                       match="Config value append is not allowed for config key: retention.ms"):
        _incremental(admin, ResourceType.TOPIC, "appended", op("retention.ms", "1", A))


def test_topic_keys_removed_in_kafka_4_are_accepted_and_ignored(broker, admin):
    admin.create_topics([NewTopic("legacy", 1, 1, config={
        "message.format.version": "2.8", "message.downconversion.enable": "true",
        "retention.ms": "60000"})])["legacy"].result(30)
    described = _describe(admin, ResourceType.TOPIC, "legacy")
    assert described["retention.ms"].value == "60000"
    assert "message.format.version" not in described
    _incremental(admin, ResourceType.TOPIC, "legacy", _set("message.format.version", "3.0"))
    log_text = broker.log_path.read_text()
    assert log_text.count("ignoring topic config message.format.version") == 1


def test_dynamic_broker_config_applies_without_restart_and_is_kept(broker, admin):
    admin.create_topics([NewTopic("rolling", 1, 1)])["rolling"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for _ in range(5):
        producer.produce("rolling", b"x" * 10_000)
    producer.flush(30)
    assert len(_segments(broker, "rolling")) == 1
    # A smaller segment size for every topic without its own, on this broker.
    _incremental(admin, ResourceType.BROKER, "0", _set("log.segment.bytes", "20000"))
    entry = _describe(admin, ResourceType.BROKER, "0")["log.segment.bytes"]
    assert entry.value == "20000" and entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert not entry.is_read_only
    topic_entry = _describe(admin, ResourceType.TOPIC, "rolling")["segment.bytes"]
    assert topic_entry.value == "20000"
    for _ in range(10):
        producer.produce("rolling", b"y" * 10_000)
        producer.flush(30)
    assert len(_segments(broker, "rolling")) >= 4  # rolled at the new size, no restart
    # The cluster-wide default (resource name "", which librdkafka cannot
    # address: sent as kafka-configs --entity-default sends it), described on
    # its own resource and felt by every topic.
    assert _set_cluster_default(broker, "log.retention.ms", "3600000").error_code == 0
    with SimpleClient(broker.bootstrap) as client:
        D = DescribeConfigsRequest
        defaults = client.call(32, D(include_synonyms=True, include_documentation=False,
                                     resources=[D.DescribeConfigsResource(
                                         resource_type=4, resource_name="",
                                         configuration_keys=None)])).results[0].configs
        assert [(c.name, c.value, c.config_source) for c in defaults] == [
            ("log.retention.ms", "3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)]
    retention = _describe(admin, ResourceType.TOPIC, "rolling")["retention.ms"]
    assert retention.value == "3600000"
    broker.restart()
    admin2 = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert _describe(admin2, ResourceType.BROKER, "0")["log.segment.bytes"].value == "20000"
    assert _describe(admin2, ResourceType.TOPIC, "rolling")["retention.ms"].value == "3600000"


def test_keys_that_cannot_change_at_run_time_are_refused(admin):
    for key, value, says in [
            ("broker.id", "7", "Cannot update these configs dynamically: broker.id"),
            ("log.dirs", "/elsewhere", "Cannot update these configs dynamically: log.dirs"),
            ("ssl.keystore.location", "/k.jks",
             "only per-listener using the listener prefix: ssl.keystore.location")]:
        with pytest.raises(KafkaException) as info:
            _incremental(admin, ResourceType.BROKER, "0", _set(key, value))
        assert info.value.args[0].code() == 42 or "INVALID_REQUEST" in info.value.args[0].name()
        assert says in info.value.args[0].str()
    with pytest.raises(KafkaException, match="log.segment.bytes"):
        _incremental(admin, ResourceType.BROKER, "0", _set("log.segment.bytes", "-1"))
    with pytest.raises(KafkaException, match="background.threads"):
        _incremental(admin, ResourceType.BROKER, "0", _set("background.threads", "many"))


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")
def test_every_key_kafka_changes_at_run_time_is_kept_and_described(broker, admin):
    """librdkafka's broker tests change keys samsa does not use (Kerberos,
    thread counts): Kafka takes them, keeps them and describes them as
    dynamic, and so does samsa."""
    keys = {"sasl.kerberos.min.time.before.relogin": "60001", "background.threads": "11",
            "num.io.threads": "9", "log.cleaner.threads": "2", "metric.reporters": "",
            "listener.name.plaintext.ssl.keystore.location": "/keys/k.jks"}
    _incremental(admin, ResourceType.BROKER, "0", *[_set(k, v) for k, v in keys.items()])
    # the legacy AlterConfigs replaces the broker's whole dynamic set
    res = ConfigResource(ResourceType.BROKER, "0", set_config={
        **keys, "num.replica.fetchers": "3"})
    admin.alter_configs([res])[res].result(30)

    def check(admin):
        described = _describe(admin, ResourceType.BROKER, "0")
        for key, value in {**keys, "num.replica.fetchers": "3"}.items():
            entry = described[key]
            assert (entry.value, entry.source) == (
                value, ConfigSource.DYNAMIC_BROKER_CONFIG.value), (key, entry)
            assert not entry.is_read_only, key
        assert described["broker.id"].is_read_only
    check(admin)
    broker.restart()  # kept in the metadata store
    check(AdminClient({"bootstrap.servers": broker.bootstrap}))
    # a per-broker key is refused at the cluster-default level, as Kafka does
    refused = _set_cluster_default(broker, "sasl.enabled.mechanisms", "PLAIN")
    assert refused.error_code == 42
    assert "broker id must be specified" in refused.error_message


def test_cluster_authorized_operations_are_the_cluster_resources(admin):
    cluster = admin.describe_cluster(include_authorized_operations=True).result(30)
    assert set(cluster.authorized_operations) == {
        AclOperation.CREATE, AclOperation.ALTER, AclOperation.DESCRIBE,
        AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE}
