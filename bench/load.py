"""The load generator: librdkafka (confluent-kafka) clients, each in its own process.

Why processes: the broker under test and the clients share a 2-core machine; a
client in the benchmark's own interpreter would compete for one GIL with the
bookkeeping, and several clients in one process would compete with each other.
Every worker is started with the "spawn" method (no librdkafka state inherited
through fork) and reports one dict on a queue.

Timestamps are time.monotonic(): CLOCK_MONOTONIC on Linux is one clock for the
whole machine, so start/end times from different processes can be compared and
the latency consumer can subtract a producer's send time.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import socket
import struct
import time
from typing import Any, Callable

CTX = mp.get_context("spawn")


class LoadError(RuntimeError):
    """A worker failed or did not report in time (the message carries its error)."""


def run_workers(target: Callable | None, args_list: list[tuple], timeout: float) -> list[dict]:
    """Start one process per args tuple; all wait on a shared barrier, then run.

    ``target(barrier, queue, *args)`` must put exactly one dict on ``queue``. With
    ``target=None`` each args tuple is ``(target, *args)`` (different kinds of worker
    in one run, e.g. a latency producer and its consumer); results come in arrival order.
    """
    jobs = [(target, *a) if target is not None else a for a in args_list]
    name = "+".join(sorted({j[0].__name__ for j in jobs}))
    queue = CTX.Queue()
    barrier = CTX.Barrier(len(jobs))
    procs = [CTX.Process(target=_guard, args=(j[0], barrier, queue, *j[1:]), daemon=True) for j in jobs]
    for p in procs:
        p.start()
    results: list[dict] = []
    deadline = time.monotonic() + timeout
    try:
        while len(results) < len(procs):
            left = deadline - time.monotonic()
            if left <= 0:
                raise LoadError(f"{name}: {len(results)}/{len(procs)} workers reported within {timeout:.0f}s")
            try:
                results.append(queue.get(timeout=min(left, 1.0)))
            except Exception:  # queue.Empty
                if not any(p.is_alive() for p in procs) and queue.empty():
                    raise LoadError(f"{name}: workers exited, {len(results)}/{len(procs)} reported") from None
    finally:
        for p in procs:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
    errors = [r["error"] for r in results if r.get("error")]
    if errors:
        raise LoadError(f"{name}: {errors[0]}")
    return results


def _guard(target, barrier, queue, *args):
    try:
        target(barrier, queue, *args)
    except BaseException as e:  # report instead of dying silently
        try:
            barrier.abort()
        except Exception:
            pass
        queue.put({"error": f"{type(e).__name__}: {e}"})


def client_conf(bootstrap: str | dict) -> dict:
    """A worker's ``bootstrap``: host:port list, or client settings (e.g. for
    security.protocol=SSL) that include bootstrap.servers."""
    return {"bootstrap.servers": bootstrap} if isinstance(bootstrap, str) else dict(bootstrap)


def _producer_conf(bootstrap: str | dict, acks: str, linger_ms: int) -> dict:
    return {
        **client_conf(bootstrap),
        "acks": acks,
        "linger.ms": linger_ms,
        # Idempotence off in every case, so acks is the only difference between
        # the acks=1 and acks=all runs (and the peer need not do producer ids).
        "enable.idempotence": False,
        "compression.type": "none",
        "queue.buffering.max.kbytes": 256 * 1024,
        "delivery.report.only.error": True,
    }


# -- produce throughput ---------------------------------------------------------------

def produce_worker(barrier, queue, bootstrap: str, topic: str, value_size: int, acks: str,
                   seconds: float, linger_ms: int = 5, max_records: int = 0):
    """Produce ``value_size``-byte values as fast as the client allows for ``seconds``
    (or ``max_records``), then flush. Reports acked records over [first send, flush done]."""
    from confluent_kafka import Producer

    failed = [0, ""]

    def on_delivery(err, msg):
        if err is not None:
            failed[0] += 1
            failed[1] = failed[1] or str(err)

    p = Producer({**_producer_conf(bootstrap, acks, linger_ms), "on_delivery": on_delivery})
    value = os.urandom(value_size)
    # Warm-up: metadata and connections to the leader(s) before the clock starts.
    for _ in range(10):
        p.produce(topic, value)
    if p.flush(30) != 0:
        raise LoadError("warm-up records not delivered within 30s")
    failed[0] = 0
    barrier.wait(60)
    t0 = time.monotonic()
    sent = _flat_out(p, topic, value, t0 + seconds, max_records or (1 << 62), 1023)
    left = p.flush(120)
    t1 = time.monotonic()
    queue.put({"records": sent - left - failed[0], "bytes": (sent - left - failed[0]) * value_size,
               "t0": t0, "t1": t1, "failed": failed[0] + left, "first_error": failed[1]})


def _flat_out(p, topic: str, value: bytes, end: float, limit: int, poll_mask: int) -> int:
    """Produce as fast as the client takes records, until ``end`` (checked when
    it is polled, every ``poll_mask`` + 1 records) or ``limit`` records; how many."""
    produce, poll = p.produce, p.poll
    sent = 0
    while sent < limit:
        try:
            produce(topic, value)
        except BufferError:
            poll(0.001)
            continue
        sent += 1
        if not sent & poll_mask:
            poll(0)
            if time.monotonic() >= end:
                break
    return sent


# -- partition scale: batches counted in the log --------------------------------------

def produce_batches_worker(barrier, queue, bootstrap: str, topic: str, value_size: int, acks: str,
                           seconds: float, conf: dict, warm_partitions: int = 0, rate: int = 0):
    """Like ``produce_worker`` with extra producer settings ``conf`` (linger, sticky
    partitioning, batch.num.messages), for counting partition-batches.

    The worker does not count batches (librdkafka's statistics callback would, at a cost
    in this process that grows with the partitions: see bench/log_batches.py). With
    ``batch.num.messages=1`` every record is a batch and ``batches`` is the records acked;
    otherwise ``batches`` is None and the caller counts them in the log from ``since_ms``,
    the wall clock at which this worker's timed sending began (CreateTime is the wall clock
    too). ``cpu_s`` is this process's CPU over the timed window, librdkafka's threads
    included: the producers share the machine with the broker.

    ``warm_partitions``: the warm-up writes one record to each of that many partitions, so
    the clock measures appends to partitions already written to (a partition's first append
    creates its index files: a one-time cost). ``rate``: records/s to send at (0: as fast
    as the client can)."""
    from confluent_kafka import Producer

    failed = [0, ""]

    def on_delivery(err, msg):
        if err is not None:
            failed[0] += 1
            failed[1] = failed[1] or str(err)

    one_per_batch = int(conf.get("batch.num.messages", 0)) == 1
    p = Producer({**_producer_conf(bootstrap, acks, 5), **conf, "on_delivery": on_delivery})
    value = os.urandom(value_size)
    for _ in range(10):
        p.produce(topic, value)
    for i in range(warm_partitions):
        while True:
            try:
                p.produce(topic, value, partition=i)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(120) != 0:
        raise LoadError("warm-up records not delivered within 120s")
    # The warm-up's records are at least 2 ms older than any timed one (CreateTime is in
    # ms), so counting batches from ``since_ms`` leaves every warm-up batch out.
    time.sleep(0.002)
    failed[0] = 0
    barrier.wait(120)
    produce, poll = p.produce, p.poll
    sent = 0
    since_ms = int(time.time() * 1000)
    cpu0 = time.process_time()
    t0 = time.monotonic()
    end = t0 + seconds
    if rate:
        total = int(rate * seconds)
        while sent < total:
            due = min(total, int((time.monotonic() - t0) * rate) + 1)
            while sent < due:
                try:
                    produce(topic, value)
                except BufferError:
                    break
                sent += 1
            poll(0)
            time.sleep(0.001)
    if not rate:
        sent = _flat_out(p, topic, value, end, 1 << 62, 255)
    left = p.flush(180)
    t1 = time.monotonic()
    cpu_s = time.process_time() - cpu0
    ok = sent - left - failed[0]
    queue.put({"records": ok, "bytes": ok * value_size, "t0": t0, "t1": t1, "since_ms": since_ms,
               "batches": ok if one_per_batch else None, "cpu_s": cpu_s,
               "failed": failed[0] + left, "first_error": failed[1]})


# -- fetch throughput ------------------------------------------------------------------

def consume_worker(barrier, queue, bootstrap: str, topic: str, partitions: list[int], expected: int,
                   timeout: float = 120.0):
    """Read ``expected`` records from the beginning of ``partitions`` (no group: assign())."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{os.getpid()}-{time.time_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "fetch.max.bytes": 64 * 1024 * 1024, "max.partition.fetch.bytes": 8 * 1024 * 1024,
                  "queued.max.messages.kbytes": 256 * 1024})
    c.list_topics(topic, timeout=30)  # connection + metadata before the clock starts
    barrier.wait(60)
    t0 = time.monotonic()
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    got = nbytes = 0
    deadline = t0 + timeout
    while got < expected:
        if time.monotonic() > deadline:
            raise LoadError(f"consumer read {got}/{expected} records in {timeout:.0f}s")
        for m in c.consume(num_messages=10000, timeout=1.0):
            if m.error():
                continue
            got += 1
            nbytes += len(m.value())
    t1 = time.monotonic()
    c.close()
    queue.put({"records": got, "bytes": nbytes, "t0": t0, "t1": t1})


