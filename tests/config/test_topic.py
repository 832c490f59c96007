"""Topic configs: defaults from broker keys, overrides, validation."""
import pytest

from samsa.config import TOPIC_KEYS, BrokerConfig, ConfigError, TopicConfig, load_broker_config
from samsa.config.topic_keys import BROKER_TO_TOPIC


def load(*overrides):
    return load_broker_config(None, list(overrides), environ={})


def test_default_topic_config_equals_kafka_defaults():
    assert BrokerConfig().default_topic_config == TopicConfig()


def test_every_topic_key_maps_to_an_attribute_and_a_broker_key():
    from samsa.config.broker import BROKER_KEYS
    attrs = set(TopicConfig.__dataclass_fields__)
    for name, tk in TOPIC_KEYS.items():
        assert tk.attr in attrs, name
        for s in tk.synonyms:
            assert s.name in BROKER_KEYS, (name, s.name)
    assert BROKER_TO_TOPIC["log.segment.bytes"] == "segment.bytes"
    assert BROKER_TO_TOPIC["log.retention.minutes"] == "retention.ms"


def test_default_topic_config_from_log_keys():
    c = load("log.segment.bytes=2048", "log.roll.hours=1", "message.max.bytes=5000",
             "log.roll.jitter.ms=7", "log.index.size.max.bytes=4096",
             "log.index.interval.bytes=100", "log.retention.bytes=999",
             "log.flush.interval.messages=10", "log.flush.interval.ms=20",
             "log.message.timestamp.type=LogAppendTime", "compression.type=zstd",
             "log.cleanup.policy=delete,compact", "log.cleaner.delete.retention.ms=1",
             "log.cleaner.min.cleanable.ratio=0.1", "log.cleaner.min.compaction.lag.ms=2",
             "log.cleaner.max.compaction.lag.ms=3", "log.segment.delete.delay.ms=4",
             "log.preallocate=true", "min.insync.replicas=2",
             "unclean.leader.election.enable=true", "log.message.downconversion.enable=false")
    t = c.default_topic_config
    assert t.segment_bytes == 2048 and t.segment_ms == 3600000 and t.segment_jitter_ms == 7
    assert t.max_message_bytes == 5000
    assert t.segment_index_bytes == 4096 and t.index_interval_bytes == 100
    assert t.retention_bytes == 999
    assert t.flush_messages == 10 and t.flush_ms == 20
    assert t.message_timestamp_type == "LogAppendTime" and t.compression_type == "zstd"
    assert t.cleanup_policy == "compact,delete" and t.compact and t.delete
    assert t.delete_retention_ms == 1 and t.min_cleanable_dirty_ratio == 0.1
    assert (t.min_compaction_lag_ms, t.max_compaction_lag_ms) == (2, 3)
    assert t.file_delete_delay_ms == 4 and t.preallocate is True
    assert t.min_insync_replicas == 2 and t.unclean_leader_election_enable is True
    assert t.message_downconversion_enable is False


def test_topic_overrides_win_over_broker_defaults():
    c = load("log.retention.hours=1", "log.segment.bytes=5000")
    t = c.topic_config({"retention.ms": "100", "cleanup.policy": "compact",
                        "max.message.bytes": "10", "segment.ms": "60000",
                        "min.cleanable.dirty.ratio": "0.01", "preallocate": "TRUE",
                        "leader.replication.throttled.replicas": "0:1,1:1"})
    assert t.retention_ms == 100 and t.segment_bytes == 5000
    assert t.cleanup_policy == "compact" and t.compact and not t.delete
    assert t.max_message_bytes == 10 and t.segment_ms == 60000
    assert t.min_cleanable_dirty_ratio == 0.01 and t.preallocate is True
    assert t.leader_replication_throttled_replicas == "0:1,1:1"
    assert c.topic_config({}) == c.default_topic_config
    assert c.topic_config({"retention.ms": None}) == c.default_topic_config


def test_unknown_topic_key_is_an_error():
    with pytest.raises(ConfigError) as ei:
        load().topic_config({"retention.hours": "5"})
    msg = str(ei.value)
    assert "retention.hours" in msg and "'5'" in msg and "retention.ms" in msg
    with pytest.raises(ConfigError):
        load().topic_config({"log.retention.hours": "5"})  # broker key, not a topic key


@pytest.mark.parametrize("key, value, allowed", [
    ("segment.bytes", "13", ">= 14"),
    ("segment.bytes", "x", ">= 14"),
    ("segment.ms", "0", ">= 1"),
    ("segment.index.bytes", "3", ">= 4"),
    ("retention.ms", "-2", ">= -1"),
    ("retention.bytes", "1e3", "an integer"),
    ("max.message.bytes", "-1", ">= 0"),
    ("flush.messages", "0", ">= 1"),
    ("cleanup.policy", "remove", "compact, delete"),
    ("compression.type", "none", "uncompressed"),
    ("compression.zstd.level", "23", "in [-131072, 22]"),
    ("message.timestamp.type", "AppendTime", "CreateTime, LogAppendTime"),
    ("min.cleanable.dirty.ratio", "-0.1", "in [0, 1]"),
    ("min.insync.replicas", "0", ">= 1"),
    ("preallocate", "on", "true or false"),
    ("min.compaction.lag.ms", "10", "max.compaction.lag.ms"),
])
def test_bad_topic_values(key, value, allowed):
    overrides = {key: value}
    if key == "min.compaction.lag.ms":
        overrides["max.compaction.lag.ms"] = "5"
    with pytest.raises(ConfigError) as ei:
        load().topic_config(overrides)
    msg = str(ei.value)
    assert key in msg and repr(value) in msg and allowed in msg, msg


def test_retention_ms_minus_one_means_forever():
    assert load().topic_config({"retention.ms": "-1"}).retention_ms == -1
