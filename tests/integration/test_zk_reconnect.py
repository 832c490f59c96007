"""A broker that lost ZooKeeper for a while tries it again often enough to find
it back before its session expires, as Kafka's ZooKeeper client does (it tries
again within a second).

kazoo's default waits about twice as long after each failed attempt (up to
an hour): after ten failures, about 50 s, so a broker whose ZooKeeper was away
for a minute came back long after it, its session expired by then, its
registration and its partitions' leadership gone for a while."""
from __future__ import annotations

import socket
import threading

from kazoo.client import KazooClient

from samsa.testing.waiting import wait_until

CHROOT = "/reconnect"
SESSION_TIMEOUT_MS = 6000
ATTEMPTS = 10  # kazoo's default has by then grown its wait to about a minute (jittered)


class _RefusingZooKeeper:
    """Listens on the port of a ZooKeeper that is down and closes every
    connection unanswered, counting them: each is one attempt of the broker's
    ZooKeeper client, which it takes as a failure and tries again later."""

    def __init__(self, host: str, port: int) -> None:
        self._server = socket.create_server((host, port), reuse_port=False)
        self._server.settimeout(0.2)
        self.attempts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._server.accept()
            except (TimeoutError, socket.timeout):
                continue
            conn.close()
            self.attempts += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._server.close()


def test_a_broker_finds_zookeeper_back_before_its_session_expires(zookeeper, broker_factory):
    broker = broker_factory({"zookeeper.connect": zookeeper.connect + CHROOT,
                             "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)})
    reader = KazooClient(hosts=zookeeper.connect + CHROOT)
    reader.start(timeout=30)
    registration = f"/brokers/ids/{broker.broker_id}"
    wait_until(lambda: reader.exists(registration), 30, "the broker registered")
    owner = reader.exists(registration).ephemeralOwner
    reader.stop()
    reader.close()

    since = broker.log_path.stat().st_size
    zookeeper.kill()
    refusing = _RefusingZooKeeper(zookeeper.host, zookeeper.port)
    try:
        # The broker has failed often enough for a doubling wait to have grown
        # past its session timeout.
        wait_until(lambda: refusing.attempts >= ATTEMPTS, 120,
                   f"{ATTEMPTS} connection attempts by the broker")
    finally:
        refusing.close()
    zookeeper.start()  # the same data: the broker's session is still there, for 6 s

    reader = KazooClient(hosts=zookeeper.connect + CHROOT)
    reader.start(timeout=30)
    try:
        wait_until(lambda: _logged_since(broker, since, b"Zookeeper connection established"),
                   30, "the broker to connect again")
        # Its session resumed: the same registration, never expired.
        wait_until(lambda: reader.exists(registration), 30, "the broker registered")
        assert reader.exists(registration).ephemeralOwner == owner
        assert broker.is_running()
    finally:
        reader.stop()
        reader.close()


def _logged_since(broker, offset: int, text: bytes) -> bool:
    with open(broker.log_path, "rb") as f:
        f.seek(offset)
        return text in f.read()
