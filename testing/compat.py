"""Run a client project's own integration suite against a samsa test broker.

kafka-python's suite (test/integration) starts a JVM Kafka per module unless
``KAFKA_URI`` names an external broker. Loaded with ``-p samsa.testing.compat`` (it must be ``-p``: it acts before conftests load),
this plugin starts one samsa broker for the run, configured as that suite's own
broker template is (4 partitions per topic, short group sessions allowed, ACLs
on), and exports what the suite reads:

- ``KAFKA_URI=tcp://127.0.0.1:PORT`` (the external broker),
- ``KAFKA_VERSION=4.0.0`` unless set (the suite enables itself with it and pins its
  clients' api_version to it; samsa serves Kafka 4.0's API versions, so a newer
  pin makes clients send versions samsa does not serve and the broker closes the
  connection, as Kafka does),
- ``KAFKA_ROOT`` (the suite checks that a Kafka distribution is there, even for an
  external broker: an empty temporary directory).

A suite already given KAFKA_URI is left alone. docs/testing.md has the recipe.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import pytest

from .broker import Broker

_started: list[Broker] = []
_dirs: list[str] = []

# What kafka-python's broker template sets that the suite relies on
KAFKA_PYTHON_CONFIGS = {
    "num.partitions": 4,
    "group.min.session.timeout.ms": 1000,
    "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
    "allow.everyone.if.no.acl.found": True,
}


# Before the suite's conftest is imported: its fixtures module reads the environment
# at import (class attributes).
@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: object, parser: object, args: object) -> None:
    if "KAFKA_URI" in os.environ:
        return
    broker = Broker(**KAFKA_PYTHON_CONFIGS).start()  # type: ignore[arg-type]
    _started.append(broker)
    os.environ["KAFKA_URI"] = "tcp://" + broker.bootstrap_servers
    os.environ.setdefault("KAFKA_VERSION", "4.0.0")
    if "KAFKA_ROOT" not in os.environ:
        root = tempfile.mkdtemp(prefix="samsa-kafka-root-")
        _dirs.append(root)
        os.environ["KAFKA_ROOT"] = root


def pytest_unconfigure(config: object) -> None:
    while _started:
        _started.pop().stop()
    while _dirs:
        shutil.rmtree(_dirs.pop(), ignore_errors=True)
