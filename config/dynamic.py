"""Dynamic broker configs: broker keys changed at run time, as Kafka's
AlterConfigs / IncrementalAlterConfigs on the BROKER resource change them.

Two layers sit above the static config (file, environment, overrides): the
cluster-wide defaults (resource name "") and each broker's own keys
(resource name = its id); the broker's own win, then the cluster default,
then the static value. ``with_dynamic`` builds the effective config from
the three, so every derived value (the default topic config above all) is
computed by the one builder that computes it at start-up.

samsa changes at run time the keys it can apply live: the broker defaults of
every topic config (``log.retention.ms``, ``log.segment.bytes``,
``message.max.bytes``, ...), which reach every topic without its own
override, and the connection limits and creation rates (the rate also per
listener, ``listener.name.<listener>.max.connection.creation.rate``). Keys Kafka also changes at run time
but samsa cannot yet (thread counts, listeners, TLS) are refused with a
message that says so, rather than accepted and silently not applied; keys
that are never dynamic (``broker.id``, ``log.dirs``) are refused as Kafka
refuses them.
"""
from __future__ import annotations

import dataclasses
from typing import Mapping

from .broker import BROKER_KEYS, LISTENER_PREFIX, BrokerConfig, _build, listener_override_key
from .errors import ConfigError
from .topic_keys import BROKER_TO_TOPIC

DYNAMIC_DEFAULT = "dynamic-default"
DYNAMIC_BROKER = "dynamic-broker"

MAX_CONNECTION_CREATION_RATE = "max.connection.creation.rate"
LIVE_KEYS: frozenset[str] = frozenset(BROKER_TO_TOPIC) | {"max.connections",
                                                          "max.connections.per.ip",
                                                          MAX_CONNECTION_CREATION_RATE}
# Keys also changed live per listener, as listener.name.<listener>.<key>
# (Kafka's ListenerReconfigurable keys that samsa applies).
LIVE_LISTENER_KEYS: frozenset[str] = frozenset({MAX_CONNECTION_CREATION_RATE})

# Dynamic in Kafka (DynamicBrokerConfig), not (yet) applied live by samsa.
NOT_LIVE_KEYS: frozenset[str] = frozenset({
    "num.io.threads", "num.network.threads", "num.replica.fetchers",
    "num.recovery.threads.per.data.dir", "background.threads", "log.cleaner.threads",
    "log.cleaner.io.max.bytes.per.second", "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.backoff.ms", "listeners", "advertised.listeners",
    "listener.security.protocol.map", "max.connections.per.ip.overrides",
    "metric.reporters", "producer.id.expiration.ms",
    "follower.replication.throttled.rate", "leader.replication.throttled.rate",
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


def check_updatable(keys) -> None:
    keys = sorted(set(keys))
    never = [k for k in keys if k not in LIVE_KEYS and k not in NOT_LIVE_KEYS
             and not k.startswith(("ssl.", "sasl.", LISTENER_PREFIX))]
    if never:
        raise DynamicConfigError(
            f"Cannot update these configs dynamically: {', '.join(never)}")
    later = [k for k in keys if not _live(k)]
    if later:
        raise DynamicConfigError(
            f"samsa cannot change these configs at run time yet: {', '.join(later)}; set "
            f"them in server.properties and restart the broker")


def with_dynamic(static: BrokerConfig, cluster_default: Mapping[str, str],
                 per_broker: Mapping[str, str]) -> BrokerConfig:
    """The effective config: static < cluster default < this broker's keys.
    ConfigError (naming the key) when a dynamic value is bad."""
    props = dict(static.static_raw)
    origins = {k: static.origins.get(k, "file") for k in props}
    for layer, origin in ((cluster_default, DYNAMIC_DEFAULT), (per_broker, DYNAMIC_BROKER)):
        for key, value in layer.items():
            if key in BROKER_KEYS or listener_key(key) in LIVE_LISTENER_KEYS:
                props[key] = value
                origins[key] = origin
    built = _build(props, origins)
    return dataclasses.replace(built, static_raw=dict(static.static_raw),
                               dynamic_default=dict(cluster_default),
                               dynamic_broker=dict(per_broker))


def validate(static: BrokerConfig, cluster_default: Mapping[str, str],
             per_broker: Mapping[str, str], changed: Mapping[str, str],
             before: BrokerConfig | None = None) -> BrokerConfig:
    """Check a change to one layer (``changed`` are its new keys) and return
    the effective config it would give; DynamicConfigError otherwise.
    ``before``: the effective config the change is made to (default: the
    static one)."""
    check_updatable(changed)
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


__all__ = ["LIVE_KEYS", "LIVE_LISTENER_KEYS", "NOT_LIVE_KEYS", "listener_key", "DynamicConfigError", "check_updatable",
           "with_dynamic", "validate", "DYNAMIC_DEFAULT", "DYNAMIC_BROKER"]
