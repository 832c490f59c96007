"""The fault endpoint's HTTP answers, in process: an action that fails inside the
broker answers 500 with its reason, so a test kit client never waits on an open
connection."""
from __future__ import annotations

import asyncio
import json

from samsa.broker.faults.endpoint import FaultEndpoint
from samsa.broker.faults.injector import FaultInjector


async def _post(port: int, path: str, body: dict) -> tuple[int, dict]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    raw = json.dumps(body).encode()
    writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(raw)}\r\n\r\n".encode() + raw)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 30)
    writer.close()
    head, _, payload = answer.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(payload)


async def test_a_failing_action_answers_500_with_its_reason():
    async def move_leader(body):
        raise RuntimeError("the controller refused the move")

    endpoint = FaultEndpoint(FaultInjector(lambda topic_id: None), {"/faults/move-leader": move_leader})
    await endpoint.start(0)
    try:
        status, answer = await _post(endpoint.port, "/faults/move-leader", {"topic": "t"})
        assert status == 500
        assert "the controller refused the move" in answer["error"]
        status, answer = await _post(endpoint.port, "/faults/nowhere", {})
        assert status == 404
    finally:
        await endpoint.stop()
