"""TLS contexts from Kafka's ssl.* keys, as a client reads them: a tool's
--command-config or a client's properties (client_tls), and the loaders of PEM key
and trust stores and of the protocol and cipher restrictions that the broker's
listeners use too (broker/security/tls_config.py reads the same keys from the
broker's config, per listener).

What cannot be used (JKS/PKCS12 stores, a missing or unreadable file, a key that
does not match its certificate, a wrong ssl.key.password) is a ConfigError naming
the key as it was written.
"""
from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any, Mapping, Protocol

from samsa.config.broker import BROKER_KEYS
from samsa.config.errors import ConfigError

_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
             "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_SSL_PROTOCOLS = ("TLS", "TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3", "SSL", "SSLv3")
# TLS 1.3 suites cannot be restricted through Python's ssl (no
# SSL_CTX_set_ciphersuites); they stay enabled whatever ssl.cipher.suites says.
_TLS13_SUITES = frozenset({"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                           "TLS_CHACHA20_POLY1305_SHA256", "TLS_AES_128_CCM_SHA256",
                           "TLS_AES_128_CCM_8_SHA256"})


class StoreKeys(Protocol):
    """One view of the ssl.* keys (a listener's in the broker's config, or a
    client's properties): their values and the names to blame in messages."""

    listener: str  # what messages name: a listener, or where client properties came from

    def value(self, key: str) -> Any: ...

    def name(self, key: str) -> str: ...

    def protocol(self) -> str: ...


class ClientKeys:
    """The ssl.* keys in a client's properties (a tool's --command-config),
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


def check_pem(keys: StoreKeys, type_key: str, needed: bool) -> None:
    store_type = (keys.value(type_key) or "").upper()
    if store_type != "PEM" and needed:
        raise ConfigError(keys.name(type_key), keys.value(type_key), "PEM",
                          message=f"{keys.name(type_key)}={keys.value(type_key)} cannot be read "
                                  f"for listener {keys.listener}: samsa reads PEM stores "
                                  f"(set {type_key}=PEM, as Kafka 2.7+ accepts)")


def load_key_store(ctx: ssl.SSLContext, keys: StoreKeys, required: bool) -> bool:
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
    check_pem(keys, "ssl.keystore.type", True)
    password = keys.value("ssl.key.password")
    if location:
        key, shown = "ssl.keystore.location", location
        if not os.path.isfile(location) or not os.access(location, os.R_OK):
            raise ConfigError(keys.name(key), location, "a readable PEM file")
        try:
            ctx.load_cert_chain(location, password=password)
        except ssl.SSLError as e:
            raise _bad_key_store(keys, key, shown, e, encrypted_key(location)) from None
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
            f.write(pem_text(inline_key) + "\n" + pem_text(chain) + "\n")
        try:
            ctx.load_cert_chain(path, password=password)
        except ssl.SSLError as e:
            raise _bad_key_store(keys, "ssl.keystore.key", "(inline PEM)", e,
                                 "ENCRYPTED" in inline_key) from None
    finally:
        os.unlink(path)
    return True


def pem_text(value: str) -> str:
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


def encrypted_key(path: str) -> bool:
    """Whether a PEM file holds an encrypted private key (PKCS#8 or legacy)."""
    try:
        with open(path, "rb") as f:
            return b"ENCRYPTED" in f.read(1 << 20)
    except OSError:
        return False


def _bad_key_store(keys: StoreKeys, key: str, shown: str, e: ssl.SSLError,
                   encrypted: bool) -> ConfigError:
    # OpenSSL says "PEM lib" for a wrong password: name the key that is wrong.
    hint = (f"; the private key is encrypted: check {keys.name('ssl.key.password')}"
            if encrypted else "")
    return ConfigError(keys.name(key), shown, "a PEM private key with its certificate chain",
                       message=f"cannot use {keys.name(key)}={shown} for listener "
                               f"{keys.listener}: {e.reason or e}{hint}")


def load_trust_store(ctx: ssl.SSLContext, keys: StoreKeys, purpose: ssl.Purpose) -> None:
    """CA certificates that sign acceptable peers; without any configured, the
    system's (as a JVM falls back to its own cacerts)."""
    location = keys.value("ssl.truststore.location")
    inline = keys.value("ssl.truststore.certificates")
    if not (location or inline):
        ctx.load_default_certs(purpose)
        return
    check_pem(keys, "ssl.truststore.type", True)
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
        ctx.load_verify_locations(cadata=pem_text(inline))
    except (ssl.SSLError, ValueError) as e:
        raise ConfigError(keys.name("ssl.truststore.certificates"), "(inline PEM)",
                          "PEM CA certificates",
                          message=f"cannot use {keys.name('ssl.truststore.certificates')}: "
                                  f"{getattr(e, 'reason', None) or e}") from None


def restrict(ctx: ssl.SSLContext, keys: StoreKeys) -> None:
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


def client_tls(props: Mapping[str, str], source: str) -> ssl.SSLContext | None:
    """The TLS context a Kafka client's properties ask for (security.protocol
    SSL or SASL_SSL, ssl.truststore.*, ssl.keystore.* for client certificates),
    None without TLS; ConfigError for what cannot be used. ``source`` names
    where the properties came from."""
    keys = ClientKeys(props, source)
    protocol = keys.protocol()
    if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        return None
    if protocol not in ("SSL", "SASL_SSL"):
        raise ConfigError("security.protocol", protocol, "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL",
                          message=f"{source}: unknown security.protocol={protocol}")
    return client_context(keys)


def client_context(keys: StoreKeys) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    restrict(ctx, keys)
    ctx.check_hostname = (keys.value("ssl.endpoint.identification.algorithm") or "").lower() == "https"
    ctx.verify_mode = ssl.CERT_REQUIRED
    load_trust_store(ctx, keys, ssl.Purpose.SERVER_AUTH)
    load_key_store(ctx, keys, required=False)
    return ctx
