"""DescribeConfigs answers: topic and broker configs as Kafka reports them.

Sources and config-type numbers are Kafka's wire values, so the handler can copy
them into DescribeConfigsResponse unchanged.  Values are rendered as Kafka
renders them (ints in decimal, booleans lower case, lists comma-joined).
Synonyms follow Kafka's order: the topic override, then the broker keys set
statically (file/env/overrides), then the broker keys' defaults.
"""
from __future__ import annotations

import enum
from typing import Iterable, Mapping, NamedTuple

from .broker import BROKER_KEYS, BrokerConfig, parse_topic_overrides
from .dynamic import STORED_ONLY_KEYS, is_dynamic, key_definition
from .topic_keys import TOPIC_KEYS, from_attr_value
from .values import ConfigKey, ConfigType, render


class ConfigSource(enum.IntEnum):
    """DescribeConfigsResponse ConfigSource values."""
    UNKNOWN = 0
    TOPIC_CONFIG = 1                    # Kafka's DYNAMIC_TOPIC_CONFIG
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    CLIENT_METRICS_CONFIG = 7
    GROUP_CONFIG = 8

    DYNAMIC_TOPIC_CONFIG = 1            # alias under Kafka's Java name


class ConfigSynonym(NamedTuple):
    name: str
    value: str | None
    source: int


class ConfigEntry(NamedTuple):
    name: str
    value: str | None
    source: int
    is_default: bool
    read_only: bool
    is_sensitive: bool
    synonyms: list[ConfigSynonym]
    config_type: int
    documentation: str


