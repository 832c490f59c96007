"""Dynamic broker configs on a running broker: load them at start, change
them through AlterConfigs / IncrementalAlterConfigs, persist them in the
metadata store, and apply them without a restart.

The rules (which keys, which layer wins, how values are checked) are
config/dynamic.py's; this module owns the broker's current effective config
and tells the broker when it changes, so the parts that hold a config
(topic defaults of every log, connection limits) switch together.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Callable

from samsa.config import BrokerConfig
from samsa.config.dynamic import DynamicConfigError, validate, with_dynamic

from .metadata import MetadataStore

log = logging.getLogger("broker.config")

Entity = int | None  # a broker id, or None for the cluster-wide defaults


class DynamicBrokerConfig:
    def __init__(self, static: BrokerConfig, store: MetadataStore,
                 on_change: Callable[[BrokerConfig], None]) -> None:
        self.static = static
        self.store = store
        self.broker_id = static.broker_id
        self._on_change = on_change
        self._lock = threading.Lock()
        self.current = self._effective(self.store.broker_configs(None),
                                       self.store.broker_configs(self.broker_id), at_start=True)

    def _effective(self, cluster_default: dict, per_broker: dict, at_start: bool = False
                   ) -> BrokerConfig:
        try:
            return with_dynamic(self.static, cluster_default, per_broker)
        except Exception as e:  # stored by another version or by hand
            if not at_start:
                raise
            log.error("ignoring the stored dynamic broker configs: %s", e)
            return self.static

    def entity_configs(self, entity: Entity) -> dict[str, str]:
        return self.store.broker_configs(entity)

    def owns(self, resource_name: str) -> Entity | bool:
        """The entity a BROKER resource name means here, or False if it is
        another broker's (the embedded store knows only this broker)."""
        if resource_name == "":
            return None
        if resource_name == str(self.broker_id):
            return self.broker_id
        return False

    def alter(self, entity: Entity, requested: Mapping[str, str | None],
              validate_only: bool) -> None:
        """Replace ``entity``'s dynamic configs (a None value: not set);
        DynamicConfigError if refused."""
        configs = {k: v for k, v in requested.items() if v is not None}
        with self._lock:
            default = self.store.broker_configs(None)
            mine = self.store.broker_configs(self.broker_id)
            before = mine if entity is not None else default
            changed = {k: v for k, v in configs.items() if before.get(k) != v}
            removed = [k for k in before if k not in configs]
            if entity is None:
                default = configs
            else:
                mine = configs
            effective = validate(self.static, default, mine,
                                 {**changed, **dict.fromkeys(removed, "")}, before=self.current,
                                 per_broker_level=entity is not None)
            if validate_only:
                return
            self.store.set_broker_configs(entity, configs)
            self.current = effective
            log.info("dynamic broker config of %s now %s", "the cluster" if entity is None
                     else f"broker {entity}", configs or "empty")
            # Under the lock: two changes racing on two network threads are
            # applied in the order they were stored.
            self._on_change(effective)

    def reload(self) -> None:
        """Another broker changed the stored configs (cluster defaults, or ours):
        apply what is stored now, if it differs from what is in effect."""
        with self._lock:
            try:
                effective = with_dynamic(self.static, self.store.broker_configs(None),
                                         self.store.broker_configs(self.broker_id))
            except Exception as e:  # keep what is in effect
                log.error("ignoring the stored dynamic broker configs: %s", e)
                return
            # raw too: per-listener keys (listener.name.<l>.*) live only there;
            # and the layers: keys kept but not applied are still described
            if (effective == self.current and effective.raw == self.current.raw
                    and effective.dynamic_default == self.current.dynamic_default
                    and effective.dynamic_broker == self.current.dynamic_broker):
                return
            self.current = effective
            log.info("dynamic broker configs changed through another broker: applied")
            self._on_change(effective)


__all__ = ["DynamicBrokerConfig", "DynamicConfigError"]
