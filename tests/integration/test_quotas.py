"""Client quotas as a user of Kafka's quotas notices them: quotas set and read
through the Java Admin client (AlterClientQuotas / DescribeClientQuotas) and
`samsa configs`, producers and consumers (Java, librdkafka, kafka-python)
slowed to their quota and told so through throttle time, old request versions
answered late instead of the connection being muted.

One broker serves the module, each test with its own client ids. It measures
over quota.window.num=2 one-second windows, so a client's burst allowance is
one window instead of Kafka's ten and a few seconds of traffic show the rate.
Rates are asserted with tolerant bounds (under 3x the quota), never equality.
"""
from __future__ import annotations

import subprocess
import sys
import re
import time
import urllib.request

import pytest
from confluent_kafka import Consumer, Producer

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import (AlterClientQuotasRequest, FetchRequest, MetadataRequest,
                                     ProduceRequest)
from samsa.protocol.records import build_batch
from tests.support.broker_process import broker_in_temp_dir

pytestmark = pytest.mark.timeout(180)

PRODUCE, FETCH, METADATA, ALTER_QUOTAS = 0, 1, 3, 49
RATE = 50_000          # bytes/s for the enforcement tests
VOLUME = 300_000       # bytes they move: ~5 s at RATE, well under 1 s without a quota
VALUE = b"q" * 1000


@pytest.fixture(scope="module")
def qbroker():
    with broker_in_temp_dir("samsa-quotas-", overrides={
            "quota.window.num": "2", "quota.window.size.seconds": "1"}, metrics=True) as b:
        yield b


@pytest.fixture(autouse=True)
def _log_tail_on_failure(request, qbroker):
    yield
    reports = (getattr(request.node, f"_samsa_report_{when}", None) for when in ("setup", "call"))
    if any(getattr(r, "failed", False) for r in reports):
        print(f"\n--- samsa broker log tail ---\n{qbroker.log_tail(80)}", file=sys.stderr)


def _set_quota(bootstrap: str, entity: list[tuple[str, str | None]], **quotas: float) -> None:
    R = AlterClientQuotasRequest
    with SimpleClient(bootstrap) as c:
        r = c.call(ALTER_QUOTAS, R(validate_only=False, entries=[R.EntryData(
            entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            ops=[R.OpData(key=k, value=float(v), remove=False) for k, v in quotas.items()])]))
    assert [e.error_code for e in r.entries] == [0]


def _create_topic(bootstrap: str, topic: str) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, b"")
    assert p.flush(30) == 0


# ------------------------------------------------------------ managing quotas

