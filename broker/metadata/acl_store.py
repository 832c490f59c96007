"""Where ACLs live: ZooKeeper in Kafka's layout (acl_layout.py), or the
embedded store's file for a single broker.

Changes are read-modify-write of one resource's ACL set. In ZooKeeper the
write is conditional on the znode version read (and creation on absence),
retried on a conflict, so two brokers adding ACLs to one resource at once
both land; then a change notice tells every broker to reload that resource.
"""
from __future__ import annotations

import abc
import logging
import threading
import time
from typing import Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import BadVersionError, KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from ..security.acl.model import AccessControlEntry, PatternType, ResourcePattern
from . import acl_layout as L
from .embedded import EmbeddedMetadataStore
from .store import MetadataStore, MetadataUnavailableError

log = logging.getLogger("broker.metadata.acls")

Entries = frozenset[AccessControlEntry]
NOTICE_EXPIRY_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener default
Change = Callable[[Entries], Entries]


class AclStore(abc.ABC):
    @abc.abstractmethod
    def load_all(self) -> dict[ResourcePattern, Entries]:
        """Every resource pattern's ACLs."""

    @abc.abstractmethod
    def load(self, pattern: ResourcePattern) -> Entries:
        """One resource pattern's ACLs as stored now."""

    @abc.abstractmethod
    def update(self, pattern: ResourcePattern, change: Change) -> Entries:
        """Apply ``change`` to the pattern's stored ACLs atomically (retrying
        on a concurrent writer) and tell every broker; returns the new set."""

    @abc.abstractmethod
    def on_change(self, listener: Callable[[ResourcePattern], None]) -> None:
        """``listener(pattern)`` after a pattern's ACLs changed here or on
        another broker (ZooKeeper: on its event thread; keep it short)."""

    def on_reload(self, listener: Callable[[], None]) -> None:
        """``listener()`` when changes may have been missed (a new ZooKeeper
        session): read everything again."""

    def close(self) -> None:
        pass


