"""Listeners and TLS with real clients: librdkafka, kafka-python and the Java
client over SSL with the properties they use against Kafka; mutual TLS and its
refusals; one port per listener in Metadata; a 3-broker cluster replicating
over an SSL inter-broker listener; garbage on the SSL port.

One broker serves the module, with four listeners:
  PLAINTEXT  plaintext
  SSL        TLS, no client certificate asked for
  MTLS       TLS with ssl.client.auth=required (a per-listener override)
  SASL_SSL   SASL PLAIN inside TLS
"""
from __future__ import annotations

import json
import random
import shutil
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess
from tests.support.cluster import Cluster
from tests.support.java_client import JavaTools
from tests.support.kafka_wire import api_versions_v0_request, free_port
from tests.support.tls_certs import CLIENT_SUBJECT, make_certs

pytestmark = pytest.mark.timeout(240)

RECORDS = 500
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" user_alice="alice-secret";')


def _tls_settings(certs) -> dict[str, str]:
    return {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.server),
            "ssl.truststore.type": "PEM", "ssl.truststore.location": str(certs.ca)}


class _Broker:
    def __init__(self, process: BrokerProcess, ports: dict[str, int], certs) -> None:
        self.process = process
        self.ports = ports
        self.certs = certs

    def address(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


@pytest.fixture(scope="module")
def certs():
    work = Path(tempfile.mkdtemp(prefix="samsa-tls-certs-"))
    yield make_certs(work)
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="module")
def tls_broker(certs):
    work = Path(tempfile.mkdtemp(prefix="samsa-tls-"))
    ports = {"PLAINTEXT": free_port(), "SSL": free_port(), "MTLS": free_port(),
             "SASL_SSL": free_port()}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    process = BrokerProcess(work, port=ports["PLAINTEXT"], overrides={
        "listeners": listeners, "advertised.listeners": listeners,
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL",
        "listener.name.mtls.ssl.client.auth": "required",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        # a half-finished handshake must not hold its connection for 10 minutes
        "connections.max.idle.ms": "4000",
        **_tls_settings(certs)})
    try:
        yield _Broker(process.start(), ports, certs)
    finally:
        try:
            process.stop()
        finally:
            shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(autouse=True)
def _log_tail_on_failure(request):
    yield
    if "tls_broker" not in request.fixturenames:
        return
    reports = (getattr(request.node, f"_samsa_report_{when}", None) for when in ("setup", "call"))
    if any(getattr(r, "failed", False) for r in reports):
        log = request.getfixturevalue("tls_broker").process.log_tail(80)
        print(f"\n--- samsa broker log tail ---\n{log}", file=sys.stderr)


def _topic() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


def _rdkafka(b: _Broker, listener: str = "SSL", **extra) -> dict:
    conf = {"bootstrap.servers": b.address(listener), "security.protocol": "SSL",
            "ssl.ca.location": str(b.certs.ca)}
    if listener == "PLAINTEXT":
        conf = {"bootstrap.servers": b.address(listener)}
    return {**conf, **extra}


def _rdkafka_round_trip(conf: dict, topic: str, count: int) -> list[bytes]:
    errors = []
    p = Producer({**conf, "acks": "all", "linger.ms": 5})
    for i in range(count):
        p.produce(topic, b"r%d" % i, on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(60) == 0 and not errors, errors
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and not m.error():
                got.append(m.value())
        return got
    finally:
        c.close()


def _metadata_ports(conf: dict) -> set[int]:
    md = AdminClient(conf).list_topics(timeout=20)
    return {b.port for b in md.brokers.values()}


# ------------------------------------------------------------------ clients over SSL

def test_librdkafka_produces_and_consumes_over_ssl(tls_broker):
    topic = _topic()
    got = _rdkafka_round_trip(_rdkafka(tls_broker), topic, RECORDS)
    assert got == [b"r%d" % i for i in range(RECORDS)]


def test_kafka_python_produces_and_consumes_over_ssl(tls_broker):
    from kafka import KafkaConsumer, KafkaProducer
    topic = _topic()
    ssl_args = dict(bootstrap_servers=tls_broker.address("SSL"), security_protocol="SSL",
                    ssl_cafile=str(tls_broker.certs.ca))
    producer = KafkaProducer(acks="all", **ssl_args)
    try:
        for f in [producer.send(topic, b"k%d" % i) for i in range(RECORDS)]:
            f.get(timeout=30)
    finally:
        producer.close()
    # In a group: FindCoordinator must answer with the SSL listener's port too.
    consumer = KafkaConsumer(topic, group_id=f"g-{topic}", auto_offset_reset="earliest",
                             consumer_timeout_ms=20000, enable_auto_commit=False, **ssl_args)
    try:
        got = [m.value for _, m in zip(range(RECORDS), consumer)]
    finally:
        consumer.close()
    assert got == [b"k%d" % i for i in range(RECORDS)]


def _java_ssl(certs, *, keystore: bool = False, truststore=None) -> list[str]:
    props = {"security.protocol": "SSL", "ssl.truststore.type": "PEM",
             "ssl.truststore.location": str(truststore or certs.ca)}
    if keystore:
        props.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(certs.client_keystore)})
    return [f"{k}={v}" for k, v in props.items()]


