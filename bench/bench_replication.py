"""What replication costs and how fast it recovers, in one run on one machine.

1. Produce throughput with replication: a topic of one partition, replication
   factor 3, min.insync.replicas=2, written with acks=all over a 3-broker
   ZooKeeper cluster, beside the same partition with one replica on a single
   broker (embedded metadata store, no ZooKeeper) written with acks=1. Both
   runs use bench/load.py's produce_worker (one librdkafka producer process,
   linger.ms=5, idempotence off) for the same ``--records`` values of
   ``--size`` bytes, into a fresh topic each time, deleted (files and all)
   after its run, so no run writes into a page cache the runs before it
   filled; ``--repeats`` runs of each,
   taken in turn with both set-ups up throughout, each after a sync (no dirty
   pages of the run before to write back), medians reported: MB/s, records/s
   and the ratio RF=3/RF=1 (target >= 0.4). The three brokers, ZooKeeper and
   the client share this machine's cores (and one disk takes three copies),
   so only the ratio of two figures from the same run means much.
2. Failover after kill -9 of a leader (``--rounds``): a topic of 3 partitions
   (replication 3, min.insync.replicas=2), leaders moved back to the preferred
   replicas before each round, a leader other than the controller killed. A
   probe producer (acks=all) sends one record every 10 ms to each partition
   the victim led; the figure is the time from the kill to the first
   acknowledgement of a record appended by the new leader (the leader epoch
   of its batch, read back afterwards, is above the one before the kill), so
   a late answer of the dead leader does not count. Beside it: when the
   controller wrote the new leader (the state znode's mtime), the broker side
   alone (a hand-built acks=all Produce sent every 10 ms straight to the
   leader the state znode names, no client metadata or back-off: the first
   one acknowledged) and zookeeper.session.timeout.ms (target: within
   session timeout + 2 s). The
   killed broker is restarted and the ISR of every partition is full again
   (/brokers/topics/<t>/partitions/<p>/state) before the next round.
3. Failover after a controlled shutdown: the same with SIGTERM instead of
   kill -9 (the broker asks the controller to move its leaderships before it
   stops; until then it still answers, and those acks do not count) (target:
   under 1 s).
4. Replication lag under steady load: bench/load.py's latency_producer
   (acks=1, linger.ms=0) writes ``--rate`` records/s to a fresh topic
   (replication 3); every 100 ms the size of the leader's ``<topic>-0/*.log``
   files is compared with each follower's (sizes as the OS sees them, leader
   read first): median and max in bytes and in records (bytes / average bytes
   per record in the leader's log). With metrics on (default), each broker
   serves /metrics on a port of its own and the followers'
   kafka_server_replicafetchermanager_maxlag gauge is read every 500 ms.

The probe producers shorten librdkafka's retry and reconnect back-offs and
refresh metadata every 100 ms (see PROBE_CONF); what is left of the client's
own timers shows as the difference between the librdkafka figure and the raw
Produce. At the end: one table with every figure and its
target, produce failures, and the ERROR lines (and a count of WARNING lines)
of every broker's log. Data is removed afterwards; logs are kept when a
problem was seen (or everything with --keep).

Usage: ``python bench/bench_replication.py [--quick] [--rounds 3] [--session-ms 3000]
[--records 500000] [--repeats 5] [--size 1024] [--rate 5000] [--lag-seconds 20]
[--no-metrics] [--keep]`` (a few minutes; --quick about one; not part of the test run).
"""
from __future__ import annotations

import argparse
import collections
import json
import logging
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kazoo.exceptions import NodeExistsError, NoNodeError

from bench.brokers import cpu_seconds, create_topic
from bench.load import aggregate, latency_producer, produce_worker, run_workers
from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import FetchRequest, ProduceRequest
from samsa.protocol.model import ApiKey
from samsa.protocol.records import build_batch, iter_batch_headers
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import Cluster
from tests.support.kafka_wire import free_port
from tests.support.waiting import wait_until