class EmbeddedAclStore(AclStore):
    def __init__(self, store: EmbeddedMetadataStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._listeners: list[Callable[[ResourcePattern], None]] = []

    @staticmethod
    def _pattern(path: str) -> ResourcePattern:
        for pattern_type in (PatternType.PREFIXED, PatternType.LITERAL):
            root = L.acl_root(pattern_type) + "/"
            if path.startswith(root):
                rtype, _, name = path[len(root):].partition("/")
                return ResourcePattern(L.resource_type_from_zk(rtype), name, pattern_type)
        raise ValueError(path)

    def load_all(self) -> dict[ResourcePattern, Entries]:
        out = {}
        for path, text in self._store.stored_acls().items():
            try:
                out[self._pattern(path)] = L.decode_acls(path, text.encode())
            except ValueError as e:
                log.warning("ignoring stored ACLs %s: %s", path, e)
        return out

    def load(self, pattern: ResourcePattern) -> Entries:
        path = L.acl_path(pattern)
        text = self._store.stored_acls().get(path)
        return L.decode_acls(path, text.encode()) if text else frozenset()

    def update(self, pattern: ResourcePattern, change: Change) -> Entries:
        path = L.acl_path(pattern)
        with self._lock:
            old = self.load(pattern)
            new = frozenset(change(old))
            if new != old:
                self._store.set_stored_acls(path, L.encode_acls(new).decode() if new else None)
        if new != old:
            for listener in list(self._listeners):
                listener(pattern)
        return new

    def on_change(self, listener: Callable[[ResourcePattern], None]) -> None:
        self._listeners.append(listener)


class ZooKeeperAclStore(AclStore):
    def __init__(self, zk: KazooClient) -> None:
        self.zk = zk
        self._listeners: list[Callable[[ResourcePattern], None]] = []
        self._reload_listeners: list[Callable[[], None]] = []
        self._seen: dict[str, set[str]] = {}
        self._closed = False
        self._session_lost = False
        zk.add_listener(self._on_state)
        for path in (L.LITERAL_ACLS, L.acl_root(PatternType.PREFIXED),
                     L.LITERAL_CHANGES, L.EXTENDED_CHANGES):
            zk.ensure_path(path)
        for root in (L.LITERAL_CHANGES, L.EXTENDED_CHANGES):
            self._seen[root] = set(zk.get_children(root))
            for child in self._seen[root]:   # what earlier brokers left behind
                try:
                    self._purge_if_old(f"{root}/{child}", zk.exists(f"{root}/{child}").ctime)
                except (NoNodeError, AttributeError):  # gone meanwhile (exists: None)
                    pass
            zk.ChildrenWatch(root, lambda children, root=root: self._on_changes(root, children))

    def _on_changes(self, root: str, children: list[str]) -> bool:
        seen = self._seen.get(root, set())
        new = sorted(c for c in children if c not in seen)
        self._seen[root] = set(children)
        for child in new:
            path = f"{root}/{child}"
            try:
                data, stat = self.zk.get(path)
                self._purge_if_old(path, stat.ctime)
                pattern = L.decode_change(root, data)
            except NoNodeError:
                continue
            except (ValueError, KeyError, TypeError) as e:
                log.warning("ignoring ACL change notice %s: %s", path, e)
                continue
            for listener in list(self._listeners):
                try:
                    listener(pattern)
                except Exception:  # noqa: BLE001 - one listener must not starve the others
                    log.exception("ACL change listener failed")
        return not self._closed

    def _purge_if_old(self, path: str, created_ms: int) -> None:
        """Kafka's brokers delete change notices older than 15 minutes (every
        broker has long since read them); so do we, or they would pile up."""
        if time.time() * 1000 - created_ms > NOTICE_EXPIRY_MS:
            try:
                self.zk.delete(path)
            except NoNodeError:
                pass

    def load_all(self) -> dict[ResourcePattern, Entries]:
        out = {}
        for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
            root = L.acl_root(pattern_type)
            for rtype in self.zk.get_children(root):
                try:
                    resource_type = L.resource_type_from_zk(rtype)
                except ValueError:
                    continue
                for name in self.zk.get_children(f"{root}/{rtype}"):
                    pattern = ResourcePattern(resource_type, name, pattern_type)
                    try:
                        entries = self.load(pattern)
                    except L.AclZNodeError as e:
                        log.warning("%s", e)
                        continue
                    if entries:
                        out[pattern] = entries
        return out

    def load(self, pattern: ResourcePattern) -> Entries:
        path = L.acl_path(pattern)
        try:
            return L.decode_acls(path, self.zk.get(path)[0])
        except NoNodeError:
            return frozenset()

    def update(self, pattern: ResourcePattern, change: Change) -> Entries:
        path = L.acl_path(pattern)
        try:
            while True:
                try:
                    data, stat = self.zk.get(path)
                    old, version = L.decode_acls(path, data), stat.version
                except NoNodeError:
                    old, version = frozenset(), None
                new = frozenset(change(old))
                if new == old:
                    return new
                try:
                    if version is None:   # the name is one node under its type's
                        self.zk.ensure_path(L.type_path(pattern.pattern_type,
                                                        pattern.resource_type))
                        self.zk.create(path, L.encode_acls(new))
                    elif new:
                        self.zk.set(path, L.encode_acls(new), version=version)
                    else:
                        self.zk.delete(path, version=version)
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue  # another writer got there first: read again
                break
            self.zk.create(f"{L.change_root(pattern.pattern_type)}/{L.CHANGE_PREFIX}",
                           L.encode_change(pattern), sequence=True)
            return new
        except (KazooException, KazooTimeoutError) as e:
            raise MetadataUnavailableError(
                f"ZooKeeper is not reachable ({type(e).__name__}); try again") from e

    def on_change(self, listener: Callable[[ResourcePattern], None]) -> None:
        self._listeners.append(listener)

    def on_reload(self, listener: Callable[[], None]) -> None:
        self._reload_listeners.append(listener)

    def _on_state(self, state: str) -> None:
        # Notices written while the session was gone may have been purged
        # since: after a new session, read every ACL again (as Kafka's
        # AclAuthorizer reloads its cache). Not on kazoo's state thread.
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost and not self._closed:
            self._session_lost = False
            self.zk.handler.spawn(self._reload_all)

    def _reload_all(self) -> None:
        for listener in list(self._reload_listeners):
            try:
                listener()
            except Exception:  # noqa: BLE001 - ZooKeeper may be gone again; logged
                log.exception("reloading the ACLs after a new ZooKeeper session failed")

    def close(self) -> None:
        self._closed = True
        self.zk.remove_listener(self._on_state)


def open_acl_store(store: MetadataStore) -> AclStore:
    """The ACL store next to ``store``: its ZooKeeper, or its file."""
    if isinstance(store, EmbeddedMetadataStore):
        return EmbeddedAclStore(store)
    zk = getattr(store, "zk", None)
    if isinstance(zk, KazooClient):
        return ZooKeeperAclStore(zk)
    raise TypeError(f"no ACL storage for {type(store).__name__}")
