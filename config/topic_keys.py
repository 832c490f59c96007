"""Kafka's topic-level config keys: type, validator, TopicConfig attribute, and
the broker keys that supply each one's default.

A topic value comes from (first match wins): the topic's own override, then the
broker synonyms in order (e.g. retention.ms <- log.retention.ms, then
log.retention.minutes x 60000, then log.retention.hours x 3600000), then
Kafka's built-in default.  Validators follow Kafka's LogConfig, so a value
Kafka would refuse with INVALID_CONFIG is refused here too.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .topic import TopicConfig
from .values import (ConfigKey, ConfigType as T, INT_MAX, LONG_MAX, OneOf, SubsetOf, Validator,
                     at_least, between)

log = logging.getLogger("config")

# Kafka's LegacyRecord.RECORD_OVERHEAD_V0: the smallest segment that can hold a record.
MIN_SEGMENT_BYTES = 14

TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
# The broker-side compression.type values; "producer" keeps what the producer sent.
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
CLEANUP_POLICIES = ("compact", "delete")


@dataclass(frozen=True)
class Synonym:
    """A broker key that supplies a topic key's default; value * scale = topic value."""
    name: str
    scale: int = 1


@dataclass(frozen=True)
class TopicKey:
    key: ConfigKey
    attr: str                         # TopicConfig attribute
    synonyms: tuple[Synonym, ...]     # broker keys, highest precedence first

    @property
    def name(self) -> str:
        return self.key.name


_D = TopicConfig()


def _k(name: str, type_: T, validator: Validator | None, doc: str,
       synonyms: str | Sequence[Synonym] | None = None, attr: str | None = None) -> TopicKey:
    attr = attr or name.replace(".", "_")
    default = getattr(_D, attr)
    if type_ is T.LIST:
        default = [p for p in default.split(",") if p]
    if synonyms is None:
        synonyms = (Synonym(name),)
    elif isinstance(synonyms, str):
        synonyms = (Synonym(synonyms),)
    return TopicKey(ConfigKey(name, type_, default, validator, doc), attr, tuple(synonyms))


TOPIC_KEYS: dict[str, TopicKey] = {k.name: k for k in [
    # Empty is allowed (Kafka 4.2+): neither deleted nor compacted, kept forever.
    _k("cleanup.policy", T.LIST, SubsetOf(CLEANUP_POLICIES, allow_empty=True),
       "delete: drop old segments by time/size; compact: keep the latest record per key; "
       "empty: keep everything.",
       "log.cleanup.policy"),
    _k("compression.type", T.STRING, OneOf(COMPRESSION_TYPES),
       "Codec for stored batches; 'producer' keeps the producer's codec.", "compression.type"),
    _k("compression.gzip.level", T.INT, between(-1, 9),
       "gzip level when the broker recompresses (-1: codec default).", "compression.gzip.level"),
    _k("compression.lz4.level", T.INT, between(1, 17),
       "lz4 level when the broker recompresses.", "compression.lz4.level"),
    _k("compression.zstd.level", T.INT, between(-131072, 22),
       "zstd level when the broker recompresses.", "compression.zstd.level"),
    _k("delete.retention.ms", T.LONG, at_least(0),
       "How long tombstones stay readable in a compacted topic.",
       "log.cleaner.delete.retention.ms"),
    _k("file.delete.delay.ms", T.LONG, at_least(0),
       "Delay before a deleted segment's files are removed from disk.",
       "log.segment.delete.delay.ms"),
    _k("flush.messages", T.LONG, at_least(1),
       "fsync after this many messages (default: leave it to the OS).",
       "log.flush.interval.messages"),
    _k("flush.ms", T.LONG, at_least(0),
       "fsync after this much time (default: leave it to the OS).",
       (Synonym("log.flush.interval.ms"), Synonym("log.flush.scheduler.interval.ms"))),
    _k("follower.replication.throttled.replicas", T.LIST, None,
       "Replicas throttled on the follower side (accepted; no effect on a single node).", ()),
    _k("index.interval.bytes", T.INT, at_least(0),
       "Bytes of log between offset index entries.", "log.index.interval.bytes"),
    _k("leader.replication.throttled.replicas", T.LIST, None,
       "Replicas throttled on the leader side (accepted; no effect on a single node).", ()),
    _k("max.compaction.lag.ms", T.LONG, at_least(1),
       "Longest time a record may stay uncompacted.", "log.cleaner.max.compaction.lag.ms"),
    _k("max.message.bytes", T.INT, at_least(0),
       "Largest record batch the topic accepts.", "message.max.bytes"),
    _k("message.downconversion.enable", T.BOOLEAN, None,
       "Whether fetches by old clients may be down-converted to v0/v1.",
       "log.message.downconversion.enable"),
    _k("message.timestamp.after.max.ms", T.LONG, at_least(0),
       "How far in the future a CreateTime timestamp may be.",
       "log.message.timestamp.after.max.ms"),
    _k("message.timestamp.before.max.ms", T.LONG, at_least(0),
       "How far in the past a CreateTime timestamp may be.",
       "log.message.timestamp.before.max.ms"),
    _k("message.timestamp.difference.max.ms", T.LONG, at_least(0),
       "Deprecated: largest allowed difference between record and broker time.",
       "log.message.timestamp.difference.max.ms"),
    _k("message.timestamp.type", T.STRING, OneOf(TIMESTAMP_TYPES),
       "CreateTime keeps the producer's timestamp; LogAppendTime stamps broker time.",
       "log.message.timestamp.type"),
    _k("min.cleanable.dirty.ratio", T.DOUBLE, between(0, 1),
       "Dirty fraction of the log that triggers compaction.", "log.cleaner.min.cleanable.ratio"),
    _k("min.compaction.lag.ms", T.LONG, at_least(0),
       "Shortest time a record stays uncompacted.", "log.cleaner.min.compaction.lag.ms"),
    _k("min.insync.replicas", T.INT, at_least(1),
       "Replicas that must acknowledge an acks=all write.", "min.insync.replicas"),
    _k("preallocate", T.BOOLEAN, None,
       "Preallocate segment files on disk.", "log.preallocate"),
    _k("retention.bytes", T.LONG, None,
       "Largest partition size before old segments are deleted (-1: no limit).",
       "log.retention.bytes"),
    _k("retention.ms", T.LONG, at_least(-1),
       "How long segments are kept before deletion (-1: forever).",
       (Synonym("log.retention.ms"), Synonym("log.retention.minutes", 60_000),
        Synonym("log.retention.hours", 3_600_000))),
    _k("segment.bytes", T.INT, at_least(MIN_SEGMENT_BYTES),
       "Size at which a new segment is rolled.", "log.segment.bytes"),
    _k("segment.index.bytes", T.INT, at_least(4),
       "Size of each segment's offset and time index files.", "log.index.size.max.bytes"),
    _k("segment.jitter.ms", T.LONG, at_least(0),
       "Random jitter subtracted from segment.ms, to spread rolls.",
       (Synonym("log.roll.jitter.ms"), Synonym("log.roll.jitter.hours", 3_600_000))),
    _k("segment.ms", T.LONG, at_least(1),
       "Age at which a new segment is rolled even if not full.",
       (Synonym("log.roll.ms"), Synonym("log.roll.hours", 3_600_000))),
    _k("unclean.leader.election.enable", T.BOOLEAN, None,
       "Allow out-of-sync replicas to become leader (no effect on a single node).",
       "unclean.leader.election.enable"),
]}

