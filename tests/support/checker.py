"""A Jepsen-style checker for a replicated samsa cluster.

Idempotent acks=all producers (librdkafka and the Java client) write unique
values ("r0-000123", "j0-000042") into one topic while consumers in a group read
and commit, and a nemesis breaks the cluster one way per round:

    kill_leader        kill -9 the leader of a random partition, restart it
    kill_controller    kill -9 the controller, restart it
    pause_leader       SIGSTOP a leader until ZooKeeper expires its session, SIGCONT
    kill_two           kill -9 two brokers: acks=all writes must stop (a probe
                       producer must see NOT_ENOUGH_REPLICAS), restart both
    restart_zookeeper  kill -9 ZooKeeper, start it again

After each round the cluster must recover: every broker registered, every
partition with a leader and a full ISR (the partition state znodes say so).
After the last round the producers stop and the history is checked against a
final read of every partition from offset 0 (the ground truth):

    lost            acked values not read
    duplicated      values read more than once, the copies written by one producer
                    id and epoch: a retry the broker failed to recognise
    unexpected      values read that no producer sent
    wrong_offset    acked values read at another partition/offset than acked
    out_of_order    acked values read out of their acked order in a partition
    offsets_went_backwards   a group's committed offset smaller than one seen before
    replica_mismatches       replicas whose .log bytes differ
    acked_while_two_down     values sent after two brokers died and acked before
                             either came back: min.insync.replicas=2 forbids it

Values sent but not acked are "failed" when the client reported an error (tallied
by error name) and "indeterminate" when it reported nothing; either may or may
not be in the log (a timed-out write can still have been appended), so finding
one (``unacked_read``) is reported, not an error. So are values a client sent
twice in a way no broker can deduplicate (``resent``: see ``analyse``).

    result = run_checker(cluster, rounds=5, nemeses=NEMESES)
    print(result.summary()); assert result.ok, result.summary()
"""
from __future__ import annotations

import collections
import logging
import random
import re
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kazoo.exceptions import KazooException

from samsa.client.blocking import ClientError, SimpleClient
from samsa.protocol.messages import ListOffsetsRequest
from samsa.protocol.model import ApiKey
from samsa.protocol.records.records import iter_all_records

from .cluster import Cluster
from .java_client import JavaTools
from .waiting import wait_until

NEMESES = ("kill_leader", "kill_controller", "pause_leader", "kill_two", "restart_zookeeper")
# Need a NetCluster (tests/support/net_cluster.py): every process stays up, links break.
NETWORK_NEMESES = ("isolate_leader", "isolate_follower", "split_halves", "isolate_zookeeper",
                   "one_way_cut", "slow_link")
ACKS1_PREFIX = "a"     # values of acks=1 producers: "a0-000001"
ACKS1_GRACE_S = 5.0    # an acks=1 write acked this long before a fault may still be lost

# Every librdkafka client here: back on its feet soon after a broker returns, and
# its many "Connection refused" lines in a logger (pytest shows them on failure)
# instead of on stderr.
RDKAFKA = {"reconnect.backoff.max.ms": 1000, "logger": logging.getLogger("checker.librdkafka")}
RDKAFKA["logger"].addHandler(logging.NullHandler())  # outside pytest: not on stderr either


# ------------------------------------------------------------------ history

class Window:
    """A span of the run in which no new acks=all write may be acknowledged
    (two of three brokers dead): values sent inside it and acked before it
    closes are violations; the errors they got are what the client saw instead."""

    def __init__(self, label: str):
        self.label = label
        self.acked: list[str] = []
        self.rejections: collections.Counter[str] = collections.Counter()