PROBE_INTERVAL_S = 0.010
# The failover probes: acks=all, one record per batch, short client back-offs and
# a metadata refresh every 100 ms (librdkafka's defaults would add a second or more
# of its own waiting before it asks who leads now).
PROBE_CONF = {
    "acks": "all", "linger.ms": 0, "enable.idempotence": False, "message.timeout.ms": 120000,
    "retry.backoff.ms": 20, "retry.backoff.max.ms": 100,
    "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
    "topic.metadata.refresh.fast.interval.ms": 20, "topic.metadata.refresh.interval.ms": 100,
}
_QUIET = logging.getLogger("bench.replication.librdkafka")  # "Connection refused" noise
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False


def log(msg: str) -> None:
    print(msg, flush=True)


# ------------------------------------------------------------------ the cluster

class MetricsCluster(Cluster):
    """tests/support/cluster.py's Cluster, each broker with a metrics.port of its own."""

    def __init__(self, *args, metrics: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.metrics_ports = {i: free_port() for i in range(self.size)} if metrics else {}

    def broker_process(self, broker_id: int, work_dir: Path | None = None) -> BrokerProcess:
        extra = ({"metrics.port": str(self.metrics_ports[broker_id]), "metrics.host": "127.0.0.1"}
                 if broker_id in self.metrics_ports else {})
        return BrokerProcess(work_dir or self.work_dir / f"broker-{broker_id}", broker_id=broker_id,
                             overrides={"zookeeper.connect": self.zookeeper_connect,
                                        **self.overrides, **extra})


def _state(cluster: Cluster, topic: str, p: int) -> tuple[dict, object] | tuple[None, None]:
    try:
        data, stat = cluster.zk_client().get(f"/brokers/topics/{topic}/partitions/{p}/state")
    except NoNodeError:
        return None, None
    return json.loads(data), stat


def _assignment(cluster: Cluster, topic: str) -> dict[int, list[int]]:
    data, _ = cluster.zk_client().get(f"/brokers/topics/{topic}")
    return {int(p): r for p, r in json.loads(data)["partitions"].items()}


def wait_full_isr(cluster: Cluster, topic: str, partitions: int, timeout: float = 90) -> None:
    """Every partition's state znode has a leader and all 3 replicas in its ISR."""
    def full():
        for p in range(partitions):
            s, _ = _state(cluster, topic, p)
            if s is None or s["leader"] < 0 or sorted(s["isr"]) != [0, 1, 2]:
                return False
        return True
    wait_until(full, timeout, f"a full ISR on every partition of {topic}", interval=0.1)


def preferred_leaders(cluster: Cluster, topic: str, partitions: int, timeout: float = 60) -> None:
    """Ask the controller for a preferred replica election (the znode Kafka's
    tools write) and wait until every partition is led by its first replica."""
    zk = cluster.zk_client()
    assignment = _assignment(cluster, topic)
    if all(cluster.partition_state(topic, p)["leader"] == assignment[p][0] for p in range(partitions)):
        return
    wait_until(lambda: not zk.exists("/admin/preferred_replica_election"), timeout,
               "the previous preferred replica election to finish")
    body = {"version": 1, "partitions": [{"topic": topic, "partition": p} for p in range(partitions)]}
    try:
        zk.create("/admin/preferred_replica_election", json.dumps(body).encode(), makepath=True)
    except NodeExistsError:
        pass
    wait_until(lambda: all(cluster.partition_state(topic, p)["leader"] == assignment[p][0]
                           for p in range(partitions)), timeout,
               f"the preferred leaders of {topic}", interval=0.1)


def create_replicated(cluster: Cluster, topic: str, partitions: int, min_isr: int = 2) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": str(min_isr)})],
                        operation_timeout=60)[topic].result(60)
    cluster.wait_for_leaders(topic, partitions, timeout=60)
    wait_full_isr(cluster, topic, partitions)


# ------------------------------------------------------------------ 1. throughput

def produce_run(bootstrap: str, topic: str, size: int, records: int, acks: str, pids: list[int]) -> dict:
    # No dirty pages left by the run before: a run must not pay for another's writeback
    # (the three brokers share one disk; the RF=3 run writes three copies of the data).
    os.sync()
    c0 = [cpu_seconds(p) or 0.0 for p in pids]
    r = aggregate(run_workers(produce_worker, [(bootstrap, topic, size, acks, 3600.0, 5, records)],
                              timeout=1200))
    c1 = [cpu_seconds(p) or 0.0 for p in pids]
    r["broker_cpu_pct"] = 100.0 * (sum(c1) - sum(c0)) / r["seconds"]
    return r


