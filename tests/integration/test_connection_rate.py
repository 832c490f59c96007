"""Connection creation rates (KIP-612) as a user of Kafka's notices them, on a
real broker over real sockets:

- an ip entity's connection_creation_rate (set through AlterClientQuotas or
  `samsa configs --entity-type ips`): a burst of connections from that
  address gets about the allowed number served, the rest are closed
  unserved; after the quota window a new one is served again; a quota on
  another address, or one raised for this address over the <default>
  entity's, lets the same burst through;
- the broker-wide max.connection.creation.rate, set at run time: a burst
  is delayed by the acceptor, not refused (every connection answered, even
  under an address quota the unpaced burst would exceed).

The brokers measure over quota.window.num=2 windows, so a burst is judged
over one window plus the time it took: at R connections/s and a window of
W seconds a fast burst gets R * W served, a few more if the machine is slow.
Outcomes are counted (ApiVersions answered or connection closed), never
times.
"""
from __future__ import annotations

import re
import socket
import struct
import subprocess
import sys
import urllib.request

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry,
                                   ConfigResource, ResourceType)

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import AlterClientQuotasRequest, ApiVersionsRequest
from tests.support.broker_process import BrokerProcess, broker_in_temp_dir
from tests.support.kafka_wire import api_versions_v0_request, free_port
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(180)

ALTER_QUOTAS = 49
INVALID_REQUEST = 42
WINDOW_SECONDS = 2   # quota.window.size.seconds of the ip tests
IP_RATE = 3          # connections/s: a fast burst gets IP_RATE * WINDOW_SECONDS
BURST = 20
# Kafka's AcceptorBlockedPercent meter's count: how long the acceptor waited
BLOCKED = "kafka_network_acceptor_acceptorblockedpercent_count"


def _broker(window_seconds: int, port: int | None = None, **overrides: str):
    return broker_in_temp_dir("samsa-connrate-", port=port, overrides={
        "quota.window.num": "2", "quota.window.size.seconds": str(window_seconds),
        **overrides}, metrics=True)


@pytest.fixture
def ip_broker():
    with _broker(WINDOW_SECONDS) as b:
        yield b


def _served(sock: socket.socket, correlation_id: int) -> bool:
    """True when the broker answers ApiVersions on ``sock``; False when it
    closes the connection instead."""
    try:
        sock.sendall(api_versions_v0_request(correlation_id))
        got = b""
        while len(got) < 4 or len(got) < 4 + struct.unpack_from(">i", got)[0]:
            chunk = sock.recv(65536)
            if not chunk:
                return False
            got += chunk
        return struct.unpack_from(">i", got, 4)[0] == correlation_id
    except OSError:
        return False


def _burst(port: int, n: int = BURST) -> tuple[int, int]:
    """Open ``n`` connections as fast as possible, then ask each for its
    ApiVersions: (served, closed)."""
    socks = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(n)]
    try:
        outcomes = [_served(s, i) for i, s in enumerate(socks)]
    finally:
        for s in socks:
            s.close()
    return sum(outcomes), outcomes.count(False)


def _set_ip_rate(client: SimpleClient, ip: str | None, rate: float | None) -> list[int]:
    """connection_creation_rate of ``ip`` (None: the <default> entity),
    removed when ``rate`` is None; the entries' error codes."""
    R = AlterClientQuotasRequest
    op = R.OpData(key="connection_creation_rate", value=rate if rate is not None else 0.0,
                  remove=rate is None)
    r = client.call(ALTER_QUOTAS, R(validate_only=False, entries=[R.EntryData(
        entity=[R.EntityData(entity_type="ip", entity_name=ip)], ops=[op])]))
    return [e.error_code for e in r.entries]


def _metrics(b: BrokerProcess) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{b.metrics_port}/metrics", timeout=10) as r:
        return r.read().decode()


def _gauge(text: str, name: str, labels: str = "") -> float:
    m = re.search(rf"^{re.escape(name + labels)} ([0-9.e+-]+)$", text, re.M)
    assert m, f"{name}{labels} missing"
    return float(m.group(1))


def _allowed(served: int) -> bool:
    # R * W, plus what a slow burst adds (R per extra second it took)
    return IP_RATE * WINDOW_SECONDS <= served <= IP_RATE * WINDOW_SECONDS + 2


