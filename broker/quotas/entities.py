"""Which quota applies to a (user, client id): Kafka's precedence over the
entity configs under /config/users and /config/clients.

Each quota type (producer_byte_rate, consumer_byte_rate, request_percentage,
controller_mutation_rate) is resolved on its own: the most specific entity that sets *that* key wins,
in this order (names sanitized, ``<default>`` the default entity):

    users/<u>/clients/<c>, users/<u>/clients/<default>, users/<u>,
    users/<default>/clients/<c>, users/<default>/clients/<default>,
    users/<default>, clients/<c>, clients/<default>

The winner also decides who shares a measurement (Kafka's quota metric
tags): a quota on users/<u> is one budget for all of u's client ids, one on
clients/<c> one budget for c under any user, and a default entity still gives
every user / client id its own budget.
"""
from __future__ import annotations

import logging
import threading
from typing import NamedTuple

from samsa.broker.metadata.store import MetadataStore
from samsa.broker.metadata.zk_layout import (client_entity_path, user_client_entity_path,
                                       user_entity_path)

log = logging.getLogger("broker.quotas")

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"  # partition mutations/s (mutation.py)
CONNECTION_CREATION_RATE = "connection_creation_rate"  # an ip's: see connection_rate.py
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE,
              CONTROLLER_MUTATION_RATE)
DEFAULT = "<default>"
# Remembered resolutions, forgotten all at once beyond that (as the ACL
# authorizer's decisions): one per (quota type, user, client id) seen.
MAX_RESOLVED = 100_000


class QuotaMatch(NamedTuple):
    """The bound that applies and the (user, client id) its measurement is
    shared under ("" for a part the matched entity does not name)."""
    bound: float
    user: str
    client_id: str


def candidate_entities(user: str, client_id: str) -> list[tuple[str, bool, bool]]:
    """(entity path, measured per user, measured per client id) in Kafka's
    order of precedence, for a raw user name and client id."""
    return [
        (user_client_entity_path(user, client_id), True, True),
        (user_client_entity_path(user, None), True, True),
        (user_entity_path(user), True, False),
        (user_client_entity_path(None, client_id), True, True),
        (user_client_entity_path(None, None), True, True),
        (user_entity_path(None), True, False),
        (client_entity_path(client_id), False, True),
        (client_entity_path(None), False, True),
    ]


# Every quota key a user / client / ip entity may hold -> whether Kafka
# declares it a LONG (whole numbers only; the others are DOUBLE).
CLIENT_QUOTA_KEYS = {PRODUCER_BYTE_RATE: True, CONSUMER_BYTE_RATE: True,
                     REQUEST_PERCENTAGE: False, CONTROLLER_MUTATION_RATE: False}
IP_QUOTA_KEYS = {CONNECTION_CREATION_RATE: True}


def check_quota_value(key: str, value: float) -> float:
    """The one rule for a quota value, for AlterClientQuotas and for what
    is read back from the store: not negative, not NaN, and whole for a LONG
    key. ValueError (with Kafka's wording) for one Kafka would refuse."""
    if value != value or value < 0:
        raise ValueError(f"Illegal value for {key}: {value}")
    if (CLIENT_QUOTA_KEYS.get(key) or IP_QUOTA_KEYS.get(key)) and not float(value).is_integer():
        raise ValueError(f"Configuration {key} must be a Long value")
    return value


def parse_quota_value(key: str, text: str) -> float:
    """A stored quota value; ValueError for one Kafka would refuse."""
    return check_quota_value(key, float(text))


class QuotaConfigs:
    """Every user/client entity's quota values, kept current from the
    metadata store's change notices (any thread), read on request paths."""

    def __init__(self, store: MetadataStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._quotas: dict[str, dict[str, float]] = {}
        self._resolved: dict[tuple[str, str, str], QuotaMatch | None] = {}
        self.generation = 0
        # Which kinds of quota some entity sets, for the dispatcher's fast
        # path: a byte-rate or request quota meters every request, a
        # mutation quota only the topic admin APIs.
        self.any_request_quota = False   # producer/consumer_byte_rate, request_percentage
        self.any_mutation_quota = False  # controller_mutation_rate
        store.on_entity_config_change(self.reload)
        for entity_type in ("users", "clients"):
            for path in store.entity_config_paths(entity_type):
                self.reload(path)

    @property
    def any(self) -> bool:
        """Whether any entity has a quota at all (the fast path skips the rest)."""
        return bool(self._quotas)

    def has(self, key: str) -> bool:
        return any(key in q for q in self._quotas.values())

    def reload(self, entity_path: str, configs: dict[str, str] | None = None) -> None:
        """``entity_path``'s quotas from ``configs`` (a change notice's, read by
        the store), or read here (start-up)."""
        if entity_path.startswith(("ips/", "groups/")):
            return
        try:
            raw = self._store.entity_configs(entity_path) if configs is None else configs
        except Exception:  # a store hiccup keeps the old values
            log.warning("could not read quotas of %s", entity_path, exc_info=True)
            return
        values = {}
        for key in QUOTA_KEYS:
            if key in raw:
                try:
                    values[key] = parse_quota_value(key, raw[key])
                except ValueError as e:
                    log.warning("ignoring quota of %s: %s", entity_path, e)
        with self._lock:
            quotas = dict(self._quotas)
            if values:
                quotas[entity_path] = values
            else:
                quotas.pop(entity_path, None)
            self._quotas = quotas
            kinds = {k for q in quotas.values() for k in q}
            self.any_mutation_quota = CONTROLLER_MUTATION_RATE in kinds
            self.any_request_quota = bool(kinds - {CONTROLLER_MUTATION_RATE})
            self._resolved = {}
            self.generation += 1

    def resolve(self, key: str, user: str, client_id: str) -> QuotaMatch | None:
        """The quota of type ``key`` for this user and client id, or None."""
        cache_key = (key, user, client_id)
        resolved = self._resolved
        try:
            return resolved[cache_key]
        except KeyError:
            pass
        quotas = self._quotas
        match = None
        for path, per_user, per_client in candidate_entities(user, client_id):
            q = quotas.get(path)
            if q is not None and key in q:
                match = QuotaMatch(q[key], user if per_user else "",
                                   client_id if per_client else "")
                break
        if len(resolved) >= MAX_RESOLVED:
            resolved.clear()  # clients that make up ids cannot grow it without bound
        resolved[cache_key] = match  # a racing reload replaced the dict: harmless
        return match
