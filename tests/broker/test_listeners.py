"""A broker's listeners share its connection limits: max.connections and
max.connections.per.ip count over all of them, as in Kafka."""
from __future__ import annotations

import pytest

from broker.network import NetworkServer
from broker.network.server import ConnectionCounts
from tests.broker.test_network import HOST, Client, echo, until

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
