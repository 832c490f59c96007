"""A minimal blocking Kafka client for samsa's own command line tools.

One connection, one request at a time; versions are picked from what the
broker advertises in ApiVersions, capped at what protocol/ can encode.
"""
from __future__ import annotations

import socket
import struct

from protocol.messages import (API_BY_KEY, ApiVersionsRequest, RequestHeader,
                               decode_response, encode_request)


class ClientError(Exception):
    pass


class SimpleClient:
    def __init__(self, bootstrap: str, client_id: str = "samsa-cli", timeout: float = 30.0):
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host or "localhost", int(port)), timeout=timeout)
        self.client_id = client_id
        self._correlation = 0
        self.versions = {}
        resp = self._call(18, 0, ApiVersionsRequest())
        for k in resp.api_keys:
            self.versions[k.api_key] = (k.min_version, k.max_version)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ClientError("the broker closed the connection")
            buf += chunk
        return bytes(buf)

    def _call(self, api_key: int, version: int, request):
        self._correlation += 1
        header = RequestHeader(api_key, version, self._correlation, self.client_id)
        self.sock.sendall(encode_request(header, request))
        (size,) = struct.unpack(">i", self._recv_exact(4))
        correlation_id, response = decode_response(self._recv_exact(size), api_key, version)
        if correlation_id != self._correlation:
            raise ClientError(f"answer for request {correlation_id}, expected {self._correlation}")
        return response

    def version_for(self, api_key: int) -> int:
        if api_key not in self.versions:
            raise ClientError(f"the broker does not support API key {api_key}")
        lo, hi = self.versions[api_key]
        ours = API_BY_KEY[api_key]
        v = min(hi, ours.max_version)
        if v < max(lo, ours.min_version):
            raise ClientError(f"no common version for API key {api_key}")
        return v

    def call(self, api_key: int, request):
        return self._call(api_key, self.version_for(api_key), request)
