"""SASL on a SASL_PLAINTEXT listener, driven by real clients as against Kafka.

One broker serves the module, with a single SASL_PLAINTEXT listener serving
PLAIN (users from the listener's JAAS config), SCRAM-SHA-256 and SCRAM-SHA-512
(credentials in the users' entity configs). Each client connects with exactly
the properties it would use against Kafka; wrong passwords and unknown users
get the error each client reports against Kafka. Raw-socket cases check the
gate: an unauthenticated connection is answered nothing but ApiVersions and
SASL, and bad SASL input closes the connection without harming the broker.
"""
from __future__ import annotations

import base64
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (ApiVersionsRequest, MetadataRequest, RequestHeader,
                               SaslAuthenticateRequest, SaslHandshakeRequest, decode_response,
                               encode_request)
from tests.support.broker_process import BrokerProcess
from tests.support.java_client import JavaTools
from tests.support.kafka_wire import free_port

pytestmark = pytest.mark.timeout(180)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" '
              'user_admin="admin-secret" user_alice="alice-secret";')
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
PLAIN_FAILED = "Authentication failed: Invalid username or password"
ADMIN = ("admin", "admin-secret")  # a PLAIN user: sets up the SCRAM users
SCRAM_USERS = {"SCRAM-SHA-256": ("sam256", "sam256-secret"),
               "SCRAM-SHA-512": ("sam512", "sam512-secret")}


def scram_failed(mechanism: str) -> str:
    return ("Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {mechanism}")


def rdkafka_admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient(_rdkafka_conf(bootstrap, "PLAIN", *ADMIN))


def upsert_scram(bootstrap: str, user: str, password: str, mechanism: str,
                 iterations: int = 8192) -> None:
    """Create or replace a SCRAM credential with AlterUserScramCredentials, the
    way an operator does it with a Kafka client's Admin API."""
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)
    m = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256,
         "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}[mechanism]
    admin = rdkafka_admin(bootstrap)  # kept: the futures die with their client
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion(user, ScramCredentialInfo(m, iterations),
                                      password.encode())])
    for f in futures.values():
        f.result(timeout=30)


@pytest.fixture(scope="module")
def sasl_broker():
    work_dir = Path(tempfile.mkdtemp(prefix="samsa-sasl-"))
    port = free_port()
    b = BrokerProcess(work_dir, port=port, overrides={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "offsets.topic.num.partitions": "1",
        "group.initial.rebalance.delay.ms": "0",  # consumers join at once
    })
    try:
        b.start()
        for mechanism, (user, password) in SCRAM_USERS.items():
            upsert_scram(b.bootstrap, user, password, mechanism)
        yield b
    finally:
        try:
            b.stop()
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)


@pytest.fixture(autouse=True)
def _log_tail_on_failure(request, sasl_broker):
    yield
    reports = (getattr(request.node, f"_samsa_report_{when}", None) for when in ("setup", "call"))
    if any(getattr(r, "failed", False) for r in reports):
        print(f"\n--- samsa broker log tail ({sasl_broker.log_path}) ---\n"
              f"{sasl_broker.log_tail(60)}", file=sys.stderr)


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# ---------------------------------------------------------------- Java client

def _java_props(flag: str, mechanism: str, username: str, password: str) -> list[str]:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
             "sasl.jaas.config": f'{module} required username="{username}" password="{password}";'}
    out = []
    for k, v in props.items():
        out += [flag, f"{k}={v}"]
    return out


def java_roundtrip(java_tools: JavaTools, bootstrap: str, mechanism: str, username: str,
                   password: str, lines: int = 20) -> None:
    topic = _topic(f"java-{mechanism.lower()}")
    values = [f"{mechanism}-{i}" for i in range(lines)]
    java_tools.produce(bootstrap, topic, values,
                       *_java_props("--producer-property", mechanism, username, password)).check()
    res = java_tools.consume(bootstrap, topic, "--from-beginning", "--max-messages", lines,
                             "--timeout-ms", 30000,
                             *_java_props("--consumer-property", mechanism, username, password),
                             timeout=90).check()
    assert res.lines == values


def test_java_client_plain(java_tools: JavaTools, sasl_broker):
    java_roundtrip(java_tools, sasl_broker.bootstrap, "PLAIN", "alice", "alice-secret")


@pytest.mark.parametrize("mechanism", list(SCRAM_USERS))
def test_java_client_scram(java_tools: JavaTools, sasl_broker, mechanism):
    java_roundtrip(java_tools, sasl_broker.bootstrap, mechanism, *SCRAM_USERS[mechanism])


