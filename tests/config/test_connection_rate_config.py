"""max.connection.creation.rate, broker-wide and per listener: Kafka's
default and validation at start-up, and changed at run time as Kafka's
DynamicBrokerConfig changes it."""
from __future__ import annotations

import pytest

from samsa.config import BrokerConfig
from samsa.config.dynamic import DynamicConfigError, validate, with_dynamic
from samsa.config.errors import ConfigError
from samsa.config.values import INT_MAX

KEY = "max.connection.creation.rate"
LISTENERS = {"listeners": "CLIENT://:9092,INTERNAL://:9093",
             "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
             "inter.broker.listener.name": "INTERNAL"}


def test_unbounded_by_default_and_per_listener_falls_back_to_it():
    c = BrokerConfig.from_dict(LISTENERS)
    assert c.max_connection_creation_rate == INT_MAX
    c = BrokerConfig.from_dict({**LISTENERS, KEY: "10",
                                f"listener.name.internal.{KEY}": "50"})
    assert c.listener_value("CLIENT", KEY) == 10
    assert c.listener_value("INTERNAL", KEY) == 50


@pytest.mark.parametrize("key", [KEY, f"listener.name.client.{KEY}"])
@pytest.mark.parametrize("value", ["-1", "many", "2.5", "2147483648"])
def test_a_bad_value_refuses_start_up_naming_the_key(key, value):
    with pytest.raises(ConfigError) as e:
        BrokerConfig.from_dict({**LISTENERS, key: value})
    assert key in str(e.value)


def test_zero_is_taken_at_start_up():
    assert BrokerConfig.from_dict({KEY: "0"}).max_connection_creation_rate == 0


def test_changed_at_run_time_broker_wide_and_per_listener():
    static = BrokerConfig.from_dict(LISTENERS)
    c = validate(static, {KEY: "20"}, {}, {KEY: "20"})
    assert c.max_connection_creation_rate == 20
    per_listener = {f"listener.name.client.{KEY}": "5"}
    c = validate(static, {KEY: "20"}, per_listener, per_listener)
    assert c.listener_value("CLIENT", KEY) == 5 and c.listener_value("INTERNAL", KEY) == 20
    # the stored layers give the same effective config at the next start
    again = with_dynamic(static, {KEY: "20"}, per_listener)
    assert again.listener_value("CLIENT", KEY) == 5


@pytest.mark.parametrize("changed", [{KEY: "0"}, {f"listener.name.client.{KEY}": "0"}])
def test_a_rate_of_zero_is_refused_at_run_time_as_kafka_refuses_it(changed):
    with pytest.raises(DynamicConfigError, match=f"Invalid {KEY} 0"):
        validate(BrokerConfig.from_dict(LISTENERS), {}, changed, changed)


def test_a_listeners_static_zero_does_not_block_broker_wide_changes():
    # Kafka reconfigures (and validates) only the listeners whose rate changes
    static = BrokerConfig.from_dict({**LISTENERS, f"listener.name.client.{KEY}": "0"})
    c = validate(static, {KEY: "20"}, {}, {KEY: "20"})
    assert c.listener_value("CLIENT", KEY) == 0 and c.listener_value("INTERNAL", KEY) == 20
    c = validate(static, {KEY: "20"}, {KEY: "30"}, {KEY: "30"}, before=c)
    assert c.listener_value("INTERNAL", KEY) == 30
    # a change that makes a listener's rate 0 is still refused
    with pytest.raises(DynamicConfigError, match=f"Invalid {KEY} 0"):
        validate(static, {}, {KEY: "0"}, {KEY: "0"})


def test_a_bad_run_time_value_names_the_key():
    key = f"listener.name.client.{KEY}"
    with pytest.raises(DynamicConfigError, match=key):
        validate(BrokerConfig.from_dict(LISTENERS), {}, {key: "-3"}, {key: "-3"})