def test_java_admin_alters_and_describes_quotas(qbroker, java_tools):
    b = qbroker.bootstrap
    r = java_tools.run("AdminInfo", "--bootstrap-server", b, "--alter-quotas",
                       "--quota-entity", "user=alice", "--add-config", "producer_byte_rate=1024",
                       "--add-config", "consumer_byte_rate=2048")
    assert r.rc == 0, r.stderr
    r = java_tools.run("AdminInfo", "--bootstrap-server", b, "--alter-quotas",
                       "--quota-entity", "user=alice", "--quota-entity", "client-id=<default>",
                       "--add-config", "request_percentage=25.5")
    assert r.rc == 0, r.stderr
    r = java_tools.run("AdminInfo", "--bootstrap-server", b, "--describe-quotas",
                       "--quota-entity", "user=alice")
    assert r.rc == 0, r.stderr
    assert r.stdout.splitlines() == [
        "client-id=<default>,user=alice\trequest_percentage=25.5",
        "user=alice\tconsumer_byte_rate=2048.0,producer_byte_rate=1024.0"]
    # an unknown key is refused as Kafka refuses it, and nothing changes
    r = java_tools.run("AdminInfo", "--bootstrap-server", b, "--alter-quotas",
                       "--quota-entity", "user=alice", "--add-config", "producer_byte_rate=1",
                       "--add-config", "bogus_rate=1")
    assert r.rc != 0 and "InvalidRequestException" in r.stderr, r.stderr
    # the tool's form, through the same APIs: delete one key, describe
    tool = [sys.executable, "-m", "samsa", "configs", "--bootstrap-server", b]
    out = subprocess.run([*tool, "--alter", "--delete-config", "consumer_byte_rate",
                          "--entity-type", "users", "--entity-name", "alice"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "Completed updating config for user alice." in out.stdout
    out = subprocess.run([*tool, "--describe", "--entity-type", "users", "--entity-name", "alice"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == \
        "Quota configs for user-principal 'alice' are producer_byte_rate=1024.0"


def test_alter_client_quotas_refusals(qbroker):
    R = AlterClientQuotasRequest

    def entry(entity, *ops):
        return R.EntryData(entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                           ops=[R.OpData(key=k, value=v, remove=rm) for k, v, rm in ops])
    with SimpleClient(qbroker.bootstrap) as c:
        r = c.call(ALTER_QUOTAS, R(validate_only=False, entries=[
            entry([("user", "bob")], ("producer_byte_rate", 10.5, False)),   # LONG key
            entry([("group", "g")], ("producer_byte_rate", 1.0, False)),    # unknown type
            entry([("user", "bob"), ("user", "eve")], ("producer_byte_rate", 1.0, False)),
            entry([("ip", "1.2.3.4"), ("user", "bob")], ("producer_byte_rate", 1.0, False)),
            entry([("ip", "1.2.3.4")], ("producer_byte_rate", 1.0, False)),  # not an ip key
            entry([("ip", "not-an-ip")], ("connection_creation_rate", 1.0, False)),
            entry([("user", "bob")], ("producer_byte_rate", -1.0, False)),
            entry([("user", "bob")], ("producer_byte_rate", 100.0, False)),  # fine
            entry([("ip", "1.2.3.4")], ("connection_creation_rate", 5.0, False)),  # fine
        ]))
        assert [e.error_code for e in r.entries] == [42, 42, 42, 42, 42, 42, 42, 0, 0]
        # validate_only checks and writes nothing
        r = c.call(ALTER_QUOTAS, R(validate_only=True, entries=[
            entry([("user", "carol")], ("consumer_byte_rate", 5.0, False))]))
        assert [e.error_code for e in r.entries] == [0]
    out = subprocess.run([sys.executable, "-m", "samsa", "configs", "--bootstrap-server",
                          qbroker.bootstrap, "--describe", "--entity-type", "users"],
                         capture_output=True, text=True, timeout=60)
    assert "'bob' are producer_byte_rate=100.0" in out.stdout
    assert "carol" not in out.stdout
    out = subprocess.run([sys.executable, "-m", "samsa", "configs", "--bootstrap-server",
                          qbroker.bootstrap, "--describe", "--entity-type", "ips"],
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "Quota configs for ip '1.2.3.4' are connection_creation_rate=5.0"


# ------------------------------------------------------------ enforcement

def test_produce_quota_throttles_the_java_client(qbroker, java_tools):
    topic = "quota-java"
    _set_quota(qbroker.bootstrap, [("client-id", "quota-java")], producer_byte_rate=RATE)
    lines = "\n".join("j" * 1000 for _ in range(VOLUME // 1000)) + "\n"
    r = java_tools.run("ConsoleProducer", "--bootstrap-server", qbroker.bootstrap,
                       "--topic", topic, "--producer-property", "client.id=quota-java",
                       "--print-metric", "produce-throttle-time-max", input=lines, timeout=120)
    assert r.rc == 0, r.stderr
    (metric,) = [ln for ln in r.stderr.splitlines() if ln.startswith("produce-throttle-time-max=")]
    assert float(metric.split("=")[1]) > 0  # the client saw throttle time and says so


def test_produce_quota_throttles_librdkafka(qbroker):
    topic = "quota-rdkafka"
    _create_topic(qbroker.bootstrap, topic)
    _set_quota(qbroker.bootstrap, [("client-id", "quota-rdkafka")], producer_byte_rate=RATE)
    throttles = []
    p = Producer({"bootstrap.servers": qbroker.bootstrap, "client.id": "quota-rdkafka",
                  "linger.ms": 5, "batch.size": 16384, "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    started = time.monotonic()
    for _ in range(VOLUME // len(VALUE)):
        p.produce(topic, VALUE)
        p.poll(0)
    assert p.flush(120) == 0
    rate = VOLUME / (time.monotonic() - started)
    assert throttles and max(throttles) > 0
    assert 0 < rate < 3 * RATE, f"{rate:.0f} B/s against a quota of {RATE}"
    # the broker's own measurements, under the JMX exporter's names for
    # kafka.server:type=Produce,user=,client-id=
    with urllib.request.urlopen(f"http://127.0.0.1:{qbroker.metrics_port}/metrics",
                                timeout=10) as r:
        text = r.read().decode()
    for name in ("kafka_server_produce_byte_rate", "kafka_server_produce_throttle_time"):
        assert re.search(rf'^{name}{{client_id="quota-rdkafka",user=""}} [0-9.e+]+$', text, re.M), \
            f"{name} for quota-rdkafka missing"


def test_fetch_quota_throttles_a_consumer(qbroker):
    topic = "quota-fetch"
    # batches smaller than what the quota lets through in one window (a batch
    # larger than that could never be fetched under it, in Kafka as here)
    p = Producer({"bootstrap.servers": qbroker.bootstrap, "client.id": "unlimited",
                  "batch.size": 16384})
    for _ in range(VOLUME // len(VALUE)):
        p.produce(topic, VALUE)
    assert p.flush(60) == 0
    _set_quota(qbroker.bootstrap, [("client-id", "quota-consumer")], consumer_byte_rate=RATE)
    throttles = []
    c = Consumer({"bootstrap.servers": qbroker.bootstrap, "client.id": "quota-consumer",
                  "group.id": "quota-fetch", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    c.subscribe([topic])
    got = 0
    started = None
    deadline = time.monotonic() + 120
    try:
        while got < VOLUME and time.monotonic() < deadline:
            for m in c.consume(100, 1.0):
                if m.error() is None:
                    started = started or time.monotonic()
                    got += len(m.value())
    finally:
        c.close()
    assert got == VOLUME
    rate = VOLUME / (time.monotonic() - started)
    assert throttles and max(throttles) > 0
    assert 0 < rate < 3 * RATE, f"{rate:.0f} B/s against a quota of {RATE}"


def _cached_fetch_sessions(b) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{b.metrics_port}/metrics", timeout=10) as r:
        for line in r.read().decode().splitlines():
            if line.startswith("kafka_server_fetchsessioncache_numincrementalfetchsessions"):
                return float(line.split()[-1])
    raise AssertionError("no fetch session gauge")


def test_a_throttled_full_fetch_opens_no_session(qbroker):
    """Kafka answers a throttled full fetch (epoch 0) with session id 0 and no
    partitions: a session id there would be dropped by the client, which starts
    over with a full fetch, and the orphans would fill the session cache."""
    topic = "quota-session"
    p = Producer({"bootstrap.servers": qbroker.bootstrap, "client.id": "unlimited"})
    for _ in range(100):
        p.produce(topic, VALUE)
    assert p.flush(60) == 0
    _set_quota(qbroker.bootstrap, [("client-id", "quota-session")], consumer_byte_rate=20_000)
    before = _cached_fetch_sessions(qbroker)
    with SimpleClient(qbroker.bootstrap, client_id="quota-session") as c:
        r = c.call(FETCH, FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
            session_id=0, session_epoch=0, topics=[FetchRequest.FetchTopic(
                topic=topic, partitions=[FetchRequest.FetchPartition(
                    partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
            forgotten_topics_data=[], rack_id=""), highest=12)
    assert r.throttle_time_ms > 0 and r.responses == []
    assert r.session_id == 0
    assert _cached_fetch_sessions(qbroker) == before


def test_kafka_python_old_protocol_is_slowed_by_late_answers(qbroker):
    from kafka import KafkaProducer
    topic = "quota-kpython"
    _create_topic(qbroker.bootstrap, topic)
    _set_quota(qbroker.bootstrap, [("client-id", "quota-kpython")], producer_byte_rate=RATE)
    p = KafkaProducer(bootstrap_servers=qbroker.bootstrap, client_id="quota-kpython",
                      api_version=(0, 10, 1), linger_ms=5)
    started = time.monotonic()
    futures = [p.send(topic, VALUE) for _ in range(VOLUME // len(VALUE))]
    p.flush(120)
    rate = VOLUME / (time.monotonic() - started)
    p.close()
    assert all(f.succeeded() for f in futures)
    assert 0 < rate < 3 * RATE, f"{rate:.0f} B/s against a quota of {RATE}"


def _produce(client: SimpleClient, topic: str, size: int, version: int):
    batch = build_batch([(None, b"w" * size, [], None)])
    return client.call(PRODUCE, ProduceRequest(acks=1, timeout_ms=5000, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=0, records=batch)])]), highest=version)


def test_kip_219_mutes_the_connection_older_versions_get_late_answers(qbroker):
    topic = "quota-wire"
    _create_topic(qbroker.bootstrap, topic)
    quota = 10_000
    size = 40_000   # over one 1 s window: (40k/s - 10k/s) / 10k/s * 1 s = about 3 s
    for client_id, version in (("wire-new", 7), ("wire-old", 3)):
        _set_quota(qbroker.bootstrap, [("client-id", client_id)], producer_byte_rate=quota)
    with SimpleClient(qbroker.bootstrap, client_id="wire-new") as c:
        sent = time.monotonic()
        r = _produce(c, topic, size, 7)
        answered = time.monotonic() - sent
        throttle = r.throttle_time_ms / 1000.0
        assert r.responses[0].partition_responses[0].error_code == 0
        assert throttle > 1.0
        assert answered < throttle            # the answer came at once...
        c.call(METADATA, MetadataRequest(topics=[]))
        # ...and the connection was not read until the throttle time was over
        assert time.monotonic() - sent >= throttle * 0.9
    with SimpleClient(qbroker.bootstrap, client_id="wire-old") as c:
        sent = time.monotonic()
        r = _produce(c, topic, size, 3)
        answered = time.monotonic() - sent
        assert r.responses[0].partition_responses[0].error_code == 0
        # Produce v3 has a throttle_time_ms field but its clients do not back
        # off by themselves: the answer itself is what waits
        assert r.throttle_time_ms > 1000
        assert answered >= r.throttle_time_ms / 1000.0 * 0.9


def test_request_percentage_throttles_any_api(qbroker):
    """request_percentage counts handler time; a tiny one throttles even
    Metadata requests, with the throttle bounded by one quota window."""
    _set_quota(qbroker.bootstrap, [("client-id", "req-time")], request_percentage=0.001)

    def throttle() -> int:
        with SimpleClient(qbroker.bootstrap, client_id="req-time") as c:
            return c.call(METADATA, MetadataRequest(topics=None)).throttle_time_ms
    got = throttle() or throttle()
    assert 0 < got <= 1000   # quota.window.size.seconds = 1
    with SimpleClient(qbroker.bootstrap, client_id="not-limited") as c:
        assert c.call(METADATA, MetadataRequest(topics=None)).throttle_time_ms == 0