def consume_bulk_worker(barrier, queue, bootstrap: str, topic: str, partitions: list[int],
                        expected: int, timeout: float = 300.0):
    """Like ``consume_worker`` but tuned so the client costs as little as it can per
    byte, for the large-value fetch cases that measure the broker: big fetches (32 MiB
    per partition, 64 MiB per request), a deep prefetch queue, large consume() batches,
    and the payload is never looked at beyond its length (``len(m)``, no ``m.value()``
    object kept)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    fetch_max = 64 * 1024 * 1024
    c = Consumer({**client_conf(bootstrap), "group.id": f"bench-{os.getpid()}-{time.time_ns()}",
                  "enable.auto.commit": False, "enable.partition.eof": False,
                  "fetch.max.bytes": fetch_max, "max.partition.fetch.bytes": 32 * 1024 * 1024,
                  "receive.message.max.bytes": fetch_max + 1024 * 1024,
                  "queued.max.messages.kbytes": 1024 * 1024, "queued.min.messages": 10_000_000,
                  "fetch.wait.max.ms": 100, "check.crcs": False})
    c.list_topics(topic, timeout=30)  # connection + metadata before the clock starts
    barrier.wait(60)
    t0 = time.monotonic()
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    got = nbytes = 0
    deadline = t0 + timeout
    consume = c.consume
    # consume(n, timeout) waits until it has n records or the timeout passes, so ask
    # for about 32 MiB at a time (sized from the first record) and never for more
    # than are left: the last call must not sit out its timeout on the clock.
    per_call = 1
    while got < expected:
        if time.monotonic() > deadline:
            raise LoadError(f"consumer read {got}/{expected} records in {timeout:.0f}s")
        batch = consume(num_messages=min(per_call, expected - got), timeout=1.0)
        if batch and per_call == 1:
            per_call = max(1, min(100_000, (32 << 20) // max(1, len(batch[0]))))
        got += len(batch)
        for m in batch:
            if m.error():
                got -= 1
                continue
            nbytes += len(m)
    t1 = time.monotonic()
    c.close()
    queue.put({"records": got, "bytes": nbytes, "t0": t0, "t1": t1})


def fill_topic(bootstrap: str, topic: str, value_size: int, records: int) -> None:
    """Write ``records`` values (untimed) so fetch scenarios read data already there."""
    run_workers(produce_worker, [(bootstrap, topic, value_size, "1", 3600.0, 5, records)], timeout=600)


# -- end-to-end latency ------------------------------------------------------------------

def latency_producer(barrier, queue, bootstrap: str, topic: str, value_size: int, rate: int,
                     seconds: float, acks: str = "1"):
    """Send ``rate`` records/s for ``seconds``; each value starts with its send time (ns).
    Reports each timed record's produce latency too: send to its delivery report
    (the broker's answer, as the producer's poll hands it over)."""
    from confluent_kafka import Producer

    acked: list[int] = []
    now_ns, unpack = time.monotonic_ns, struct.unpack_from

    def on_delivery(err, msg) -> None:
        if err is None:
            (ts,) = unpack(">q", msg.value(), 0)
            if ts:
                acked.append(now_ns() - ts)

    p = Producer({**_producer_conf(bootstrap, acks, 0), "delivery.report.only.error": False,
                  "on_delivery": on_delivery})
    p.produce(topic, struct.pack(">q", 0).ljust(value_size, b"x"))  # warm-up, timestamp 0 = ignored
    p.flush(30)
    barrier.wait(60)
    time.sleep(1.0)  # the consumer is assigned and polling before the first timed record
    pad = b"x" * (value_size - 8)
    total = int(rate * seconds)
    t0 = time.monotonic()
    sent = 0
    while sent < total:
        due = min(total, int((time.monotonic() - t0) * rate) + 1)
        while sent < due:
            p.produce(topic, struct.pack(">q", time.monotonic_ns()) + pad)
            sent += 1
        p.poll(0)
        time.sleep(0.0005)
    p.flush(60)
    queue.put({"sent": sent, "seconds": time.monotonic() - t0, "ack_latencies_ns": acked})


def latency_consumer(barrier, queue, bootstrap: str, topic: str, expected: int, timeout: float):
    """Record receive time minus send time for every timed record."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-lat-{os.getpid()}",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    barrier.wait(60)
    lat: list[int] = []
    deadline = time.monotonic() + timeout
    # poll() hands over each record as soon as it arrives; consume(num_messages=N,
    # timeout=T) would wait for N records or T, adding up to T to every latency.
    poll, now_ns, unpack = c.poll, time.monotonic_ns, struct.unpack_from
    while len(lat) < expected and time.monotonic() < deadline:
        m = poll(0.2)
        if m is None:
            continue
        now = now_ns()
        if m.error():
            continue
        (ts,) = unpack(">q", m.value(), 0)
        if ts:
            lat.append(now - ts)
    c.close()
    queue.put({"latencies_ns": lat, "expected": expected})