def test_an_ip_over_its_connection_rate_gets_only_its_share_served(ip_broker):
    port = ip_broker.port
    # One admin connection, made before any quota counts it
    with SimpleClient(ip_broker.bootstrap) as admin:
        # bad values are refused with Kafka's error and change nothing
        assert _set_ip_rate(admin, "127.0.0.1", -1.0) == [INVALID_REQUEST]
        assert _set_ip_rate(admin, "127.0.0.1", 2.5) == [INVALID_REQUEST]
        # a quota on another address leaves this one alone
        assert _set_ip_rate(admin, "10.9.8.7", 1) == [0]
        assert _burst(port) == (BURST, 0)

        assert _set_ip_rate(admin, "127.0.0.1", IP_RATE) == [0]
        served, closed = _burst(port)
        assert _allowed(served), (served, closed)
        assert closed == BURST - served
        text = _metrics(ip_broker)
        assert _gauge(text, "samsa_connections_throttled") == closed
        # (an average over the last windows: its value is unit-tested)
        assert _gauge(text, "kafka_server_socket_server_metrics_ip_connection_accept_throttle_time",
                      '{listener="PLAINTEXT"}') >= 0
        # Kafka's connection-accept-rate per address with a quota, beside the
        # per-listener one under the same name
        assert _gauge(text, "kafka_server_socket_server_metrics_connection_accept_rate",
                      '{ip="127.0.0.1"}') > 0
        assert _gauge(text, "kafka_server_socket_server_metrics_connection_accept_rate",
                      '{listener="PLAINTEXT"}') > 0
        # the closed ones were not counted against the address: once the
        # burst's windows have passed it is served again (and the attempts
        # refused meanwhile, several a second, are not counted either, or
        # it never would be)
        wait_until(lambda: _burst(port, 1) == (1, 0), timeout=60, interval=0.2,
                   what="a connection from the address served again")
        # and the admin connection was served throughout: a rate bounds new
        # connections only
        assert admin.call(18, ApiVersionsRequest()).error_code == 0


def test_the_default_ip_rate_and_a_specific_ip_raised_over_it(ip_broker):
    port = ip_broker.port
    with SimpleClient(ip_broker.bootstrap) as admin:
        # the <default> entity, set as an operator sets it
        out = subprocess.run([sys.executable, "-m", "samsa", "configs", "--bootstrap-server",
                              ip_broker.bootstrap, "--alter", "--entity-type", "ips",
                              "--entity-default", "--add-config",
                              f"connection_creation_rate={IP_RATE}"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        served, closed = _burst(port)
        assert _allowed(served) and closed == BURST - served, (served, closed)
        # this address's own quota, raised over the default: the same burst
        # is served (its connections so far are judged by the new bound)
        assert _set_ip_rate(admin, "127.0.0.1", 1000) == [0]
        assert _burst(port) == (BURST, 0)
        # removed again: the default applies again
        assert _set_ip_rate(admin, "127.0.0.1", None) == [0]
        served, closed = _burst(port)
        assert closed > 0, (served, closed)


def test_the_broker_wide_rate_delays_a_burst_without_refusing_it():
    with _broker(1) as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})

        def set_rate(value: str) -> None:
            res = ConfigResource(ResourceType.BROKER, "0", incremental_configs=[ConfigEntry(
                "max.connection.creation.rate", value,
                incremental_operation=AlterConfigOpType.SET)])
            admin.incremental_alter_configs([res])[res].result(30)
        with pytest.raises(KafkaException, match="Invalid max.connection.creation.rate 0"):
            set_rate("0")
        set_rate("4")  # at run time, as Kafka's DynamicBrokerConfig takes it
        with SimpleClient(b.bootstrap) as quotas:
            # The address may open three times as many (paced by Kafka's
            # windows, a few get through at once when an old window
            # expires): a burst the acceptor did not pace would hit this
            # quota and see most of its connections closed.
            assert _set_ip_rate(quotas, "127.0.0.1", 12) == [0]
            assert _burst(b.port, 30) == (30, 0)  # every one answered
        text = _metrics(b)
        # ... because the acceptor held them back to the broker's rate
        assert _gauge(text, BLOCKED, '{listener="PLAINTEXT"}') > 0
        assert _gauge(text, "samsa_connections_throttled") == 0


def test_the_inter_broker_listener_is_outside_the_broker_wide_rate():
    """Configured at start-up: the broker-wide rate paces clients, while
    other brokers connecting on the inter-broker listener (here with a rate
    of its own) are neither delayed nor use up the clients' budget."""
    client_port, internal_port = free_port(), free_port()
    with _broker(1, client_port, **{
        "listeners": f"CLIENT://127.0.0.1:{client_port},INTERNAL://127.0.0.1:{internal_port}",
        "advertised.listeners": f"CLIENT://127.0.0.1:{client_port},"
                                f"INTERNAL://127.0.0.1:{internal_port}",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "max.connection.creation.rate": "3",
        "listener.name.internal.max.connection.creation.rate": "1000"}) as b:
        assert _burst(internal_port) == (BURST, 0)
        assert _gauge(_metrics(b), BLOCKED, '{listener="INTERNAL"}') == 0
        assert _burst(client_port) == (BURST, 0)
        assert _gauge(_metrics(b), BLOCKED, '{listener="CLIENT"}') > 0
