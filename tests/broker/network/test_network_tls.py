"""NetworkServer on a TLS listener with real TLS client sockets: the same
framing, ordering, sendfile-region and backpressure behaviour as plaintext
(see test_network.py), now through TlsConnection."""
from __future__ import annotations

import os
import socket
import ssl
import struct
import tempfile

import pytest

from samsa.broker.network import NetworkServer
from samsa.broker.security.ssl_principal import SslPrincipalMapper
from samsa.broker.security.tls_config import ListenerTls
from tests.broker.network.test_network import HOST, Client, Region, echo, frame, until
from tests.support.tls_certs import make_certs

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


def _server_tls(certs, client_auth: int = ssl.CERT_NONE) -> ListenerTls:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(certs.server))
    ctx.verify_mode = client_auth
    if client_auth != ssl.CERT_NONE:
        ctx.load_verify_locations(cafile=str(certs.ca))
    return ListenerTls(ctx, SslPrincipalMapper("RULE:^CN=([^,]*),.*$/$1/L,DEFAULT"))


def _client_ctx(certs, with_cert: bool = False) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(certs.ca))
    if with_cert:
        ctx.load_cert_chain(str(certs.client_cert), str(certs.client_key))
    return ctx


@pytest.fixture
async def tls_server(certs):
    servers: list[NetworkServer] = []

    async def make(handler=echo, client_auth: int = ssl.CERT_NONE, **kw) -> NetworkServer:
        s = NetworkServer(HOST, 0, 1, handler, tls=_server_tls(certs, client_auth),
                          listener_name="SSL", security_protocol="SSL", **kw)
        await s.start()
        servers.append(s)
        return s

    yield make
    for s in servers:
        await s.stop()


async def test_pipelined_frames_split_across_records(tls_server, certs):
    server = await tls_server()
    c = await Client.connect(server, ssl=_client_ctx(certs), server_hostname="localhost")
    payloads = [os.urandom(n) for n in (0, 1, 5, 4096, 70_000, 300_000, 17)]
    data = b"".join(frame(p) for p in payloads)
    for i in range(0, len(data), 9_999):  # frames straddle TLS records and reads
        await c.send(data[i:i + 9_999])
    for p in payloads:
        assert await c.response() == p
    c.writer.close()


async def test_file_regions_are_encrypted_in_order_under_backpressure(tls_server, certs):
    tmp = tempfile.TemporaryFile()
    content = os.urandom(3 * 1024 * 1024)
    tmp.write(content)
    tmp.flush()

    async def handler(conn, f):
        start, length = struct.unpack(">ii", bytes(f))
        return [struct.pack(">i", length + 3), b"abc", Region(tmp, start, length)]

    server = await tls_server(handler, max_pending_response_bytes=256 * 1024)
    c = await Client.connect(server, ssl=_client_ctx(certs), server_hostname="localhost")
    asks = [(0, 3 * 1024 * 1024), (5, 1), (1000, 700_000), (0, 0)]
    await c.send(b"".join(frame(struct.pack(">ii", s, n)) for s, n in asks))
    for s, n in asks:
        assert await c.response() == b"abc" + content[s:s + n]
    c.writer.close()
    tmp.close()


def _blocking_tls(port: int, ctx: ssl.SSLContext) -> tuple[socket.socket, ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO]:
    """A TLS session over a plain socket we can half-close (SSLSocket.shutdown
    would drop the session)."""
    sock = socket.create_connection((HOST, port), timeout=20)
    bio_in, bio_out = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ctx.wrap_bio(bio_in, bio_out, server_hostname="localhost")
    while True:
        try:
            obj.do_handshake()
            break
        except ssl.SSLWantReadError:
            sock.sendall(bio_out.read())
            bio_in.write(sock.recv(65536))
    sock.sendall(bio_out.read())
    return sock, obj, bio_in, bio_out


async def test_requests_before_a_half_close_are_all_answered_despite_pausing(tls_server, certs):
    import asyncio
    server = await tls_server(max_inflight_requests=2)
    port = server.port

    def run() -> int:
        sock, obj, bio_in, bio_out = _blocking_tls(port, _client_ctx(certs))
        for i in range(300):
            obj.write(frame(b"%d" % i))
        sock.sendall(bio_out.read())
        sock.shutdown(socket.SHUT_WR)  # EOF right behind the requests
        got = b""
        while True:
            data = sock.recv(65536)
            if not data:
                break
            bio_in.write(data)
            try:
                while True:
                    got += obj.read(65536)
            except (ssl.SSLWantReadError, ssl.SSLZeroReturnError):
                pass
        sock.close()
        count, pos = 0, 0
        while pos + 4 <= len(got):
            (n,) = struct.unpack_from(">i", got, pos)
            assert got[pos + 4:pos + 4 + n] == b"%d" % count
            pos += 4 + n
            count += 1
        return count

    assert await asyncio.get_running_loop().run_in_executor(None, run) == 300


async def test_client_certificate_names_the_principal(tls_server, certs):
    seen = []

    async def handler(conn, f):
        seen.append(str(conn.principal))
        return [frame(b"ok")]

    server = await tls_server(handler, client_auth=ssl.CERT_OPTIONAL)
    with_cert = await Client.connect(server, ssl=_client_ctx(certs, with_cert=True),
                                     server_hostname="localhost")
    assert await with_cert.request(b"x") == b"ok"
    without = await Client.connect(server, ssl=_client_ctx(certs), server_hostname="localhost")
    assert await without.request(b"x") == b"ok"
    assert seen == ["User:alice", "User:ANONYMOUS"]
    with_cert.writer.close()
    without.writer.close()


async def test_handshake_failures_close_only_those_connections(tls_server, certs):
    server = await tls_server(client_auth=ssl.CERT_REQUIRED)
    # The alert, a reset or a plain EOF, depending on who gets there first.
    with pytest.raises((ssl.SSLError, ConnectionError, EOFError)):
        c = await Client.connect(server, ssl=_client_ctx(certs), server_hostname="localhost")
        await c.request(b"x")  # TLS 1.3: the refusal arrives after the client's Finished
    good = await Client.connect(server, ssl=_client_ctx(certs, with_cert=True),
                                server_hostname="localhost")
    assert await good.request(b"still serving") == b"still serving"
    await until(lambda: server.connections_open == 1)  # the refused one is gone, not this one
    good.writer.close()
