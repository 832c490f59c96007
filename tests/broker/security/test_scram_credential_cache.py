"""The broker's SCRAM credential cache (Kafka's CredentialCache): SCRAM
attempts are answered from memory, never by reading the store, and the
store's change notices keep it current."""
from __future__ import annotations

import asyncio

import pytest

from samsa.broker.metadata.zk_layout import user_client_entity_path, user_entity_path
from samsa.broker.security.sasl.credential_cache import ScramCredentialCache
from samsa.broker.security.sasl.mechanism import SaslError
from samsa.broker.security.sasl.scram import ScramServer
from samsa.client.scram_credential import credential_from_password

SHA256 = "SCRAM-SHA-256"
ALICE = credential_from_password(SHA256, "alice-pw", 4096, b"salt")


class CountingStore:
    """The entity-config part of a metadata store, counting reads; ``down``
    makes every read fail as ZooKeeper's client does when it is away."""

    def __init__(self, configs: dict[str, dict[str, str]]) -> None:
        self.configs = configs
        self.reads = 0
        self.down = False
        self.listeners = []

    def entity_configs(self, path: str) -> dict[str, str]:
        self.reads += 1
        if self.down:
            raise ConnectionError("ZooKeeper is away")
        return dict(self.configs.get(path, {}))

    def entity_config_paths(self, entity_type: str) -> list[str]:
        return sorted(p for p in self.configs if p.startswith(entity_type + "/"))

    def on_entity_config_change(self, listener) -> None:
        self.listeners.append(listener)

    def change(self, path: str, configs: dict[str, str]) -> None:
        self.configs[path] = configs
        if self.down:
            return  # a store that cannot read the entity tells its listeners once it can
        for listener in self.listeners:
            listener(path, dict(configs))


def test_scram_attempts_never_read_the_store():
    store = CountingStore({user_entity_path("alice"): {SHA256: ALICE.to_config()},
                           user_client_entity_path("alice", "app"): {"producer_byte_rate": "1"}})
    cache = ScramCredentialCache(store)
    reads = store.reads
    for user in ("alice", "mallory", "a/b", "*"):
        server = ScramServer(SHA256, cache.credential)
        try:
            asyncio.run(server.evaluate(f"n,,n={user},r=nonce".encode()))
        except SaslError:
            assert user != "alice"
    assert store.reads == reads
    assert cache.credential("alice", SHA256) == ALICE
    assert cache.credential("alice", "SCRAM-SHA-512") is None


def test_change_notices_keep_the_cache_current_and_a_store_failure_keeps_it():
    store = CountingStore({})
    cache = ScramCredentialCache(store)
    assert cache.credential("bob/x", SHA256) is None
    store.change(user_entity_path("bob/x"), {SHA256: ALICE.to_config()})  # sanitized path
    assert cache.credential("bob/x", SHA256) == ALICE
    store.down = True
    store.change(user_entity_path("bob/x"), {})
    assert cache.credential("bob/x", SHA256) == ALICE  # kept: the read failed
    store.down = False
    store.change(user_entity_path("bob/x"), {})
    assert cache.credential("bob/x", SHA256) is None


@pytest.mark.parametrize("text", ["garbage", "salt=!!,stored_key=a,server_key=b,iterations=1"])
def test_an_unreadable_credential_is_no_credential(text):
    cache = ScramCredentialCache(CountingStore({user_entity_path("eve"): {SHA256: text}}))
    assert cache.credential("eve", SHA256) is None
