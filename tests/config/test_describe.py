"""DescribeConfigs entries: values, sources, synonyms, types."""
from samsa.config import (ConfigSource, ConfigType, describe_broker_config, describe_topic_config,
                    load_broker_config, TOPIC_KEYS, BROKER_KEYS)
from samsa.config.dynamic import STORED_ONLY_KEYS

S = ConfigSource


def load(*overrides, env=None):
    return load_broker_config(None, list(overrides), environ=env or {})


def by_name(entries):
    return {e.name: e for e in entries}


def test_wire_numbers():
    assert [S.UNKNOWN, S.TOPIC_CONFIG, S.DYNAMIC_BROKER_CONFIG, S.DYNAMIC_DEFAULT_BROKER_CONFIG,
            S.STATIC_BROKER_CONFIG, S.DEFAULT_CONFIG, S.DYNAMIC_BROKER_LOGGER_CONFIG] == list(range(7))
    assert S.DYNAMIC_TOPIC_CONFIG == 1
    assert [ConfigType.UNKNOWN, ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT,
            ConfigType.SHORT, ConfigType.LONG, ConfigType.DOUBLE, ConfigType.LIST,
            ConfigType.CLASS, ConfigType.PASSWORD] == list(range(10))


def test_topic_all_defaults():
    entries = describe_topic_config(load(), {})
    assert [e.name for e in entries] == sorted(TOPIC_KEYS)
    e = by_name(entries)
    seg = e["segment.bytes"]
    assert seg.value == "1073741824" and seg.source == S.DEFAULT_CONFIG and seg.is_default
    assert seg.synonyms == [("log.segment.bytes", "1073741824", S.DEFAULT_CONFIG)]
    assert seg.config_type == ConfigType.INT and not seg.read_only and not seg.is_sensitive
    assert seg.documentation
    assert e["retention.ms"].value == "604800000"
    assert e["retention.ms"].synonyms == [("log.retention.hours", "168", S.DEFAULT_CONFIG)]
    assert e["retention.ms"].config_type == ConfigType.LONG
    assert e["cleanup.policy"].value == "delete" and e["cleanup.policy"].config_type == ConfigType.LIST
    assert e["preallocate"].value == "false" and e["preallocate"].config_type == ConfigType.BOOLEAN
    assert e["min.cleanable.dirty.ratio"].value == "0.5"
    assert e["min.cleanable.dirty.ratio"].config_type == ConfigType.DOUBLE
    assert e["message.timestamp.type"].value == "CreateTime"
    assert e["leader.replication.throttled.replicas"].synonyms == []
    assert e["leader.replication.throttled.replicas"].source == S.DEFAULT_CONFIG


def test_topic_override_and_static_broker_sources():
    c = load("log.retention.minutes=10", "log.segment.bytes=4096")
    e = by_name(describe_topic_config(c, {"retention.ms": "5000", "cleanup.policy": "compact,delete",
                                          "preallocate": "TRUE"}))
    r = e["retention.ms"]
    assert r.value == "5000" and r.source == S.TOPIC_CONFIG and not r.is_default
    assert r.synonyms == [("retention.ms", "5000", S.TOPIC_CONFIG),
                          ("log.retention.minutes", "10", S.STATIC_BROKER_CONFIG),
                          ("log.retention.hours", "168", S.DEFAULT_CONFIG)]
    s = e["segment.bytes"]
    assert s.value == "4096" and s.source == S.STATIC_BROKER_CONFIG
    assert s.synonyms[0] == ("log.segment.bytes", "4096", S.STATIC_BROKER_CONFIG)
    assert e["cleanup.policy"].value == "compact,delete"
    assert e["preallocate"].value == "true"          # rendered as Kafka renders booleans


def test_topic_describe_subset_and_unknown_names_left_out():
    names = [e.name for e in describe_topic_config(load(), {}, keys=["segment.ms", "nope"])]
    assert names == ["segment.ms"]


def test_broker_describe_sources():
    c = load("num.partitions=3", "log.retention.hours=2", "log.dirs=/a,/b",
             env={"KAFKA_AUTO_CREATE_TOPICS_ENABLE": "FALSE"})
    entries = describe_broker_config(c)
    # samsa's keys and the other keys Kafka changes at run time
    assert [e.name for e in entries] == sorted({*BROKER_KEYS, *STORED_ONLY_KEYS})
    e = by_name(entries)
    assert e["num.partitions"].value == "3" and e["num.partitions"].source == S.STATIC_BROKER_CONFIG
    assert e["num.partitions"].synonyms == [("num.partitions", "3", S.STATIC_BROKER_CONFIG),
                                            ("num.partitions", "1", S.DEFAULT_CONFIG)]
    assert e["auto.create.topics.enable"].value == "false"
    assert e["auto.create.topics.enable"].source == S.STATIC_BROKER_CONFIG
    assert e["num.network.threads"].source == S.DEFAULT_CONFIG and e["num.network.threads"].is_default
    # dynamic in Kafka, so not read-only; broker.id never is
    assert e["num.network.threads"].value == "1" and not e["num.network.threads"].read_only
    assert e["broker.id"].read_only
    assert e["log.dirs"].value == "/a,/b" and e["log.dirs"].source == S.STATIC_BROKER_CONFIG
    hours = e["log.retention.hours"]
    assert hours.value == "2" and hours.source == S.STATIC_BROKER_CONFIG
    ms = e["log.retention.ms"]
    assert ms.value is None and ms.source == S.DEFAULT_CONFIG and ms.synonyms == []
    assert e["log.cleanup.policy"].value == "delete"
    assert e["log.cleaner.min.cleanable.ratio"].value == "0.5"
    assert e["zookeeper.connect"].value is None
    assert e["offsets.topic.replication.factor"].config_type == ConfigType.SHORT


def test_a_stored_key_of_unknown_type_is_described_as_sensitive():
    """A per-listener key samsa has no definition for (here a callback
    handler's secret option) is kept as stored; its type is unknown, so it
    may be a password: Kafka describes such a key as sensitive, without its
    value (KafkaConfig.maybeSensitive), at either dynamic level."""
    from samsa.config.describe import describe_broker_defaults
    from samsa.config.dynamic import with_dynamic
    key = "listener.name.internal.plain.sasl.server.callback.handler.secret"
    c = with_dynamic(load(), {key: "cluster-secret"}, {key: "broker-secret"})
    e = by_name(describe_broker_config(c))[key]
    assert e.source == S.DYNAMIC_BROKER_CONFIG and e.is_sensitive
    assert e.value is None and [s.value for s in e.synonyms] == [None, None]
    d = by_name(describe_broker_defaults(c))[key]
    assert d.is_sensitive and d.value is None and [s.value for s in d.synonyms] == [None]
