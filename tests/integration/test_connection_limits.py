"""max.connections on a broker with a client and an inter-broker listener:
clients that fill the broker are refused, other brokers still get in on the
inter-broker listener (Kafka's protected listener)."""
from __future__ import annotations

import shutil
import socket
import struct
import tempfile
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.kafka_wire import api_versions_v0_request, free_port

pytestmark = pytest.mark.timeout(120)


def _api_versions(sock: socket.socket, correlation_id: int) -> bool:
    """True when the broker answers ApiVersions on ``sock``; False when it
    closed the connection."""
    try:
        sock.sendall(api_versions_v0_request(correlation_id))
        head = sock.recv(4)
        if len(head) < 4:
            return False
        (size,) = struct.unpack(">i", head)
        got = b""
        while len(got) < size:
            chunk = sock.recv(size - len(got))
            if not chunk:
                return False
            got += chunk
        return struct.unpack_from(">i", got)[0] == correlation_id
    except (ConnectionError, OSError):
        return False


def test_inter_broker_listener_gets_in_at_max_connections():
    work_dir = Path(tempfile.mkdtemp(prefix="samsa-connlimits-"))
    client_port, internal_port = free_port(), free_port()
    b = BrokerProcess(work_dir, port=client_port, overrides={
        "listeners": f"CLIENT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{internal_port}",
        "advertised.listeners": f"CLIENT://127.0.0.1:{client_port},"
                                f"INTERNAL://127.0.0.1:{internal_port}",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "max.connections": "2"})
    held: list[socket.socket] = []
    try:
        b.start()

        def connect(port: int) -> socket.socket:
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.settimeout(10)
            held.append(s)
            return s
        # The readiness probe's connection may still be counted for a moment:
        # fill the broker until a client is refused.
        for i in range(10):
            if not _api_versions(connect(client_port), i):
                break
        else:
            pytest.fail("max.connections=2 never refused a client")
        assert _api_versions(connect(internal_port), 100)
        assert _api_versions(connect(internal_port), 101)
    finally:
        for s in held:
            s.close()
        try:
            b.stop()
        finally:
            shutil.rmtree(work_dir, ignore_errors=True)
