"""SSL contexts from Kafka's ssl.* keys: one per SSL listener, one for the
broker's own connections to other brokers.

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

import os
import ssl
import tempfile
from typing import Any, Mapping, NamedTuple

from samsa.config.broker import BROKER_KEYS, LISTENER_PREFIX, BrokerConfig
from samsa.config.errors import ConfigError

from .ssl_principal import SslPrincipalMapper

_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_SSL_PROTOCOLS = ("TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3", "SSL", "SSLv3")
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL,
                "required": ssl.CERT_REQUIRED}
# TLS 1.3 suites cannot be restricted through Python's ssl (no
# SSL_CTX_set_ciphersuites); they stay enabled whatever ssl.cipher.suites says.
_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                           "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                           "TLS_AES_128_CCM_8_SHA256"})


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


class _ClientKeys(_Keys):
    """The same keys in a client's properties (a tool's --command-config),
    with Kafka's client defaults."""

    def __init__(self, props: Mapping[str, str], source: str) -> None:
        self.props = props
        self.listener = source  # named in messages

    def value(self, key: str) -> Any:
        raw = self.props.get(key)
        return BROKER_KEYS[key].parse(raw) if raw is not None else BROKER_KEYS[key].default

    def name(self, key: str) -> str:
        return key

    def protocol(self) -> str:
        return (self.props.get("security.protocol") or "PLAINTEXT").strip().upper()


def _check_pem(keys: _Keys, type_key: str, needed: bool) -> None:
    store_type = (keys.value(type_key) or "").upper()
    if store_type != "PEM" and needed:
        raise ConfigError(keys.name(type_key), keys.value(type_key), "PEM",
                          message=f"{keys.name(type_key)}={keys.value(type_key)} cannot be read "
                                  f"for listener {keys.listener}: samsa reads PEM stores "
                                  f"(set {type_key}=PEM, as Kafka 2.7+ accepts)")


