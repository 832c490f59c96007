"""A hand-built ApiVersions v0 round trip, used to decide that a broker is ready.

Deliberately independent of samsa's own ``protocol`` package: readiness of the system
under test must not be judged by the code under test. ApiVersions v0 is the one
request every Kafka broker answers (its response header is always v0), so the same
probe works for samsa and for peers such as Tansu.
"""

from __future__ import annotations

import collections
import random
import socket
import struct

API_VERSIONS_KEY = 18


def api_versions_v0_request(correlation_id: int, client_id: str = "samsa-tests") -> bytes:
    """Size-prefixed frame: header v1 (api_key, api_version, correlation_id, client_id), empty body."""
    cid = client_id.encode()
    body = struct.pack(">hhih", API_VERSIONS_KEY, 0, correlation_id, len(cid)) + cid
    return struct.pack(">i", len(body)) + body


def recv_exactly(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from ``sock``; ConnectionError if it closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def probe_api_versions(host: str, port: int, timeout: float = 2.0, correlation_id: int = 7) -> int:
    """Send ApiVersions v0 and read the answer; returns its error code.

    Raises OSError (including ConnectionError, socket.timeout) when the broker does not
    accept the connection or does not answer with a well-formed frame carrying our
    correlation id.
    """
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(api_versions_v0_request(correlation_id))
        (size,) = struct.unpack(">i", recv_exactly(sock, 4))
        if not 6 <= size <= 1 << 20:
            raise ConnectionError(f"implausible ApiVersions response size {size}")
        payload = recv_exactly(sock, size)
    got_cid, error_code = struct.unpack_from(">ih", payload, 0)
    if got_cid != correlation_id:
        raise ConnectionError(f"ApiVersions answered correlation id {got_cid}, sent {correlation_id}")
    return error_code


_PORTS = random.SystemRandom()
_LOWEST_PORT = 10_000
# the ports this process handed out last: not handed out again soon (a CI run
# gave one broker's SSL and SASL_PLAINTEXT listeners the same random port)
_HANDED_OUT: collections.deque[int] = collections.deque(maxlen=1024)


def _ephemeral_low() -> int:
    """Where the kernel's range of local ports for outgoing connections starts."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now, for a server about to start.

    Taken below the kernel's ephemeral range, at random: a port the kernel
    handed out by binding to 0 is also what it hands the next outgoing
    connection, and a JVM (ZooKeeper) takes a second to bind, so under a busy
    test run a client's connection took the port first (BindException). Where
    the ephemeral range leaves no room below it, the bind-to-0 port as before."""
    low = _ephemeral_low()
    for _ in range(100) if low - _LOWEST_PORT >= 1000 else ():
        port = _PORTS.randrange(_LOWEST_PORT, low)
        if port in _HANDED_OUT:
            # free still, but handed to a server of ours that has not bound it
            # yet (a broker's listeners are chosen together, then started)
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            _HANDED_OUT.append(port)
            return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]