class History:
    """Every value the producers sent and what became of it (thread-safe)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.sent: dict[str, Window | None] = {}     # value -> the window open when it was sent
        self.sent_in: dict[str, str] = {}            # value -> the round it was sent in
        self.phase = "before the first round"
        self.acked: dict[str, tuple[int, int]] = {}  # value -> (partition, offset or -1)
        self.failed: dict[str, str] = {}             # value -> error name
        self.errors: collections.Counter[str] = collections.Counter()
        self.crashes: list[str] = []                 # producers that died or hit a fatal error
        self.window: Window | None = None
        self.acked_at: dict[str, float] = {}         # value -> when acked (monotonic)
        self.fault_spans: list[tuple[float, float]] = []  # each round: fault on .. recovered

    def on_sent(self, value: str) -> None:
        with self.lock:
            self.sent[value] = self.window
            self.sent_in[value] = self.phase

    def on_acked(self, value: str, partition: int, offset: int | None) -> None:
        """``offset`` None: acked without one (librdkafka's implicit ack of values
        in flight before a later batch of the same producer succeeded)."""
        with self.lock:
            self.acked[value] = (partition, -1 if offset is None else offset)
            self.acked_at[value] = time.monotonic()
            w = self.sent.get(value)
            # (acks=1 values: the leader alone acknowledges, min.insync.replicas aside)
            if w is not None and w is self.window and not value.startswith(ACKS1_PREFIX):
                w.acked.append(value)

    def on_failed(self, value: str | None, error: str, count: int = 1) -> None:
        with self.lock:
            self.errors[error] += count
            if value is not None:
                self.failed[value] = error
                w = self.sent.get(value)
                if w is not None:
                    w.rejections[error] += 1

    def acked_count(self) -> int:
        with self.lock:
            return len(self.acked)

    def acked_by_producer(self) -> collections.Counter[str]:
        """Acked values per producer name ("r0" of "r0-000001")."""
        with self.lock:
            return collections.Counter(v.partition("-")[0] for v in self.acked)


# ------------------------------------------------------------------ clients

def _poll_until(client, until: float) -> None:
    """Serve a librdkafka client's callbacks until ``until`` (monotonic): the
    pacing of the producers. poll() returns at the first callback, so loop."""
    while (left := until - time.monotonic()) > 0:
        client.poll(left)


class RdkafkaProducer(threading.Thread):
    """confluent_kafka (librdkafka), idempotent, acks=all, about ``rate`` values/s.
    A fatal error (the idempotent producer gave up) is recorded and a new
    producer takes over: the run goes on, values stay unique.

    ``message_timeout_ms`` should outlast any fault: a value that times out while
    in flight makes librdkafka bump its producer epoch and send the rest of what
    was in flight again under new sequence numbers, which no broker can tell from
    new values (librdkafka issue #4953; KIP-360). Its requests time out sooner
    (socket.timeout.ms) and are retried with their sequence numbers."""

    def __init__(self, name: str, bootstrap: str, topic: str, history: History, rate: float,
                 message_timeout_ms: int, acks: str = "all"):
        super().__init__(name=f"producer-{name}", daemon=True)
        self.prefix, self.topic, self.history, self.rate = name, topic, history, rate
        # acks=1 cannot be idempotent (librdkafka refuses the pair)
        self.config = {"bootstrap.servers": bootstrap, "enable.idempotence": acks == "all",
                       "acks": acks,
                       "linger.ms": 5, "message.timeout.ms": message_timeout_ms,
                       "socket.timeout.ms": 10000, "error_cb": self._on_error, **RDKAFKA}
        self.flush_s = message_timeout_ms / 1000 + 30
        self.stopping = threading.Event()
        self.fatal: KafkaError | None = None

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.fatal = err

    def _on_delivery(self, err, msg) -> None:
        value = msg.value().decode()
        if err is None:
            self.history.on_acked(value, msg.partition(), msg.offset())
        else:
            self.history.on_failed(value, err.name())

    def _retire(self, producer: Producer, reason: str) -> None:
        self.history.crashes.append(f"{self.prefix}: {reason}")
        try:
            producer.purge()  # the rest fail with _PURGE_* in their delivery reports
            producer.flush(5)
        except KafkaException:  # the fatal error raised once more; what was left has no report
            pass

    def run(self) -> None:
        producer, seq = Producer(self.config), 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            if self.fatal is not None:
                self._retire(producer, f"fatal {self.fatal.name()}: {self.fatal.str()}")
                self.fatal, producer = None, Producer(self.config)
            value = f"{self.prefix}-{seq:06d}"
            try:
                producer.produce(self.topic, key=value.encode(), value=value.encode(),
                                 on_delivery=self._on_delivery)
                self.history.on_sent(value)
                seq += 1
            except BufferError:  # local queue full (a long outage): try again next time
                pass
            except KafkaException as e:
                self.fatal = e.args[0]
                continue
            next_at += 1 / self.rate
            try:
                _poll_until(producer, next_at)
            except KafkaException as e:  # poll() raises a fatal error too
                self.fatal = e.args[0]
        try:
            left = producer.flush(self.flush_s)
        except KafkaException as e:
            self._retire(producer, f"fatal {e.args[0].name()} at the end: {e.args[0].str()}")
            return
        if left:
            self._retire(producer, f"{left} values unresolved {self.flush_s:g} s after the end")


_JAVA_ERROR = re.compile(r"ERROR: (\d+) of \d+ records failed, first: ([\w.$]+)")


class JavaProducer:
    """The Java client through tests/java/ConsoleProducer (idempotent, acks=all):
    values written to its stdin one a line at about ``rate``/s, and --print-acks
    lines "PARTITION<TAB>OFFSET<TAB>VALUE" read back from its stdout. It reports
    failures only as a count at exit; a producer that dies is replaced."""

    def __init__(self, tools: JavaTools, name: str, bootstrap: str, topic: str, history: History,
                 rate: float, log_dir: Path, delivery_timeout_ms: int):
        self.tools, self.name, self.bootstrap, self.topic = tools, name, bootstrap, topic
        self.history, self.rate, self.log_dir = history, rate, log_dir
        self.delivery_timeout_ms = delivery_timeout_ms
        self.stopping = threading.Event()
        self.generation = 0
        self.writer = threading.Thread(target=self._write, name=f"producer-{name}", daemon=True)

    def start(self) -> "JavaProducer":
        self.writer.start()
        return self

    def _launch(self):
        stderr = open(self.log_dir / f"java-producer-{self.name}-{self.generation}.err", "w+")
        proc = self.tools.popen(
            "ConsoleProducer", "--bootstrap-server", self.bootstrap, "--topic", self.topic,
            "--print-acks", "--property", "parse.key=true",
            "--producer-property", "request.timeout.ms=5000",
            "--producer-property", f"delivery.timeout.ms={self.delivery_timeout_ms}",
            "--producer-property", "reconnect.backoff.max.ms=1000",
            stdin=subprocess.PIPE, stderr=stderr, bufsize=1)
        reader = threading.Thread(target=self._read, args=(proc,), daemon=True)
        reader.start()
        return proc, reader, stderr

    def _read(self, proc: subprocess.Popen) -> None:
        for line in proc.stdout:
            try:
                partition, offset, value = line.rstrip("\n").split("\t", 2)
                self.history.on_acked(value, int(partition), int(offset))
            except ValueError:
                self.history.crashes.append(f"{self.name}: unexpected output {line!r}")

    def _finish(self, proc, reader, stderr, timeout: float, died: bool = False) -> None:
        try:
            proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            rc = proc.wait()
            self.history.crashes.append(f"{self.name}/{self.generation}: still running {timeout:g} s "
                                        "after its input ended (killed)")
        reader.join(30)
        stderr.seek(0)
        err = stderr.read()
        stderr.close()
        m = _JAVA_ERROR.search(err)
        if m:  # which values failed, Java does not say: counted, not attributed
            self.history.on_failed(None, "java:" + m.group(2).rsplit(".", 1)[-1], int(m.group(1)))
        if died or (rc != 0 and not m):
            self.history.crashes.append(f"{self.name}/{self.generation}: exit {rc}: {err[-500:]}")

    def _write(self) -> None:
        proc, reader, stderr = self._launch()
        seq = 0
        next_at = time.monotonic()
        while not self.stopping.is_set():
            value = f"{self.name}-{seq:06d}"
            try:
                self.history.on_sent(value)  # before the write: its ack may come at once
                proc.stdin.write(f"{value}\t{value}\n")
                proc.stdin.flush()
            except (BrokenPipeError, ValueError):  # it died: note why, start another
                self._finish(proc, reader, stderr, 10, died=True)
                self.generation += 1
                proc, reader, stderr = self._launch()
            seq += 1
            next_at += 1 / self.rate
            self.stopping.wait(max(0.0, next_at - time.monotonic()))
        self._finish(proc, reader, stderr, self.delivery_timeout_ms / 1000 + 60)

    def stop(self) -> None:
        self.stopping.set()
        self.writer.join()


CONSUMER_STOP_S = 60.0


class GroupConsumer(threading.Thread):
    """A member of the checker's group: consumes, then commits synchronously what it
    processed. What it reads is not the ground truth (a group is at-least-once);
    it is here so group commits happen through every fault."""

    def __init__(self, name: str, bootstrap: str, topic: str, group: str, stats: "ConsumerStats"):
        super().__init__(name=f"consumer-{name}", daemon=True)
        self.topic, self.stats = topic, stats
        self.config = {"bootstrap.servers": bootstrap, "group.id": group,
                       "enable.auto.commit": False, "auto.offset.reset": "earliest",
                       "session.timeout.ms": 6000, "heartbeat.interval.ms": 1000, **RDKAFKA}
        self.stopping = threading.Event()
        self.where = "start"  # the client call it is in, for a member that hangs

    def run(self) -> None:
        c = Consumer(self.config)
        try:
            c.subscribe([self.topic])
            while not self.stopping.is_set():
                try:
                    self.where = "consume()"
                    msgs = [m for m in c.consume(100, timeout=0.3) if m.error() is None]
                except KafkaException as e:
                    with self.stats.lock:
                        self.stats.commit_errors[f"consume: {e.args[0].name()}"] += 1
                    continue
                if not msgs:
                    continue
                try:
                    self.where = "commit(asynchronous=False)"
                    c.commit(asynchronous=False)
                    error = None
                except KafkaException as e:
                    error = e.args[0].name()
                with self.stats.lock:  # two members count into it
                    self.stats.consumed += len(msgs)
                    if error is None:
                        self.stats.commits += 1
                    else:
                        self.stats.commit_errors[error] += 1
        finally:
            self.where = "close()"
            c.close()


@dataclass
class ConsumerStats:
    consumed: int = 0
    commits: int = 0
    commit_errors: collections.Counter = field(default_factory=collections.Counter)
    samples: int = 0
    sample_errors: collections.Counter = field(default_factory=collections.Counter)
    backwards: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class CommitSampler(threading.Thread):
    """Reads the group's committed offsets (OffsetFetch through ``committed()``, from a
    consumer that does not join) a few times a second: per partition, an offset
    smaller than one seen before (or none after one) means a commit was lost."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, group: str,
                 stats: ConsumerStats, label: Callable[[], str]):
        super().__init__(name="commit-sampler", daemon=True)
        self.tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.config = {"bootstrap.servers": bootstrap, "group.id": group,
                       "enable.auto.commit": False, **RDKAFKA}
        self.stats, self.label = stats, label
        self.highest: dict[int, int] = {}
        self.stopping = threading.Event()

    def sample(self, c: Consumer) -> None:
        try:
            got = c.committed(self.tps, timeout=5)
        except KafkaException as e:
            self.stats.sample_errors[e.args[0].name()] += 1
            return
        self.stats.samples += 1
        for tp in got:
            if tp.error is not None:
                self.stats.sample_errors[tp.error.name()] += 1
                continue
            before = self.highest.get(tp.partition, -1)
            if before >= 0 and tp.offset < before:
                self.stats.backwards.append(f"p{tp.partition}: {before} -> {tp.offset} ({self.label()})")
            self.highest[tp.partition] = max(before, tp.offset)

    def run(self) -> None:
        c = Consumer(self.config)
        try:
            while not self.stopping.wait(0.3):
                self.sample(c)
            self.sample(c)  # once more after the consumers' last commits
        finally:
            c.close()


