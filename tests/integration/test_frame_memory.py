"""A size prefix is a claim, not an allocation (issue 15 item 1, issue 24
items 11 and 12).

Hundreds of connections each declare a 100 MB frame and send a few bytes of
it, or trickle it. The broker must not allocate what they declare, nor let
them hold the request-memory budget (queued.max.request.bytes) that large
requests of real clients need: its resident memory stays bounded while they
hang on, a producer of 600 KB records is served throughout, and connections
whose frame stops or trickles are closed after request.receive.timeout.ms.

The broker runs under an address-space limit, so a broker that did allocate
declared sizes fails this test with a MemoryError rather than taking the
machine's memory with it.
"""
from __future__ import annotations

import os
import resource
import socket
import struct
import threading
import time
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.kafka_wire import free_port
from tests.support.metrics import sample, scrape
from tests.support.waiting import wait_until

ATTACKERS = 400
DECLARED = 100 * 1000 * 1000
# What the attack may add to the broker's resident memory: about 40 KiB per
# connection (socket, state, a 16 KiB receive buffer) plus slack for the
# clients served meanwhile. Allocating the declared sizes would be 40 GB.
RSS_GROWTH_LIMIT = 64 * 1024 * 1024
ADDRESS_SPACE_LIMIT = 6 * 1024 ** 3


def _round_trip(bootstrap: str, values: list[bytes]) -> list[bytes]:
    """Produce ``values`` to a new topic and read them back with real clients."""
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 2_000_000,
                         "message.timeout.ms": 30000})
    errors = []
    for v in values:
        producer.produce(topic, v, on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "fetch.max.bytes": 4_000_000,
                         "max.partition.fetch.bytes": 4_000_000})
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def test_declared_frames_cost_no_memory_and_others_are_served(broker_factory):
    broker = broker_factory({"message.max.bytes": 2_000_000})
    pid = broker.pid
    resource.prlimit(pid, resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    # Warm up: the clients' first round trip loads code and caches.
    assert _round_trip(broker.bootstrap, [b"warm-up"]) == [b"warm-up"]
    rss_before = broker.rss()

    attackers = []
    try:
        for _ in range(ATTACKERS):
            s = socket.create_connection((broker.host, broker.port), timeout=10)
            # The size prefix, then a request header's first bytes: never the rest.
            s.sendall(struct.pack(">i", DECLARED) + b"\x00\x00\x00\x0c\x00\x00\x00\x01")
            attackers.append(s)
        # Every attacker is accepted and its bytes read by the broker.
        wait_until(lambda: broker.is_running() and _count_connections(pid) >= ATTACKERS,
               what="the broker to hold every attacking connection")

        small = [f"small-{i}".encode() for i in range(50)]
        assert _round_trip(broker.bootstrap, small) == small
        rss_during = broker.rss()
        print(f"\nbroker RSS before the attack {rss_before / 2**20:.1f} MiB, with {ATTACKERS} "
              f"connections declaring {DECLARED // 10**6} MB each {rss_during / 2**20:.1f} MiB")
        assert broker.is_running()
        assert rss_during - rss_before < RSS_GROWTH_LIMIT
    finally:
        for s in attackers:
            s.close()

    wait_until(lambda: _count_connections(pid) < 10, what="the attacking connections to close")
    # The attackers' reservations are back: a large request (over the receive
    # chunk, so it needs the shared budget) is received and answered.
    big = [b"x" * 1_500_000]
    assert _round_trip(broker.bootstrap, big) == big
    rss_after = broker.rss()
    print(f"broker RSS after they closed and a 1.5 MB request {rss_after / 2**20:.1f} MiB")
    assert rss_after - rss_before < RSS_GROWTH_LIMIT


def test_large_request_waits_for_memory_instead_of_failing(broker_factory):
    """With the budget held by a half-sent large frame, another large request
    waits (it is not refused or dropped) and goes through once the budget
    frees; small requests are served meanwhile."""
    metrics_port = free_port()
    broker = broker_factory({"message.max.bytes": 2_000_000,
                             "queued.max.request.bytes": 1_000_000,
                             "metrics.port": str(metrics_port), "metrics.host": "127.0.0.1"})

    def request_memory(gauge: str) -> float:
        return sample(scrape(metrics_port), f"samsa_request_memory_{gauge}") or 0

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(30)
    hog = socket.create_connection((broker.host, broker.port), timeout=10)
    # What is sent is paid for, not what is declared: 1 MB of the frame
    # really arrives and holds the whole budget.
    hog.sendall(struct.pack(">i", 50_000_000) + b"\x00" * 1_000_000)
    wait_until(lambda: request_memory("used") >= 1_000_000, what="the half-sent frame holding the budget")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 2_000_000,
                         "message.timeout.ms": 60000, "linger.ms": 0})
    delivered = []
    producer.produce("t", b"y" * 1_200_000, on_delivery=lambda err, msg: delivered.append(err))
    try:
        # The large request arrives and waits in line for memory (the broker's
        # gauge counts the connection waiting)...
        wait_until(lambda: request_memory("waiting") == 1, what="the large request waiting for memory")
        # ...small requests (metadata, a small produce) are answered meanwhile...
        assert _round_trip(broker.bootstrap, [b"small"]) == [b"small"]
        # ...and the large one is still waiting, unanswered.
        assert request_memory("waiting") == 1
        producer.poll(0)
        assert delivered == []
    finally:
        hog.close()
    assert producer.flush(30) == 0
    assert delivered == [None]


