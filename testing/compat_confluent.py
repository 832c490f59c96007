"""Run confluent-kafka-python's integration suite (tests/integration) against a
samsa test broker.

Its conftest's ``kafka_cluster`` fixture uses a running cluster when ``BROKERS``
names its bootstrap servers (what it calls a bring-your-own cluster) and starts one
with trivup otherwise. Loaded with ``-p samsa.testing.compat_confluent``, this
plugin starts one samsa broker for the run and exports ``BROKERS``; a run already
given BROKERS is left alone. What it cannot stand in for (docs/testing.md):

- trivup must still be importable: the suite's cluster_fixture imports it at load;
- ``sasl_cluster`` always starts trivup (a Java Kafka);
- the Schema Registry tests need ``SR_URL`` (a registry of their own).

``TEST_CONSUMER_GROUP_PROTOCOL=consumer`` (the suite's switch to KIP-848 groups)
works as with Kafka 4: samsa serves both group protocols.
"""
from __future__ import annotations

import os

import pytest

from .broker import Broker

_started: list[Broker] = []

# What the suite's trivup clusters set: transactions on one broker, 3 partitions for
# an auto-created topic, and an ACL authorizer that lets everyone through until a
# resource has ACLs (trivup always adds one; the admin tests create and delete ACLs,
# which a broker without an authorizer refuses with SECURITY_DISABLED)
CONFLUENT_CONFIGS = {
    "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
    "num.partitions": 3,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": True,
}


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: object, parser: object, args: object) -> None:
    if os.environ.get("BROKERS"):
        return
    broker = Broker(**CONFLUENT_CONFIGS).start()  # type: ignore[arg-type]
    _started.append(broker)
    os.environ["BROKERS"] = broker.bootstrap_servers


def pytest_unconfigure(config: object) -> None:
    while _started:
        _started.pop().stop()
