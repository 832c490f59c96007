"""The port of the broker coordinating a group or a transactional id, asked of
any broker with FindCoordinator (v4: the keys as a list) until one is named
that answers as its coordinator."""
from __future__ import annotations

import asyncio

from samsa.client.aio import KafkaConnection
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (DescribeTransactionsRequest, FindCoordinatorRequest,
                                     OffsetFetchRequest)
from samsa.protocol.model import ApiKey

GROUP_KEY, TRANSACTION_KEY = 0, 1
# What a broker answers while the coordinator's partition is moving to it or
# loading: a client asks FindCoordinator again, as here.
COORDINATOR_MOVING = (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                      ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.NOT_COORDINATOR)


async def coordinator_port(port: int, key: str, key_type: int = GROUP_KEY) -> int:
    """Asked of the broker at ``port`` (127.0.0.1) until it names a
    coordinator that answers as one: right after the internal topic is made
    (the first FindCoordinator makes it), FindCoordinator answers
    COORDINATOR_NOT_AVAILABLE, then may name the partition's leader before
    that broker has taken the leadership up (NOT_COORDINATOR) or loaded it."""
    conn = await KafkaConnection.connect("127.0.0.1", port, client_id="finder")
    try:
        while True:
            r = await conn.call(FindCoordinatorRequest(key=key, key_type=key_type,
                                                       coordinator_keys=[key]),
                                api_key=ApiKey.FIND_COORDINATOR)
            (c,) = r.coordinators
            if c.error_code == ErrorCode.NONE and await _answers_as_coordinator(
                    c.port, key, key_type):
                return c.port
            assert c.error_code in (ErrorCode.NONE, *COORDINATOR_MOVING), c
            await asyncio.sleep(0.1)
    finally:
        await conn.close()


async def _answers_as_coordinator(port: int, key: str, key_type: int) -> bool:
    conn = await KafkaConnection.connect("127.0.0.1", port, client_id="finder")
    try:
        if key_type == GROUP_KEY:
            fetched = await conn.call(OffsetFetchRequest(group_id=key, topics=None),
                                      api_key=ApiKey.OFFSET_FETCH, version=7)
            code = fetched.error_code
        else:
            described = await conn.call(DescribeTransactionsRequest(transactional_ids=[key]),
                                        api_key=ApiKey.DESCRIBE_TRANSACTIONS)
            code = described.transaction_states[0].error_code
    finally:
        await conn.close()
    if code in COORDINATOR_MOVING:
        return False
    return True
