"""SSL contexts from Kafka's ssl.* keys: one per SSL listener, one for the
broker's own connections to other brokers (the loaders of key and trust stores
are client/tls.py's, shared with the clients and tools).

Kafka 2.7+ reads PEM key and trust stores (ssl.keystore.type=PEM), either as
files (ssl.keystore.location holding the private key and the certificate
chain, ssl.truststore.location the CA certificates) or inline in the config
(ssl.keystore.certificate.chain + ssl.keystore.key, ssl.truststore.certificates).
Every key may be overridden per listener as listener.name.<listener>.<key>.
What cannot be used (JKS/PKCS12 stores, a missing or unreadable file, a key
that does not match its certificate, a wrong ssl.key.password) refuses
start-up with a ConfigError naming the key as the operator wrote it.
"""
from __future__ import annotations

import ssl
from typing import NamedTuple

from samsa.config.broker import LISTENER_PREFIX, BrokerConfig
from samsa.config.errors import ConfigError

from samsa.client.tls import client_context, load_key_store, load_trust_store, restrict

from .ssl_principal import SslPrincipalMapper

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}


class ListenerTls(NamedTuple):
    """What an SSL or SASL_SSL listener needs: its context and how it names
    clients that present a certificate."""
    context: ssl.SSLContext
    principal_mapper: SslPrincipalMapper


class _Keys:
    """One listener's view of the ssl.* keys: values and the names to blame."""

    def __init__(self, cfg: BrokerConfig, listener: str) -> None:
        self.cfg = cfg
        self.listener = listener

    def value(self, key: str):
        return self.cfg.listener_value(self.listener, key)

    def name(self, key: str) -> str:
        prefixed = f"{LISTENER_PREFIX}{self.listener.lower()}.{key}"
        return prefixed if prefixed in self.cfg.raw else key

    def protocol(self) -> str:
        return self.cfg.security_protocol(self.listener)


def listener_tls(cfg: BrokerConfig, listener: str) -> ListenerTls:
    """The server side of an SSL / SASL_SSL listener."""
    keys = _Keys(cfg, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.num_tickets = 0  # Kafka clients do not resume sessions: no tickets to write
    ctx.options |= ssl.OP_NO_RENEGOTIATION  # a client cannot make the broker redo handshakes
    restrict(ctx, keys)
    load_key_store(ctx, keys, required=True)
    client_auth = keys.value("ssl.client.auth")
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(keys.name("ssl.client.auth"), client_auth, "one of required, requested, none")
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    if ctx.verify_mode != ssl.CERT_NONE:
        load_trust_store(ctx, keys, ssl.Purpose.CLIENT_AUTH)
    mapper = SslPrincipalMapper(keys.value("ssl.principal.mapping.rules"),
                                keys.name("ssl.principal.mapping.rules"))
    return ListenerTls(ctx, mapper)


def inter_broker_tls(cfg: BrokerConfig) -> ssl.SSLContext | None:
    """The client side of the broker's connections to other brokers: TLS when
    the inter-broker listener is SSL or SASL_SSL, with that listener's trust
    store (and its key store, for listeners that require client certificates)."""
    listener = cfg.inter_broker_listener
    if cfg.security_protocol(listener) not in ("SSL", "SASL_SSL"):
        return None
    return client_context(_Keys(cfg, listener))


def check_tls_config(cfg: BrokerConfig) -> dict[str, ListenerTls]:
    """Every SSL listener's context, built at start-up so a bad key refuses to
    start naming it; plus the inter-broker client context's checks."""
    out = {}
    for lst in cfg.listeners:
        if cfg.security_protocol(lst.name) in ("SSL", "SASL_SSL"):
            out[lst.name] = listener_tls(cfg, lst.name)
    inter_broker_tls(cfg)
    return out