def _flags(flag: str, props: list[str]) -> list[str]:
    return [x for p in props for x in (flag, p)]


def test_java_client_produces_and_consumes_over_ssl_and_mutual_tls(java_tools: JavaTools, tls_broker):
    b, topic = tls_broker, _topic()
    lines = [f"line-{i}" for i in range(RECORDS)]
    java_tools.produce(b.address("SSL"), topic, lines, "--acks", "all",
                       *_flags("--producer-property", _java_ssl(b.certs))).check()
    # With a client certificate on the listener that requires one: the broker
    # names the client by its certificate's subject.
    log_mark = len(b.process.log_tail(100000))
    java_tools.produce(b.address("MTLS"), topic, ["from-alice"],
                       *_flags("--producer-property", _java_ssl(b.certs, keystore=True))).check()
    res = java_tools.consume(b.address("SSL"), topic, "--from-beginning", "--max-messages",
                             RECORDS + 1, "--timeout-ms", 30000,
                             *_flags("--consumer-property", _java_ssl(b.certs))).check()
    assert res.lines == lines + ["from-alice"]
    assert f"principal User:{CLIENT_SUBJECT}" in b.process.log_tail(100000)[log_mark:]


def test_java_client_without_certificate_is_refused_by_mutual_tls(java_tools: JavaTools, tls_broker):
    b = tls_broker
    res = java_tools.admin_info(b.address("MTLS"), "--describe-cluster",
                                *_flags("--admin-property", _java_ssl(b.certs)), timeout=90)
    assert res.rc != 0
    assert "SslAuthenticationException" in res.stdout + res.stderr


def test_sasl_ssl_with_every_client(java_tools: JavaTools, tls_broker):
    """SASL PLAIN inside TLS, each client with its usual properties; a wrong
    password is refused as Kafka refuses it."""
    b, topic = tls_broker, _topic()
    sasl = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
            "sasl.username": "alice", "sasl.password": "alice-secret"}
    got = _rdkafka_round_trip({**_rdkafka(b, "SASL_SSL"), **sasl}, topic, 100)
    assert got == [b"r%d" % i for i in range(100)]

    from kafka import KafkaConsumer
    consumer = KafkaConsumer(topic, bootstrap_servers=b.address("SASL_SSL"),
                             security_protocol="SASL_SSL", ssl_cafile=str(b.certs.ca),
                             sasl_mechanism="PLAIN", sasl_plain_username="alice",
                             sasl_plain_password="alice-secret", auto_offset_reset="earliest",
                             group_id=f"g-{topic}",
                             consumer_timeout_ms=20000, enable_auto_commit=False)
    try:
        assert [m.value for _, m in zip(range(100), consumer)] == got
    finally:
        consumer.close()

    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            'username="alice" password="alice-secret";')
    java = [*(p for p in _java_ssl(b.certs) if not p.startswith("security.protocol=")),
            "security.protocol=SASL_SSL", "sasl.mechanism=PLAIN",
            f"sasl.jaas.config={jaas}"]
    java_tools.produce(b.address("SASL_SSL"), topic, ["from-java"],
                       *_flags("--producer-property", java)).check()

    wrong = _rdkafka_refused({**_rdkafka(b, "SASL_SSL"), **sasl, "sasl.password": "nope"})
    assert "Authentication failed" in wrong, wrong


def _samsa(*args: str) -> "subprocess.CompletedProcess[str]":
    from tests.support.broker_process import REPO_ROOT
    return subprocess.run([sys.executable, "-m", "samsa", *args], capture_output=True, text=True,
                          timeout=60, cwd=REPO_ROOT)


