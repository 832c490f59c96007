"""`samsa configs` and `samsa get-offsets`: Kafka's tool names, flags and
output, against a real broker; records produced by librdkafka."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.tools.configs.lists import parse_config_list
from tests.support.broker_process import REPO_ROOT


def _samsa(*args):
    return subprocess.run([sys.executable, "-m", "samsa", *args], capture_output=True,
                          text=True, timeout=60, cwd=REPO_ROOT)


def _topic(broker, name, partitions=1, **config):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1, config=config)])[name].result(30)


def test_config_lists_keep_bracketed_commas():
    assert parse_config_list("a=1,cleanup.policy=[compact,delete],b=x") == {
        "a": "1", "cleanup.policy": "compact,delete", "b": "x"}
    with pytest.raises(ValueError):
        parse_config_list("novalue")


def test_configs_describe_and_alter_a_topic(broker):
    _topic(broker, "t", **{"retention.ms": "1000"})
    p = _samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "topics",
               "--entity-name", "t", "--describe")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic t are:"
    assert lines[1].startswith("  retention.ms=1000 sensitive=false synonyms={"
                               "DYNAMIC_TOPIC_CONFIG:retention.ms=1000")
    assert len(lines) == 2  # only the overrides without --all
    p = _samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "topics",
               "--entity-name", "t", "--alter", "--add-config",
               "cleanup.policy=[compact,delete],segment.bytes=1000000",
               "--delete-config", "retention.ms")
    assert p.returncode == 0 and p.stdout.strip() == "Completed updating config for topic t."
    p = _samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "topics",
               "--entity-name", "t", "--describe")
    names = sorted(line.split("=")[0].strip() for line in p.stdout.splitlines()[1:])
    assert names == ["cleanup.policy", "segment.bytes"]
    assert "cleanup.policy=compact,delete " in p.stdout
    p = _samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "topics",
               "--entity-name", "t", "--describe", "--all")
    assert p.stdout.startswith("All configs for topic t are:") and "retention.ms=" in p.stdout


def test_configs_alter_brokers_and_the_cluster_default(broker):
    p = _samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers",
               "--entity-default", "--alter", "--add-config", "log.retention.ms=7200000")
    assert p.returncode == 0
    assert p.stdout.strip() == "Completed updating default config for brokers in the cluster."
    p = _samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers",
               "--entity-default", "--describe")
    assert p.stdout.splitlines()[0] == "Default configs for brokers in the cluster are:"
    assert "log.retention.ms=7200000" in p.stdout
    # Broker 0's own dynamic configs leave out the cluster default it inherits
    # (kafka-configs lists one source per entity); --all shows where it comes from.
    p = _samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers",
               "--entity-name", "0", "--describe")
    assert p.stdout.splitlines() == ["Dynamic configs for broker 0 are:"]
    p = _samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers",
               "--entity-name", "0", "--describe", "--all")
    assert p.stdout.splitlines()[0] == "All configs for broker 0 are:"
    assert "  log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" \
        "log.retention.ms=7200000, " in p.stdout
    # A refused change is one line and a non-zero exit.
    p = _samsa("configs", "--bootstrap-server", broker.bootstrap, "--entity-type", "brokers",
               "--entity-name", "0", "--alter", "--add-config", "broker.id=9")
    assert p.returncode == 1 and "INVALID_REQUEST" in p.stderr and "Traceback" not in p.stderr


def test_get_offsets_latest_earliest_and_by_time(broker):
    _topic(broker, "o", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    before = int(time.time() * 1000)
    for i in range(5):
        producer.produce("o", b"a", partition=0, timestamp=before - 10_000 + i)
    for i in range(3):
        producer.produce("o", b"b", partition=1, timestamp=before + i)
    assert producer.flush(30) == 0
    p = _samsa("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", "o")
    assert p.returncode == 0 and p.stdout.splitlines() == ["o:0:5", "o:1:3"]
    p = _samsa("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", "o",
               "--time", "-2", "--partitions", "1")
    assert p.stdout.splitlines() == ["o:1:0"]
    p = _samsa("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", "o",
               "--time", str(before - 10_000 + 2))
    assert p.stdout.splitlines() == ["o:0:2", "o:1:0"]
    p = _samsa("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", "o",
               "--time", "-3")
    assert p.stdout.splitlines() == ["o:0:4", "o:1:2"]
    p = _samsa("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", "nope")
    assert p.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in p.stderr
    p = _samsa("get-offsets", "--bootstrap-server", broker.bootstrap, "--topic", "o",
               "--partitions", "7")
    assert p.returncode == 1 and "no partition(s) 7" in p.stderr


def test_consumer_groups_list_and_describe_with_lag(broker):
    from confluent_kafka import Consumer

    _topic(broker, "g-topic", partitions=2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(10):
        producer.produce("g-topic", b"v", partition=i % 2)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "readers",
                         "client.id": "reader-1", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})
    consumer.subscribe(["g-topic"])
    try:
        seen = 0
        deadline = time.monotonic() + 60
        while seen < 6 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen += 1
                if seen == 6:
                    consumer.commit(asynchronous=False)
        assert seen == 6
        p = _samsa("consumer-groups", "--bootstrap-server", broker.bootstrap, "--list")
        assert p.returncode == 0 and "readers" in p.stdout.split()
        p = _samsa("consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe",
                   "--group", "readers")
        assert p.returncode == 0, p.stderr
        lines = [line.split() for line in p.stdout.strip().splitlines()]
        assert lines[0] == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET",
                            "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
        rows = {int(r[2]): r for r in lines[1:]}
        assert sorted(rows) == [0, 1]
        assert sum(int(r[3]) for r in rows.values()) == 6       # committed
        assert all(r[4] == "5" for r in rows.values())          # log end
        assert sum(int(r[5]) for r in rows.values()) == 4       # lag
        assert all(r[8] == "reader-1" and r[6] != "-" for r in rows.values())
    finally:
        consumer.close()
    p = _samsa("consumer-groups", "--bootstrap-server", broker.bootstrap, "--describe",
               "--group", "nobody")
    assert p.returncode == 1 and "Consumer group 'nobody' does not exist." in p.stderr