# Broker keys that feed one another (Kafka's DynamicBrokerConfig.brokerConfigSynonyms).
_BROKER_SYNONYM_GROUPS = [
    ("log.roll.ms", "log.roll.hours"),
    ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    ("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
    ("log.dirs", "log.dir"),
    ("broker.id", "node.id"),
]
_GROUP_OF = {k: g for g in _BROKER_SYNONYM_GROUPS for k in g}


def _layer_value(key: str, raw: Mapping[str, str]) -> str | None:
    ck = key_definition(key)
    if ck is None:  # a listener key samsa has no definition for: as stored
        return raw[key]
    return render(ck.type, ck.parse(raw[key]))


def _broker_synonyms(cfg: BrokerConfig, names: Iterable[str]) -> list[ConfigSynonym]:
    """Every layer that sets one of ``names``, highest precedence first: this
    broker's dynamic keys, the cluster's dynamic defaults, the static config,
    then the built-in defaults (as Kafka lists them)."""
    static = cfg.static_raw or cfg.raw
    out = []
    for layer, source in ((cfg.dynamic_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                          (cfg.dynamic_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                          (static, ConfigSource.STATIC_BROKER_CONFIG)):
        out += [ConfigSynonym(n, _layer_value(n, layer), source) for n in names if n in layer]
    for n in names:
        ck = key_definition(n)
        if ck is not None and ck.default is not None:
            out.append(ConfigSynonym(n, render(ck.type, ck.default), ConfigSource.DEFAULT_CONFIG))
    return out


def describe_topic_config(broker_cfg: BrokerConfig,
                          overrides: Mapping[str, str | None] | None = None,
                          keys: Iterable[str] | None = None) -> list[ConfigEntry]:
    """Every topic config key (or just `keys`), sorted by name.

    ConfigError if an override is unknown or bad (stored overrides were
    validated when set, so this indicates a corrupted store).
    """
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    parsed = {tk.name: value for tk, value in parse_topic_overrides(overrides)}
    effective = broker_cfg.topic_config(overrides)
    entries = []
    for name in sorted(TOPIC_KEYS if keys is None else keys):
        tk = TOPIC_KEYS.get(name)
        if tk is None:
            continue  # Kafka silently leaves out unknown names in a describe
        ck = tk.key
        synonyms: list[ConfigSynonym] = []
        if name in parsed:
            synonyms.append(ConfigSynonym(name, render(ck.type, parsed[name]),
                                          ConfigSource.TOPIC_CONFIG))
        synonyms += _broker_synonyms(broker_cfg, [s.name for s in tk.synonyms])
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        if name in parsed and ck.type is ConfigType.LIST:
            # a topic's own list as it set it (Kafka keeps its order:
            # cleanup.policy "delete,compact" is not "compact,delete")
            value = synonyms[0].value
        else:
            value = render(ck.type, from_attr_value(tk, getattr(effective, tk.attr)))
        entries.append(ConfigEntry(
            name=name, value=value, source=int(source),
            is_default=source == ConfigSource.DEFAULT_CONFIG, read_only=False,
            is_sensitive=ck.sensitive, synonyms=[ConfigSynonym(s.name, s.value, int(s.source))
                                                 for s in synonyms],
            config_type=int(ck.type), documentation=ck.doc))
    return entries


def _sensitive(ck: ConfigKey | None) -> bool:
    """Whether a broker key's value is withheld: a key without a definition
    (a per-listener key stored as given) may be a password, so it is, as
    Kafka's KafkaConfig.maybeSensitive treats a key of unknown type."""
    return ck.sensitive if ck is not None else True


def describe_broker_config(broker_cfg: BrokerConfig, keys: Iterable[str] | None = None
                           ) -> list[ConfigEntry]:
    """Every broker key (or just `keys`), sorted by name: samsa's own, the
    other keys Kafka changes at run time, and the per-listener keys stored.

    The value and source are the highest layer's that sets the key
    (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG,
    else DEFAULT_CONFIG); keys Kafka changes at run time are not read-only.
    """
    if keys is None:
        keys = {*BROKER_KEYS, *STORED_ONLY_KEYS, *broker_cfg.dynamic_broker,
                *broker_cfg.dynamic_default}
    entries = []
    for name in sorted(set(keys)):
        ck = key_definition(name)
        if ck is None and name not in broker_cfg.dynamic_broker \
                and name not in broker_cfg.dynamic_default:
            continue
        group = _GROUP_OF.get(name, (name,))
        synonyms = _broker_synonyms(broker_cfg, group)
        # As Kafka does, drop the higher-precedence synonyms listed before this key.
        while synonyms and synonyms[0].name != name:
            synonyms.pop(0)
        source = synonyms[0].source if synonyms else ConfigSource.DEFAULT_CONFIG
        sensitive = _sensitive(ck)
        entries.append(ConfigEntry(
            name=name, value=None if sensitive or not synonyms else synonyms[0].value,
            source=int(source),
            is_default=source == ConfigSource.DEFAULT_CONFIG, read_only=not is_dynamic(name),
            is_sensitive=sensitive,
            # Kafka never answers a password's value (ssl.key.password, inline keys...)
            synonyms=[ConfigSynonym(s.name, None if sensitive else s.value, int(s.source))
                      for s in synonyms],
            config_type=int(ck.type) if ck is not None else int(ConfigType.UNKNOWN),
            documentation=ck.doc if ck is not None else ""))
    return entries


def describe_broker_defaults(broker_cfg: BrokerConfig) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults (BROKER resource ""), as Kafka
    describes them: only the keys set at that level."""
    entries = []
    for name in sorted(broker_cfg.dynamic_default):
        ck = key_definition(name)
        sensitive = _sensitive(ck)
        value = None if sensitive else _layer_value(name, broker_cfg.dynamic_default)
        source = int(ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
        entries.append(ConfigEntry(
            name=name, value=value, source=source, is_default=False,
            read_only=not is_dynamic(name), is_sensitive=sensitive,
            synonyms=[ConfigSynonym(name, value, source)],
            config_type=int(ck.type) if ck is not None else int(ConfigType.UNKNOWN),
            documentation=ck.doc if ck is not None else ""))
    return entries


__all__ = ["describe_broker_defaults", "ConfigSource", "ConfigEntry", "ConfigSynonym", "ConfigType",
           "describe_topic_config", "describe_broker_config"]