def drop_topic(bootstrap: str, topic: str, data_dirs: list[Path], timeout: float = 120) -> None:
    """Delete a throughput run's topic and wait until its files are gone from
    every data directory: with the data of every run kept, the later runs
    wrote into a full page cache and paid for reclaiming it (CPU per MB
    doubled from the third run on, both set-ups, the RF=3 one hit 3 times as
    hard), so a run measured the runs before it."""
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=60)[topic].result(60)
    wait_until(lambda: not any(any(d.glob(f"{topic}-*")) for d in data_dirs), timeout,
               f"the files of {topic} to be removed", interval=0.1)


def fmt_tp(r: dict) -> str:
    return (f"{r['mb_s']:.1f} MB/s, {r['rec_s']:,.0f} records/s ({r['records']:,} records in "
            f"{r['seconds']:.1f} s, brokers' CPU {r['broker_cpu_pct']:.0f}% of a core"
            + (f", {r['failed']} FAILED: {r['first_error']}" if r["failed"] else "") + ")")


# ------------------------------------------------------------------ 2./3. failover

def _epochs(cluster: Cluster, topic: str, p: int, lo: int, hi: int) -> dict[int, int]:
    """{offset: leader epoch of its batch} for offsets lo..hi of one partition, read
    with plain Fetch requests from its leader (no consumer group involved)."""
    out: dict[int, int] = {}
    leader = cluster.partition_state(topic, p)["leader"]
    offset, deadline = lo, time.monotonic() + 30
    with SimpleClient(cluster.broker(leader).bootstrap, timeout=15) as c:
        while offset <= hi and time.monotonic() < deadline:
            r = c.call(ApiKey.FETCH, FetchRequest(
                replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                topics=[FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                    partition=p, current_leader_epoch=-1, fetch_offset=offset, log_start_offset=-1,
                    partition_max_bytes=1 << 20)])]), highest=11)
            part = r.responses[0].partitions[0]
            before = offset
            for _, h in iter_batch_headers(bytes(part.records or b"")):
                for o in range(h.base_offset, h.base_offset + h.last_offset_delta + 1):
                    out[o] = h.partition_leader_epoch
                offset = h.base_offset + h.last_offset_delta + 1
            if offset == before:
                time.sleep(0.05)
    return out


def _raw_probe(cluster: Cluster, topic: str, parts: list[int], victim: int, before: dict[int, int],
               size: int, t0: float, stop: threading.Event, out: dict[int, float]) -> None:
    """The broker side alone: once the state znode names a new leader, a
    hand-built acks=all Produce straight to it, every 10 ms until one is
    acknowledged (no client metadata, no client back-off); seconds since t0."""
    value = b"r" * size
    while not stop.is_set() and len(out) < len(parts):
        for p in parts:
            s, _ = _state(cluster, topic, p) if p not in out else (None, None)
            if not s or s["leader"] in (-1, victim) or s["leader_epoch"] <= before[p]:
                continue
            try:
                with SimpleClient(cluster.broker(s["leader"]).bootstrap, timeout=15) as c:
                    r = c.call(ApiKey.PRODUCE, ProduceRequest(acks=-1, timeout_ms=10000, topic_data=[
                        ProduceRequest.TopicProduceData(name=topic, partition_data=[
                            ProduceRequest.PartitionProduceData(index=p, records=build_batch(
                                [(None, value, [], int(time.time() * 1000))]))])]), highest=9)
                if r.responses[0].partition_responses[0].error_code == 0:
                    out[p] = time.monotonic() - t0
            except OSError:
                pass
        stop.wait(0.01)


