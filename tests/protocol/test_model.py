"""The shared names of protocol/model.py against what they name."""
from __future__ import annotations

import re

from samsa.broker.handlers import HANDLERS
from samsa.protocol.messages import API_BY_KEY
from samsa.protocol.model import ApiKey


def _kafka_name(schema_name: str) -> str:
    # Kafka's ApiKeys constant of a schema's name: AlterReplicaLogDirs -> ALTER_REPLICA_LOG_DIRS
    return re.sub(r"(?<!^)(?=[A-Z])", "_", schema_name).upper()


def test_api_keys_are_the_served_apis_with_kafkas_names():
    assert {k.value: k.name for k in ApiKey} == {
        key: _kafka_name(spec.name) for key, spec in API_BY_KEY.items()}
    assert ApiKey.ALTER_REPLICA_LOG_DIRS == 34 and ApiKey.LIST_CONFIG_RESOURCES == 74


def test_every_api_key_has_a_handler():
    assert set(HANDLERS) == set(ApiKey)
    assert all(type(key) is ApiKey for key in HANDLERS)
