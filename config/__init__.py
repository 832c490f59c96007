"""Typed broker and topic configuration with Kafka's key names.

    cfg = load_broker_config("server.properties", overrides=["log.dirs=/data"])
    cfg.listeners, cfg.log_dirs, cfg.default_topic_config, cfg.topic_config({...})
"""
from .broker import (BROKER_KEYS, BrokerConfig, Listener, env_key, load_broker_config,
                     parse_override)
from .describe import (ConfigEntry, ConfigSource, ConfigSynonym, describe_broker_config,
                       describe_topic_config)
from .errors import ConfigError
from .properties import format_properties, load_properties, parse_properties
from .topic import TopicConfig
from .topic_keys import TOPIC_KEYS
from .values import ConfigType

__all__ = [
    "load_broker_config", "BrokerConfig", "ConfigError", "TopicConfig", "Listener",
    "ConfigType", "BROKER_KEYS", "TOPIC_KEYS", "env_key", "parse_override",
    "load_properties", "parse_properties", "format_properties", "describe_topic_config", "describe_broker_config",
    "ConfigEntry", "ConfigSource", "ConfigSynonym",
]