def failover_round(cluster: Cluster, topic: str, victim: int, how: str, size: int,
                   timeout: float) -> dict:
    """``how`` = "kill" (kill -9) or "term" (SIGTERM) of ``victim``; returns the
    seconds from the signal to the first ack by a new leader (None if none came)."""
    from confluent_kafka import Producer
    leaders = cluster.leaders(topic)
    parts = sorted(p for p, b in leaders.items() if b == victim)
    before = {p: _state(cluster, topic, p)[0]["leader_epoch"] for p in parts}
    acks: dict[int, list[tuple[float, int]]] = {p: [] for p in parts}  # (ack time, offset)
    errors: collections.Counter[str] = collections.Counter()

    def on_delivery(err, msg):
        now = time.monotonic()
        if err is not None:
            errors[err.name()] += 1
        else:
            acks[msg.partition()].append((now, msg.offset()))

    prod = Producer({"bootstrap.servers": cluster.bootstrap, **PROBE_CONF,
                     "on_delivery": on_delivery, "logger": _QUIET})
    value = b"x" * size
    for p in parts:  # metadata and connections before the clock starts
        prod.produce(topic, value, partition=p)
    if prod.flush(30):
        raise RuntimeError("the probe's warm-up records were not acknowledged within 30 s")
    for p in parts:
        acks[p].clear()
    errors.clear()

    broker = cluster.broker(victim)
    t0_wall, t0 = time.time(), time.monotonic()
    if how == "kill":
        cluster.kill(victim)
    else:
        broker._signal(signal.SIGTERM)  # what BrokerProcess.stop() sends, without waiting
    raw: dict[int, float] = {}
    stop = threading.Event()
    raw_thread = threading.Thread(target=_raw_probe, daemon=True, args=(
        cluster, topic, parts, victim, before, size, t0, stop, raw))
    raw_thread.start()
    elected: dict[int, tuple[int, float, float]] = {}  # p -> (new leader, written at, seen at)
    next_send = next_zk = t0
    deadline = t0 + timeout
    while time.monotonic() < deadline:
        now = time.monotonic()
        if now >= next_send:
            for p in parts:
                prod.produce(topic, value, partition=p)
            next_send = now + PROBE_INTERVAL_S
        if now >= next_zk and len(elected) < len(parts):
            for p in parts:
                s, stat = _state(cluster, topic, p)
                if p not in elected and s and s["leader"] not in (-1, victim) \
                        and s["leader_epoch"] > before[p]:
                    elected[p] = (s["leader"], stat.mtime / 1000 - t0_wall, time.monotonic() - t0)
            next_zk = time.monotonic() + 0.05
        prod.poll(0.002)
        # done once every partition has acks for records sent after its new leader was seen
        if len(elected) == len(parts) and len(raw) == len(parts) and all(
                any(t - t0 > elected[p][2] + 0.5 for t, _ in acks[p]) for p in parts):
            break
    stop.set()
    raw_thread.join(30)
    left = prod.flush(60)
    if left:
        errors["not acknowledged within 60 s"] += left
    first: dict[int, float | None] = {}
    for p in parts:
        if not acks[p]:
            first[p] = None
            continue
        offsets = [o for _, o in acks[p]]
        epochs = _epochs(cluster, topic, p, min(offsets), max(offsets))
        unknown = sum(1 for o in offsets if epochs.get(o) is None)
        if unknown:
            errors[f"leader epoch of {unknown} acked record(s) not read back"] += 1
        new = [t for t, o in acks[p] if epochs.get(o) is not None and epochs[o] > before[p]]
        first[p] = min(new) - t0 if new else None
    firsts = [v for v in first.values() if v is not None]
    return {"victim": victim, "partitions": parts, "first_ack_s": min(firsts) if firsts else None,
            "all_partitions_s": max(firsts) if len(firsts) == len(parts) else None,
            "raw_s": min(raw.values()) if raw else None, "elected": elected, "errors": dict(errors)}


