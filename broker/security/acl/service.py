"""The broker's ACLs: the authorizer's cache kept in step with the store.

Every change goes through the store (conditional writes, change notices) and
is applied to this broker's cache at once; other brokers apply it when the
change notice reaches them. The cache is only ever given what the store holds
when read, and reads plus installs happen one at a time (as Kafka's
AclAuthorizer holds its lock): a request thread installing what its own write
produced could otherwise land after the change-notice thread installed a
newer set, and leave the older one in force until the next change.
"""
from __future__ import annotations

import logging
import threading
from typing import Iterable

from samsa.config import BrokerConfig

from ...metadata.acl_store import AclStore, Entries
from .authorizer import AclAuthorizer, parse_super_users
from .model import AccessControlEntry, AclBinding, AclBindingFilter, ResourcePattern

log = logging.getLogger("broker.security.acl")


class AclService:
    def __init__(self, store: AclStore, authorizer: AclAuthorizer) -> None:
        self.store = store
        self.authorizer = authorizer
        self._lock = threading.Lock()   # one read-and-install of the cache at a time
        store.on_change(self._reload)
        store.on_reload(self._reload_all)
        self._reload_all()

    @classmethod
    def from_config(cls, cfg: BrokerConfig, store: AclStore) -> "AclService":
        return cls(store, AclAuthorizer(parse_super_users(cfg.super_users),
                                        cfg.allow_everyone_if_no_acl_found))

    def _reload_all(self) -> None:
        with self._lock:
            self.authorizer.replace_all(self.store.load_all())

    def _refresh(self, pattern: ResourcePattern) -> int:
        """Give the cache the pattern's ACLs as stored now; how many."""
        with self._lock:
            entries = self.store.load(pattern)
            self.authorizer.set_resource(pattern, entries)
        return len(entries)

    def _reload(self, pattern: ResourcePattern) -> None:
        entries = self._refresh(pattern)
        # as Kafka's AclAuthorizer logs each change notice it processes
        log.info("ACLs changed for %s: %d entries", pattern, entries)

    def add(self, bindings: Iterable[AclBinding]) -> None:
        """Blocking (ZooKeeper round trips): call off the event loop."""
        by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in by_pattern.items():
            def add_to(old: Entries, added: set[AccessControlEntry] = entries) -> Entries:
                return old | added
            self.store.update(pattern, add_to)
            self._refresh(pattern)

    def remove(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        """Delete what each filter matches; per filter, the bindings deleted.
        Blocking: call off the event loop."""
        matched = [self.authorizer.bindings(f) for f in filters]
        patterns = {b.pattern for found in matched for b in found}
        for pattern in patterns:
            def drop(old: Entries, pattern: ResourcePattern = pattern) -> Entries:
                return frozenset(e for e in old if not any(
                    f.matches(AclBinding(pattern, e)) for f in filters))
            self.store.update(pattern, drop)
            self._refresh(pattern)
        return matched
