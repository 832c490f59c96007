"""Dynamic broker configs: broker keys changed at run time, as Kafka's
AlterConfigs / IncrementalAlterConfigs on the BROKER resource change them.

Two layers sit above the static config (file, environment, overrides): the
cluster-wide defaults (resource name "") and each broker's own keys
(resource name = its id); the broker's own win, then the cluster default,
then the static value. ``with_dynamic`` builds the effective config from
the three, so every derived value (the default topic config above all) is
computed by the one builder that computes it at start-up.

Every key Kafka lets a client change at run time (its DynamicBrokerConfig
.AllDynamicConfigs) is accepted, checked against its type, stored, and
described with its dynamic source, as Kafka's tools and librdkafka's tests
expect. samsa applies the ones it can live (``LIVE_KEYS``): the broker
defaults of every topic config (``log.retention.ms``, ``log.segment.bytes``,
``message.max.bytes``, ...), which reach every topic without its own
override, and the connection limits and creation rates (the rate also per
listener, ``listener.name.<listener>.max.connection.creation.rate``). The
others (thread counts, listeners, TLS and SASL settings, log cleaner
tuning...) are kept and reported but do not change what the broker runs
with. Keys Kafka never changes at run time (``broker.id``, ``log.dirs``)
are refused as Kafka refuses them, with its words: so are the keystore and
truststore keys without a listener prefix, and the per-broker keys at the
cluster-default level.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

from .broker import BROKER_KEYS, LISTENER_PREFIX, BrokerConfig, _build, listener_override_key
from .errors import ConfigError
from .topic_keys import BROKER_TO_TOPIC
from .values import ConfigKey, ConfigType

DYNAMIC_DEFAULT = "dynamic-default"
DYNAMIC_BROKER = "dynamic-broker"

MAX_CONNECTION_CREATION_RATE = "max.connection.creation.rate"
LIVE_KEYS: frozenset[str] = frozenset(BROKER_TO_TOPIC) | {"max.connections",
                                                          "max.connections.per.ip",
                                                          MAX_CONNECTION_CREATION_RATE}
# Keys also changed live per listener, as listener.name.<listener>.<key>
# (Kafka's ListenerReconfigurable keys that samsa applies).
LIVE_LISTENER_KEYS: frozenset[str] = frozenset({MAX_CONNECTION_CREATION_RATE})

# Kafka's TLS keys that change only per listener (SslConfigs.RECONFIGURABLE_CONFIGS).
SECURITY_KEYS: frozenset[str] = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})
# Kafka's DynamicListenerConfig keys.
_LISTENER_KEYS: frozenset[str] = frozenset({
    "listeners", "listener.security.protocol.map", "principal.builder.class",
    "ssl.protocol", "ssl.provider", "ssl.cipher.suites", "ssl.enabled.protocols",
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation",
    "ssl.client.auth", "ssl.engine.factory.class",
    "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config", "sasl.enabled.mechanisms",
    "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
    "max.connections", MAX_CONNECTION_CREATION_RATE, "num.network.threads",
})
# Set per broker only, never as a cluster default (Kafka's PerBrokerConfigs).
_CLUSTER_LEVEL_LISTENER_KEYS = frozenset({"max.connections", MAX_CONNECTION_CREATION_RATE,
                                          "num.network.threads"})
PER_BROKER_KEYS: frozenset[str] = (SECURITY_KEYS | _LISTENER_KEYS) - _CLUSTER_LEVEL_LISTENER_KEYS

# Kafka's dynamic keys samsa has no other use for: their definitions (Kafka's
# types and defaults), to check a value and to describe it.
_T = ConfigType
STORED_ONLY_KEYS: dict[str, ConfigKey] = {k.name: k for k in [
    ConfigKey("log.cleaner.io.buffer.load.factor", _T.DOUBLE, 0.9),
    ConfigKey("log.cleaner.io.buffer.size", _T.INT, 524288),
    ConfigKey("log.cleaner.io.max.bytes.per.second", _T.DOUBLE, 1.7976931348623157e308),
    ConfigKey("num.replica.fetchers", _T.INT, 1),
    ConfigKey("metric.reporters", _T.LIST, []),
    ConfigKey("principal.builder.class", _T.CLASS,
              "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"),
    ConfigKey("ssl.provider", _T.STRING, None),
    ConfigKey("ssl.keymanager.algorithm", _T.STRING, "SunX509"),
    ConfigKey("ssl.trustmanager.algorithm", _T.STRING, "PKIX"),
    ConfigKey("ssl.secure.random.implementation", _T.STRING, None),
    ConfigKey("ssl.engine.factory.class", _T.CLASS, None),
    ConfigKey("sasl.jaas.config", _T.PASSWORD, None, sensitive=True),
    ConfigKey("sasl.kerberos.service.name", _T.STRING, None),
    ConfigKey("sasl.kerberos.kinit.cmd", _T.STRING, "/usr/bin/kinit"),
    ConfigKey("sasl.kerberos.ticket.renew.window.factor", _T.DOUBLE, 0.8),
    ConfigKey("sasl.kerberos.ticket.renew.jitter", _T.DOUBLE, 0.05),
    ConfigKey("sasl.kerberos.min.time.before.relogin", _T.LONG, 60000),
    ConfigKey("sasl.kerberos.principal.to.local.rules", _T.LIST, ["DEFAULT"]),
    ConfigKey("sasl.login.refresh.window.factor", _T.DOUBLE, 0.8),
    ConfigKey("sasl.login.refresh.window.jitter", _T.DOUBLE, 0.05),
    ConfigKey("sasl.login.refresh.min.period.seconds", _T.SHORT, 60),
    ConfigKey("sasl.login.refresh.buffer.seconds", _T.SHORT, 300),
    ConfigKey("remote.log.index.file.cache.total.size.bytes", _T.LONG, 1073741824),
    ConfigKey("remote.fetch.max.wait.ms", _T.INT, 500),
    ConfigKey("remote.log.manager.copy.max.bytes.per.second", _T.LONG, 2**63 - 1),
    ConfigKey("remote.log.manager.fetch.max.bytes.per.second", _T.LONG, 2**63 - 1),
    ConfigKey("remote.list.offsets.request.timeout.ms", _T.LONG, 30000),
    ConfigKey("remote.log.manager.copier.thread.pool.size", _T.INT, 10),
    ConfigKey("remote.log.manager.expiration.thread.pool.size", _T.INT, 10),
    ConfigKey("remote.log.manager.follower.thread.pool.size", _T.INT, 2),
    ConfigKey("remote.log.reader.threads", _T.INT, 10),
    ConfigKey("follower.fetch.last.tiered.offset.enable", _T.BOOLEAN, False),
    ConfigKey("config.providers", _T.LIST, []),
    ConfigKey("group.coordinator.cached.buffer.max.bytes", _T.INT, 1024 * 1024 + 12),
    ConfigKey("share.coordinator.cached.buffer.max.bytes", _T.INT, 1024 * 1024 + 12),
]}

# Every key Kafka changes at run time (DynamicBrokerConfig.AllDynamicConfigs;
# the log keys are every broker synonym of a topic config).
KAFKA_DYNAMIC_KEYS: frozenset[str] = LIVE_KEYS | SECURITY_KEYS | _LISTENER_KEYS | frozenset(
    STORED_ONLY_KEYS) | frozenset({
        # the log cleaner
        "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.backoff.ms",
        # thread pools
        "num.io.threads", "num.recovery.threads.per.data.dir", "background.threads",
        # the socket server
        "max.connections.per.ip.overrides",
        # producer state
        "producer.id.expiration.ms", "transaction.partition.verification.enable",
        # log-dir moves (AlterReplicaLogDirs): the copy's rate, applied at start
        "replica.alter.log.dirs.io.max.bytes.per.second",
    })


class DynamicConfigError(ValueError):
    """A dynamic change that cannot be made (Kafka answers INVALID_REQUEST)."""


def listener_key(key: str) -> str | None:
    """The broker key a ``listener.name.<listener>.<key>`` stands for, or None."""
    ck = listener_override_key(key)
    return None if ck is None else ck.name


def _live(key: str) -> bool:
    return key in LIVE_KEYS or listener_key(key) in LIVE_LISTENER_KEYS


def is_dynamic(key: str) -> bool:
    """Whether a client may change ``key`` at run time (as in Kafka)."""
    return key in KAFKA_DYNAMIC_KEYS or key.startswith(LISTENER_PREFIX)


def key_definition(key: str) -> ConfigKey | None:
    """The definition of a broker key (its listener-prefixed form included)."""
    if key.startswith(LISTENER_PREFIX):
        base = key[len(LISTENER_PREFIX):].partition(".")[2]
        # a SASL key of a listener may also name the mechanism:
        # listener.name.<l>.<mechanism>.sasl.jaas.config
        for name in (base, base.partition(".")[2]):
            ck = BROKER_KEYS.get(name) or STORED_ONLY_KEYS.get(name)
            if ck is not None:
                return ck
        return None
    return BROKER_KEYS.get(key) or STORED_ONLY_KEYS.get(key)


def check_updatable(keys: Mapping[str, str], per_broker: bool = True) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs: which keys a client may
    change, at which level, and that their values are of their types
    (``keys``: {key: new value}; "" for a key being removed)."""
    names = sorted(keys)
    never = [k for k in names if not is_dynamic(k)]
    if never:
        raise DynamicConfigError(
            f"Cannot update these configs dynamically: {', '.join(never)}")
    bare = [k for k in names if k in SECURITY_KEYS]
    if bare:
        raise DynamicConfigError(
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {', '.join(bare)}")
    if not per_broker:
        mine = [k for k in names if k in PER_BROKER_KEYS or (
            k.startswith(LISTENER_PREFIX)
            and k[len(LISTENER_PREFIX):].partition(".")[2] not in _CLUSTER_LEVEL_LISTENER_KEYS)]
        if mine:
            raise DynamicConfigError(
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {', '.join(mine)}")
    for k in names:
        ck = key_definition(k)
        if ck is not None and keys[k] != "":
            try:
                dataclasses.replace(ck, name=k).parse(keys[k])
            except ConfigError as e:
                raise DynamicConfigError(str(e)) from None


def with_dynamic(static: BrokerConfig, cluster_default: Mapping[str, str],
                 per_broker: Mapping[str, str]) -> BrokerConfig:
    """The effective config: static < cluster default < this broker's keys.
    ConfigError (naming the key) when a dynamic value is bad."""
    props = dict(static.static_raw)
    origins = {k: static.origins.get(k, "file") for k in props}
    for layer, origin in ((cluster_default, DYNAMIC_DEFAULT), (per_broker, DYNAMIC_BROKER)):
        for key, value in layer.items():
            # only what samsa applies at run time: the other stored keys are
            # reported (describe.py), not run with
            if _live(key):
                props[key] = value
                origins[key] = origin
    built = _build(props, origins)
    return dataclasses.replace(built, static_raw=dict(static.static_raw),
                               dynamic_default=dict(cluster_default),
                               dynamic_broker=dict(per_broker))


def validate(static: BrokerConfig, cluster_default: Mapping[str, str],
             per_broker: Mapping[str, str], changed: Mapping[str, str],
             before: BrokerConfig | None = None, per_broker_level: bool = True) -> BrokerConfig:
    """Check a change to one layer (``changed`` are its new keys) and return
    the effective config it would give; DynamicConfigError otherwise.
    ``before``: the effective config the change is made to (default: the
    static one)."""
    check_updatable(changed, per_broker_level)
    try:
        effective = with_dynamic(static, cluster_default, per_broker)
    except ConfigError as e:
        raise DynamicConfigError(str(e)) from None
    if any(k == MAX_CONNECTION_CREATION_RATE or listener_key(k) == MAX_CONNECTION_CREATION_RATE
           for k in changed):
        # Kafka's listener quotas refuse a rate of 0 when reconfigured
        # (start-up takes it: at most one connection per quota window), and
        # only a listener whose rate the change changes is reconfigured: a
        # listener's static 0 does not block changes of the broker-wide rate.
        before = static if before is None else before
        for lst in effective.listeners:
            rate = effective.listener_value(lst.name, MAX_CONNECTION_CREATION_RATE)
            if rate <= 0 and rate != before.listener_value(lst.name, MAX_CONNECTION_CREATION_RATE):
                raise DynamicConfigError(f"Invalid {MAX_CONNECTION_CREATION_RATE} {rate}")
    return effective


__all__ = ["LIVE_KEYS", "LIVE_LISTENER_KEYS", "KAFKA_DYNAMIC_KEYS", "STORED_ONLY_KEYS", "SECURITY_KEYS",
           "PER_BROKER_KEYS", "is_dynamic", "key_definition", "listener_key", "DynamicConfigError",
           "check_updatable",
           "with_dynamic", "validate", "DYNAMIC_DEFAULT", "DYNAMIC_BROKER"]
