"""The test kit's pause: requests held until resume go on in the order they
arrived, as a stalled Kafka broker, reading one request of a connection at a
time, would take them up again (a producer's pipelined requests in sequence),
and one arriving right after the resume goes after them."""
from __future__ import annotations

import asyncio
import struct

from samsa.broker.faults.injector import FaultInjector
from samsa.broker.network.context import ConnectionContext
from samsa.protocol.messages import ApiVersionsRequest, RequestHeader, encode_request
from samsa.protocol.model import ApiKey


class _Connection:
    closed = False

    @property
    def peer_gone(self) -> bool:
        return self.closed

    def mute_remaining(self) -> float:
        return 0.0


def _frame(correlation_id: int) -> memoryview:
    wire = encode_request(RequestHeader(api_key=ApiKey.API_VERSIONS, api_version=3,
                                        correlation_id=correlation_id, client_id="app"),
                          ApiVersionsRequest(client_software_name="t", client_software_version="1"))
    return memoryview(bytearray(wire))[4:]


async def test_requests_held_by_a_pause_go_on_in_the_order_they_arrived():
    injector = FaultInjector(lambda topic_id: None)
    went_on: list[int] = []

    async def dispatcher(conn, frame):
        went_on.append(struct.unpack_from(">i", frame, 4)[0])  # the correlation id
        return None
    handle = injector.wrap(dispatcher)
    conn = ConnectionContext("c", ("127.0.0.1", 1), ("127.0.0.1", 2), None, 0, _Connection())
    injector.rules.paused = True
    held = []
    for c in range(1, 6):
        held.append(asyncio.create_task(handle(conn, _frame(c))))
        # arrivals spread over the pause's poll period, so that each held
        # request's poll comes round at another moment after the resume
        await asyncio.sleep(0.003)
    assert went_on == []
    injector.rules.paused = False
    late = asyncio.create_task(handle(conn, _frame(6)))
    await asyncio.wait_for(asyncio.gather(*held, late), 30)
    assert went_on == [1, 2, 3, 4, 5, 6]
    assert not conn.holds_requests()


async def test_a_request_whose_client_went_while_paused_is_not_handled():
    injector = FaultInjector(lambda topic_id: None)
    went_on: list[int] = []

    async def dispatcher(conn, frame):
        went_on.append(struct.unpack_from(">i", frame, 4)[0])
        return None
    handle = injector.wrap(dispatcher)
    network = _Connection()
    conn = ConnectionContext("c", ("127.0.0.1", 1), ("127.0.0.1", 2), None, 0, network)
    injector.rules.paused = True
    held = asyncio.create_task(handle(conn, _frame(1)))
    await asyncio.sleep(0)
    network.closed = True   # the client went
    injector.rules.paused = False
    assert await asyncio.wait_for(held, 30) is None
    assert went_on == []