# -- many connections ------------------------------------------------------------------

def hold_connections(host: str, port: int, count: int, ready, stop, out):
    """Open ``count`` connections, each answering ApiVersions; every second each one sends
    another ApiVersions, so they are live clients, not just open sockets. Runs until ``stop``."""
    from tests.support.kafka_wire import _recv_exactly, api_versions_v0_request

    socks = []
    try:
        for i in range(count):
            s = socket.create_connection((host, port), timeout=30)
            s.sendall(api_versions_v0_request(i))
            (n,) = struct.unpack(">i", _recv_exactly(s, 4))
            _recv_exactly(s, n)
            socks.append(s)
        ready.set()
        rounds = 0
        while not stop.wait(1.0):
            for i, s in enumerate(socks):
                s.sendall(api_versions_v0_request(i))
            for s in socks:
                (n,) = struct.unpack(">i", _recv_exactly(s, 4))
                _recv_exactly(s, n)
            rounds += 1
        out.put({"open": len(socks), "rounds": rounds})
    except BaseException as e:
        out.put({"open": len(socks), "error": f"{type(e).__name__}: {e}"})
        ready.set()
    finally:
        for s in socks:
            s.close()


def aggregate(results: list[dict[str, Any]]) -> dict:
    """Total records/bytes over the union of the workers' intervals (and their batches,
    CPU seconds, and the earliest wall-clock start, where the workers report them)."""
    t0 = min(r["t0"] for r in results)
    t1 = max(r["t1"] for r in results)
    records = sum(r["records"] for r in results)
    nbytes = sum(r["bytes"] for r in results)
    secs = max(t1 - t0, 1e-9)
    batches = [r.get("batches", 0) for r in results]
    return {"records": records, "bytes": nbytes, "seconds": secs, "mb_s": nbytes / secs / 1e6,
            "rec_s": records / secs,
            # None: some worker left its batches to be counted elsewhere (in the log)
            "batches": None if None in batches else sum(batches),
            "since_ms": min((r["since_ms"] for r in results if "since_ms" in r), default=None),
            "client_cpu_s": sum(r["cpu_s"] for r in results) if all("cpu_s" in r for r in results)
            else None,
            "failed": sum(r.get("failed", 0) for r in results),
            "first_error": next((r.get("first_error") for r in results if r.get("first_error")), "")}
