"""A TCP relay in front of ZooKeeper that can stop passing bytes at an exact
point of a client's session, for tests that need ZooKeeper to go away at a
given step of a broker's start rather than at whatever step a signal lands on.

ZooKeeper's wire framing is a 4-byte big-endian length before each packet, and
a connection opens with the client's ConnectRequest answered by one
ConnectResponse. ``hold_after_handshake(n)`` lets the n-th connection from then
on finish that handshake (the client has its session and logs "connection
established") and then holds every byte on every connection, and every new
connection, until ``release()``: to the client, ZooKeeper stopped answering
right after it connected.
"""
from __future__ import annotations

import socket
import struct
import threading


class ZooKeeperRelay:
    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.connect = f"127.0.0.1:{self._listener.getsockname()[1]}"  # for zookeeper.connect
        self._flowing = threading.Event()
        self._flowing.set()
        self._lock = threading.Lock()
        self._hold_on: int | None = None   # connection number whose handshake arms the hold
        self._accepted = 0
        self.held = threading.Event()      # set once the hold has begun
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="zk-relay").start()

    def hold_after_handshake(self, nth: int) -> None:
        """Hold everything once the ``nth`` connection from now on has its
        ConnectResponse (1: the next one)."""
        with self._lock:
            self._hold_on = self._accepted + nth

    def release(self) -> None:
        self._flowing.set()

    def close(self) -> None:
        self._closed = True
        self._flowing.set()
        self._listener.close()
        with self._lock:
            for s in self._sockets:
                _close(s)

    # ------------------------------------------------------------ relaying

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._accepted += 1
                arms = self._accepted == self._hold_on
                self._sockets.append(client)
            threading.Thread(target=self._open, args=(client, arms), daemon=True).start()

    def _open(self, client: socket.socket, arms_hold: bool) -> None:
        self._flowing.wait()
        try:
            server = socket.create_connection(self._upstream, timeout=5)
            server.settimeout(None)
        except OSError:
            _close(client)  # ZooKeeper down: the client sees a refused connection
            return
        with self._lock:
            self._sockets.append(server)
        threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
        self._pump(server, client, arms_hold)

    def _pump(self, src: socket.socket, dst: socket.socket, arms_hold: bool) -> None:
        # ``arms_hold``: the first packet from the server is the ConnectResponse;
        # the hold begins right after it is passed on.
        until_hold = None if not arms_hold else -1   # bytes left of that packet
        pending = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                pending += data
                if until_hold is not None:
                    if until_hold < 0:
                        if len(pending) < 4:
                            continue
                        until_hold = 4 + struct.unpack(">i", pending[:4])[0]
                    if len(pending) < until_hold:
                        continue
                    self._flowing.wait()
                    # held before the client can have its answer: nothing it
                    # sends after the handshake may slip through
                    self._flowing.clear()
                    dst.sendall(pending[:until_hold])
                    pending = pending[until_hold:]
                    until_hold = None
                    self.held.set()
                self._flowing.wait()
                if pending:
                    dst.sendall(pending)
                    pending = b""
        except OSError:
            pass
        finally:
            _close(src)
            _close(dst)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
