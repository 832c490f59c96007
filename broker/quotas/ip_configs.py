"""The ip entities' connection_creation_rate (Kafka's /config/ips/<ip> and
/config/ips/<default>), read from the metadata store at start and kept
current from its change notices, as the user and client quotas are (see
entities.py): each change goes straight to the broker's connection rates.
"""
from __future__ import annotations

import logging

from samsa.broker.metadata.store import MetadataStore
from samsa.broker.metadata.zk_layout import desanitize_entity_name

from .connection_rate import ConnectionRateQuotas
from .entities import CONNECTION_CREATION_RATE, DEFAULT, parse_quota_value

log = logging.getLogger("broker.quotas")

IPS = "ips/"


class IpConnectionRateConfigs:
    """Feeds ``rates`` every ip entity's connection_creation_rate."""

    def __init__(self, store: MetadataStore, rates: ConnectionRateQuotas) -> None:
        self._store = store
        self._rates = rates
        store.on_entity_config_change(self.reload)
        for path in store.entity_config_paths("ips"):
            self.reload(path)

    def reload(self, entity_path: str, configs: dict[str, str] | None = None) -> None:
        """``entity_path`` changed (any thread), to ``configs`` when the store
        read them (a change notice); other entity types are not ours."""
        if not entity_path.startswith(IPS):
            return
        name = entity_path[len(IPS):]
        ip = None if name == DEFAULT else desanitize_entity_name(name)
        try:
            raw = (self._store.entity_configs(entity_path) if configs is None
                   else configs).get(CONNECTION_CREATION_RATE)
        except Exception:  # a store hiccup keeps the rate in effect
            log.warning("could not read the connection rate of %s", entity_path, exc_info=True)
            return
        rate = None
        if raw is not None:
            try:
                rate = int(parse_quota_value(CONNECTION_CREATION_RATE, raw))
            except ValueError as e:  # written by hand or another tool: as if unset
                log.warning("ignoring the connection rate of %s: %s", entity_path, e)
        self._rates.set_ip_rate(ip, rate)
        log.info("connection creation rate of %s now %s", "<default> ips" if ip is None
                 else ip, "unbounded" if rate is None else f"{rate}/s")