def test_samsa_tools_over_ssl_and_mutual_tls_with_command_config(tls_broker, tmp_path):
    b, topic = tls_broker, _topic()
    ssl_props = tmp_path / "ssl.properties"
    ssl_props.write_text("security.protocol=SSL\nssl.truststore.type=PEM\n"
                         f"ssl.truststore.location={b.certs.ca}\n")
    mtls_props = tmp_path / "mtls.properties"
    mtls_props.write_text(ssl_props.read_text() + "ssl.keystore.type=PEM\n"
                          f"ssl.keystore.location={b.certs.client_keystore}\n")
    made = _samsa("topics", "--bootstrap-server", b.address("SSL"), "--command-config",
                  str(ssl_props), "--create", "--topic", topic, "--partitions", "2")
    assert made.returncode == 0, made.stderr
    listed = _samsa("topics", "--bootstrap-server", b.address("MTLS"), "--command-config",
                    str(mtls_props), "--list")
    assert listed.returncode == 0 and topic in listed.stdout.split(), listed.stderr
    groups = _samsa("consumer-groups", "--bootstrap-server", b.address("SSL"), "--command-config",
                    str(ssl_props), "--list")
    assert groups.returncode == 0, groups.stderr
    sasl_ssl = tmp_path / "sasl_ssl.properties"
    sasl_ssl.write_text(ssl_props.read_text().replace("security.protocol=SSL", "security.protocol=SASL_SSL")
                        + "sasl.mechanism=PLAIN\nsasl.jaas.config=" + PLAIN_JAAS.replace(
                            'username="admin" password="admin-secret" user_alice="alice-secret"',
                            'username="alice" password="alice-secret"') + "\n")
    described = _samsa("topics", "--bootstrap-server", b.address("SASL_SSL"), "--command-config",
                       str(sasl_ssl), "--describe", "--topic", topic)
    assert described.returncode == 0 and topic in described.stdout, described.stderr
    # Without a certificate the listener that requires one refuses: one line, no traceback.
    refused = _samsa("topics", "--bootstrap-server", b.address("MTLS"), "--command-config",
                     str(ssl_props), "--list")
    assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr


# ------------------------------------------------------------------ listeners

def test_metadata_answers_with_the_port_of_the_listener_asked(tls_broker):
    b = tls_broker
    assert _metadata_ports(_rdkafka(b, "PLAINTEXT")) == {b.ports["PLAINTEXT"]}
    assert _metadata_ports(_rdkafka(b, "SSL")) == {b.ports["SSL"]}
    mtls = _rdkafka(b, "MTLS", **{"ssl.certificate.location": str(b.certs.client_cert),
                                  "ssl.key.location": str(b.certs.client_key)})
    assert _metadata_ports(mtls) == {b.ports["MTLS"]}


# ------------------------------------------------------------------ refusals

def _rdkafka_refused(conf: dict) -> str:
    """The error librdkafka reports when it cannot get metadata."""
    errors: list[str] = []
    admin = AdminClient({**conf, "error_cb": lambda err: errors.append(str(err)),
                         "reconnect.backoff.ms": 500})
    with pytest.raises(KafkaException):
        admin.list_topics(timeout=2)
    deadline = time.monotonic() + 30  # a hang guard: the error comes within a second
    while not errors and time.monotonic() < deadline:
        admin.poll(0.2)  # serves error_cb
    return " ".join(errors)


def test_mutual_tls_refuses_no_certificate_and_a_foreign_ca(tls_broker):
    b = tls_broker
    none = _rdkafka_refused(_rdkafka(b, "MTLS"))
    assert "SSL handshake failed" in none or "certificate required" in none, none
    foreign = _rdkafka_refused(_rdkafka(b, "MTLS", **{"ssl.certificate.location": str(b.certs.rogue_cert),
                                                      "ssl.key.location": str(b.certs.rogue_key)}))
    assert "SSL handshake failed" in foreign or "unknown ca" in foreign, foreign


def test_untrusted_broker_certificate_is_refused_by_clients(tls_broker):
    b = tls_broker
    err = _rdkafka_refused({**_rdkafka(b), "ssl.ca.location": str(b.certs.rogue_ca)})
    assert "certificate verify failed" in err, err


# ------------------------------------------------------------------ garbage

def _client_hello() -> bytes:
    """The first bytes a real TLS client sends (from an in-memory handshake)."""
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


def _closed_by_broker(sock: socket.socket, timeout: float = 30.0) -> bool:
    """Read until the broker closes (EOF or reset); False if it keeps the socket
    open. Whatever it sent before closing must be TLS records (an alert, a
    server hello), never a Kafka response."""
    sock.settimeout(timeout)
    received = b""
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            received += data
    except ConnectionResetError:
        pass
    except socket.timeout:
        return False
    assert not received or received[0] in (0x15, 0x16), received[:16]  # alert, handshake
    return True


