"""The port of the broker coordinating a group or a transactional id, asked of
any broker with FindCoordinator (v4: the keys as a list) until one is named."""
from __future__ import annotations

import asyncio

from samsa.client.aio import KafkaConnection
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import FindCoordinatorRequest
from samsa.protocol.model import ApiKey

GROUP_KEY, TRANSACTION_KEY = 0, 1


async def coordinator_port(port: int, key: str, key_type: int = GROUP_KEY) -> int:
    """Asked of the broker at ``port`` (127.0.0.1) until it names a coordinator
    (right after a topic or a broker starts, it answers COORDINATOR_NOT_AVAILABLE)."""
    conn = await KafkaConnection.connect("127.0.0.1", port, client_id="finder")
    try:
        while True:
            r = await conn.call(FindCoordinatorRequest(key=key, key_type=key_type,
                                                       coordinator_keys=[key]),
                                api_key=ApiKey.FIND_COORDINATOR)
            (c,) = r.coordinators
            if c.error_code == ErrorCode.NONE:
                return c.port
            await asyncio.sleep(0.1)
    finally:
        await conn.close()