# ------------------------------------------------------------------ cluster state

def _state(cluster: Cluster, topic: str, partition: int) -> dict | None:
    try:
        return cluster.partition_state(topic, partition)
    except KazooException:  # ZooKeeper away: unknown
        return None


def _leader(cluster: Cluster, topic: str, partition: int) -> int:
    s = _state(cluster, topic, partition)
    return -1 if s is None else s["leader"]


def recovered(cluster: Cluster, topic: str, partitions: int, replicas: int) -> bool:
    """Every broker running and registered by a session connected now, a
    controller, and every partition led with all its replicas in the ISR."""
    try:
        if not all(b.is_running() for b in cluster.brokers) or not cluster.zk.is_running():
            return False
        if cluster.registered_ids() != set(range(cluster.size)) or cluster.controller_id() < 0:
            return False
        if not _registrations_live(cluster):
            return False
        states = [cluster.partition_state(topic, p) for p in range(partitions)]
    except (KazooException, OSError):
        return False
    return all(s is not None and s["leader"] >= 0 and len(s["isr"]) == replicas for s in states)


def _registrations_live(cluster: Cluster) -> bool:
    """Whether each /brokers/ids/<id> belongs to a session connected to
    ZooKeeper now. Right after ZooKeeper restarts, the registrations (and the
    full ISRs) of brokers whose sessions are about to expire are still there:
    a round started then found the ISR shrunk to its victim alone a moment later
    (the controller removing the expired brokers) and no leader to elect."""
    answer = cluster.zk.command(b"cons")
    connected = {int(sid, 16) for sid in re.findall(rb"sid=0x([0-9a-f]+)", answer)}
    client = cluster.zk_client()
    return all(client.get(f"/brokers/ids/{b}")[1].ephemeralOwner in connected
               for b in range(cluster.size))


def _segments(cluster: Cluster, broker: int, topic: str, partition: int) -> list[Path]:
    # Segment names are zero-padded base offsets: name order is offset order.
    return sorted((cluster.broker(broker).data_dir / f"{topic}-{partition}").glob("*.log"))


def _log_bytes(files: list[Path]) -> bytes:
    return b"".join(f.read_bytes() for f in files)


def _where(files: list[Path], position: int) -> str:
    for f in files:
        size = f.stat().st_size
        if position < size:
            return f"{f.name} +{position}"
        position -= size
    return f"end +{position}"


def compare_replicas(cluster: Cluster, topic: str, partitions: int,
                     timeout: float = 60) -> tuple[list[str], dict[int, int]]:
    """Compare every partition's .log bytes across the brokers once their sizes agree
    (producers stopped and the ISR full, followers only have to catch up); then the
    high watermark is every replica's end. Segments are concatenated, so where a
    replica happened to roll one does not matter. Returns the mismatches (file and
    position of the first differing byte) and {partition: bytes compared}."""
    brokers = range(cluster.size)

    def sizes(p: int) -> dict[int, int]:
        return {b: sum(f.stat().st_size for f in _segments(cluster, b, topic, p)) for b in brokers}
    try:
        wait_until(lambda: all(len(set(sizes(p).values())) == 1 for p in range(partitions)),
                   timeout, f"the replicas of {topic} to reach the same size")
    except AssertionError:
        pass  # compared anyway: the report says which sizes differ
    mismatches, compared = [], {}
    for p in range(partitions):
        files = {b: _segments(cluster, b, topic, p) for b in brokers}
        missing = [b for b, fs in files.items() if not fs]
        if missing:
            mismatches.append(f"p{p}: no .log segment on brokers {missing}")
            continue
        data = {b: _log_bytes(fs) for b, fs in files.items()}
        if len({len(d) for d in data.values()}) > 1:
            mismatches.append(f"p{p}: sizes differ {({b: len(d) for b, d in data.items()})}")
        compared[p] = n = min(len(d) for d in data.values())
        for b in brokers[1:]:
            if data[0][:n] != data[b][:n]:
                at = next(i for i in range(n) if data[0][i] != data[b][i])
                mismatches.append(f"p{p}: broker {b} differs from broker 0 at byte {at} "
                                  f"(broker 0 {_where(files[0], at)}, broker {b} {_where(files[b], at)})")
    return mismatches, compared


def log_writers(cluster: Cluster, topic: str, partitions: int,
                broker: int = 0) -> dict[tuple[int, int], tuple[int, int]]:
    """{(partition, offset): (producer id, producer epoch)} from one replica's .log
    files: which producer session wrote each record (to tell a client's re-send
    under a new epoch from a write the broker failed to deduplicate)."""
    out = {}
    for p in range(partitions):
        for hdr, rec in iter_all_records(_log_bytes(_segments(cluster, broker, topic, p))):
            out[(p, rec.offset)] = (hdr.producer_id, hdr.producer_epoch)
    return out


# ------------------------------------------------------------------ the final read