def test_tls_garbage_closes_those_connections_and_the_broker_keeps_serving(tls_broker):
    b = tls_broker
    port = b.ports["SSL"]
    rng = random.Random(16)
    hello = _client_hello()
    payloads = [bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4096))) for _ in range(20)]
    payloads += [hello[:n] + bytes(rng.getrandbits(8) for _ in range(64))
                 for n in (5, 11, len(hello) // 2, len(hello) - 1)]  # truncated hellos, then garbage
    payloads += [api_versions_v0_request(1), b"\x16\x03\x01\xff\xff" + b"\x00" * 100]
    for data in payloads:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(data)
            s.shutdown(socket.SHUT_WR)
            assert _closed_by_broker(s), data[:16]
    # A handshake begun and left: closed when idle (connections.max.idle.ms).
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(hello)
        assert _closed_by_broker(s, timeout=60)
    # Still serving, on both kinds of listener.
    topic = _topic()
    assert _rdkafka_round_trip(_rdkafka(b), topic, 10) == [b"r%d" % i for i in range(10)]
    assert _metadata_ports(_rdkafka(b, "PLAINTEXT")) == {b.ports["PLAINTEXT"]}
    log = b.process.log_tail(100000)
    assert "Traceback" not in log
    assert "TLS handshake failed" in log


# ------------------------------------------------------------------ cluster

class _SslCluster(Cluster):
    """Brokers with a PLAINTEXT listener (readiness probe) and an SSL one that
    they replicate over (inter.broker.listener.name=SSL); brokers 0 and 1 have
    a third listener, EXTRA, that broker 2 lacks."""

    def __init__(self, work_dir: Path, certs) -> None:
        super().__init__(work_dir, size=3)
        self.certs = certs
        self.ssl_ports = {i: free_port() for i in range(3)}
        self.extra_ports = {i: free_port() for i in range(2)}

    def broker_process(self, broker_id: int, work_dir: Path | None = None) -> BrokerProcess:
        port, ssl_port = free_port(), self.ssl_ports[broker_id]
        listeners = f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{ssl_port}"
        if broker_id in self.extra_ports:
            listeners += f",EXTRA://127.0.0.1:{self.extra_ports[broker_id]}"
        return BrokerProcess(work_dir or self.work_dir / f"broker-{broker_id}", port=port,
                             broker_id=broker_id, overrides={
                                 "zookeeper.connect": self.zookeeper_connect, **self.overrides,
                                 "listeners": listeners, "advertised.listeners": listeners,
                                 "inter.broker.listener.name": "SSL",
                                 "listener.security.protocol.map":
                                     "PLAINTEXT:PLAINTEXT,SSL:SSL,EXTRA:PLAINTEXT",
                                 "ssl.client.auth": "required",
                                 "default.replication.factor": "3", "min.insync.replicas": "2",
                                 **_tls_settings(self.certs)})


def test_cluster_replicates_over_an_ssl_inter_broker_listener(certs):
    from tests.integration.conftest import require_zookeeper
    require_zookeeper()
    work = Path(tempfile.mkdtemp(prefix="samsa-tls-cluster-"))
    cluster = _SslCluster(work, certs)
    ok = False
    try:
        cluster.start()
        topic = _topic()
        conf = {"bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in cluster.ssl_ports.values()),
                "security.protocol": "SSL", "ssl.ca.location": str(certs.ca),
                "ssl.certificate.location": str(certs.client_cert),
                "ssl.key.location": str(certs.client_key)}
        admin = AdminClient(conf)
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        assert _metadata_ports(conf) == set(cluster.ssl_ports.values())
        got = _rdkafka_round_trip(conf, topic, RECORDS)
        assert got == [b"r%d" % i for i in range(RECORDS)]
        # acks=all was answered with all three replicas in the ISR: the
        # followers fetched every record, over TLS with their certificates
        # (the SSL listener is the only address brokers know of each other).
        zk = cluster.zk_client()
        state = json.loads(zk.get(f"/brokers/topics/{topic}/partitions/0/state")[0])
        assert sorted(state["isr"]) == [0, 1, 2]
        registration = json.loads(zk.get("/brokers/ids/2")[0])
        assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
        assert f"SSL://127.0.0.1:{cluster.ssl_ports[2]}" in registration["endpoints"]

        # A listener broker 2 lacks: Metadata over it leaves broker 2 out, and
        # partitions it leads have no leader but LISTENER_NOT_FOUND, as Kafka answers.
        spread = _topic()
        admin.create_topics([NewTopic(spread, 3, 1)])[spread].result(30)
        extra = {"bootstrap.servers": f"127.0.0.1:{cluster.extra_ports[0]}"}
        assert _metadata_ports(extra) == set(cluster.extra_ports.values())
        led_by = {p.id: p.leader for p in admin.list_topics(spread, timeout=20)
                  .topics[spread].partitions.values()}
        assert 2 in led_by.values(), led_by
        seen = AdminClient(extra).list_topics(spread, timeout=20).topics[spread].partitions
        for pid, p in seen.items():
            if led_by[pid] == 2:
                assert p.leader == -1 and p.error is not None and p.error.code() == 72, p
            else:
                assert p.leader == led_by[pid] and p.error is None
        ok = True
    finally:
        if not ok:
            cluster.print_log_tails()
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
