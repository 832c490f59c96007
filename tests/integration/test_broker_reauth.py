"""Brokers re-authenticate their own SASL connections to each other (KIP-368).

Three brokers with only a SASL_PLAINTEXT listener (also the inter-broker one;
the brokers log in as ``admin`` with PLAIN) and short SASL sessions
(``connections.max.reauth.ms``). An RF=3 topic takes acks=all writes and
transactions from real clients (librdkafka, as ``alice``) for several
session lifetimes, so each broker's replica fetchers, and the transaction
coordinator's marker and verification connections, use their connections to
the other brokers throughout. As Kafka's brokers do, they re-authenticate
those connections before the sessions end: the brokers' logs show the
re-authentications, and no broker closes another's connection for an ended
session (it would, and log it, for a connection used after its session
ended), and every acknowledged record and committed transaction is read back.

A single broker with short sessions checks the same rule on one connection of
each of samsa's clients: KafkaConnection (the brokers') under pipelined
requests and with a re-authentication the broker refuses, and SimpleClient
(the command-line tools').
"""
from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import shutil
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.aio import ConnectionClosedError, KafkaConnection
from samsa.client.blocking import SimpleClient
from samsa.client.sasl import SaslClientSettings
from samsa.protocol.messages import AlterUserScramCredentialsRequest, MetadataRequest
from tests.integration.conftest import require_zookeeper
from tests.support.broker_process import broker_in_temp_dir
from tests.support.cluster import SaslPlaintextCluster
from tests.support.kafka_wire import free_port

pytestmark = pytest.mark.timeout(240)

REAUTH_MS = 3000
LIFETIMES = 4  # how long the writes go on, in session lifetimes
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" '
              'user_admin="admin-secret" user_alice="alice-secret";')
BROKER_PRINCIPAL = "User:admin"  # the JAAS entry's username: how brokers log in
# broker/handlers/sasl.py's line for a connection used after its session ended
EXPIRED = re.compile(r"closing connection \S+: SASL session of (\S+) expired")
# client/aio.py's line for a re-authentication the other broker accepted
REAUTHENTICATED = re.compile(r"re-authenticated to (\S+) as admin with SASL/PLAIN")


@pytest.fixture
def cluster():
    require_zookeeper()
    work = Path(tempfile.mkdtemp(prefix="samsa-broker-reauth-"))
    c = SaslPlaintextCluster(work, 3, offsets_partitions=1, overrides={
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": REAUTH_MS,
        "offsets.topic.replication.factor": 1,
        "transaction.state.log.num.partitions": 1,
        "transaction.state.log.replication.factor": 3,
        "transaction.state.log.min.isr": 2,
    })
    try:
        c.start()
        yield c
    except BaseException:
        c.print_log_tails()
        raise
    finally:
        c.stop()
        shutil.rmtree(work, ignore_errors=True)


def _client_conf(bootstrap: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": "alice",
            "sasl.password": "alice-secret"}