def read_everything(bootstrap: str, topic: str, partitions: int,
                    timeout: float = 120) -> tuple[list[tuple[int, int, str]], str | None]:
    """Every record of every partition from offset 0 up to the high watermark at the
    start, as (partition, offset, value); plus what stopped the read short, if anything."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"checker-reader-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, **RDKAFKA})
    got: list[tuple[int, int, str]] = []
    try:
        ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(partitions)}
        position = {p: 0 for p in range(partitions)}
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while any(position[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                return got, f"read stopped at {position}, high watermarks {ends}"
            for m in c.consume(1000, timeout=0.5):
                if m.error() is not None:
                    return got, f"read error {m.error()}"
                got.append((m.partition(), m.offset(), m.value().decode(errors="replace")))
                position[m.partition()] = m.offset() + 1
        return got, None
    finally:
        c.close()


# ------------------------------------------------------------------ result

@dataclass
class CheckerResult:
    rounds: list[str] = field(default_factory=list)   # one line per round
    sent: int = 0
    acked: int = 0
    acked_without_offset: int = 0
    failed: int = 0
    errors: collections.Counter = field(default_factory=collections.Counter)
    indeterminate: int = 0
    unacked_read: list[str] = field(default_factory=list)
    unacked_read_why: collections.Counter = field(default_factory=collections.Counter)
    read_total: int = 0
    read_problem: str | None = None
    lost: list[str] = field(default_factory=list)
    # acks=1 values (producers "a0"...): acked by the leader alone. Kafka loses such a
    # write when that leader is cut off or dies before a follower copied it and the
    # new leader's log truncates it away: allowed when it was acked during a fault
    # (or just before: the followers' copy lags a fetch behind), not otherwise.
    acks1_sent: int = 0
    acks1_acked: int = 0
    acks1_lost: list[str] = field(default_factory=list)
    acks1_lost_unexplained: list[str] = field(default_factory=list)
    # Spans in which no acks=all write may be acknowledged (the partition's side
    # with ZooKeeper holds fewer than min.insync.replicas brokers).
    refusal_windows: list[Window] = field(default_factory=list)
    recovery_s: dict[str, list[float]] = field(default_factory=dict)  # nemesis -> heal..recovered
    duplicated: list[str] = field(default_factory=list)
    resent: list[str] = field(default_factory=list)
    unexpected: list[str] = field(default_factory=list)
    wrong_offset: list[str] = field(default_factory=list)
    out_of_order: list[str] = field(default_factory=list)
    offsets_went_backwards: list[str] = field(default_factory=list)
    replica_mismatches: list[str] = field(default_factory=list)
    replica_bytes: dict[int, int] = field(default_factory=dict)   # partition -> bytes compared
    acked_by_producer: collections.Counter = field(default_factory=collections.Counter)
    committed: dict[int, int] = field(default_factory=dict)       # highest committed offsets seen
    sent_in: dict[str, collections.Counter] = field(default_factory=dict)  # category -> rounds
    kill_two: list[Window] = field(default_factory=list)
    not_recovered: list[str] = field(default_factory=list)
    no_reaction: list[str] = field(default_factory=list)
    crashes: list[str] = field(default_factory=list)
    consumers: ConsumerStats = field(default_factory=ConsumerStats)
    stuck_consumers: list[str] = field(default_factory=list)  # client-side, reported only

    @property
    def acked_while_two_down(self) -> list[str]:
        return [v for w in self.kill_two for v in w.acked]

    @property
    def acked_in_minority(self) -> list[str]:
        return [v for w in self.refusal_windows for v in w.acked]

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.unexpected or self.wrong_offset
                    or self.out_of_order or self.offsets_went_backwards or self.replica_mismatches
                    or self.acked_while_two_down or self.not_recovered or self.no_reaction
                    or self.read_problem or self.acks1_lost_unexplained or self.acked_in_minority)

    def summary(self) -> str:
        def some(items: list[str], n: int = 5, category: str = "") -> str:
            if not items:
                return ""
            rounds = self.sent_in.get(category)
            return (f" (sent in: {dict(rounds.most_common())})" if rounds else "") + f"  e.g. {items[:n]}"
        c = self.consumers
        lines = [f"checker: {'OK' if self.ok else 'FAILED'} after {len(self.rounds)} nemesis rounds",
                 *(f"  {r}" for r in self.rounds),
                 f"sent={self.sent} acked={self.acked} (without an offset: {self.acked_without_offset}) "
                 f"failed={self.failed} "
                 f"indeterminate={self.indeterminate} unacked_read={len(self.unacked_read)} "
                 f"read_total={self.read_total}",
                 f"acked by producer: {dict(sorted(self.acked_by_producer.items()))}; "
                 f"errors: {dict(self.errors.most_common())}",
                 *([f"  sent, not acked, read (allowed): {dict(self.unacked_read_why)} "
                    f"e.g. {self.unacked_read[:3]}"] if self.unacked_read else []),
                 f"lost={len(self.lost)}{some(self.lost, category='lost')}",
                 f"duplicated={len(self.duplicated)}{some(self.duplicated, category='duplicated')}",
                 f"resent_by_client={len(self.resent)} (no idempotence, or a new producer epoch: "
                 f"not the broker's doing)"
                 f"{some(self.resent, 3, category='resent')}",
                 f"unexpected={len(self.unexpected)}{some(self.unexpected)}",
                 f"wrong_offset={len(self.wrong_offset)}{some(self.wrong_offset, category='wrong_offset')}",
                 f"out_of_order={len(self.out_of_order)}{some(self.out_of_order)}",
                 f"offsets_went_backwards={len(self.offsets_went_backwards)}"
                 f"{some(self.offsets_went_backwards)}",
                 f"replica_mismatches={len(self.replica_mismatches)}{some(self.replica_mismatches)} "
                 f"(bytes compared per partition: {self.replica_bytes})",
                 f"acked_while_two_down={len(self.acked_while_two_down)}{some(self.acked_while_two_down)}",
                 *(f"  {w.label}: rejections {dict(w.rejections)}" for w in self.kill_two),
                 f"acked_in_minority={len(self.acked_in_minority)}{some(self.acked_in_minority)}",
                 *(f"  {w.label}: rejections {dict(w.rejections)}" for w in self.refusal_windows),
                 *([f"acks=1: sent={self.acks1_sent} acked={self.acks1_acked} "
                    f"lost in a fault (allowed)={len(self.acks1_lost)}"
                    f"{some(self.acks1_lost, 3, category='acks1_lost')} "
                    f"lost outside any fault={len(self.acks1_lost_unexplained)}"
                    f"{some(self.acks1_lost_unexplained)}"] if self.acks1_sent else []),
                 *(["recovery after healing (s): " + ", ".join(
                     f"{k} n={len(v)} median={sorted(v)[len(v) // 2]:.1f} max={max(v):.1f}"
                     for k, v in sorted(self.recovery_s.items()))] if self.recovery_s else []),
                 f"group: consumed={c.consumed} commits={c.commits} commit_errors={dict(c.commit_errors)} "
                 f"offset_samples={c.samples} sample_errors={dict(c.sample_errors)} "
                 f"highest committed={self.committed}"]
        if self.read_problem:
            lines.append(f"final read incomplete: {self.read_problem}")
        if self.not_recovered:
            lines.append(f"not recovered: {self.not_recovered}")
        if self.stuck_consumers:
            lines.append(f"group members that did not stop (a client hang, not counted as a "
                         f"failure): {self.stuck_consumers}")
        if self.no_reaction:
            lines.append(f"no reaction to a fault: {self.no_reaction}")
        if self.crashes:
            lines.append(f"producer crashes ({len(self.crashes)}): {self.crashes[:5]}")
        return "\n".join(lines)


def analyse(history: History, read: list[tuple[int, int, str]], result: CheckerResult,
            writers: dict[tuple[int, int], tuple[int, int]] | None = None) -> None:
    """Fill ``result``'s counts from the producers' history and the final read. Each
    reported value says where it was read (and by which producer id/epoch, from
    ``writers``), where it was acked and in which round it was sent.

    A value read twice is ``resent`` when the client sent it again in a way no
    broker can recognise: from a producer without idempotence (the kill_two probe;
    librdkafka retries NOT_LEADER_OR_FOLLOWER even with retries=0), or under a new
    producer epoch (every copy from a different one). Copies from one producer
    epoch are a deduplication the broker missed: ``duplicated``."""
    writers = writers or {}
    with history.lock:
        sent, acked, sent_in = dict(history.sent), dict(history.acked), dict(history.sent_in)
        failed = dict(history.failed)
        acked_at, spans = dict(history.acked_at), list(history.fault_spans)
        result.errors.update(history.errors)
    result.sent, result.acked = len(sent), len(acked)
    result.failed = sum(result.errors.values())  # Java's failures are counted, not attributed
    result.indeterminate = max(0, len(sent) - len(acked) - result.failed)
    result.read_total = len(read)
    where: dict[str, list[tuple[int, int]]] = collections.defaultdict(list)
    for p, o, v in read:
        where[v].append((p, o))

    def about(v: str) -> str:
        ack = (f"acked p{acked[v][0]}@{acked[v][1] if acked[v][1] >= 0 else '?'}" if v in acked
               else f"failed with {failed[v]}" if v in failed else "no report")
        copies = [f"p{p}@{o}" + (" by pid {}/epoch {}".format(*writers[(p, o)]) if (p, o) in writers else "")
                  for p, o in where.get(v, [])]
        return f"{v} read at {copies}, {ack}, sent in {sent_in.get(v, '?')}"
    def tally(category: str, values: Iterable[str]) -> None:
        result.sent_in[category] = collections.Counter(sent_in.get(v, "?") for v in values)
    twice = [v for v, at in where.items() if len(at) > 1]
    def by_client(v: str) -> bool:
        ids = [writers.get(at) for at in where[v]]
        return None not in ids and (any(pid < 0 for pid, _ in ids) or len(set(ids)) == len(ids))
    resent = [v for v in twice if by_client(v)]
    result.resent = sorted(about(v) for v in resent)
    result.duplicated = sorted(about(v) for v in set(twice) - set(resent))
    tally("resent", resent)
    tally("duplicated", set(twice) - set(resent))
    result.unexpected = sorted(f"{v} read at {at}" for v, at in where.items() if v not in sent)
    unacked = [v for v in where if v in sent and v not in acked]
    result.unacked_read = sorted(about(v) for v in unacked)
    result.unacked_read_why.update(failed.get(v, "no report") for v in unacked)
    by_partition: dict[int, list[tuple[int, str]]] = collections.defaultdict(list)
    known = {v: (p, o) for v, (p, o) in acked.items() if o >= 0}  # offset and order checkable
    result.acked_without_offset = len(acked) - len(known)
    def in_a_fault(v: str) -> bool:
        at = acked_at.get(v)
        return at is not None and any(start - ACKS1_GRACE_S <= at <= end for start, end in spans)
    for v, (p, o) in acked.items():
        if v not in where:
            if not v.startswith(ACKS1_PREFIX):
                result.lost.append(about(v))
            elif in_a_fault(v):
                result.acks1_lost.append(about(v))
            else:
                result.acks1_lost_unexplained.append(about(v))
        elif v in known and (p, o) not in where[v]:
            result.wrong_offset.append(about(v))
        if v in known:
            by_partition[p].append((o, v))
    for p, items in by_partition.items():
        last = None
        for o, v in sorted(items):
            if v not in where:
                continue
            # Where it was acked if it is there (a misplaced copy is wrong_offset's business).
            pos = (p, o) if (p, o) in where[v] else min(where[v])
            if last is not None and pos <= last[1]:
                result.out_of_order.append(f"{about(v)}: not after {last[0]} (read at {last[1]})")
            last = (v, pos)
    tally("lost", (v for v in acked if v not in where and not v.startswith(ACKS1_PREFIX)))
    tally("acks1_lost", (v for v in acked if v not in where and v.startswith(ACKS1_PREFIX)))
    result.acks1_acked = sum(1 for v in acked if v.startswith(ACKS1_PREFIX))
    result.acks1_sent = sum(1 for v in sent if v.startswith(ACKS1_PREFIX))
    tally("wrong_offset", (v for v, (p, o) in known.items() if v in where and (p, o) not in where[v]))


# ------------------------------------------------------------------ nemeses

@dataclass
class Run:
    """What a nemesis needs: the cluster, the topic, and the history to mark windows in."""
    cluster: Cluster
    topic: str
    partitions: int
    replicas: int
    min_insync: int
    history: History
    rng: random.Random
    hold_s: float
    log: Callable[[str], None]
    result: CheckerResult
    label: str = ""
    probes: int = 0  # probe values sent so far (kill_two)
    healed_at: float | None = None  # when the round's fault was undone (monotonic)

    @property
    def session_s(self) -> float:
        return self.cluster.session_timeout_ms / 1000

    def hold(self, seconds: float | None = None) -> int:
        """Keep the fault in place for hold_s seconds of load (the fault's duration,
        not a wait for anything); returns how many values were acked meanwhile."""
        before = self.history.acked_count()
        time.sleep(self.hold_s if seconds is None else seconds)
        return self.history.acked_count() - before

    def random_leader(self) -> tuple[int, int]:
        """(partition, leader) of a random partition."""
        p = self.rng.randrange(self.partitions)

        def led():  # wait_until wants a truthy value, and broker 0 is a fine leader
            leader = _leader(self.cluster, self.topic, p)
            return (leader,) if leader >= 0 else None
        return p, wait_until(led, 30, f"a leader for p{p}")[0]

    def led_by(self, broker: int) -> list[int]:
        return [p for p in range(self.partitions) if _leader(self.cluster, self.topic, p) == broker]

    def wait_failover(self, gone: Iterable[int], partitions: list[int]) -> None:
        """With replicas to spare, until ``partitions`` are led by a broker not in ``gone``."""
        gone = set(gone)
        if self.replicas <= len(gone):  # no replica left to lead: offline until healed
            return
        wait_until(lambda: all(_leader(self.cluster, self.topic, p) not in (-1, *gone)
                               for p in partitions),
                   max(30, 5 * self.session_s), f"new leaders for {partitions} without {sorted(gone)}")


def kill_leader(run: Run) -> str:
    p, victim = run.random_leader()
    led = run.led_by(victim)
    run.cluster.kill(victim)
    try:
        run.wait_failover([victim], led)
        acked = run.hold()
    finally:
        run.cluster.restart(victim)
    return f"killed broker {victim} (leader of p{p}); acked under fault: {acked}"


def kill_controller(run: Run) -> str:
    victim = run.cluster.wait_for_controller()
    led = run.led_by(victim)
    run.cluster.kill(victim)
    try:
        run.cluster.wait_for_controller(among=[b for b in range(run.cluster.size) if b != victim],
                                        timeout=max(30, 5 * run.session_s))
        run.wait_failover([victim], led)
        acked = run.hold()
    finally:
        run.cluster.restart(victim)
    return f"killed controller {victim}; acked under fault: {acked}"


def pause_leader(run: Run) -> str:
    p, victim = run.random_leader()
    led = run.led_by(victim)
    zk = run.cluster.zk_client()
    run.cluster.pause(victim)
    try:
        # Longer than the session: until ZooKeeper has expired it.
        wait_until(lambda: not zk.exists(f"/brokers/ids/{victim}"), max(30, 5 * run.session_s),
                   f"ZooKeeper to expire paused broker {victim}'s session")
        run.wait_failover([victim], led)
        acked = run.hold()
    finally:
        run.cluster.resume(victim)
    return f"paused broker {victim} (leader of p{p}) past its session; acked under fault: {acked}"


def _probe_until_refused(run: Run, within_s: float | None = None) -> list[int]:
    """Until every partition has refused an acks=all write with NOT_ENOUGH_REPLICAS.
    The probe is a plain producer (no idempotence, retries=0), so the broker's
    refusal reaches us as is instead of being retried until a timeout (librdkafka
    still retries NOT_LEADER_OR_FOLLOWER: copies of probe values are possible and
    counted as ``resent``); its values are part of the history like any other, so
    an ack of one while two brokers are down is a violation."""
    refused: set[int] = set()

    def on_delivery(err, msg):
        value = msg.value().decode()
        if err is None:
            run.history.on_acked(value, msg.partition(), msg.offset())
        else:
            run.history.on_failed(value, err.name())
            if err.code() == KafkaError.NOT_ENOUGH_REPLICAS:
                refused.add(msg.partition())
    probe = Producer({"bootstrap.servers": run.cluster.bootstrap, "acks": "all",
                      "enable.idempotence": False, "retries": 0, "linger.ms": 0,
                      "message.timeout.ms": 5000, **RDKAFKA})
    # Refusals start once the survivor's ISR has shrunk: after the dead brokers'
    # sessions expire and the controller (or the leader itself) drops them.
    next_at = time.monotonic()
    deadline = next_at + (max(30, 10 * run.session_s) if within_s is None else within_s)
    try:
        while len(refused) < run.partitions and time.monotonic() < deadline:
            for p in set(range(run.partitions)) - refused:
                run.probes += 1
                value = f"probe-{run.probes:06d}"
                run.history.on_sent(value)
                probe.produce(run.topic, value=value.encode(), partition=p, on_delivery=on_delivery)
            next_at += 0.5  # one value per partition every half second
            _poll_until(probe, next_at)
    finally:
        probe.flush(10)
    return sorted(set(range(run.partitions)) - refused)  # never answered NOT_ENOUGH_REPLICAS


def kill_two(run: Run) -> str:
    victims = sorted(run.rng.sample(range(run.cluster.size), 2))
    for b in victims:
        run.cluster.kill(b)
    # Writes must stop when no partition keeps min.insync.replicas live replicas:
    # every broker holds a replica of each (replicas == brokers), two are gone.
    if not (run.replicas == run.cluster.size and run.replicas - 2 < run.min_insync):
        try:
            acked = run.hold()
        finally:
            for b in victims:
                run.cluster.restart(b)
        return f"killed brokers {victims}; acked meanwhile: {acked}"
    window = Window(f"{run.label}: brokers {victims} down")
    run.result.kill_two.append(window)
    run.history.window = window
    try:
        unrefused = _probe_until_refused(run)
    finally:
        run.history.window = None  # before either comes back: from now on acks are fine
        for b in victims:
            run.cluster.restart(b)
    return (f"killed brokers {victims}; acked while both down: {len(window.acked)}, "
            f"refused: {dict(window.rejections)}"
            + (f"; partitions {unrefused} never answered NOT_ENOUGH_REPLICAS" if unrefused else ""))


def restart_zookeeper(run: Run) -> str:
    # Away longer than a session: every broker's session is in doubt when it returns.
    away = max(run.hold_s, 1.5 * run.session_s)
    run.cluster.zk.kill()
    try:
        acked = run.hold(away)
    finally:
        run.cluster.zk.start()
    return f"ZooKeeper killed for {away:g} s and started again; acked meanwhile: {acked}"


# ------------------------------------------------------------------ network nemeses
# Every process stays up; links break (nftables rules in the nodes' namespaces,
# tests/support/netns.py). The test's clients reach every broker all along.

def _network(run: Run):
    network = getattr(run.cluster, "network", None)
    if network is None:
        raise RuntimeError("network nemeses need a NetCluster (tests/support/net_cluster.py)")
    return network


def _node(broker: int) -> str:
    return f"b{broker}"


def _everyone_but(run: Run, brokers: Iterable[int]) -> list[str]:
    """ZooKeeper and every broker not in ``brokers``, as network nodes."""
    brokers = set(brokers)
    return ["zk", *(_node(b) for b in range(run.cluster.size) if b not in brokers)]


def _wait_expired(run: Run, brokers: Iterable[int]) -> None:
    """Until ZooKeeper has expired the sessions of ``brokers`` (their /brokers/ids gone)."""
    brokers = sorted(brokers)
    zk = run.cluster.zk_client()
    wait_until(lambda: not any(zk.exists(f"/brokers/ids/{b}") for b in brokers),
               max(30, 5 * run.session_s), f"ZooKeeper to expire the sessions of {brokers}")


def _healing(run: Run) -> None:
    _network(run).heal()
    run.healed_at = time.monotonic()


def _wait_led_by(run: Run, side: list[int]) -> None:
    """Until the controller has every partition led from ``side`` (ZooKeeper's side)
    with an ISR shrunk to that side, and each new leader has taken the leadership
    up itself: from then on min.insync.replicas refuses. (Between the controller's
    znode write and the new leader acting on it, the old leader, its ISR unshrunk,
    may still acknowledge what every replica, the new leader included, fetched:
    rightly, and outside the window.)"""
    states: list[dict] = []

    def led():
        states[:] = [s for p in range(run.partitions)
                     if (s := _state(run.cluster, run.topic, p)) is not None
                     and s["leader"] in side and set(s["isr"]) <= set(side)]
        return len(states) == run.partitions
    wait_until(led, max(30, 10 * run.session_s),
               f"every partition led from {side} with its ISR shrunk to it")
    wait_until(lambda: all(_leads_at(run, p, s["leader"], s["leader_epoch"])
                           for p, s in enumerate(states)),
               max(30, 10 * run.session_s), f"the leaders on {side} to act as leaders")


def _leads_at(run: Run, partition: int, broker: int, epoch: int) -> bool:
    """Whether ``broker`` answers ListOffsets for ``partition`` as its leader at
    ``epoch`` (its replica manager's view, not its metadata cache's)."""
    L = ListOffsetsRequest
    req = L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name=run.topic, partitions=[
        L.ListOffsetsPartition(partition_index=partition, current_leader_epoch=epoch,
                               timestamp=-1)])])
    try:
        with SimpleClient(run.cluster.broker(broker).bootstrap, client_id="checker",
                          timeout=5) as client:
            resp = client.call(ApiKey.LIST_OFFSETS, req)
    except (OSError, ClientError):
        return False
    return resp.topics[0].partitions[0].error_code == 0


def _refusal_window(run: Run, label: str) -> Window:
    """From now until the heal, no acks=all write may be acknowledged."""
    window = Window(f"{run.label}: {label}")
    run.result.refusal_windows.append(window)
    run.history.window = window
    return window


def isolate_leader(run: Run) -> str:
    """The leader of a partition cut from ZooKeeper and the other brokers, not from
    its clients: it must stop acknowledging acks=all writes (its followers stop
    fetching, its ISR cannot shrink without ZooKeeper) while the controller elects
    another leader; what it took meanwhile is truncated on its return, unacked."""
    net = _network(run)
    p, victim = run.random_leader()
    led = run.led_by(victim)
    net.cut(_node(victim), _everyone_but(run, [victim]))
    try:
        _wait_expired(run, [victim])
        run.wait_failover([victim], led)
        acked = run.hold()
    finally:
        _healing(run)
    return f"cut leader {victim} (of p{p}) from ZooKeeper and its peers; acked meanwhile: {acked}"


def isolate_follower(run: Run) -> str:
    """A follower cut from ZooKeeper and its peers: it leaves the ISR, writes go on
    with the two left (min.insync.replicas 2)."""
    net = _network(run)
    p, leader = run.random_leader()
    followers = [b for b in range(run.cluster.size) if b != leader]
    victim = run.rng.choice(followers)
    net.cut(_node(victim), _everyone_but(run, [victim]))
    try:
        _wait_expired(run, [victim])
        wait_until(lambda: (s := _state(run.cluster, run.topic, p)) is not None
                   and victim not in s["isr"], max(30, 10 * run.session_s),
                   f"broker {victim} out of p{p}'s ISR")
        acked = run.hold()
    finally:
        _healing(run)
    return f"cut follower {victim} (of p{p}) from ZooKeeper and its peers; acked meanwhile: {acked}"


def split_halves(run: Run) -> str:
    """ZooKeeper and one broker on one side, the other brokers on the other. The
    ZooKeeper side leads everything with one in-sync replica (min.insync.replicas
    refuses), the other side cannot shrink its ISRs: no acks=all write may be
    acknowledged until the heal."""
    net = _network(run)
    brokers = list(range(run.cluster.size))
    run.rng.shuffle(brokers)
    with_zk, without = brokers[:len(brokers) // 2], brokers[len(brokers) // 2:]
    net.partition(["zk", *map(_node, with_zk)], map(_node, without))
    refusing = run.replicas == run.cluster.size and len(with_zk) < run.min_insync
    window = None
    try:
        _wait_expired(run, without)
        if refusing:
            _wait_led_by(run, with_zk)
            window = _refusal_window(run, f"{sorted(with_zk)} with ZooKeeper | {sorted(without)}")
        before = run.history.acked_count()
        unrefused = _probe_until_refused(run, max(run.hold_s, 15)) if window else []
        acked = run.hold() + run.history.acked_count() - before
    finally:
        run.history.window = None
        _healing(run)
    return (f"split {sorted(with_zk)}+ZooKeeper | {sorted(without)}; acked meanwhile: {acked}"
            + (f"; acked in the window: {len(window.acked)}, refused: {dict(window.rejections)}"
               if window else "")
            + (f"; partitions {unrefused} never answered NOT_ENOUGH_REPLICAS" if unrefused else ""))


def isolate_zookeeper(run: Run) -> str:
    """ZooKeeper cut from a majority of the brokers (they still hear each other):
    the one broker left with ZooKeeper leads everything with one in-sync replica."""
    net = _network(run)
    majority = sorted(run.rng.sample(range(run.cluster.size), run.cluster.size // 2 + 1))
    net.cut("zk", map(_node, majority))
    minority = [b for b in range(run.cluster.size) if b not in majority]
    refusing = run.replicas == run.cluster.size and len(minority) < run.min_insync
    window = None
    try:
        _wait_expired(run, majority)
        if refusing:
            # Until the survivor leads alone, the others may still replicate and
            # acknowledge, rightly: every ISR member has what they acknowledged.
            _wait_led_by(run, minority)
            window = _refusal_window(run, f"ZooKeeper cut from {majority}")
        before = run.history.acked_count()
        unrefused = _probe_until_refused(run, max(run.hold_s, 15)) if window else []
        acked = run.hold() + run.history.acked_count() - before
    finally:
        run.history.window = None
        _healing(run)
    return (f"cut ZooKeeper from brokers {majority}; acked meanwhile: {acked}"
            + (f"; acked in the window: {len(window.acked)}, refused: {dict(window.rejections)}"
               if window else "")
            + (f"; partitions {unrefused} never answered NOT_ENOUGH_REPLICAS" if unrefused else ""))


def one_way_cut(run: Run) -> str:
    """A broker (a leader, mostly) that still sends to ZooKeeper and its peers but
    hears nothing from them (its clients still reach it)."""
    net = _network(run)
    p, victim = run.random_leader()
    led = run.led_by(victim)
    net.cut_inbound(_node(victim), _everyone_but(run, [victim]))
    try:
        _wait_expired(run, [victim])
        run.wait_failover([victim], led)
        acked = run.hold()
    finally:
        _healing(run)
    return f"broker {victim} (leader of p{p}) hears nothing from ZooKeeper and its peers; " \
           f"acked meanwhile: {acked}"


def slow_link(run: Run) -> str:
    """A broker whose every packet is delayed and some lost, for a while."""
    net = _network(run)
    victim = run.rng.randrange(run.cluster.size)
    how = net.slow(_node(victim))
    try:
        acked = run.hold(max(run.hold_s, run.session_s))
    finally:
        _healing(run)
    return f"slow link at broker {victim} ({how}); acked meanwhile: {acked}"


NEMESIS_FUNCTIONS: dict[str, Callable[[Run], str]] = {
    "kill_leader": kill_leader, "kill_controller": kill_controller, "pause_leader": pause_leader,
    "kill_two": kill_two, "restart_zookeeper": restart_zookeeper,
    "isolate_leader": isolate_leader, "isolate_follower": isolate_follower,
    "split_halves": split_halves, "isolate_zookeeper": isolate_zookeeper,
    "one_way_cut": one_way_cut, "slow_link": slow_link}


def heal(cluster: Cluster) -> None:
    """Undo whatever a failed nemesis left: every link up, ZooKeeper and every broker running."""
    network = getattr(cluster, "network", None)
    if network is not None:
        network.heal()
    if not cluster.zk.is_running():
        cluster.zk.start()
    for i, b in enumerate(cluster.brokers):
        if b.is_running():
            cluster.resume(i)  # a no-op unless paused
        else:
            cluster.restart(i)


# ------------------------------------------------------------------ the run

def create_topic(cluster: Cluster, topic: str, partitions: int, replicas: int, min_insync: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(topic, partitions, replicas, config={
        "min.insync.replicas": str(min_insync)})], operation_timeout=30)[topic].result(30)
    wait_until(lambda: recovered(cluster, topic, partitions, replicas), 60,
               f"{topic}'s {partitions} partitions led with {replicas} replicas in sync")


def run_checker(cluster: Cluster, rounds: int, nemeses: Iterable[str] = NEMESES, *,
                partitions: int = 3, replicas: int = 3, min_insync: int = 2,
                seed: int | None = None, hold_s: float = 2.0, rdkafka_producers: int = 2,
                java_producers: int = 1, rate: float = 150.0, message_timeout_ms: int = 120000,
                acks1_producers: int = 0,
                consumers: int = 2, java_tools: JavaTools | None = None,
                log: Callable[[str], None] = print) -> CheckerResult:
    """Produce and consume through ``rounds`` nemesis rounds (``nemeses`` taken in turn),
    then check the history against a final read. ``replicas=1, min_insync=1`` runs
    the same harness on an unreplicated topic (nothing acked is then promised to
    survive the loss of a broker's disk, but kill -9 keeps the page cache)."""
    nemeses = list(nemeses)
    rng = random.Random(seed)
    topic = f"checked-{uuid.uuid4().hex[:8]}"
    group = f"checker-{uuid.uuid4().hex[:8]}"
    result = CheckerResult()
    history = History()
    create_topic(cluster, topic, partitions, replicas, min_insync)
    run = Run(cluster, topic, partitions, replicas, min_insync, history, rng, hold_s,
              log, result, label="setup")
    log(f"checker: topic {topic} ({partitions} partitions, replication {replicas}, "
        f"min.insync.replicas {min_insync}), seed {seed}")

    tools = java_tools or (JavaTools() if java_producers else None)
    producers = [RdkafkaProducer(f"r{i}", cluster.bootstrap, topic, history, rate, message_timeout_ms)
                 for i in range(rdkafka_producers)]
    producers += [RdkafkaProducer(f"{ACKS1_PREFIX}{i}", cluster.bootstrap, topic, history, rate,
                                  message_timeout_ms, acks="1") for i in range(acks1_producers)]
    javas = [JavaProducer(tools, f"j{i}", cluster.bootstrap, topic, history, rate, cluster.work_dir,
                          delivery_timeout_ms=message_timeout_ms) for i in range(java_producers)]
    members = [GroupConsumer(f"c{i}", cluster.bootstrap, topic, group, result.consumers)
               for i in range(consumers)]
    sampler = CommitSampler(cluster.bootstrap, topic, partitions, group, result.consumers,
                            lambda: run.label)
    for t in (*producers, *javas, *members, sampler):
        t.start()
    try:
        # Every producer connected and acked before the first fault.
        names = {t.prefix for t in producers} | {j.name for j in javas}
        wait_until(lambda: names <= set(history.acked_by_producer()), 120,
                   f"acks for each of {sorted(names)} before any fault")
        for i in range(rounds):
            name = nemeses[i % len(nemeses)]
            run.label = history.phase = f"round {i + 1}/{rounds} {name}"
            started = time.monotonic()
            run.healed_at = None
            try:
                what = NEMESIS_FUNCTIONS[name](run)
            except AssertionError as e:  # the cluster's reaction never came (no failover...)
                heal(cluster)
                result.no_reaction.append(f"{run.label}: {e}")
                what = f"did not go as expected: {e}"
            returned = time.monotonic()  # the process nemeses heal (restart) before they return
            try:
                wait_until(lambda: recovered(cluster, topic, partitions, replicas),
                           max(60, 10 * run.session_s), "every partition led with a full ISR")
            except AssertionError as e:
                result.not_recovered.append(f"{run.label}: {e}")
                result.rounds.append(f"{run.label}: {what}; NOT RECOVERED")
                log(result.rounds[-1])
                break
            now = time.monotonic()
            with history.lock:
                history.fault_spans.append((started, now))
            healed = run.healed_at if run.healed_at is not None else returned
            result.recovery_s.setdefault(name, []).append(now - healed)
            result.rounds.append(f"{run.label}: {what} ({now - started:.1f} s, "
                                 f"recovered {now - healed:.1f} s after the heal)")
            log(result.rounds[-1])
        run.label = history.phase = "after the last round"
    finally:
        started = time.monotonic()
        for t in producers:
            t.stopping.set()
        for j in javas:
            j.stopping.set()
        for t in producers:
            t.join()
        for j in javas:
            j.stop()
        log(f"producers stopped, every value resolved ({time.monotonic() - started:.1f} s)")
        started = time.monotonic()
        for t in members:
            t.stopping.set()
        for t in members:
            # A member can hang inside librdkafka's synchronous commit (seen once
            # after 100 rounds, while the group and its committed offsets were
            # fine on every broker): noted, and the check goes on without it.
            t.join(CONSUMER_STOP_S)
            if t.is_alive():
                result.stuck_consumers.append(f"{t.name} still in {t.where} after "
                                              f"{CONSUMER_STOP_S:g} s")
        sampler.stopping.set()
        sampler.join()
        log(f"consumers stopped ({time.monotonic() - started:.1f} s)")
    result.crashes = list(history.crashes)
    result.offsets_went_backwards = result.consumers.backwards
    result.committed = dict(sorted(sampler.highest.items()))
    result.acked_by_producer = history.acked_by_producer()
    started = time.monotonic()
    if not result.not_recovered and replicas > 1:
        result.replica_mismatches, result.replica_bytes = compare_replicas(cluster, topic, partitions)
        log(f"replicas compared ({time.monotonic() - started:.1f} s)")
    started = time.monotonic()
    read, result.read_problem = read_everything(cluster.bootstrap, topic, partitions)
    log(f"final read of {len(read)} records ({time.monotonic() - started:.1f} s)")
    analyse(history, read, result, log_writers(cluster, topic, partitions))
    log(result.summary())
    return result