def failover_rounds(cluster: Cluster, topic: str, partitions: int, how: str, rounds: int,
                    size: int, timeout: float) -> list[dict]:
    out = []
    for i in range(rounds):
        wait_full_isr(cluster, topic, partitions)
        preferred_leaders(cluster, topic, partitions)
        controller = cluster.controller_id()
        leaders = set(cluster.leaders(topic).values()) - {-1}
        candidates = sorted(leaders - {controller}) or sorted(leaders)  # rather not the controller
        victim = candidates[i % len(candidates)]
        r = failover_round(cluster, topic, victim, how, size, timeout)
        if how == "term":
            stopping = cluster.broker(victim)
            try:
                r["exit_code"] = stopping.proc.wait(60)  # already signalled: wait for its exit
            except subprocess.TimeoutExpired:
                r["exit_code"] = f"still running 60 s after SIGTERM, killed ({stopping.stop(0)})"
        cluster.restart(victim)
        el = r["elected"]
        el_txt = ", ".join(f"p{p}: leader {new} written at +{w:.2f} s"
                           for p, (new, w, _) in sorted(el.items()))
        first = r["first_ack_s"]
        written = min((w for _, w, _ in el.values()), default=None)
        log(f"  round {i + 1}: {'kill -9' if how == 'kill' else 'SIGTERM'} broker {victim} "
            f"(controller {controller}, led p{','.join(map(str, r['partitions']))}): "
            f"first ack by a new leader +{first:.3f} s"
            + (f" ({first - written:.3f} s after the new leader was written)" if written is not None else "")
            + (f"; raw Produce to the new leader acked +{r['raw_s']:.3f} s" if r["raw_s"] is not None else "")
            if first is not None else
            f"  round {i + 1}: broker {victim}: NO ack by a new leader within {timeout:.0f} s")
        log(f"    {el_txt or 'no new leader seen in ZooKeeper'}"
            + (f"; exit code {r['exit_code']}" if how == "term" else "")
            + (f"; probe errors {r['errors']}" if r["errors"] else ""))
        out.append(r)
    wait_full_isr(cluster, topic, partitions)
    return out


# ------------------------------------------------------------------ 4. lag

def _log_size(d: Path) -> int:
    total = 0
    for f in d.glob("*.log"):
        try:
            total += f.stat().st_size
        except FileNotFoundError:  # a segment deleted between glob and stat
            pass
    return total


def _maxlag(port: int) -> float | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as r:
            text = r.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("kafka_server_replicafetchermanager_maxlag"):
            return float(line.rsplit(" ", 1)[1])
    return None


def measure_lag(cluster: MetricsCluster, topic: str, size: int, rate: int, seconds: float) -> dict:
    leader = cluster.leaders(topic)[0]
    followers = [b for b in range(cluster.size) if b != leader]
    dirs = {b: cluster.broker(b).data_dir / f"{topic}-0" for b in range(cluster.size)}
    done: dict = {}

    def load():
        try:
            done["result"] = run_workers(latency_producer, [(cluster.bootstrap, topic, size, rate, seconds)],
                                         timeout=seconds + 120)[0]
        except Exception as e:  # reported below
            done["error"] = f"{type(e).__name__}: {e}"

    th = threading.Thread(target=load, daemon=True)
    th.start()
    samples: list[tuple[int, list[int]]] = []  # (leader bytes, [leader - follower bytes])
    gauge: list[float] = []
    while th.is_alive():
        time.sleep(0.1)
        lead = _log_size(dirs[leader])
        if lead < 20 * size:  # the timed load has not started (warm-up, the producer's 1 s pause)
            continue
        samples.append((lead, [max(0, lead - _log_size(dirs[f])) for f in followers]))
        if cluster.metrics_ports and len(samples) % 5 == 0:
            for f in followers:
                v = _maxlag(cluster.metrics_ports[f])
                if v is not None:
                    gauge.append(v)
    # up to the last sample in which the leader's log grew (not the idle tail after the load)
    last = max((i for i in range(1, len(samples)) if samples[i][0] != samples[i - 1][0]), default=0)
    lag_bytes = [d for _, ds in samples[:last + 1] for d in ds]
    th.join()
    if "error" in done:
        raise RuntimeError(f"the steady producer failed: {done['error']}")
    sent = done["result"]["sent"] + 1  # + its warm-up record
    wait_until(lambda: len({_log_size(dirs[b]) for b in dirs}) == 1, 60,
               "the followers to catch up after the load", interval=0.1)
    per_record = _log_size(dirs[leader]) / sent
    still = cluster.leaders(topic)[0]
    return {"leader": leader, "leader_after": still, "samples": len(lag_bytes), "sent": sent,
            "bytes_per_record": per_record,
            "median_bytes": statistics.median(lag_bytes) if lag_bytes else None,
            "max_bytes": max(lag_bytes) if lag_bytes else None,
            "gauge_max": max(gauge) if gauge else None, "gauge_samples": len(gauge),
            "rate_achieved": done["result"]["sent"] / done["result"]["seconds"]}


