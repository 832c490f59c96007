"""kazoo's connection socket with its reads served from a buffer.

kazoo's connection thread reads one packet at a time: a wait for the socket
(poll), then a wait and a ``recv`` for the 4-byte length, then a wait and a
``recv`` for the body, five system calls per packet, each one releasing
the GIL. In a busy broker another thread takes the GIL at each of them, and
kazoo's thread waits its turn again (up to the 5 ms switch interval) to go
on: a controller's writes at 30,000 partitions bring 30,000 watch events to
every broker's session, and the packets trickled in at a few hundred a
second while the session's answers (the controller's own, the brokers'
state reads, pings) queued behind them.

``BufferedSocket.recv`` takes whatever the socket holds (up to
``CHUNK``) in one system call and serves kazoo's small reads from it;
``pending()`` (which kazoo asks of TLS sockets, and then reads without
waiting) says how much is buffered; ``select`` says a socket with a
buffered packet is readable without asking the kernel, looking at the
other descriptors (kazoo's wake-up for requests to send) every
``POLL_EVERY`` such answers so that sending keeps up with a flood of events.
"""
from __future__ import annotations

import socket
import ssl
from typing import Any, Callable, Sequence

CHUNK = 256 * 1024
POLL_EVERY = 64  # buffered answers between two looks at the other descriptors


class BufferedSocket:
    """A connected socket whose ``recv`` reads ahead; anything else is the
    socket's own."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._buffer = b""
        self._at = 0
        self.buffered_answers = 0  # select's answers from the buffer since it last polled

    def buffered(self) -> int:
        return len(self._buffer) - self._at

    def pending(self) -> int:
        inner = self._sock.pending() if isinstance(self._sock, ssl.SSLSocket) else 0
        return self.buffered() + inner

    def recv(self, size: int, flags: int = 0) -> bytes:
        if flags:
            return self._sock.recv(size, flags)
        if self._at >= len(self._buffer):
            data = self._sock.recv(max(size, CHUNK))
            if len(data) <= size:
                return data
            self._buffer, self._at = data, 0
        end = self._at + size
        chunk = self._buffer[self._at:end]
        self._at = min(end, len(self._buffer))
        if self._at >= len(self._buffer):
            self._buffer, self._at = b"", 0
        return chunk

    def fileno(self) -> int:
        return self._sock.fileno()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


Select = Callable[..., tuple[list, list, list]]


def select_buffered(select: Select, rlist: Sequence[Any], wlist: Sequence[Any],
                    xlist: Sequence[Any], timeout: float | None = None) -> tuple[list, list, list]:
    """``select`` (kazoo's signature), where a ``BufferedSocket`` holding
    bytes is readable at once."""
    ready = [s for s in rlist if isinstance(s, BufferedSocket) and s.buffered()]
    if not ready:
        return select(rlist, wlist, xlist, timeout)
    if all(s.buffered_answers < POLL_EVERY for s in ready):
        for s in ready:
            s.buffered_answers += 1
        return ready, [], []
    for s in ready:
        s.buffered_answers = 0
    readable, writable, errors = select(rlist, wlist, xlist, 0)
    return ready + [s for s in readable if s not in ready], writable, errors
