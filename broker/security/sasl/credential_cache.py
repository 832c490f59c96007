"""Every user's SCRAM credentials in memory, as Kafka's CredentialCache: filled
from the users' entity configs at start and kept current by the metadata
store's change notices, so a SCRAM attempt (unauthenticated by definition)
costs a dict lookup, never a ZooKeeper read, and still works while ZooKeeper
is away."""
from __future__ import annotations

import logging
import threading

from ...metadata.store import MetadataStore
from ...metadata.zk_layout import user_entity_path
from samsa.client.scram_credential import HASHES, ScramCredential

log = logging.getLogger("broker.sasl")


class ScramCredentialCache:
    """Credentials by user entity path ("users/<sanitized name>") and mechanism;
    written on the store's notice thread, read on the event loop (each write
    installs a new dict, so readers never see one half done)."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._credentials: dict[str, dict[str, ScramCredential]] = {}
        store.on_entity_config_change(self.reload)  # first, so no change slips between
        for path in store.entity_config_paths("users"):
            self.reload(path)

    def reload(self, entity_path: str, configs: dict[str, str] | None = None) -> None:
        """One entity's credentials from ``configs`` (a change notice's, read
        by the store), or read here (start-up)."""
        parts = entity_path.split("/")
        if len(parts) != 2 or parts[0] != "users":
            return  # clients, ips, user/client pairs: quotas only
        try:
            if configs is None:
                configs = self._store.entity_configs(entity_path)
        except Exception:  # a store hiccup keeps the old credentials
            log.warning("could not read the SCRAM credentials of %s", entity_path,
                        exc_info=True)
            return
        credentials = {}
        for mechanism in HASHES:
            if mechanism in configs:
                try:
                    credentials[mechanism] = ScramCredential.from_config(configs[mechanism])
                except ValueError as e:
                    log.warning("ignoring the %s credential of %s: %s", mechanism,
                                entity_path, e)
        with self._lock:
            updated = dict(self._credentials)
            if credentials:
                updated[entity_path] = credentials
            else:
                updated.pop(entity_path, None)
            self._credentials = updated

    def credential(self, username: str, mechanism: str) -> ScramCredential | None:
        """The user's credential for the mechanism, None if it has none."""
        return self._credentials.get(user_entity_path(username), {}).get(mechanism)