# ------------------------------------------------------------------ broker logs

_STAMP = re.compile(r"^\[[^\]]*\] ")


def scan_log(path: Path) -> tuple[list[str], collections.Counter]:
    """ERROR/CRITICAL lines and tracebacks (first lines, deduplicated) and the
    WARNING lines counted by message (digits folded)."""
    errors: list[str] = []
    warnings: collections.Counter[str] = collections.Counter()
    try:
        lines = path.read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return errors, warnings
    for i, line in enumerate(lines):
        body = _STAMP.sub("", line)
        if body.startswith(("ERROR ", "CRITICAL ")) or line.startswith("Traceback"):
            if line.startswith("Traceback"):  # its last line says what it was
                j = i + 1
                while j < len(lines) and (lines[j].startswith(" ") or not lines[j].strip()):
                    j += 1
                body = "Traceback: " + (lines[j] if j < len(lines) else "?")
            if body not in errors:
                errors.append(body)
        elif body.startswith("WARNING "):
            warnings[re.sub(r"\d+", "N", body)[:160]] += 1
    return errors, warnings


# ------------------------------------------------------------------ main

def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f} s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="about a minute: fewer records, 1 round each")
    ap.add_argument("--rounds", type=int, default=None, help="failover rounds of each kind (3; --quick: 1)")
    ap.add_argument("--session-ms", type=int, default=3000, help="zookeeper.session.timeout.ms")
    ap.add_argument("--records", type=int, default=None,
                    help="records per throughput run (500000; --quick: 200000)")
    ap.add_argument("--repeats", type=int, default=None,
                    help="throughput runs of each kind, the median reported (5; --quick: 1)")
    ap.add_argument("--size", type=int, default=1024, help="value bytes")
    ap.add_argument("--rate", type=int, default=5000, help="records/s of the lag phase's producer")
    ap.add_argument("--lag-seconds", type=float, default=None,
                    help="length of the lag phase (20; --quick: 8)")
    ap.add_argument("--no-metrics", action="store_true", help="no metrics.port, no maxlag gauge")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (logs and data)")
    args = ap.parse_args()
    rounds = args.rounds if args.rounds is not None else (1 if args.quick else 3)
    records = args.records or (200_000 if args.quick else 500_000)
    repeats = args.repeats or (1 if args.quick else 5)
    lag_seconds = args.lag_seconds or (8.0 if args.quick else 20.0)
    session_s = args.session_ms / 1000
    probe_timeout = 3 * session_s + 30

    work = Path(tempfile.mkdtemp(prefix="samsa-bench-replication-"))
    started = time.monotonic()
    problems: list[str] = []
    res: dict = {}
    log(f"work directory {work}; {records:,} records of {args.size} B per throughput run, "
        f"session timeout {args.session_ms} ms, {rounds} round(s) per failover kind")
    # Deleted topics' files go at once (see drop_topic), not after the default minute.
    fast_delete = {"log.segment.delete.delay.ms": "0"}
    single = BrokerProcess(work / "single", startup_timeout=60, overrides=fast_delete)
    cluster = MetricsCluster(work / "cluster", size=3, session_timeout_ms=args.session_ms,
                             offsets_partitions=3, metrics=not args.no_metrics,
                             overrides=fast_delete)
    logs: list[tuple[str, Path]] = [("single broker", single.log_path)]
    try:
        # 1. the baseline (one broker, no ZooKeeper, RF=1, acks=1) and RF=3 acks=all
        # (min.insync.replicas=2) over 3 brokers, taken in turn: both are up throughout
        # (the idle one costs little), so a change in the machine's load meets both.
        log(f"[1] produce throughput, {repeats} run(s) each, in turn")
        single.start()
        cluster.start()
        logs += [(f"broker {i}", b.log_path) for i, b in enumerate(cluster.brokers)]
        create_replicated(cluster, "failover", 3)
        runs: dict[str, list[dict]] = {"rf1": [], "rf3": []}
        for i in range(repeats):
            create_topic(single.bootstrap, f"rf1-{i}", 1)
            r = produce_run(single.bootstrap, f"rf1-{i}", args.size, records, "1", [single.pid])
            runs["rf1"].append(r)
            log(f"  RF=1 acks=1, 1 broker:                  {fmt_tp(r)}")
            drop_topic(single.bootstrap, f"rf1-{i}", [single.data_dir])
            create_replicated(cluster, f"rf3-{i}", 1)
            _, before = _state(cluster, f"rf3-{i}", 0)
            r = produce_run(cluster.bootstrap, f"rf3-{i}", args.size, records, "all",
                            [b.pid for b in cluster.brokers])
            runs["rf3"].append(r)
            log(f"  RF=3 acks=all min.insync=2, 3 brokers: {fmt_tp(r)}")
            s, after = _state(cluster, f"rf3-{i}", 0)
            if after.version != before.version:  # a follower left the ISR (and came back?)
                problems.append(f"rf3-{i}: the partition state changed during the run: {s}")
            drop_topic(cluster.bootstrap, f"rf3-{i}", [b.data_dir for b in cluster.brokers])
            for name in ("rf1", "rf3"):
                if runs[name][-1]["failed"]:
                    problems.append(f"{name} run {i + 1}: {runs[name][-1]['failed']} produce failures "
                                    f"({runs[name][-1]['first_error']})")
        for name, rs in runs.items():
            ordered = sorted(rs, key=lambda r: r["mb_s"])
            res[name] = {**ordered[(len(ordered) - 1) // 2], "runs": [r["mb_s"] for r in rs]}
        single.stop()
        shutil.rmtree(single.data_dir, ignore_errors=True)
        os.sync()  # the throughput runs' writeback is over before anything else is timed

        # 2. kill -9 of a leader
        log(f"[2] kill -9 of a leader, {rounds} round(s)")
        res["kill"] = failover_rounds(cluster, "failover", 3, "kill", rounds, args.size, probe_timeout)
        # 3. SIGTERM of a leader
        log(f"[3] SIGTERM (controlled shutdown) of a leader, {rounds} round(s)")
        res["term"] = failover_rounds(cluster, "failover", 3, "term", rounds, args.size, probe_timeout)
        # 4. lag under a steady load (a fresh topic: every replica in place)
        log(f"[4] replication lag at {args.rate} records/s for {lag_seconds:g} s")
        create_replicated(cluster, "lag", 1)
        res["lag"] = lag = measure_lag(cluster, "lag", args.size, args.rate, lag_seconds)
        bpr = lag["bytes_per_record"]
        log(f"  leader broker {lag['leader']}, {lag['samples']} follower samples (every 100 ms), "
            f"{lag['rate_achieved']:.0f} records/s sent, {bpr:.0f} bytes/record in the log")
        if lag["leader_after"] != lag["leader"]:
            problems.append(f"lag: the leader moved from {lag['leader']} to {lag['leader_after']} under load")

        for kind in ("kill", "term"):
            for i, r in enumerate(res[kind]):
                if r["first_ack_s"] is None:
                    problems.append(f"{kind} round {i + 1}: no ack by a new leader "
                                    f"within {probe_timeout:.0f} s")
                if r["errors"]:
                    problems.append(f"{kind} round {i + 1}: probe delivery errors {r['errors']}")
                if kind == "term" and r.get("exit_code") not in (0, None):
                    problems.append(f"term round {i + 1}: broker {r['victim']} exited with {r['exit_code']}")
    except BaseException as e:
        problems.append(f"the run stopped: {type(e).__name__}: {str(e)[:800]}")
        if not isinstance(e, Exception):
            raise
    finally:
        single.stop()
        cluster.stop()

    # ------------------------------------------------------------ the table
    rows: list[tuple[str, str, str, str]] = []
    rf1, rf3 = res.get("rf1"), res.get("rf3")
    n_runs = f" (median of {repeats})" if repeats > 1 else ""
    if rf1:
        rows.append((f"produce RF=1 acks=1, 1 broker{n_runs}",
                     f"{rf1['mb_s']:.1f} MB/s, {rf1['rec_s']:,.0f} rec/s", "", ""))
    if rf3:
        rows.append((f"produce RF=3 acks=all min.isr=2, 3 brokers{n_runs}",
                     f"{rf3['mb_s']:.1f} MB/s, {rf3['rec_s']:,.0f} rec/s", "", ""))
    if rf1 and rf3:
        ratio = rf3["mb_s"] / rf1["mb_s"]
        pairs = " ".join(f"{b / a:.2f}" for a, b in zip(rf1["runs"], rf3["runs"]))
        rows.append(("  ratio RF=3 / RF=1" + (f" of the medians (pairs: {pairs})" if repeats > 1 else ""),
                     f"{ratio:.3f}", ">= 0.4", "yes" if ratio >= 0.4 else "NO"))
    for kind, label, limit, limit_txt in (
            ("kill", "kill -9 leader -> first ack", session_s + 2.0,
             f"<= {session_s + 2:.1f} s (session {session_s:g} s + 2 s)"),
            ("term", "SIGTERM leader -> first ack", 1.0, "< 1 s")):
        rs = res.get(kind)
        if not rs:
            continue
        vals = [r["first_ack_s"] for r in rs]
        got = [v for v in vals if v is not None]
        med = statistics.median(got) if got else None
        worst = max(got) if len(got) == len(vals) else None
        ok = worst is not None and (worst <= limit if kind == "kill" else worst < limit)
        rows.append((f"{label} (median / max of {len(vals)})", f"{_ms(med)} / {_ms(worst)}", limit_txt,
                     "yes" if ok else "NO"))
        el = [w for r in rs for (_, w, _) in r["elected"].values()]
        if el:
            rows.append(("  new leader written in ZooKeeper (median)",
                         f"+{statistics.median(el):.2f} s", "", ""))
        raw = [r["raw_s"] for r in rs if r["raw_s"] is not None]
        if raw:
            worst = max(raw) if len(raw) == len(rs) else None
            ok = worst is not None and (worst <= limit if kind == "kill" else worst < limit)
            rows.append(("  raw Produce straight to it acked (median / max)",
                         f"{_ms(statistics.median(raw))} / {_ms(worst)}", limit_txt, "yes" if ok else "NO"))
    lag = res.get("lag")
    if lag and lag["max_bytes"] is not None:
        bpr = lag["bytes_per_record"]
        rows.append((f"follower lag @ {args.rate} rec/s, bytes (median / max)",
                     f"{lag['median_bytes']:,.0f} / {lag['max_bytes']:,}", "(no target)", ""))
        rows.append(("  in records, estimated (median / max)",
                     f"{lag['median_bytes'] / bpr:,.1f} / {lag['max_bytes'] / bpr:,.1f}", "", ""))
        if lag["gauge_max"] is not None:
            rows.append(("  replicafetchermanager_maxlag gauge, max", f"{lag['gauge_max']:,.0f} records",
                         "", ""))
    rows.append(("zookeeper.session.timeout.ms", f"{args.session_ms}", "", ""))

    # ------------------------------------------------------------ broker logs
    log_lines: list[str] = []
    for name, path in logs:
        errors, warnings = scan_log(path)
        if errors:
            problems.append(f"{name}: {len(errors)} distinct ERROR line(s) in its log")
            log_lines.append(f"  {name} ({path}): ERROR lines:")
            log_lines += [f"    {e[:300]}" for e in errors[:10]]
        if warnings:
            top = "; ".join(f"{n} x {w}" for w, n in warnings.most_common(3))
            log_lines.append(f"  {name}: {sum(warnings.values())} WARNING line(s), most frequent: {top}")

    print()
    head = ("figure", "value", "target", "met")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if log_lines:
        print("\nbroker logs:")
        print("\n".join(log_lines))
    if problems:
        print("\nproblems:")
        for p in problems:
            print(f"  - {p}")
    keep = args.keep or bool(problems)
    if not args.keep:
        if problems:  # the logs tell what happened; the data is large
            for d in [single.data_dir, *(b.data_dir for b in cluster.brokers)]:
                shutil.rmtree(d, ignore_errors=True)
        else:
            shutil.rmtree(work, ignore_errors=True)
    if keep:
        print(f"\nwork directory kept: {work}")
    print(f"wall time {time.monotonic() - started:.0f} s")
    return 1 if any(p.startswith("the run stopped") for p in problems) else 0


if __name__ == "__main__":
    sys.exit(main())
