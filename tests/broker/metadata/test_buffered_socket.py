"""kazoo's socket read ahead (buffered_socket.py) and the inline watchers of
the store's kazoo handler: packets are handed over whole and in order, a
buffered packet is readable without asking the kernel, requests to send are
still noticed during a flood of answers, and a watcher marked ``runs_inline``
runs on the thread that read its event."""
from __future__ import annotations

import select
import socket
import struct
import threading

from kazoo.protocol.states import Callback

from samsa.broker.metadata.zookeeper import buffered_socket
from samsa.broker.metadata.zookeeper.buffered_socket import BufferedSocket, select_buffered
from samsa.broker.metadata.zookeeper.session import _WatchReadPool


def _framed(i: int) -> bytes:
    body = b"packet-%d" % i
    return struct.pack(">i", len(body)) + body


def _read_packet(sock: BufferedSocket) -> bytes:
    # as kazoo's _read_header: the length, then the body, each maybe in pieces
    def read(n: int) -> bytes:
        out = b""
        while len(out) < n:
            out += sock.recv(n - len(out))
        return out
    return read(struct.unpack(">i", read(4))[0])


def test_many_packets_are_read_with_one_system_call_and_come_out_whole():
    a, b = socket.socketpair()
    with a, b:
        b.sendall(b"".join(_framed(i) for i in range(500)))
        sock = BufferedSocket(a)
        first = _read_packet(sock)
        assert first == b"packet-0"
        assert sock.pending() == sock.buffered() > 0   # the rest came with the first recv
        a.setblocking(False)   # nothing more is asked of the kernel for the rest
        assert [_read_packet(sock) for _ in range(499)] == [b"packet-%d" % i
                                                           for i in range(1, 500)]
        assert sock.pending() == 0


def test_a_buffered_socket_is_readable_at_once_and_the_others_are_looked_at_now_and_then():
    a, b = socket.socketpair()
    wake_r, wake_w = socket.socketpair()
    with a, b, wake_r, wake_w:
        b.sendall(_framed(1) + _framed(2))
        sock = BufferedSocket(a)
        polls: list[float | None] = []

        def poll(rlist, wlist, xlist, timeout=None):
            polls.append(timeout)
            return select.select(rlist, wlist, xlist, timeout)
        assert _read_packet(sock) == b"packet-1"
        wake_w.send(b"x")   # kazoo's "a request to send"
        answers = [select_buffered(poll, [sock, wake_r], [], [], 5.0)
                   for _ in range(buffered_socket.POLL_EVERY + 1)]
        assert all(sock in r for r, _, _ in answers)
        # no poll until POLL_EVERY buffered answers; then one that does not wait
        assert polls == [0]
        assert wake_r in answers[-1][0]
        assert _read_packet(sock) == b"packet-2"
        # nothing buffered: an ordinary wait
        r, _, _ = select_buffered(poll, [sock, wake_r], [], [], 0.01)
        assert sock not in r and polls == [0, 0.01]


def test_a_watcher_marked_runs_inline_runs_on_the_dispatching_thread():
    handler = _WatchReadPool()
    handler.start()
    try:
        ran_on: dict[str, str] = {}
        queued = threading.Event()

        def inline(name):
            ran_on[name] = threading.current_thread().name
        inline.runs_inline = True  # type: ignore[attr-defined]

        def ordinary(name):
            ran_on[name] = threading.current_thread().name
            queued.set()
        handler.dispatch_callback(Callback("watch", inline, ("inline",)))
        handler.dispatch_callback(Callback("watch", ordinary, ("queued",)))
        assert queued.wait(10)
        assert ran_on["inline"] == threading.current_thread().name
        assert ran_on["queued"] != threading.current_thread().name
    finally:
        handler.stop()