def test_java_client_scram_refused(java_tools: JavaTools, sasl_broker):
    res = java_tools.produce(sasl_broker.bootstrap, _topic("java-refused"), ["never"],
                             *_java_props("--producer-property", "SCRAM-SHA-512", "sam512",
                                          "wrong"), timeout=90)
    assert res.rc == 1, res
    assert f"SaslAuthenticationException: {scram_failed('SCRAM-SHA-512')}" in res.stderr, res.stderr


@pytest.mark.parametrize("username,password", [("alice", "wrong"), ("mallory", "x")])
def test_java_client_plain_refused(java_tools: JavaTools, sasl_broker, username, password):
    topic = _topic("java-refused")
    res = java_tools.produce(sasl_broker.bootstrap, topic, ["never"],
                             *_java_props("--producer-property", "PLAIN", username, password),
                             timeout=90)
    assert res.rc == 1, res
    assert f"SaslAuthenticationException: {PLAIN_FAILED}" in res.stderr, res.stderr


# ---------------------------------------------------------------- librdkafka

def _rdkafka_conf(bootstrap: str, mechanism: str, username: str, password: str) -> dict:
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism, "sasl.username": username, "sasl.password": password}


def rdkafka_roundtrip(bootstrap: str, mechanism: str, username: str, password: str) -> None:
    topic = _topic(f"rdkafka-{mechanism.lower()}")
    conf = _rdkafka_conf(bootstrap, mechanism, username, password)
    producer = Producer(conf)
    delivered = []
    for i in range(10):
        producer.produce(topic, f"v{i}".encode(),
                         on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None] * 10
    consumer = Consumer({**conf, "group.id": _topic("g"), "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        got = []
        for _ in range(60):
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
            if len(got) == 10:
                break
        assert got == [f"v{i}".encode() for i in range(10)]
    finally:
        consumer.close()


def rdkafka_refusal(bootstrap: str, mechanism: str, username: str, password: str) -> KafkaError:
    """The first error librdkafka reports for a producer with these credentials."""
    errors: list[KafkaError] = []
    producer = Producer({**_rdkafka_conf(bootstrap, mechanism, username, password),
                         "error_cb": errors.append, "reconnect.backoff.ms": 1000})
    for _ in range(30):
        producer.poll(0.5)
        if errors:
            break
    return errors[0]


def test_librdkafka_plain(sasl_broker):
    rdkafka_roundtrip(sasl_broker.bootstrap, "PLAIN", "alice", "alice-secret")


@pytest.mark.parametrize("mechanism", list(SCRAM_USERS))
def test_librdkafka_scram(sasl_broker, mechanism):
    rdkafka_roundtrip(sasl_broker.bootstrap, mechanism, *SCRAM_USERS[mechanism])


@pytest.mark.parametrize("username,password", [("sam256", "wrong"), ("nobody", "x")])
def test_librdkafka_scram_refused(sasl_broker, username, password):
    err = rdkafka_refusal(sasl_broker.bootstrap, "SCRAM-SHA-256", username, password)
    assert err.code() == KafkaError._AUTHENTICATION
    assert f"SASL authentication error: {scram_failed('SCRAM-SHA-256')}" in err.str()


@pytest.mark.parametrize("username,password", [("alice", "wrong"), ("mallory", "x")])
def test_librdkafka_plain_refused(sasl_broker, username, password):
    err = rdkafka_refusal(sasl_broker.bootstrap, "PLAIN", username, password)
    assert err.code() == KafkaError._AUTHENTICATION
    assert f"SASL authentication error: {PLAIN_FAILED}" in err.str()


# ---------------------------------------------------------------- kafka-python

def kafka_python_roundtrip(bootstrap: str, mechanism: str, username: str, password: str,
                           api_version=None) -> None:
    from kafka import KafkaConsumer, KafkaProducer
    conf = dict(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                sasl_mechanism=mechanism, sasl_plain_username=username,
                sasl_plain_password=password, api_version=api_version)
    topic = _topic(f"kp-{mechanism.lower()}")
    producer = KafkaProducer(**conf)
    try:
        for i in range(5):
            producer.send(topic, f"k{i}".encode()).get(timeout=30)
    finally:
        producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=15000,
                             **conf)
    try:
        got = []
        for msg in consumer:
            got.append(msg.value)
            if len(got) == 5:
                break
        assert got == [f"k{i}".encode() for i in range(5)]
    finally:
        consumer.close()


@pytest.mark.parametrize("api_version", [None, (0, 10, 0)], ids=["negotiated", "handshake-v0"])
def test_kafka_python_plain(sasl_broker, api_version):
    kafka_python_roundtrip(sasl_broker.bootstrap, "PLAIN", "alice", "alice-secret", api_version)


@pytest.mark.parametrize("api_version", [None, (0, 10, 0)], ids=["negotiated", "handshake-v0"])
@pytest.mark.parametrize("mechanism", list(SCRAM_USERS))
def test_kafka_python_scram(sasl_broker, mechanism, api_version):
    kafka_python_roundtrip(sasl_broker.bootstrap, mechanism, *SCRAM_USERS[mechanism], api_version)


def kafka_python_refusal(bootstrap: str, mechanism: str, username: str, password: str,
                         api_version=None) -> Exception:
    from kafka import KafkaProducer
    producer = None
    try:
        producer = KafkaProducer(bootstrap_servers=bootstrap, security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism=mechanism, sasl_plain_username=username,
                                 sasl_plain_password=password, api_version=api_version,
                                 bootstrap_timeout_ms=3000, max_block_ms=3000,
                                 request_timeout_ms=3000, reconnect_backoff_ms=500)
        producer.send(_topic("kp-refused"), b"never").get(timeout=5)
    except Exception as e:  # the point is which error it is
        return e
    finally:
        if producer is not None:
            producer.close(timeout=1)
    raise AssertionError("kafka-python authenticated with a wrong password")


def test_kafka_python_plain_refused(sasl_broker):
    from kafka.errors import KafkaTimeoutError
    # kafka-python, against Kafka too, reports that it could not bootstrap
    # (the SaslAuthenticationFailedError it logs on the way shows only when the
    # answer is read before the close that follows it: kafka-python drops data
    # that arrives together with the connection's end).
    for api_version in (None, (0, 10, 0)):  # SaslAuthenticate, then raw tokens
        log_start = len(sasl_broker.log_path.read_bytes())
        err = kafka_python_refusal(sasl_broker.bootstrap, "PLAIN", "alice", "wrong", api_version)
        assert isinstance(err, KafkaTimeoutError), repr(err)
        assert PLAIN_FAILED.encode() in sasl_broker.log_path.read_bytes()[log_start:]


# ---------------------------------------------------------------- the wire

class Wire:
    """A raw connection speaking Kafka requests, for what no client would send."""

    def __init__(self, broker) -> None:
        self.sock = socket.create_connection((broker.host, broker.port), timeout=15)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, request) -> int:
        self.correlation_id += 1
        header = RequestHeader(api_key, version, self.correlation_id, "sasl-test")
        self.sock.sendall(encode_request(header, request))
        return self.correlation_id

    def call(self, api_key: int, version: int, request):
        corr = self.send(api_key, version, request)
        got, response = decode_response(self.recv_frame(), api_key, version)
        assert got == corr
        return response

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self._exact(4))
        return self._exact(size)

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by the broker")
            buf += chunk
        return buf

    def closed_without_answer(self) -> bool:
        """The broker closed the connection and sent nothing more."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True

    def authenticate_plain(self, username: str, password: str, handshake_version: int = 1):
        hs = self.call(17, handshake_version, SaslHandshakeRequest(mechanism="PLAIN"))
        assert hs.error_code == 0
        token = b"\0" + username.encode() + b"\0" + password.encode()
        return self.call(36, 1, SaslAuthenticateRequest(auth_bytes=token))


def test_unauthenticated_connection_gets_only_api_versions_and_sasl(sasl_broker):
    w = Wire(sasl_broker)
    try:
        versions = w.call(18, 3, ApiVersionsRequest(client_software_name="t",
                                                    client_software_version="1"))
        assert versions.error_code == 0
        assert {17, 36} <= {k.api_key for k in versions.api_keys}
        w.send(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        assert w.closed_without_answer()
    finally:
        w.close()


def test_handshake_with_a_mechanism_not_enabled(sasl_broker):
    w = Wire(sasl_broker)
    try:
        hs = w.call(17, 1, SaslHandshakeRequest(mechanism="GSSAPI"))
        assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert hs.mechanisms == MECHANISMS.split(",")
        assert w.closed_without_answer()
    finally:
        w.close()


def test_wrong_password_answer_then_close(sasl_broker):
    w = Wire(sasl_broker)
    try:
        auth = w.authenticate_plain("alice", "nope")
        assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert auth.error_message == PLAIN_FAILED
        assert w.closed_without_answer()
    finally:
        w.close()


def test_authenticated_connection_is_served(sasl_broker):
    w = Wire(sasl_broker)
    try:
        auth = w.authenticate_plain("alice", "alice-secret")
        assert auth.error_code == 0 and auth.session_lifetime_ms == 0
        meta = w.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
        assert [b.node_id for b in meta.brokers] == [0]
        # SASL requests out of turn after authentication: Kafka's answers, still connected.
        again = w.call(36, 1, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
        assert (again.error_code, again.error_message) == (
            ErrorCode.ILLEGAL_SASL_STATE,
            "SaslAuthenticate request received after successful authentication")
        assert w.call(17, 0, SaslHandshakeRequest(mechanism="PLAIN")).error_code == \
            ErrorCode.ILLEGAL_SASL_STATE
        assert w.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
    finally:
        w.close()


def test_frame_above_max_receive_size_closes_at_its_size_prefix(sasl_broker):
    """sasl.server.max.receive.size (512 KiB) is checked on the size prefix,
    as Kafka's SaslServerAuthenticator does: an unauthenticated connection
    that declares a larger frame is closed at once, with only the 4-byte
    prefix sent (the broker reads none of the body, so an unauthenticated
    client cannot push megabytes into it); before and after the handshake."""
    for declared, handshake in ((524289, False), (100_000_000, False), (524289, True)):
        w = Wire(sasl_broker)
        try:
            if handshake:
                assert w.call(17, 1, SaslHandshakeRequest(mechanism="PLAIN")).error_code == 0
            w.sock.sendall(struct.pack(">i", declared))
            assert w.closed_without_answer()
        finally:
            w.close()


def _fuzz_cases(rng: random.Random):
    """(name, steps): each step sends something; the connection must then close."""
    garbage = bytes(rng.getrandbits(8) for _ in range(64))
    plain_v0 = [("call", 17, 0, SaslHandshakeRequest(mechanism="PLAIN"))]
    plain_v1 = [("call", 17, 1, SaslHandshakeRequest(mechanism="PLAIN"))]
    scram_v1 = [("call", 17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))]
    return [
        ("authenticate without handshake",
         [("send", 36, 1, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))]),
        ("second handshake", plain_v1 + [("send", 17, 1, SaslHandshakeRequest(mechanism="PLAIN"))]),
        ("raw v0 token that is garbage", plain_v0 + [("frame", garbage)]),
        ("raw v0 empty token", plain_v0 + [("frame", b"")]),
        ("raw v0 token then a request", plain_v0 + [("frame", b"\0alice\0wrong")]),
        ("PLAIN token of random bytes", plain_v1 + [("auth", garbage)]),
        ("PLAIN token of 100 KiB", plain_v1 + [("auth", b"\0alice\0" + b"x" * 100_000)]),
        # sasl.server.max.receive.size (512 KiB) caps frames before authentication
        ("oversized SaslAuthenticate", plain_v1 + [("send", 36, 1, SaslAuthenticateRequest(
            auth_bytes=b"\0alice\0" + b"x" * 600_000))]),
        ("oversized raw v0 token", plain_v0 + [("frame", b"\0alice\0" + b"x" * 600_000)]),
        ("oversized SCRAM first message", scram_v1 + [("send", 36, 1, SaslAuthenticateRequest(
            auth_bytes=b"n,,n=" + b"u" * 600_000 + b",r=abc"))]),
        ("PLAIN token with too many parts", plain_v1 + [("auth", b"a\0b\0c\0d")]),
        ("SCRAM first message garbage", scram_v1 + [("auth", garbage)]),
        ("SCRAM first message for nobody", scram_v1 + [("auth", b"n,,n=nobody,r=abc")]),
        ("oversized frame", [("frame_header", 0x7FFFFFFF)]),
        ("truncated request", [("truncated", 17)]),
        ("produce before authentication", [("frame", b"\x00\x00\x00\x09" + garbage)]),
        ("random frame", [("frame", garbage)]),
    ]


def test_sasl_fuzz_closes_connections_and_leaks_nothing(sasl_broker):
    rng = random.Random(1605)
    for round_ in range(3):
        for name, steps in _fuzz_cases(rng):
            w = Wire(sasl_broker)
            try:
                for step in steps:
                    kind = step[0]
                    if kind == "call":
                        response = w.call(*step[1:])
                        assert response.error_code == 0, name
                        continue
                    if kind == "auth":
                        try:
                            auth = w.call(36, 1, SaslAuthenticateRequest(auth_bytes=step[1]))
                        except ConnectionError:
                            continue  # closed straight away: fine
                        # The only answer an unauthenticated peer may get: a refusal.
                        assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED, name
                        continue
                    try:
                        if kind == "send":
                            w.send(*step[1:])
                        elif kind == "frame":
                            w.send_frame(step[1])
                        elif kind == "frame_header":
                            w.sock.sendall(struct.pack(">i", step[1]) + b"\x00" * 8)
                        elif kind == "truncated":
                            frame = encode_request(RequestHeader(step[1], 1, 1, "t"),
                                                   SaslHandshakeRequest(mechanism="PLAIN"))
                            w.sock.sendall(frame[:-3])
                            w.sock.shutdown(socket.SHUT_WR)
                    except ConnectionError:
                        # The broker closed on an earlier step before this one went out (a
                        # reset, under load): what must hold still holds below.
                        break
                # Whatever comes next must be refused: a request that would leak
                # metadata gets no answer, the connection just closes.
                try:
                    w.send(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False))
                except OSError:
                    pass
                assert w.closed_without_answer(), name
            finally:
                w.close()
    # ... and the broker still serves an honest client.
    w = Wire(sasl_broker)
    try:
        assert w.authenticate_plain("alice", "alice-secret").error_code == 0
    finally:
        w.close()
    assert "Traceback" not in sasl_broker.log_path.read_text()
    assert os.path.exists(sasl_broker.log_path)


# ---------------------------------------------------------------- SCRAM credentials

def test_scram_credentials_describe_alter_errors(sasl_broker):
    from samsa.protocol.messages import (AlterUserScramCredentialsRequest as Alter,
                                   DescribeUserScramCredentialsRequest as Describe)
    w = Wire(sasl_broker)
    try:
        assert w.authenticate_plain(*ADMIN).error_code == 0
        described = w.call(50, 0, Describe(users=None))
        listed = {r.user: [(c.mechanism, c.iterations) for c in r.credential_infos]
                  for r in described.results}
        assert listed["sam256"] == [(1, 8192)] and listed["sam512"] == [(2, 8192)]

        described = w.call(50, 0, Describe(users=[Describe.UserName(name=n)
                                                  for n in ("sam256", "ghost", "dup", "dup")]))
        assert [(r.user, r.error_code) for r in described.results] == [
            ("sam256", 0), ("ghost", ErrorCode.RESOURCE_NOT_FOUND),
            ("dup", ErrorCode.DUPLICATE_RESOURCE)]
        assert described.results[1].error_message == \
            "Attempt to describe a user credential that does not exist: ghost"

        def upsert(name, mechanism, iterations):
            return Alter.ScramCredentialUpsertion(name=name, mechanism=mechanism,
                                                  iterations=iterations, salt=b"salt",
                                                  salted_password=b"x" * 32)
        altered = w.call(51, 0, Alter(
            deletions=[Alter.ScramCredentialDeletion(name="ghost", mechanism=1),
                       Alter.ScramCredentialDeletion(name="weird", mechanism=7)],
            upsertions=[upsert("few", 1, 4095), upsert("many", 2, 16385), upsert("twice", 1, 4096),
                        upsert("twice", 1, 5000), upsert("", 1, 4096)]))
        assert {r.user: (r.error_code, r.error_message) for r in altered.results} == {
            "ghost": (ErrorCode.RESOURCE_NOT_FOUND,
                      "Attempt to delete a user credential that does not exist"),
            "weird": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            "few": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            "many": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            "twice": (ErrorCode.DUPLICATE_RESOURCE,
                      "A user credential cannot be altered twice in the same request"),
            "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        }
        # Nothing of a refused alteration was written.
        described = w.call(50, 0, Describe(users=[Describe.UserName(name="twice")]))
        assert described.results[0].error_code == ErrorCode.RESOURCE_NOT_FOUND
    finally:
        w.close()


def test_scram_user_created_then_deleted(sasl_broker):
    from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion
    bootstrap = sasl_broker.bootstrap
    upsert_scram(bootstrap, "carol", "carol-secret", "SCRAM-SHA-256", iterations=4096)
    rdkafka_roundtrip(bootstrap, "SCRAM-SHA-256", "carol", "carol-secret")
    admin = rdkafka_admin(bootstrap)
    futures = admin.alter_user_scram_credentials(
        [UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_256)])
    for f in futures.values():
        f.result(timeout=30)
    err = rdkafka_refusal(bootstrap, "SCRAM-SHA-256", "carol", "carol-secret")
    assert f"SASL authentication error: {scram_failed('SCRAM-SHA-256')}" in err.str()


# ---------------------------------------------------------------- re-authentication (KIP-368)

REAUTH_MS = 1500


@pytest.fixture(scope="module")
def reauth_broker():
    """A broker whose SASL sessions last REAUTH_MS."""
    work_dir = Path(tempfile.mkdtemp(prefix="samsa-sasl-reauth-"))
    port = free_port()
    b = BrokerProcess(work_dir, port=port, overrides={
        "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "connections.max.reauth.ms": REAUTH_MS,
        "offsets.topic.num.partitions": "1",
    })
    try:
        yield b.start()
    finally:
        try:
            b.stop()
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)


def test_session_expiry_and_reauthentication_on_the_wire(reauth_broker):
    import time
    metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    idle, renewing, impostor = Wire(reauth_broker), Wire(reauth_broker), Wire(reauth_broker)
    try:
        for w in (idle, renewing, impostor):
            auth = w.authenticate_plain("alice", "alice-secret")
            assert auth.error_code == 0 and auth.session_lifetime_ms == REAUTH_MS
            assert w.call(3, 12, metadata).brokers
        time.sleep(REAUTH_MS / 1000 + 0.3)  # the sessions end: what is being tested

        # Not re-authenticated: the next request closes the connection, unanswered.
        idle.send(3, 12, metadata)
        assert idle.closed_without_answer()

        # Re-authenticated on the same connection: served again, with a new session.
        auth = renewing.authenticate_plain("alice", "alice-secret")
        assert auth.error_code == 0 and auth.session_lifetime_ms == REAUTH_MS
        assert renewing.call(3, 12, metadata).brokers

        # Re-authentication may not change who the connection is.
        auth = impostor.authenticate_plain("admin", "admin-secret")
        assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert auth.error_message == ("Cannot change principals during re-authentication "
                                      "from User:alice: User:admin")
        assert impostor.closed_without_answer()
    finally:
        for w in (idle, renewing, impostor):
            w.close()


def test_java_producer_keeps_working_across_reauthentications(java_tools: JavaTools,
                                                              reauth_broker):
    import time
    topic = _topic("java-reauth")
    log_start = len(reauth_broker.log_path.read_bytes())
    producer = java_tools.popen("ConsoleProducer", "--bootstrap-server", reauth_broker.bootstrap,
                                "--topic", topic, "--print-acks",
                                *_java_props("--producer-property", "PLAIN", "alice",
                                             "alice-secret"),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    sent = []
    try:
        started = time.monotonic()
        # One record at a time, each acknowledged before the next, for three
        # session lifetimes: the producer must re-authenticate (at least twice)
        # on its connections, and never be cut off for not doing so.
        while time.monotonic() - started < 3 * REAUTH_MS / 1000 or len(sent) < 5:
            value = f"r{len(sent)}"
            producer.stdin.write(value + "\n")
            producer.stdin.flush()
            ack = producer.stdout.readline()
            assert ack.endswith(f"\t{value}\n"), (ack, producer.poll())
            sent.append(value)
        producer.stdin.close()
        assert producer.wait(timeout=60) == 0, producer.stderr.read()
    finally:
        if producer.poll() is None:
            producer.kill()
            producer.wait()
    res = java_tools.consume(reauth_broker.bootstrap, topic, "--from-beginning",
                             "--max-messages", len(sent), "--timeout-ms", 30000,
                             *_java_props("--consumer-property", "PLAIN", "alice", "alice-secret"),
                             timeout=90).check()
    assert res.lines == sent
    # No connection of it was cut off (session expired) or had a re-authentication refused.
    assert b"broker.sasl" not in reauth_broker.log_path.read_bytes()[log_start:]


# ---------------------------------------------------------------- samsa configs

def _samsa(*args: object) -> subprocess.CompletedProcess:
    repo = Path(__file__).resolve().parents[2]
    return subprocess.run([sys.executable, "-m", "samsa", *map(str, args)], capture_output=True,
                          text=True, timeout=120, cwd=repo)


def test_samsa_configs_manages_scram_users(sasl_broker, tmp_path):
    admin = tmp_path / "admin.properties"
    admin.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule '
                     'required username="admin" password="admin-secret";\n')
    common = ["configs", "--bootstrap-server", sasl_broker.bootstrap, "--command-config", admin]
    res = _samsa(*common, "--alter", "--add-config",
                 "SCRAM-SHA-256=[iterations=8192,password=dave-secret],"
                 "SCRAM-SHA-512=[password=dave-secret]",
                 "--entity-type", "users", "--entity-name", "dave")
    assert (res.returncode, res.stdout) == (0, "Completed updating config for user dave.\n"), res
    res = _samsa(*common, "--describe", "--entity-type", "users", "--entity-name", "dave")
    assert res.stdout == ("SCRAM credential configs for user-principal 'dave' are "
                          "SCRAM-SHA-256=iterations=8192, SCRAM-SHA-512=iterations=4096\n"), res
    rdkafka_roundtrip(sasl_broker.bootstrap, "SCRAM-SHA-512", "dave", "dave-secret")

    # The user's own SCRAM login works for the tool too.
    dave = tmp_path / "dave.properties"
    dave.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                    'sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule '
                    'required username="dave" password="dave-secret";\n')
    res = _samsa("configs", "--bootstrap-server", sasl_broker.bootstrap, "--command-config", dave,
                 "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users",
                 "--entity-name", "dave")
    assert res.returncode == 0, res
    err = rdkafka_refusal(sasl_broker.bootstrap, "SCRAM-SHA-512", "dave", "dave-secret")
    assert f"SASL authentication error: {scram_failed('SCRAM-SHA-512')}" in err.str()

    res = _samsa(*common, "--alter", "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]",
                 "--entity-type", "users", "--entity-name", "dave")
    assert res.returncode == 1
    assert "UNACCEPTABLE_CREDENTIAL: Too few iterations" in res.stderr

    # Without credentials the tool is refused like any client.
    res = _samsa("configs", "--bootstrap-server", sasl_broker.bootstrap, "--describe",
                 "--entity-type", "users")
    assert res.returncode == 1 and "closed the connection" in res.stderr, res


# ---------------------------------------------------------------- a ZooKeeper cluster

def test_credential_created_at_broker_0_authenticates_at_broker_2(tmp_path):
    import hashlib
    import hmac as hmac_
    import json

    from tests.integration.conftest import require_zookeeper
    from tests.support.cluster import SaslPlaintextCluster
    from samsa.protocol.messages import AlterUserScramCredentialsRequest as Alter
    require_zookeeper()

    cluster = SaslPlaintextCluster(tmp_path, 3, offsets_partitions=1, overrides={
        "inter.broker.listener.name": "SASL_PLAINTEXT",  # Kafka requires it to be a listener
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "offsets.topic.replication.factor": 1,
    })
    try:
        cluster.start()
        # The credential as a Kafka client's Admin API makes it (salted here,
        # with Python's own PBKDF2, not samsa's code).
        salt = b"pepper-and-salt"
        salted = hashlib.pbkdf2_hmac("sha256", b"zed-secret", salt, 4096)
        w = Wire(cluster.broker(0))
        try:
            assert w.authenticate_plain(*ADMIN).error_code == 0
            altered = w.call(51, 0, Alter(deletions=[], upsertions=[
                Alter.ScramCredentialUpsertion(name="zed", mechanism=1, iterations=4096,
                                               salt=salt, salted_password=salted)]))
            assert [(r.user, r.error_code) for r in altered.results] == [("zed", 0)]
        finally:
            w.close()

        # Kafka's layout: /config/users/<user> holds the credential, and a
        # change notice tells the other brokers.
        zk = cluster.zk_client()
        stored = json.loads(zk.get("/config/users/zed")[0])
        client_key = hmac_.new(salted, b"Client Key", "sha256").digest()
        expected = (f"salt={base64.b64encode(salt).decode()},"
                    f"stored_key={base64.b64encode(hashlib.sha256(client_key).digest()).decode()},"
                    f"server_key="
                    f"{base64.b64encode(hmac_.new(salted, b'Server Key', 'sha256').digest()).decode()},"
                    "iterations=4096")
        assert stored == {"version": 1, "config": {"SCRAM-SHA-256": expected}}
        notices = [json.loads(zk.get(f"/config/changes/{n}")[0])
                   for n in zk.get_children("/config/changes")]
        assert {"version": 2, "entity_path": "users/zed"} in notices

        # Broker 2 authenticates zed.
        broker2 = cluster.broker(2).bootstrap
        from confluent_kafka.admin import AdminClient
        admin = AdminClient(_rdkafka_conf(broker2, "SCRAM-SHA-256", "zed", "zed-secret"))
        assert set(admin.list_topics(timeout=30).brokers) == {0, 1, 2}
        err = rdkafka_refusal(broker2, "SCRAM-SHA-256", "zed", "not-zed-secret")
        assert f"SASL authentication error: {scram_failed('SCRAM-SHA-256')}" in err.str()

        # Brokers log in to each other too (as admin, the PLAIN listener
        # entry's username/password): a 3-replica topic takes acks=all writes.
        from confluent_kafka.admin import NewTopic
        topic = _topic("replicated")
        admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(timeout=30)
        conf = {**_rdkafka_conf(broker2, "SCRAM-SHA-256", "zed", "zed-secret"), "acks": "all"}
        producer = Producer(conf)
        delivered = []
        for i in range(5):
            producer.produce(topic, f"r{i}".encode(), on_delivery=lambda e, m: delivered.append(e))
        assert producer.flush(60) == 0 and delivered == [None] * 5
        for broker in cluster.brokers:  # every replica holds the records
            segment = broker.data_dir / f"{topic}-0" / "00000000000000000000.log"
            assert segment.stat().st_size > 0, broker.log_tail(30)
        assert "SASL authentication at" not in cluster.log_tails()
    except BaseException:
        cluster.print_log_tails()
        raise
    finally:
        cluster.stop()


def test_scram_is_answered_from_memory_when_zookeeper_refuses_reads(tmp_path):
    """A SCRAM attempt costs no ZooKeeper read (Kafka's CredentialCache): with
    the user's znode unreadable by the broker, the user still authenticates
    and a wrong password still gets Kafka's answer, not a closed connection."""
    from kazoo.security import make_acl

    from samsa.client.sasl import SaslClientError, SaslClientSettings, authenticate
    from tests.integration.conftest import require_zookeeper
    from tests.support.cluster import SaslPlaintextCluster
    require_zookeeper()

    cluster = SaslPlaintextCluster(tmp_path, 1, offsets_partitions=1, overrides={
        "inter.broker.listener.name": "SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
        "offsets.topic.replication.factor": 1,
    })
    zk = None
    try:
        cluster.start()
        broker = cluster.broker(0)
        upsert_scram(broker.bootstrap, "yan", "yan-secret", "SCRAM-SHA-256", iterations=4096)
        zk = cluster.zk_client()
        everything_but_read = make_acl("world", "anyone", write=True, create=True,
                                       delete=True, admin=True)
        zk.set_acls("/config/users/yan", [everything_but_read])

        def scram(password: str):
            w = Wire(broker)
            try:
                assert w.call(17, 1, SaslHandshakeRequest(mechanism="SCRAM-SHA-256")
                              ).error_code == 0
                answers = []

                def exchange(token: bytes) -> bytes:
                    answers.append(w.call(36, 1, SaslAuthenticateRequest(auth_bytes=token)))
                    if answers[-1].error_code:
                        raise SaslClientError(answers[-1].error_message)
                    return answers[-1].auth_bytes
                try:
                    authenticate(SaslClientSettings("SCRAM-SHA-256", "yan", password), exchange)
                except SaslClientError:
                    pass
                return answers[-1]
            finally:
                w.close()

        assert scram("yan-secret").error_code == 0
        refused = scram("not-yan-secret")
        assert (refused.error_code, refused.error_message) == (
            ErrorCode.SASL_AUTHENTICATION_FAILED, scram_failed("SCRAM-SHA-256"))
    except BaseException:
        cluster.print_log_tails()
        raise
    finally:
        if zk is not None:
            zk.set_acls("/config/users/yan", [make_acl("world", "anyone", all=True)])
        cluster.stop()


def test_bad_jaas_refuses_to_start_naming_the_key(tmp_path):
    key = "listener.name.sasl_plaintext.plain.sasl.jaas.config"
    res = _samsa("server", "/dev/null", "--override", "listeners=SASL_PLAINTEXT://127.0.0.1:0",
                 "--override", f"log.dirs={tmp_path}", "--override",
                 f'{key}=org.apache.kafka.common.security.plain.PlainLoginModule required '
                 'user_alice="alice-secret"')  # no ';'
    assert res.returncode == 2, res
    assert res.stderr.startswith(f"samsa: refusing to start: invalid value for {key}: "), res
    assert "alice-secret" not in res.stderr