def _count_connections(pid: int) -> int:
    """Established TCP sockets of the broker process (from /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    established = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "01" and parts[9] in inodes:
                        established += 1
        except FileNotFoundError:
            pass
    return established


SILENT = 150
TRICKLING = 150
RECORD = 600 * 1000
RECORDS = 30


def _trickle(socks: list[socket.socket], stop: threading.Event) -> None:
    """A few bytes a second on every socket until told to stop (the broker
    closing one just drops it from the round)."""
    while socks and not stop.wait(0.5):
        for s in list(socks):
            try:
                s.send(b"t" * 50)
            except OSError:
                socks.remove(s)


def test_declared_and_trickling_frames_do_not_starve_large_requests(broker_factory):
    """300 connections declare 100 MB frames: half send nothing more, half
    trickle 100 bytes a second. A producer of 600 KB records (each its own
    request, larger than the receive chunk, so it needs the request-memory
    budget) gets every record acknowledged within its 30 s request timeout
    while they hang on, and the broker's memory stays bounded. Then the
    attackers' frames, never finished, are closed after
    request.receive.timeout.ms."""
    broker = broker_factory({"request.receive.timeout.ms": 20000})
    pid = broker.pid
    resource.prlimit(pid, resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("big", 1, 1)])["big"].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 0,
                         "request.timeout.ms": 30000, "message.timeout.ms": 30000,
                         "retries": 0})
    # Warm up: the producer's connection and the broker's code paths.
    producer.produce("big", b"w" * RECORD)
    assert producer.flush(30) == 0
    rss_before = broker.rss()

    silent: list[socket.socket] = []
    trickling: list[socket.socket] = []
    stop = threading.Event()
    trickler = threading.Thread(target=_trickle, args=(trickling, stop), daemon=True)
    try:
        for i in range(SILENT + TRICKLING):
            s = socket.create_connection((broker.host, broker.port), timeout=10)
            s.sendall(struct.pack(">i", DECLARED) + b"\x00\x00\x00\x0c\x00\x00\x00\x01")
            (silent if i % 2 else trickling).append(s)
        wait_until(lambda: _count_connections(pid) >= SILENT + TRICKLING + 1,
                   what="the broker to hold every attacking connection")
        trickler.start()

        results: list = []
        for i in range(RECORDS):
            producer.produce("big", bytes([i]) * RECORD,
                             on_delivery=lambda err, msg: results.append(err))
        assert producer.flush(60) == 0
        rss_during = broker.rss()
        failed = [e for e in results if e is not None]
        print(f"\nbroker RSS before {rss_before / 2**20:.1f} MiB, with {SILENT} silent and "
              f"{TRICKLING} trickling 100 MB frames and {RECORDS} x {RECORD} B produced "
              f"{rss_during / 2**20:.1f} MiB")
        assert len(results) == RECORDS and not failed, failed
        assert broker.is_running()
        assert rss_during - rss_before < RSS_GROWTH_LIMIT

        # Neither kind ever finishes its frame: both are closed (the
        # producer's connection stays).
        wait_until(lambda: _count_connections(pid) <= 2, timeout=60,
                   what="the silent and trickling connections to be closed")
    finally:
        stop.set()
        for s in silent + trickling:
            s.close()

