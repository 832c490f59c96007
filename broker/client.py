"""A blocking Kafka client for samsa's own command line tools.

One connection, one request at a time, over the same sans-IO core as the
asyncio client (``protocol.client``): versions are picked from what the
broker advertises in ApiVersions, capped at what protocol/ can encode.
"""
from __future__ import annotations

import socket
import sys
from typing import Callable

from protocol.client import ClientCore, NoCommonVersionError
from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import ApiVersionsRequest


class ClientError(Exception):
    pass


class SimpleClient:
    def __init__(self, bootstrap: str, client_id: str = "samsa-cli", timeout: float = 30.0):
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host or "localhost", int(port)), timeout=timeout)
        self.core = ClientCore(client_id)
        self._call(18, 0, ApiVersionsRequest())

    @property
    def versions(self) -> dict[int, tuple[int, int]]:
        return self.core.broker_versions

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _call(self, api_key: int, version: int, request):
        _, data = self.core.request(request, api_key=api_key, version=version)
        self.sock.sendall(data)
        while True:
            chunk = self.sock.recv(256 * 1024)
            if not chunk:
                raise ClientError("the broker closed the connection")
            try:
                done = self.core.receive(chunk)
            except ProtocolError as e:
                raise ClientError(f"bad response from the broker: {e}") from None
            if done:
                return done[0][1]

    def version_for(self, api_key: int) -> int:
        try:
            return self.core.version_for(api_key)
        except NoCommonVersionError as e:
            raise ClientError(str(e)) from None

    def call(self, api_key: int, request):
        return self._call(api_key, self.version_for(api_key), request)


def error_text(code: int, message: str | None = None) -> str:
    """Kafka's name for an error code, with the broker's message if any."""
    name = ErrorCode(code).name if code in ErrorCode._value2member_map_ else str(code)
    return f"{name}: {message}" if message else name


def run_tool(prog: str, bootstrap: str, action: Callable[[SimpleClient], int]) -> int:
    """Connect to ``bootstrap`` and run ``action``; an unreachable broker or a
    broken connection is one line naming the address, never a traceback."""
    try:
        client = SimpleClient(bootstrap)
    except OSError as e:
        print(f"{prog}: cannot reach the broker at {bootstrap}: {e.strerror or e}",
              file=sys.stderr)
        return 1
    try:
        with client:
            return action(client)
    except BrokenPipeError:
        raise  # the reader went away (| head): the command line ends quietly
    except (OSError, ClientError) as e:
        print(f"{prog}: {e}", file=sys.stderr)
        return 1
