"""As confluent-kafka-python's tests/integration/conftest.py: BROKERS names a running
cluster, else trivup starts one."""
import os

import pytest

from tests.integration.cluster_fixture import ByoFixture, TrivupFixture


@pytest.fixture(scope="session")
def kafka_cluster():
    brokers = os.environ.get("BROKERS", "")
    cluster = (ByoFixture({"bootstrap.servers": brokers}) if brokers
               else TrivupFixture({"broker_cnt": 1, "version": "3.9.0"}))
    try:
        yield cluster
    finally:
        cluster.stop()
