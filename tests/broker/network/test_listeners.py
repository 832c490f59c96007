"""A broker's listeners share its connection limits: max.connections and
max.connections.per.ip count over all of them, as in Kafka."""
from __future__ import annotations

import pytest

from samsa.broker.network import NetworkServer
from samsa.broker.network.server import ConnectionCounts
from tests.broker.network.test_network import HOST, Client, echo, until

pytestmark = pytest.mark.timeout(60)


async def test_connection_limits_count_over_all_listeners():
    counts = ConnectionCounts()
    first = NetworkServer(HOST, 0, 1, echo, max_connections_per_ip=2, connection_counts=counts,
                          listener_name="PLAINTEXT")
    second = NetworkServer(HOST, 0, 1, echo, max_connections_per_ip=2, connection_counts=counts,
                           listener_name="INTERNAL")
    await first.start()
    await second.start()
    try:
        a = await Client.connect(first)
        b = await Client.connect(second)
        assert await a.request(b"a") == b"a" and await b.request(b"b") == b"b"
        refused = await Client.connect(second)  # the address's third connection
        assert await refused.closed_by_server()
        assert second.connections_rejected == 1
        assert (first.connections_open, second.connections_open) == (1, 1)
        a.writer.close()
        await until(lambda: first.connections_open == 0)
        again = await Client.connect(second)  # room again
        assert await again.request(b"c") == b"c"
        for c in (b, again, refused):
            c.writer.close()
    finally:
        await first.stop()
        await second.stop()


async def test_inter_broker_listener_is_not_refused_at_max_connections():
    """Kafka's protected listener: clients reaching the broker-wide
    max.connections do not lock other brokers out of the inter-broker
    listener (max.connections.per.ip still applies there)."""
    counts = ConnectionCounts()
    clients = NetworkServer(HOST, 0, 1, echo, max_connections=1, connection_counts=counts,
                            listener_name="PLAINTEXT")
    brokers = NetworkServer(HOST, 0, 1, echo, max_connections=1, max_connections_per_ip=3,
                            connection_counts=counts, listener_name="INTERNAL",
                            inter_broker=True)
    await clients.start()
    await brokers.start()
    try:
        a = await Client.connect(clients)
        assert await a.request(b"a") == b"a"
        refused = await Client.connect(clients)  # the broker is full for clients
        assert await refused.closed_by_server()
        peers = [await Client.connect(brokers) for _ in range(2)]
        for i, peer in enumerate(peers):
            assert await peer.request(b"r%d" % i) == b"r%d" % i
        assert brokers.connections_rejected == 0 and brokers.connections_open == 2
        third = await Client.connect(brokers)  # the address's fourth connection overall
        assert await third.closed_by_server()
        assert brokers.connections_rejected == 1
        for c in (a, refused, third, *peers):
            c.writer.close()
    finally:
        await clients.stop()
        await brokers.stop()


@pytest.mark.parametrize("props,protected", [
    ({"listeners": "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
      "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
      "inter.broker.listener.name": "INTERNAL"}, {"CLIENT": False, "INTERNAL": True}),
    # Kafka protects the inter-broker listener only when there are others
    ({"listeners": "PLAINTEXT://127.0.0.1:0"}, {"PLAINTEXT": False}),
])
def test_broker_marks_its_inter_broker_listener(props, protected, tmp_path):
    from samsa.broker.server import Broker
    from samsa.config.broker import BrokerConfig
    broker = Broker(BrokerConfig.from_dict({**props, "log.dirs": str(tmp_path)}))
    assert {n.listener_name: n.inter_broker for n in broker._listener_servers()} == protected