def _read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumer = Consumer({**_client_conf(bootstrap), "group.id": f"check-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    values: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(values) < expected and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
    finally:
        consumer.close()
    return values


def test_brokers_reauthenticate_their_connections_to_each_other(cluster):
    bootstrap = cluster.bootstrap
    topic = f"reauth-{uuid.uuid4().hex[:8]}"
    admin = AdminClient(_client_conf(bootstrap))
    # three partitions, one led by each broker: every broker fetches from both others
    admin.create_topics([NewTopic(topic, 3, 3, config={"min.insync.replicas": "2"})]
                        )[topic].result(timeout=30)
    cluster.wait_for_leaders(topic, 3)
    marks = cluster.log_marks()

    producer = Producer({**_client_conf(bootstrap), "acks": "all", "linger.ms": 5})
    # transactions across the three partitions: the coordinator writes markers
    # to the other leaders, which verify each first write with the coordinator
    transactional = Producer({**_client_conf(bootstrap), "linger.ms": 5,
                              "transactional.id": f"reauth-{uuid.uuid4().hex[:8]}"})
    transactional.init_transactions(60)
    committed: list[bytes] = []
    acknowledged: list[bytes] = []
    failed: list[str] = []

    def delivered(err, msg):
        if err is None:
            acknowledged.append(msg.value())
        else:
            failed.append(str(err))
    started, sent = time.monotonic(), 0
    # Writes for several session lifetimes: each fetcher connection outlives
    # its first sessions and must be re-authenticated to go on.
    while time.monotonic() - started < LIFETIMES * REAUTH_MS / 1000:
        producer.produce(topic, f"r{sent}".encode(), partition=sent % 3,
                         on_delivery=delivered)
        sent += 1
        producer.poll(0.01)
        if sent % 20 == 0:
            transactional.begin_transaction()
            batch = [f"t{sent}-{p}".encode() for p in range(3)]
            for p, value in enumerate(batch):
                transactional.produce(topic, value, partition=p)
            transactional.commit_transaction(30)
            committed += batch
    assert producer.flush(60) == 0
    assert acknowledged, failed
    assert committed

    read = _read_all(bootstrap, topic, len(acknowledged) + len(committed))
    missing = (set(acknowledged) | set(committed)) - set(read)
    assert not missing, sorted(missing)[:10]

    logs = {b: cluster.brokers[b].log_path.read_bytes()[marks[b]:].decode(errors="replace")
            for b in range(3)}
    # No broker cut off another's connection for an ended session ...
    expired = {b: [p for p in EXPIRED.findall(text) if p == BROKER_PRINCIPAL]
               for b, text in logs.items()}
    assert expired == {0: [], 1: [], 2: []}, expired
    assert not any("SASL re-authentication to" in text for text in logs.values())
    # ... because each broker re-authenticated its connections to the other two
    # (the leaders it fetches from), each about once a lifetime (and those of
    # the transaction coordinator, which may be its own listener).
    others = {b: {f"127.0.0.1:{cluster.brokers[o].port}" for o in range(3) if o != b}
              for b in range(3)}
    reauthenticated = {b: REAUTHENTICATED.findall(text) for b, text in logs.items()}
    for b in range(3):
        assert others[b] <= set(reauthenticated[b]), (b, reauthenticated[b])
        assert len(reauthenticated[b]) >= 2 * (LIFETIMES - 2), (b, reauthenticated[b])


# ---------------------------------------------------------------- one broker

SINGLE_REAUTH_MS = 2000
ALICE = SaslClientSettings("PLAIN", "alice", "alice-secret")
ADMIN = SaslClientSettings("PLAIN", "admin", "admin-secret")
METADATA = MetadataRequest(topics=None, allow_auto_topic_creation=False)


@pytest.fixture(scope="module")
def reauth_broker():
    """One broker whose SASL sessions last SINGLE_REAUTH_MS."""
    port = free_port()
    with broker_in_temp_dir("samsa-client-reauth-", port=port, overrides={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": SINGLE_REAUTH_MS,
        "offsets.topic.num.partitions": "1",
    }) as b:
        yield b


def _broker_log_since(broker, mark: int) -> str:
    return broker.log_path.read_bytes()[mark:].decode(errors="replace")


async def test_pipelined_connection_reauthenticates_between_requests(reauth_broker, caplog):
    caplog.set_level(logging.INFO, logger="broker.aio_client")
    mark = len(reauth_broker.log_path.read_bytes())
    conn = await KafkaConnection.connect(reauth_broker.host, reauth_broker.port, sasl=ALICE)
    answered = 0

    async def keep_asking(until: float) -> None:
        nonlocal answered
        while asyncio.get_running_loop().time() < until:
            assert (await conn.call(METADATA, api_key=3)).brokers
            answered += 1
    try:
        # four callers, so requests are in flight whenever re-authentication
        # comes due: it waits for their answers and the calls behind it wait
        until = asyncio.get_running_loop().time() + 3 * SINGLE_REAUTH_MS / 1000
        await asyncio.gather(*(keep_asking(until) for _ in range(4)))
        assert not conn.closed
    finally:
        await conn.close()
    reauthentications = [r for r in caplog.records
                         if r.getMessage().startswith(f"re-authenticated to {reauth_broker.bootstrap}"
                                                      " as alice with SASL/PLAIN")]
    assert len(reauthentications) >= 2, [r.getMessage() for r in caplog.records]
    assert answered > 4
    assert "SASL session of User:alice expired" not in _broker_log_since(reauth_broker, mark)


async def test_refused_reauthentication_closes_the_connection(reauth_broker, caplog):
    caplog.set_level(logging.INFO, logger="broker.aio_client")
    salt = b"reauth-salt"
    salted = hashlib.pbkdf2_hmac("sha256", b"zoe-secret", salt, 4096)
    A = AlterUserScramCredentialsRequest
    admin = await KafkaConnection.connect(reauth_broker.host, reauth_broker.port, sasl=ADMIN)
    try:
        created = await admin.call(A(deletions=[], upsertions=[A.ScramCredentialUpsertion(
            name="zoe", mechanism=1, iterations=4096, salt=salt, salted_password=salted)]),
            api_key=51)
        assert [r.error_code for r in created.results] == [0]
        zoe = await KafkaConnection.connect(reauth_broker.host, reauth_broker.port,
                                            sasl=SaslClientSettings("SCRAM-SHA-256", "zoe",
                                                                    "zoe-secret"))
        try:
            assert (await zoe.call(METADATA, api_key=3)).brokers
            # zoe's credential goes: her next login, the re-authentication, is refused
            deleted = await admin.call(A(deletions=[A.ScramCredentialDeletion(
                name="zoe", mechanism=1)], upsertions=[]), api_key=51)
            assert [r.error_code for r in deleted.results] == [0]
            await asyncio.sleep(SINGLE_REAUTH_MS / 1000)  # the session ends
            with pytest.raises(ConnectionClosedError,
                               match=f"SASL re-authentication to {reauth_broker.bootstrap} "
                                     "failed: SASL authentication at .* failed: Authentication "
                                     "failed during authentication due to invalid credentials"):
                await zoe.call(METADATA, api_key=3)
            assert zoe.closed
        finally:
            await zoe.close()
    finally:
        await admin.close()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(m.startswith(f"SASL re-authentication to {reauth_broker.bootstrap} failed")
               and m.endswith("closing the connection") for m in warnings), warnings


def test_tool_client_reauthenticates_on_the_same_connection(reauth_broker):
    mark = len(reauth_broker.log_path.read_bytes())
    with SimpleClient(reauth_broker.bootstrap, sasl=ALICE) as client:
        sock = client.sock
        # requests all along, and one after the session has ended unused (a
        # console consumer between records): each finds the session renewed
        started = time.monotonic()
        while time.monotonic() - started < 2 * SINGLE_REAUTH_MS / 1000:
            assert client.call(3, METADATA).brokers
            time.sleep(0.05)
        time.sleep(1.2 * SINGLE_REAUTH_MS / 1000)
        assert client.call(3, METADATA).brokers
        assert client.sock is sock  # the same connection, never replaced
    assert "SASL session of User:alice expired" not in _broker_log_since(reauth_broker, mark)
