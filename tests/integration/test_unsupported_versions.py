"""A request in a version the broker does not serve (issue 24, item 6), as
Kafka answers it: ApiVersions of any version, also a future flexible one
with a v2 header and tagged fields, gets a v0 response with UNSUPPORTED_VERSION
and the served ranges; any other API closes the connection (Kafka's
SocketServer.parseRequestHeader: no response can be encoded in a version the
client reads), the broker saying which versions it serves, and keeps serving."""
from __future__ import annotations

import socket
import struct

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import MetadataRequest, decode_response
from tests.support.waiting import wait_until


def _send(broker, body: bytes) -> bytes | None:
    """One request frame; the response frame, or None if the broker closed the connection."""
    with socket.create_connection((broker.host, broker.port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf[4:]


def test_future_api_versions_gets_v0_with_the_served_ranges(broker):
    # ApiVersions v9 as a newer client would send it: header v2 (client id, then
    # an empty tag buffer) and a v3+ body (software name and version, tags)
    header = struct.pack(">hhih", 18, 9, 77, 4) + b"java" + b"\x00"
    body = b"\x0bapache-kafka" + b"\x065.0.0" + b"\x00"
    frame = _send(broker, header + body)
    assert frame is not None
    corr, err = struct.unpack_from(">ih", frame)
    assert (corr, err) == (77, ErrorCode.UNSUPPORTED_VERSION)
    _, resp = decode_response(frame, 18, 0)
    ranges = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert ranges[18] == (0, 4) and ranges[34] == (0, 2) and ranges[74] == (0, 1)


def test_other_apis_in_an_unserved_version_close_the_connection(broker):
    for key, version in [(3, 99), (0, 14), (9999, 0)]:
        assert _send(broker, struct.pack(">hhih", key, version, 5, 1) + b"x" + b"\x00" * 8) is None
    # the broker says what it serves, and goes on serving
    wait_until(lambda: "unsupported api_key 3 version 99 (this broker serves Metadata v0-13)"
               in broker.log_path.read_text(), what="the log line")
    with SimpleClient(broker.bootstrap) as client:
        assert client.call(3, MetadataRequest(topics=None)).brokers
