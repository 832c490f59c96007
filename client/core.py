"""The client side of one Kafka connection, without I/O.

What every samsa client (the asyncio transport, the blocking one the
command-line tools use, the replica fetchers, the tests' wire checks) does
the same way lives here: correlation ids, framing of the byte stream,
matching each response to its request's API and version, and choosing the
version of each API from what the broker advertised in ApiVersions.

    core = ClientCore("samsa-tool")
    wire = core.request(ApiVersionsRequest(), api_key=ApiKey.API_VERSIONS, version=0)
    ...write wire, read bytes...
    for correlation_id, response in core.receive(data): ...

Responses come back in request order (Kafka guarantees it per connection);
a response whose correlation id is not the oldest outstanding one is a
broken stream and raises ``ProtocolError``.
"""
from __future__ import annotations

import collections
import struct
from typing import Any, NamedTuple

from samsa.protocol.errors import ProtocolError
from samsa.protocol.messages import API_BY_KEY, RequestHeader, decode_response, encode_request
from samsa.protocol.messages.model import Message
from samsa.protocol.messages.wire import Buf
from samsa.protocol.model import ApiKey

_SIZE = struct.Struct(">i")


class NoCommonVersionError(Exception):
    """The broker does not serve any version of an API that we can encode."""

    def __init__(self, api_key: int, detail: str) -> None:
        name = API_BY_KEY[api_key].name if api_key in API_BY_KEY else f"API {api_key}"
        super().__init__(f"the broker does not support {name}: {detail}")
        self.api_key = api_key


class Pending(NamedTuple):
    correlation_id: int
    api_key: int
    version: int
    expects_response: bool


class ClientCore:
    def __init__(self, client_id: str | None = "samsa", max_response_bytes: int = 1 << 30) -> None:
        self.client_id = client_id
        self.max_response_bytes = max_response_bytes
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._next_correlation = 0
        self._pending: collections.deque[Pending] = collections.deque()
        self._buf = bytearray()

    # ------------------------------------------------------------ versions

    def learn_versions(self, api_versions_response: Any) -> None:
        """Record what the broker serves (an ApiVersions response)."""
        self.broker_versions = {k.api_key: (k.min_version, k.max_version)
                                for k in api_versions_response.api_keys}

    def version_for(self, api_key: int, highest: int | None = None) -> int:
        """The highest version both sides speak (at most ``highest``)."""
        ours = API_BY_KEY.get(api_key)
        if ours is None:
            raise NoCommonVersionError(api_key, "samsa cannot encode it")
        if api_key not in self.broker_versions:
            raise NoCommonVersionError(api_key, "not advertised in ApiVersions")
        lo, hi = self.broker_versions[api_key]
        v: int = min(hi, ours.max_version, highest if highest is not None else hi)
        if v < max(lo, ours.min_version):
            raise NoCommonVersionError(api_key, f"broker serves v{lo}-{hi}, samsa "
                                                f"v{ours.min_version}-{ours.max_version}")
        return v

    # ------------------------------------------------------------ requests

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def outstanding(self, correlation_id: int) -> bool:
        """Whether a request with this correlation id still awaits its answer."""
        return any(p.correlation_id == correlation_id for p in self._pending)

    def request(self, request: Message, *, api_key: int, version: int | None = None,
                expects_response: bool = True) -> tuple[int, bytes]:
        """Encode ``request``; returns (correlation id, bytes to send). A Produce
        with acks=0 gets no answer: say so with ``expects_response=False``."""
        if version is None:
            version = self.version_for(api_key)
        correlation_id = self._next_correlation
        self._next_correlation = (self._next_correlation + 1) & 0x7FFFFFFF
        data = encode_request(RequestHeader(api_key, version, correlation_id, self.client_id),
                              request)
        if expects_response:
            self._pending.append(Pending(correlation_id, api_key, version, True))
        return correlation_id, data

    # ------------------------------------------------------------ responses

    def receive(self, data: bytes) -> list[tuple[int, object]]:
        """Feed received bytes; returns the responses completed by them, in order."""
        buf = self._buf
        buf += data
        out = []
        pos = 0
        while len(buf) - pos >= 4:
            size = self.frame_size(buf, pos)
            if len(buf) - pos - 4 < size:
                break
            frame = bytes(buf[pos + 4:pos + 4 + size])
            pos += 4 + size
            out.append(self.receive_frame(frame))
        if pos:
            del buf[:pos]
        return out

    def frame_size(self, buf: Buf, pos: int = 0) -> int:
        """The size a response frame's 4-byte prefix at ``pos`` announces;
        ProtocolError when it cannot be a response. For transports that read
        each frame straight into a buffer of its own (no stream buffer)."""
        size: int = _SIZE.unpack_from(buf, pos)[0]
        if size < 4 or size > self.max_response_bytes:
            raise ProtocolError(f"response frame size {size} outside 4..{self.max_response_bytes}")
        return size

    def receive_frame(self, frame: Buf) -> tuple[int, object]:
        """One whole response frame (without its size prefix): (correlation id,
        response). ``frame`` may be any bytes-like object; the response may
        keep views of it."""
        return self._complete(frame)

    def _complete(self, frame: Buf) -> tuple[int, object]:
        if not self._pending:
            raise ProtocolError("a response arrived with no request outstanding")
        expected = self._pending[0]
        correlation_id: int = _SIZE.unpack_from(frame, 0)[0]
        if correlation_id != expected.correlation_id:
            raise ProtocolError(f"response for correlation id {correlation_id}, expected "
                                f"{expected.correlation_id}")
        self._pending.popleft()
        _, response = decode_response(frame, expected.api_key, expected.version)
        if expected.api_key == ApiKey.API_VERSIONS and getattr(response, "error_code", 0) == 0:
            self.learn_versions(response)
        return correlation_id, response

    def fail_all(self) -> list[Pending]:
        """The connection is gone: every outstanding request, for the caller to fail."""
        pending = list(self._pending)
        self._pending.clear()
        self._buf.clear()
        return pending