def _load_key_store(ctx: ssl.SSLContext, keys: _Keys, required: bool) -> bool:
    """The private key and certificate chain; False when none is configured."""
    location = keys.value("ssl.keystore.location")
    chain = keys.value("ssl.keystore.certificate.chain")
    inline_key = keys.value("ssl.keystore.key")
    if not (location or chain or inline_key):
        if required:
            raise ConfigError(keys.name("ssl.keystore.location"), None,
                              "a PEM file with the listener's private key and certificate chain",
                              message=f"listener {keys.listener} is {keys.protocol()}"
                                      f" but has no key store: set ssl.keystore.location (or "
                                      f"ssl.keystore.certificate.chain and ssl.keystore.key)")
        return False
    _check_pem(keys, "ssl.keystore.type", True)
    password = keys.value("ssl.key.password")
    if location:
        key, shown = "ssl.keystore.location", location
        if not os.path.isfile(location) or not os.access(location, os.R_OK):
            raise ConfigError(keys.name(key), location, "a readable PEM file")
        try:
            ctx.load_cert_chain(location, password=password)
        except ssl.SSLError as e:
            raise _bad_key_store(keys, key, shown, e, _encrypted_key(location)) from None
        return True
    if not (chain and inline_key):
        missing = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain"
        raise ConfigError(keys.name(missing), None, "PEM text (both ssl.keystore.certificate.chain"
                                                    " and ssl.keystore.key are needed)")
    # load_cert_chain reads files only: the inline PEM goes through a private
    # temporary file that is gone before the broker serves.
    fd, path = tempfile.mkstemp(prefix="samsa-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(_pem_text(inline_key) + "\n" + _pem_text(chain) + "\n")
        try:
            ctx.load_cert_chain(path, password=password)
        except ssl.SSLError as e:
            raise _bad_key_store(keys, "ssl.keystore.key", "(inline PEM)", e,
                                 "ENCRYPTED" in inline_key) from None
    finally:
        os.unlink(path)
    return True


def _pem_text(value: str) -> str:
    """PEM as OpenSSL reads it. A properties file joins continued lines, so
    Kafka's inline PEM often arrives as one line: re-break it into the
    BEGIN/END markers and 64-character base64 lines."""
    text = value.strip()
    if "\n" in text:
        return text
    out = []
    for part in text.split("-----"):
        part = part.strip()
        if not part:
            continue
        if part.startswith(("BEGIN ", "END ")):
            out.append(f"-----{part}-----")
        else:
            body = "".join(part.split())
            out.extend(body[i:i + 64] for i in range(0, len(body), 64))
    return "\n".join(out)


def _encrypted_key(path: str) -> bool:
    """Whether a PEM file holds an encrypted private key (PKCS#8 or legacy)."""
    try:
        with open(path, "rb") as f:
            return b"ENCRYPTED" in f.read(1 << 20)
    except OSError:
        return False


def _bad_key_store(keys: _Keys, key: str, shown: str, e: ssl.SSLError,
                   encrypted: bool) -> ConfigError:
    # OpenSSL says "PEM lib" for a wrong password: name the key that is wrong.
    hint = (f"; the private key is encrypted: check {keys.name('ssl.key.password')}"
            if encrypted else "")
    return ConfigError(keys.name(key), shown, "a PEM private key with its certificate chain",
                       message=f"cannot use {keys.name(key)}={shown} for listener "
                               f"{keys.listener}: {e.reason or e}{hint}")


def _load_trust_store(ctx: ssl.SSLContext, keys: _Keys, purpose: ssl.Purpose) -> None:
    """CA certificates that sign acceptable peers; without any configured, the
    system's (as a JVM falls back to its own cacerts)."""
    location = keys.value("ssl.truststore.location")
    inline = keys.value("ssl.truststore.certificates")
    if not (location or inline):
        ctx.load_default_certs(purpose)
        return
    _check_pem(keys, "ssl.truststore.type", True)
    if location:
        if not os.path.isfile(location) or not os.access(location, os.R_OK):
            raise ConfigError(keys.name("ssl.truststore.location"), location, "a readable PEM file")
        try:
            ctx.load_verify_locations(cafile=location)
        except ssl.SSLError as e:
            raise ConfigError(keys.name("ssl.truststore.location"), location,
                              "a PEM file of CA certificates",
                              message=f"cannot use {keys.name('ssl.truststore.location')}="
                                      f"{location}: {e.reason or e}") from None
        return
    try:
        ctx.load_verify_locations(cadata=_pem_text(inline))
    except (ssl.SSLError, ValueError) as e:
        raise ConfigError(keys.name("ssl.truststore.certificates"), "(inline PEM)",
                          "PEM CA certificates",
                          message=f"cannot use {keys.name('ssl.truststore.certificates')}: "
                                  f"{getattr(e, 'reason', None) or e}") from None


def _restrict(ctx: ssl.SSLContext, keys: _Keys) -> None:
    """ssl.protocol, ssl.enabled.protocols and ssl.cipher.suites."""
    protocol = keys.value("ssl.protocol")
    if protocol not in _SSL_PROTOCOLS:
        raise ConfigError(keys.name("ssl.protocol"), protocol, "one of " + ", ".join(_SSL_PROTOCOLS))
    enabled = [v for v in keys.value("ssl.enabled.protocols") if v in _VERSIONS]
    if not enabled:
        raise ConfigError(keys.name("ssl.enabled.protocols"),
                          ",".join(keys.value("ssl.enabled.protocols")),
                          "at least one of " + ", ".join(_VERSIONS))
    order = list(_VERSIONS)
    try:
        ctx.minimum_version = _VERSIONS[min(enabled, key=order.index)]
        ctx.maximum_version = _VERSIONS[max(enabled, key=order.index)]
    except (ValueError, ssl.SSLError) as e:
        raise ConfigError(keys.name("ssl.enabled.protocols"), ",".join(enabled),
                          "TLS versions this OpenSSL offers", message=f"{keys.name('ssl.enabled.protocols')}: {e}") from None
    suites = [s for s in keys.value("ssl.cipher.suites") if s and s not in _TLS13_SUITES]
    if suites:
        try:
            ctx.set_ciphers(":".join(suites))
        except ssl.SSLError:
            raise ConfigError(keys.name("ssl.cipher.suites"), ",".join(suites),
                              "cipher suite names OpenSSL knows (e.g. ECDHE-RSA-AES128-GCM-SHA256)"
                              ) from None


def listener_tls(cfg: BrokerConfig, listener: str) -> ListenerTls:
    """The server side of an SSL / SASL_SSL listener."""
    keys = _Keys(cfg, listener)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.num_tickets = 0  # Kafka clients do not resume sessions: no tickets to write
    ctx.options |= ssl.OP_NO_RENEGOTIATION  # a client cannot make the broker redo handshakes
    _restrict(ctx, keys)
    _load_key_store(ctx, keys, required=True)
    client_auth = keys.value("ssl.client.auth")
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(keys.name("ssl.client.auth"), client_auth, "one of required, requested, none")
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    if ctx.verify_mode != ssl.CERT_NONE:
        _load_trust_store(ctx, keys, ssl.Purpose.CLIENT_AUTH)
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
    return _client_context(_Keys(cfg, listener))


def client_tls(props: Mapping[str, str], source: str) -> ssl.SSLContext | None:
    """The TLS context a Kafka client's properties ask for (security.protocol
    SSL or SASL_SSL, ssl.truststore.*, ssl.keystore.* for client certificates),
    None without TLS; ConfigError for what cannot be used. ``source`` names
    where the properties came from."""
    keys = _ClientKeys(props, source)
    protocol = keys.protocol()
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        return None
    if protocol not in ("SSL", "SASL_SSL"):
        raise ConfigError("security.protocol", protocol, "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
                          message=f"{source}: unknown security.protocol={protocol}")
    return _client_context(keys)


def _client_context(keys: _Keys) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _restrict(ctx, keys)
    ctx.check_hostname = (keys.value("ssl.endpoint.identification.algorithm") or "").lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    _load_trust_store(ctx, keys, ssl.Purpose.SERVER_AUTH)
    _load_key_store(ctx, keys, required=False)
    return ctx


def check_tls_config(cfg: BrokerConfig) -> dict[str, ListenerTls]:
    """Every SSL listener's context, built at start-up so a bad key refuses to
    start naming it; plus the inter-broker client context's checks."""
    out = {}
    for lst in cfg.listeners:
        if cfg.security_protocol(lst.name) in ("SSL", "SASL_SSL"):
            out[lst.name] = listener_tls(cfg, lst.name)
    inter_broker_tls(cfg)
    return out