# Topic keys of Kafka 3.x that Kafka 4.0 removed. samsa serves the tools and
# clients of both generations, so these are accepted and ignored (with one
# warning per key) rather than refused as unknown: a 3.x tool copying a
# topic's configs must not fail on them.
REMOVED_TOPIC_KEYS: dict[str, str] = {
    "message.format.version": "the message format follows the client's Produce version",
    "message.downconversion.enable": "old fetchers are always down-converted",
}
_warned_removed: set[str] = set()


def drop_removed_keys(configs: Mapping[str, str | None]) -> dict[str, str | None]:
    """``configs`` without the keys Kafka 4 removed, warning once per key."""
    kept = {}
    for key, value in configs.items():
        if key in REMOVED_TOPIC_KEYS:
            if key not in _warned_removed:
                _warned_removed.add(key)
                log.warning("ignoring topic config %s=%s: removed in Kafka 4.0 (%s)", key,
                            value, REMOVED_TOPIC_KEYS[key])
            continue
        kept[key] = value
    return kept


# Broker key -> topic key it feeds (used to say "log.segment.bytes is a synonym of ...").
BROKER_TO_TOPIC: dict[str, str] = {
    s.name: tk.name for tk in TOPIC_KEYS.values() for s in tk.synonyms}


def to_attr_value(tk: TopicKey, value: Any) -> Any:
    """Typed key value -> the representation TopicConfig stores."""
    if tk.key.type is T.LIST:
        if tk.name == "cleanup.policy":
            # Canonical order and no duplicates: storage checks "compact"/"delete" membership.
            return ",".join(p for p in CLEANUP_POLICIES if p in value)
        return ",".join(value)
    return value


def from_attr_value(tk: TopicKey, value: Any) -> Any:
    """TopicConfig attribute -> typed key value (lists back to lists)."""
    if tk.key.type is T.LIST:
        return [p for p in value.split(",") if p]
    return value


__all__ = ["REMOVED_TOPIC_KEYS", "drop_removed_keys", "TOPIC_KEYS", "TopicKey", "Synonym", "BROKER_TO_TOPIC", "TIMESTAMP_TYPES",
           "COMPRESSION_TYPES", "CLEANUP_POLICIES", "MIN_SEGMENT_BYTES", "INT_MAX", "LONG_MAX"]
