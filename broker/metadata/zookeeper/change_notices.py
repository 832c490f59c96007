"""Kafka's config change notices (``/config/changes/config_change_<n>``):
written after every dynamic config change, by brokers and by Kafka's tools,
and followed by every broker, which re-reads the entity a notice names (a
topic's configs, a broker's or the cluster's, a user's, client's or IP's
quotas) and tells its listeners.
"""
from __future__ import annotations

import functools
import logging
from typing import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from .. import zk_layout as z
from .cache import WatchCache
from .session import ZooKeeperSession

log = logging.getLogger("broker.metadata.zookeeper")


def write_change_notice(zk: KazooClient, entity: str) -> None:
    """Announce a changed config of ``entity`` ("topics/<name>",
    "brokers/<id>", "users/<name>", ...), as Kafka's admin writes it."""
    zk.create(z.CONFIG_CHANGE_PREFIX, z.encode_config_change(entity), sequence=True)


class ConfigChangeNotices:
    def __init__(self, session: ZooKeeperSession, cache: WatchCache,
                 entity_configs: Callable[[str], dict[str, str]]) -> None:
        self._session = session
        self.zk = session.zk
        self._cache = cache
        self._entity_configs = entity_configs
        self._broker_config_listeners: list[Callable[[], None]] = []
        self._entity_config_listeners: list[Callable[[str, dict[str, str]], None]] = []
        self._seen_config_changes: set[str] = set()

    def start(self) -> None:
        """Follow the notices written from now on (older ones are history:
        whoever reads a config reads its current znode)."""
        self._seen_config_changes = set(self.zk.get_children(z.CONFIG_CHANGES))
        self.zk.ChildrenWatch(z.CONFIG_CHANGES, self._on_config_changes)

    def on_broker_config_change(self, listener: Callable[[], None]) -> None:
        self._broker_config_listeners.append(listener)

    def on_entity_config_change(self, listener: Callable[[str, dict[str, str]], None]) -> None:
        self._entity_config_listeners.append(listener)

    def _on_config_changes(self, children: list[str]) -> bool:
        new = [c for c in sorted(children) if c not in self._seen_config_changes]
        self._seen_config_changes = set(children)
        brokers_changed = False
        for child in new:
            try:
                brokers_changed |= self._apply_config_change(child)
            except KazooException as e:
                log.warning("reading config change %s failed (%s); reading it again", child,
                            type(e).__name__)
                self._session.read_again_later(
                    f"config change {child}",
                    functools.partial(self._apply_config_change_again, child))
        if brokers_changed:
            self._broker_configs_changed()
        return not self._session.closed

    def _apply_config_change(self, child: str) -> bool:
        """Act on one change notice; True when it was a broker config's (the
        broker config listeners are told once per batch of notices)."""
        path = f"{z.CONFIG_CHANGES}/{child}"
        try:
            entity = z.decode_config_change(path, self.zk.get(path)[0])
        except (NoNodeError, z.ZNodeFormatError):
            return False
        if entity.startswith("brokers/"):
            return True
        if entity.split("/", 1)[0] in ("users", "clients", "ips", "groups"):
            self._entity_config_changed(entity)
        elif entity.startswith("topics/") and entity[7:] in self._cache.topics():
            self._cache.reload_topic(entity[7:])
        return False

    def _apply_config_change_again(self, child: str) -> bool:
        if self._apply_config_change(child):
            self._broker_configs_changed()
        return True

    def _broker_configs_changed(self) -> None:
        for listener in list(self._broker_config_listeners):
            try:
                listener()
            except Exception:  # noqa: BLE001 - one listener must not starve the others
                log.exception("broker config listener failed")

    def _entity_config_changed(self, entity_path: str) -> None:
        """Tell the listeners, with the entity's configs read here once: a read
        that fails raises, and the change notice is read again later
        (read_again_later), rather than each listener failing on its own and
        keeping the old values for good."""
        try:
            configs = self._entity_configs(entity_path)
        except z.ZNodeFormatError as e:  # written by hand or a broken tool: keep what we have
            log.warning("ignoring entity config: %s", e)
            return
        for listener in list(self._entity_config_listeners):
            try:
                listener(entity_path, dict(configs))
            except Exception:  # noqa: BLE001 - one listener must not starve the others
                log.exception("entity config listener failed")
