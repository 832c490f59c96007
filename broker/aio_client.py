"""An asyncio connection to a Kafka-protocol broker, over ``protocol.client``.

Used where samsa itself is a client on an event loop (replica fetchers,
requests between brokers, async tools and tests). Requests may be pipelined:
``call`` can be awaited from several tasks at once; one reader task matches
responses to requests through the sans-IO core, in order.

    conn = await KafkaConnection.connect("127.0.0.1", 9092, client_id="samsa-fetcher")
    response = await conn.call(MetadataRequest(topics=None), api_key=3)
    await conn.close()
"""
from __future__ import annotations

import asyncio
import collections
from typing import Any

from protocol.client import ClientCore
from protocol.errors import ProtocolError
from protocol.messages import ApiVersionsRequest

API_VERSIONS = 18


class ConnectionClosedError(ConnectionError):
    """The connection closed (or broke) before the response arrived."""


class KafkaConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                 core: ClientCore, address: str) -> None:
        self._reader = reader
        self._writer = writer
        self.core = core
        self.address = address
        self._waiters: collections.deque[asyncio.Future] = collections.deque()
        self._closed_error: BaseException | None = None
        self._read_task = asyncio.get_running_loop().create_task(self._read_loop())

    @classmethod
    async def connect(cls, host: str, port: int, *, client_id: str | None = "samsa",
                      timeout: float = 30.0) -> "KafkaConnection":
        """Open the connection and learn the broker's API versions."""
        address = f"{host}:{port}"
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
        except (OSError, asyncio.TimeoutError) as e:
            raise ConnectionClosedError(f"could not connect to {address}: {e or 'timed out'}") \
                from None
        conn = cls(reader, writer, ClientCore(client_id), address)
        try:
            await asyncio.wait_for(conn.call(ApiVersionsRequest(client_software_name="samsa",
                                                                client_software_version="0"),
                                             api_key=API_VERSIONS, version=3), timeout)
        except BaseException:
            await conn.close()
            raise
        return conn

    @property
    def closed(self) -> bool:
        return self._closed_error is not None

    async def call(self, request: Any, *, api_key: int, version: int | None = None,
                   expects_response: bool = True) -> Any:
        """Send one request and wait for its response (None when none is expected)."""
        if self._closed_error is not None:
            raise ConnectionClosedError(f"connection to {self.address} is closed: "
                                        f"{self._closed_error}")
        _, data = self.core.request(request, api_key=api_key, version=version,
                                    expects_response=expects_response)
        future: asyncio.Future | None = None
        if expects_response:
            future = asyncio.get_running_loop().create_future()
            self._waiters.append(future)
        self._writer.write(data)
        try:
            await self._writer.drain()
        except (OSError, RuntimeError) as e:
            self._fail(ConnectionClosedError(f"send to {self.address} failed: {e}"))
        if future is None:
            return None
        return await future

    async def _read_loop(self) -> None:
        try:
            while True:
                data = await self._reader.read(256 * 1024)
                if not data:
                    raise ConnectionClosedError(f"{self.address} closed the connection")
                for _, response in self.core.receive(data):
                    future = self._waiters.popleft()
                    if not future.done():
                        future.set_result(response)
        except asyncio.CancelledError:
            self._fail(ConnectionClosedError("connection closed"))
            raise
        except (OSError, ProtocolError, ConnectionClosedError) as e:
            self._fail(e if isinstance(e, ConnectionClosedError)
                       else ConnectionClosedError(f"connection to {self.address} broke: {e}"))

    def _fail(self, error: BaseException) -> None:
        if self._closed_error is None:
            self._closed_error = error
        self.core.fail_all()
        while self._waiters:
            future = self._waiters.popleft()
            if not future.done():
                future.set_exception(error)
        self._writer.close()

    async def close(self) -> None:
        self._read_task.cancel()
        try:
            await self._read_task
        except (asyncio.CancelledError, Exception):
            pass
        self._fail(ConnectionClosedError("connection closed"))
        try:
            await self._writer.wait_closed()
        except (OSError, RuntimeError):
            pass
