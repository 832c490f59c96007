"""Random, well-formed requests for every advertised API and version, sent to a
live broker: each gets an answer or, at worst, a closed connection; the broker
never dies and keeps serving a real client afterwards.

The codec fuzz (tests/protocol/test_fuzz.py) covers malformed bytes; this covers
what lies behind a successful decode: handlers facing absurd field values.
"""
from __future__ import annotations

import socket
import struct

from hypothesis import HealthCheck, given, settings, strategies as st
from kafka import KafkaProducer

from samsa.broker.server import advertised_apis
from samsa.protocol.messages import RequestHeader, decode_response, encode_request
from tests.protocol.test_messages_strategies import message_strategy

CASES = [(spec, v) for spec in advertised_apis()
         for v in range(spec.min_version, spec.max_version + 1)]
_WAIT_FIELDS = ("max_wait_ms", "timeout_ms", "session_timeout_ms", "rebalance_timeout_ms")


def _clamp_waits(msg):
    """Long-polls and rebalance waits are legitimate; keep them short so the run is."""
    for name in _WAIT_FIELDS:
        if hasattr(msg, name):
            setattr(msg, name, min(max(getattr(msg, name), 0), 50))
    for attr in getattr(msg, "_attrs", ()):
        value = getattr(msg, attr)
        for item in value if isinstance(value, list) else [value]:
            if hasattr(item, "_attrs"):
                _clamp_waits(item)


def _recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def test_random_requests_never_bring_the_broker_down(broker_factory):
    broker = broker_factory({"group.initial.rebalance.delay.ms": "0"})
    conn = {"sock": None}
    outcomes = {"answered": 0, "closed": 0}

    def sock():
        if conn["sock"] is None:
            conn["sock"] = socket.create_connection((broker.host, broker.port), timeout=20)
        return conn["sock"]

    @settings(max_examples=400, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def send_one(data):
        spec, v = data.draw(st.sampled_from(CASES), label="api")
        req = data.draw(message_strategy(spec.request_cls, v), label="request")
        _clamp_waits(req)
        s = sock()
        try:
            s.sendall(encode_request(RequestHeader(spec.key, v, 77, "fuzz"), req))
            if spec.key == 0 and getattr(req, "acks", None) == 0:
                return  # acks=0: no answer comes
            frame = _recv_exact(s, struct.unpack(">i", _recv_exact(s, 4))[0])
            corr, _ = decode_response(frame, spec.key, v)
            assert corr == 77
            outcomes["answered"] += 1
        except (ConnectionError, OSError):
            outcomes["closed"] += 1
            # A closed connection is an allowed answer to nonsense; a dead broker is not.
            conn["sock"] = None
            s.close()
        assert broker.is_running(), f"broker died on {spec.name} v{v}: {req!r}\n{broker.log_tail()}"

    try:
        send_one()
    finally:
        if conn["sock"] is not None:
            conn["sock"].close()
    # A handler that raised means a request got a dropped connection instead of
    # Kafka's error code for it: the broker logs a traceback for exactly that.
    log_text = broker.log_path.read_text(errors="replace")
    assert "Traceback" not in log_text, log_text[log_text.index("Traceback") - 300:][:3000]
    assert outcomes["answered"] > outcomes["closed"], outcomes
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        assert producer.send("after-fuzz", b"alive").get(timeout=30).offset == 0
    finally:
        producer.close()
