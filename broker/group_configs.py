"""Group configs: the GROUP config resource (type 32) of DescribeConfigs and
IncrementalAlterConfigs/AlterConfigs, Kafka 4's per-group settings over the
broker's group.* ones.

One table, ``KEYS``: each key's broker setting (its default and bounds) and
what it means. KIP-848's consumer.* keys and KIP-932's share.* keys (the
share machine reads them through broker/groups/share/config.py). A group's configs are kept as an entity config of the
metadata store (``groups/<group>``, /config/groups/<group> in ZooKeeper, as
users' and clients' are), so they survive restarts and every broker follows
their changes; ``GroupConfigs`` is the coordinator's copy, read without I/O.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from samsa.config.describe import ConfigEntry, ConfigSource
from samsa.config.values import ConfigType

from .metadata.zk_layout import desanitize_entity_name, sanitize_entity_name

GROUP = 32  # DescribeConfigs/AlterConfigs resource type
ENTITY_TYPE = "groups"


@dataclass(frozen=True)
class GroupConfigKey:
    name: str
    broker_key: str | None  # the broker setting it overrides (its default), if any
    minimum: str | None  # broker attribute bounding it below, if any
    maximum: str | None  # ... and above
    doc: str
    floor: int = 1  # Kafka's ConfigDef atLeast(), before the broker's bounds
    default: str | None = None  # a STRING key's default (no broker setting)
    check: Callable[[str], str | None] | None = None  # a STRING key's validator
    parse: Callable[[str], Any] = str  # a STRING key's value as the group reads it

    @property
    def is_int(self) -> bool:
        return self.check is None


def _one_of(name: str, *choices: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        if value in choices:
            return None
        return (f"Invalid value {value} for configuration {name}: "
                f"String must be one of: {', '.join(choices)}")
    return check


def _auto_offset_reset(value: str) -> str | None:
    if share_auto_offset_reset(value) is not None:
        return None
    return (f"Invalid value {value} for configuration share.auto.offset.reset: "
            "must be earliest, latest or by_duration:<ISO8601 duration, not negative>")


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?",
                       re.IGNORECASE)


def share_auto_offset_reset(value: str) -> str | int | None:
    """share.auto.offset.reset parsed: "earliest", "latest", a by_duration's
    milliseconds, or None if it is none of these (Kafka's three strategies)."""
    lowered = value.strip().lower()
    if lowered in ("earliest", "latest"):
        return lowered
    if not lowered.startswith("by_duration:"):
        return None
    match = _DURATION.fullmatch(value.strip()[len("by_duration:"):])
    if match is None or value.strip().upper().endswith(("P", "T")):
        return None
    days, hours, minutes, seconds = match.groups()
    return int((int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60
                + float(seconds or 0)) * 1000)


KEYS: dict[str, GroupConfigKey] = {k.name: k for k in (
    GroupConfigKey("consumer.session.timeout.ms", "group.consumer.session.timeout.ms",
                   "group.consumer.min.session.timeout.ms",
                   "group.consumer.max.session.timeout.ms",
                   "The timeout to detect client failures when using the consumer group "
                   "protocol."),
    GroupConfigKey("consumer.heartbeat.interval.ms", "group.consumer.heartbeat.interval.ms",
                   "group.consumer.min.heartbeat.interval.ms",
                   "group.consumer.max.heartbeat.interval.ms",
                   "The heartbeat interval given to the members of a consumer group."),
    # KIP-932 share groups, as Kafka 4.x's GroupConfig has them
    GroupConfigKey("share.session.timeout.ms", "group.share.session.timeout.ms",
                   "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
                   "The timeout to detect client failures when using the share group "
                   "protocol."),
    GroupConfigKey("share.heartbeat.interval.ms", "group.share.heartbeat.interval.ms",
                   "group.share.min.heartbeat.interval.ms",
                   "group.share.max.heartbeat.interval.ms",
                   "The heartbeat interval given to the members of a share group."),
    GroupConfigKey("share.record.lock.duration.ms", "group.share.record.lock.duration.ms",
                   "group.share.min.record.lock.duration.ms",
                   "group.share.max.record.lock.duration.ms",
                   "The record acquisition lock duration in milliseconds for share groups.",
                   floor=1000),
    GroupConfigKey("share.delivery.count.limit", "group.share.delivery.count.limit",
                   "group.share.min.delivery.count.limit",
                   "group.share.max.delivery.count.limit",
                   "The maximum number of delivery attempts for a record delivered to a "
                   "share group.", floor=2),
    GroupConfigKey("share.partition.max.record.locks", "group.share.partition.max.record.locks",
                   "group.share.min.partition.max.record.locks",
                   "group.share.max.partition.max.record.locks",
                   "Share-group record lock limit per share-partition.", floor=100),
    GroupConfigKey("share.auto.offset.reset", None, None, None,
                   "The strategy to initialize the share-partition start offset: earliest, "
                   "latest, or by_duration:<ISO8601 duration> (that long before now).",
                   default="latest", check=_auto_offset_reset,
                   parse=share_auto_offset_reset),
    GroupConfigKey("share.isolation.level", None, None, None,
                   "Controls how to read records written transactionally: read_committed "
                   "or read_uncommitted.", default="read_uncommitted",
                   check=_one_of("share.isolation.level", "read_committed",
                                 "read_uncommitted")),
)}

# (session timeout, heartbeat interval): Kafka refuses a session not longer
# than the heartbeat interval, each taken from the group or the broker
_SESSION_OVER_HEARTBEAT = (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                           ("share.session.timeout.ms", "share.heartbeat.interval.ms"))


def _broker_value(cfg: Any, key: str) -> int:
    return int(getattr(cfg, key.replace(".", "_")))


def default_value(key: GroupConfigKey, cfg: Any) -> str:
    if key.broker_key is None:
        return key.default or ""
    return str(_broker_value(cfg, key.broker_key))


def entity_path(group_id: str) -> str:
    return f"{ENTITY_TYPE}/{sanitize_entity_name(group_id)}"


def validate(configs: dict[str, str | None], cfg: Any) -> str | None:
    """Why these configs of a group are refused (INVALID_CONFIG), or None."""
    for name, value in configs.items():
        key = KEYS.get(name)
        if key is None:
            return f"Unknown group config name: {name}"
        if value is None:
            continue
        if key.check is not None:
            refused = key.check(value)
            if refused:
                return refused
            continue
        try:
            number = int(value)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type INT"
        if number < key.floor:
            return f"Invalid value {value} for configuration {name}: Value must be at least {key.floor}"
        if key.minimum is not None and number < _broker_value(cfg, key.minimum):
            return (f"{name} must be greater than or equal to {key.minimum} "
                    f"({_broker_value(cfg, key.minimum)})")
        if key.maximum is not None and number > _broker_value(cfg, key.maximum):
            return (f"{name} must be less than or equal to {key.maximum} "
                    f"({_broker_value(cfg, key.maximum)})")
    for session, heartbeat in _SESSION_OVER_HEARTBEAT:
        if configs.get(session) is None and configs.get(heartbeat) is None:
            continue
        values = [int(configs.get(k) or default_value(KEYS[k], cfg)) for k in (session, heartbeat)]
        if values[0] <= values[1]:
            return f"{session} must be greater than {heartbeat}"
    return None


def parse(name: str, value: str) -> Any:
    """A group's own value of a config as its group reads it (an INT key's
    number, share.auto.offset.reset's strategy), or None if the key's own rule
    (its floor, its choices) refuses it. The broker's bounds were checked when
    it was set (validate); the value is read later, without the broker's config."""
    key = KEYS.get(name)
    if key is None:
        return None
    if key.check is not None:
        return None if key.check(value) else key.parse(value)
    try:
        number = int(value)
    except ValueError:
        return None
    return number if number >= key.floor else None


def describe(configs: dict[str, str], cfg: Any) -> list[ConfigEntry]:
    """Every group config: the group's own value, else the broker's."""
    out = []
    for name, key in KEYS.items():
        own = configs.get(name)
        value = own if own is not None else default_value(key, cfg)
        source = ConfigSource.GROUP_CONFIG if own is not None \
            else ConfigSource.DEFAULT_CONFIG
        out.append(ConfigEntry(name, value, int(source), own is None, False, False, [],
                               int(ConfigType.INT if key.is_int else ConfigType.STRING),
                               key.doc))
    return out


class _Store(Protocol):
    def entity_configs(self, entity_path: str) -> dict[str, str]: ...
    def entity_config_paths(self, entity_type: str) -> list[str]: ...
    def on_entity_config_change(self, listener: Callable[[str, dict[str, str]], None]
                                ) -> None: ...


class GroupConfigs:
    """Every group's own configs, followed from the metadata store (changes
    arrive on the store's thread; each installs a new dict, so the
    coordinator's loop reads them without a lock)."""

    def __init__(self, store: _Store) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._by_group: dict[str, dict[str, str]] = {}
        store.on_entity_config_change(self.reload)
        for path in store.entity_config_paths(ENTITY_TYPE):
            self.reload(path)

    def reload(self, path: str, configs: dict[str, str] | None = None) -> None:
        kind, _, name = path.partition("/")
        if kind != ENTITY_TYPE or not name:
            return
        if configs is None:
            configs = self._store.entity_configs(path)
        group = desanitize_entity_name(name)
        with self._lock:
            groups = dict(self._by_group)
            if configs:
                groups[group] = dict(configs)
            else:
                groups.pop(group, None)
            self._by_group = groups

    def get(self, group_id: str) -> dict[str, str]:
        return self._by_group.get(group_id, {})
