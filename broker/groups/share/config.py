"""A share group's settings: the broker's group.share.* defaults, overridden
per group by the share.* group configs (GROUP config resources, KIP-932).

The keys, their bounds and the refusal of bad values are the GROUP config
table's (broker/group_configs.py, IncrementalAlterConfigs / DescribeConfigs on
resource type 32); here they are read, each change taking effect at the
group's next event as Kafka's do: a lock duration for the locks taken from
then on, share.auto.offset.reset when a share-partition is next initialised.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ... import group_configs
from .partition import ShareLimits

AUTO_OFFSET_RESET = "share.auto.offset.reset"
LOCK_DURATION = "share.record.lock.duration.ms"
DELIVERY_COUNT_LIMIT = "share.delivery.count.limit"
SESSION_TIMEOUT = "share.session.timeout.ms"
HEARTBEAT_INTERVAL = "share.heartbeat.interval.ms"
ISOLATION_LEVEL = "share.isolation.level"
MAX_RECORD_LOCKS = "share.partition.max.record.locks"


@dataclass(frozen=True)
class ShareDefaults:
    """The broker's defaults (Kafka's group.share.* broker keys)."""
    lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    max_record_locks: int = 2_000
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    max_size: int = 200

    @classmethod
    def from_broker_config(cls, cfg: Any) -> ShareDefaults:
        return cls(cfg.group_share_record_lock_duration_ms,
                   cfg.group_share_delivery_count_limit,
                   cfg.group_share_partition_max_record_locks,
                   cfg.group_share_session_timeout_ms,
                   cfg.group_share_heartbeat_interval_ms,
                   cfg.group_share_max_size)


@dataclass(frozen=True)
class ShareGroupSettings:
    auto_offset_reset: str | int  # "earliest", "latest" or by_duration's milliseconds
    limits: ShareLimits
    session_timeout_ms: int
    heartbeat_interval_ms: int
    read_committed: bool


def settings(defaults: ShareDefaults, overrides: Mapping[str, str]) -> ShareGroupSettings:
    """The group's settings; a bad override is ignored (it was validated when set)."""
    def get(key: str, fallback: Any) -> Any:
        raw = overrides.get(key)
        parsed = None if raw is None else group_configs.parse(key, raw)
        return fallback if parsed is None else parsed
    return ShareGroupSettings(
        get(AUTO_OFFSET_RESET, "latest"),
        ShareLimits(get(LOCK_DURATION, defaults.lock_duration_ms),
                    get(DELIVERY_COUNT_LIMIT, defaults.delivery_count_limit),
                    get(MAX_RECORD_LOCKS, defaults.max_record_locks)),
        get(SESSION_TIMEOUT, defaults.session_timeout_ms),
        get(HEARTBEAT_INTERVAL, defaults.heartbeat_interval_ms),
        get(ISOLATION_LEVEL, "read_uncommitted") == "read_committed")
