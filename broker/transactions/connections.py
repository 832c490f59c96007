"""Connections from the transaction coordinator's loop to other brokers
(markers to partition leaders, produce verification to coordinators): one
pipelined connection per broker, opened once however many callers need it at
the same moment, and dropped only by a caller that saw that very connection
fail (a newer one another caller opened meanwhile stays).
"""
from __future__ import annotations

import asyncio

from samsa.client.aio import ConnectionClosedError, KafkaConnection
from ..metadata import BrokerEndpoint
from ..security.inter_broker import PLAINTEXT, InterBrokerSecurity


class BrokerConnections:
    def __init__(self, client_id: str, timeout_s: float,
                 security: InterBrokerSecurity = PLAINTEXT) -> None:
        self._client_id = client_id
        self._security = security  # TLS and SASL login of the inter-broker listener
        self._timeout = timeout_s
        self._connections: dict[int, KafkaConnection] = {}
        self._opening: dict[int, asyncio.Lock] = {}

    async def get(self, endpoint: BrokerEndpoint | None, broker_id: int) -> KafkaConnection:
        """The connection to ``broker_id`` (at ``endpoint``, None: not registered,
        ConnectionClosedError)."""
        conn = self._connections.get(broker_id)
        if conn is not None and not conn.closed:
            return conn
        async with self._opening.setdefault(broker_id, asyncio.Lock()):
            conn = self._connections.get(broker_id)
            if conn is not None and not conn.closed:
                return conn
            if endpoint is None:
                raise ConnectionClosedError(f"broker {broker_id} is not registered")
            conn = await KafkaConnection.connect(endpoint.host, endpoint.port,
                                                 client_id=self._client_id,
                                                 timeout=self._timeout,
                                                 tls=self._security.tls,
                                                 sasl=self._security.sasl)
            self._connections[broker_id] = conn
            return conn

    def drop(self, broker_id: int, conn: KafkaConnection | None) -> None:
        """``conn`` failed: forget it (if it is still the one kept) and close it."""
        if conn is not None and self._connections.get(broker_id) is conn:
            del self._connections[broker_id]
        if conn is not None:
            asyncio.get_running_loop().create_task(conn.close())

    async def close(self) -> None:
        for conn in list(self._connections.values()):
            await conn.close()
        self._connections.clear()
