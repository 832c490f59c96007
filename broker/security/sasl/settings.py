"""Which SASL mechanisms each SASL_* listener serves, and PLAIN's users, from
Kafka's keys; built once at start-up, where a bad value refuses to start
naming its key.

Kafka's resolution, per listener (its name lower-cased in the keys):
- mechanisms: ``listener.name.<l>.sasl.enabled.mechanisms``, else
  ``sasl.enabled.mechanisms`` (Kafka's default GSSAPI is not implemented, so
  when neither is set samsa serves PLAIN);
- PLAIN users: the ``user_<name>="<password>"`` options of the
  PlainLoginModule entry in ``listener.name.<l>.plain.sasl.jaas.config``, else
  in section ``<l>.KafkaServer`` or ``KafkaServer`` of the JAAS file named by
  ``java.security.auth.login.config``;
- session lifetime: ``listener.name.<l>.connections.max.reauth.ms``, else
  ``connections.max.reauth.ms`` (0: sessions never expire).
SCRAM needs no JAAS entry here: its credentials live in the metadata store.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

from samsa.config import BrokerConfig
from samsa.config.errors import ConfigError

from samsa.client.sasl import SaslClientSettings
from samsa.client.jaas import JaasSyntaxError, LoginModuleEntry, parse_jaas_file, parse_jaas_property
from samsa.client.sasl import SUPPORTED_MECHANISMS

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
DEFAULT_MECHANISMS = ("PLAIN",)


@dataclasses.dataclass(frozen=True)
class ListenerSasl:
    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str]
    max_reauth_ms: int


@dataclasses.dataclass(frozen=True)
class SaslSettings:
    listeners: Mapping[str, ListenerSasl]  # upper-case listener name -> its settings
    failed_authentication_delay_ms: int = 100
    # How this broker authenticates to the others (None: their listener has no SASL).
    inter_broker: SaslClientSettings | None = None

    def for_listener(self, name: str) -> ListenerSasl:
        found = self.listeners.get(name)
        return found if found is not None else ListenerSasl(DEFAULT_MECHANISMS, {}, 0)

    @classmethod
    def from_config(cls, cfg: BrokerConfig) -> "SaslSettings":
        jaas_file = _JaasFile(cfg.java_security_auth_login_config)
        out = {}
        for listener in cfg.listeners:
            protocol = cfg.listener_security_protocol_map.get(listener.name, listener.name)
            if protocol.startswith("SASL_"):
                out[listener.name] = _listener_settings(cfg, listener.name, jaas_file)
        return cls(out, cfg.connections_failed_authentication_delay_ms,
                   _inter_broker(cfg, out, jaas_file))


def _inter_broker(cfg: BrokerConfig, listeners: Mapping[str, ListenerSasl],
                  jaas_file: "_JaasFile") -> SaslClientSettings | None:
    """Kafka's rule: on a SASL inter-broker listener a broker logs in to the
    others with ``sasl.mechanism.inter.broker.protocol`` (samsa: PLAIN when
    unset), which that listener must enable, as the ``username``/``password``
    of its JAAS entry for that mechanism. One broker needs it too: it sends
    transaction markers to itself over the wire."""
    name = cfg.inter_broker_listener
    if name not in listeners:
        return None
    key = "sasl.mechanism.inter.broker.protocol"
    mechanism = cfg.sasl_mechanism_inter_broker_protocol if cfg.is_set(key) else "PLAIN"
    if mechanism not in listeners[name].mechanisms:
        raise ConfigError(key, mechanism, "a mechanism the inter-broker listener "
                          f"{name} enables ({', '.join(listeners[name].mechanisms)})")
    jaas_key = f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config"
    if jaas_key in cfg.raw:
        try:
            entries = parse_jaas_property(str(cfg.raw[jaas_key]))
        except JaasSyntaxError as e:
            raise ConfigError(jaas_key, "[hidden]", "a JAAS entry",
                              message=f"invalid value for {jaas_key}: {e}") from None
    else:
        entries = (jaas_file.section(f"{name.lower()}.KafkaServer")
                   or jaas_file.section("KafkaServer") or [])
    for entry in entries:
        if "username" in entry.options and "password" in entry.options:
            return SaslClientSettings(mechanism, entry.options["username"],
                                      entry.options["password"])
    raise ConfigError(jaas_key, None, "username and password for the broker itself",
                      message=f"listener {name} carries traffic between brokers with SASL/"
                              f"{mechanism}, but {jaas_key} (or the JAAS file) gives no "
                              'username="..." password="..." for the broker to log in with')


def _listener_settings(cfg: BrokerConfig, name: str, jaas_file: "_JaasFile") -> ListenerSasl:
    prefix = f"listener.name.{name.lower()}."
    raw = cfg.raw
    key = prefix + "sasl.enabled.mechanisms"
    if key in raw:
        mechanisms = [m.strip() for m in str(raw[key]).split(",") if m.strip()]
    else:
        key = "sasl.enabled.mechanisms"
        mechanisms = list(cfg.sasl_enabled_mechanisms)
        if not cfg.is_set(key):
            mechanisms = list(DEFAULT_MECHANISMS)
    unknown = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
    if unknown or not mechanisms:
        raise ConfigError(key, raw.get(key, ",".join(mechanisms)),
                          "a comma-separated list of " + ", ".join(SUPPORTED_MECHANISMS)
                          + (f" ({', '.join(unknown)} not implemented)" if unknown else ""))
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        users = _plain_users(raw, prefix, name, jaas_file)
    reauth_key = prefix + "connections.max.reauth.ms"
    reauth = cfg.connections_max_reauth_ms
    if reauth_key in raw:
        try:
            reauth = int(str(raw[reauth_key]).strip())
        except ValueError:
            reauth = -1
        if reauth < 0:
            raise ConfigError(reauth_key, raw[reauth_key], "a number of milliseconds >= 0")
    return ListenerSasl(tuple(mechanisms), users, reauth)


def _plain_users(raw: Mapping[str, object], prefix: str, listener: str,
                 jaas_file: "_JaasFile") -> dict[str, str]:
    key = prefix + "plain.sasl.jaas.config"
    if key in raw:
        try:
            entries = parse_jaas_property(str(raw[key]))
        except JaasSyntaxError as e:
            raise ConfigError(key, "[hidden]", "a JAAS entry: <LoginModule> required "
                              'key="value" ...;', message=f"invalid value for {key}: {e}") from None
        if len(entries) != 1 or entries[0].login_module != PLAIN_LOGIN_MODULE:
            raise ConfigError(key, "[hidden]", f"exactly one {PLAIN_LOGIN_MODULE} entry",
                              message=f"invalid value for {key}: expected exactly one "
                                      f"{PLAIN_LOGIN_MODULE} entry")
        return _users_of(entries)
    found = jaas_file.section(f"{listener.lower()}.KafkaServer")
    if found is None:
        found = jaas_file.section("KafkaServer")
    if found is None:
        raise ConfigError(key, None, "a JAAS entry with the listener's PLAIN users",
                          message=f"SASL/PLAIN is enabled on listener {listener} but {key} is "
                                  "not set and java.security.auth.login.config names no "
                                  f"KafkaServer or {listener.lower()}.KafkaServer section")
    return _users_of(found)


def _users_of(entries: list[LoginModuleEntry]) -> dict[str, str]:
    users = {}
    for entry in entries:
        if entry.login_module == PLAIN_LOGIN_MODULE:
            for option, value in entry.options.items():
                if option.startswith("user_"):
                    users[option[len("user_"):]] = value
    return users


class _JaasFile:
    """The JAAS file's sections, read on first use (only PLAIN needs it)."""
    KEY = "java.security.auth.login.config"

    def __init__(self, path: str | None) -> None:
        self._path = path
        self._sections: dict[str, list[LoginModuleEntry]] | None = None

    def section(self, name: str) -> list[LoginModuleEntry] | None:
        if self._path is None:
            return None
        if self._sections is None:
            try:
                with open(self._path, encoding="utf-8") as f:
                    text = f.read()
            except OSError as e:
                raise ConfigError(self.KEY, self._path, "a readable JAAS file",
                                  message=f"cannot read {self.KEY} {self._path!r}: "
                                          f"{e.strerror or e}") from None
            try:
                self._sections = parse_jaas_file(text)
            except JaasSyntaxError as e:
                raise ConfigError(self.KEY, self._path, "a JAAS file",
                                  message=f"invalid JAAS file {self._path!r} "
                                          f"({self.KEY}): {e}") from None
        return self._sections.get(name)
