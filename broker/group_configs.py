"""Group configs: the GROUP config resource (type 32) of DescribeConfigs and
IncrementalAlterConfigs/AlterConfigs, Kafka 4's per-group settings over the
broker's group.* ones.

One table, ``KEYS``: each key's broker setting (its default and bounds) and
what it means. KIP-848's consumer.* keys are here; KIP-932's share.* keys
join the same table. A group's configs are kept as an entity config of the
metadata store (``groups/<group>``, /config/groups/<group> in ZooKeeper, as
users' and clients' are), so they survive restarts and every broker follows
their changes; ``GroupConfigs`` is the coordinator's copy, read without I/O.
"""
from __future__ import annotations

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
    broker_key: str  # the broker setting it overrides (its default)
    minimum: str | None  # broker attribute bounding it below, if any
    maximum: str | None  # ... and above
    doc: str


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
)}


def _broker_value(cfg: Any, key: str) -> int:
    return int(getattr(cfg, key.replace(".", "_")))


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
        try:
            number = int(value)
        except ValueError:
            return f"Invalid value {value} for configuration {name}: Not a number of type INT"
        if key.minimum is not None and number < _broker_value(cfg, key.minimum):
            return (f"{name} must be greater than or equal to {key.minimum} "
                    f"({_broker_value(cfg, key.minimum)})")
        if key.maximum is not None and number > _broker_value(cfg, key.maximum):
            return (f"{name} must be less than or equal to {key.maximum} "
                    f"({_broker_value(cfg, key.maximum)})")
    return None


def describe(configs: dict[str, str], cfg: Any) -> list[ConfigEntry]:
    """Every group config: the group's own value, else the broker's."""
    out = []
    for name, key in KEYS.items():
        own = configs.get(name)
        value = own if own is not None else str(_broker_value(cfg, key.broker_key))
        source = ConfigSource.GROUP_CONFIG if own is not None \
            else ConfigSource.DEFAULT_CONFIG
        out.append(ConfigEntry(name, value, int(source), own is None, False, False, [],
                               int(ConfigType.INT), key.doc))
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
