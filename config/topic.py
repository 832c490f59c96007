"""Per-topic (log) configuration: Kafka's topic keys as one typed, immutable object.

storage/ reads these attributes; config/ fills them from broker defaults
(`log.segment.bytes` ...) and per-topic overrides (`segment.bytes` ...).
The key table (names, types, validators, broker synonyms) is in topic_keys.py;
build instances with `BrokerConfig.topic_config(overrides)` rather than by hand
so values are validated.
"""
from __future__ import annotations

import dataclasses
from typing import Any

LONG_MAX = 9223372036854775807


@dataclasses.dataclass(frozen=True)
class TopicConfig:
    segment_bytes: int = 1073741824            # segment.bytes / log.segment.bytes
    segment_ms: int = 604800000                # segment.ms / log.roll.ms (7 days)
    segment_jitter_ms: int = 0                 # segment.jitter.ms / log.roll.jitter.ms
    segment_index_bytes: int = 10485760        # segment.index.bytes / log.index.size.max.bytes
    index_interval_bytes: int = 4096           # index.interval.bytes / log.index.interval.bytes
    retention_ms: int = 604800000              # retention.ms / log.retention.ms (-1: forever)
    retention_bytes: int = -1                  # retention.bytes / log.retention.bytes
    flush_messages: int = LONG_MAX             # flush.messages / log.flush.interval.messages
    flush_ms: int = LONG_MAX                   # flush.ms / log.flush.interval.ms
    message_timestamp_type: str = "CreateTime"  # message.timestamp.type: CreateTime | LogAppendTime
    max_message_bytes: int = 1048588           # max.message.bytes / message.max.bytes
    cleanup_policy: str = "delete"             # cleanup.policy: delete | compact | compact,delete
    compression_type: str = "producer"         # compression.type
    delete_retention_ms: int = 86400000        # delete.retention.ms
    min_cleanable_dirty_ratio: float = 0.5     # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0             # min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX      # max.compaction.lag.ms
    file_delete_delay_ms: int = 60000          # file.delete.delay.ms
    preallocate: bool = False                  # preallocate
    min_insync_replicas: int = 1               # min.insync.replicas
    # Added by config/ (appended so existing positional order is unchanged):
    message_timestamp_difference_max_ms: int = LONG_MAX  # message.timestamp.difference.max.ms
    message_timestamp_before_max_ms: int = LONG_MAX      # message.timestamp.before.max.ms
    message_timestamp_after_max_ms: int = LONG_MAX       # message.timestamp.after.max.ms
    message_downconversion_enable: bool = True           # message.downconversion.enable
    unclean_leader_election_enable: bool = False         # unclean.leader.election.enable
    compression_gzip_level: int = -1                     # compression.gzip.level (-1: codec default)
    compression_lz4_level: int = 9                       # compression.lz4.level
    compression_zstd_level: int = 3                      # compression.zstd.level
    leader_replication_throttled_replicas: str = ""      # accepted for tool compatibility; no effect
    follower_replication_throttled_replicas: str = ""    # accepted for tool compatibility; no effect

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def replace(self, **changes: Any) -> "TopicConfig":
        return dataclasses.replace(self, **changes)
