"""Nothing acknowledged is lost, and nothing is written twice, when the broker crashes.

The real Java producer (acks=all, idempotence on: the console producer's defaults) is fed
numbered lines a little at a time while the broker is killed with SIGKILL mid-stream.
ConsoleProducer --print-acks tells us exactly which records the broker acknowledged
(partition, offset, value), so after a restart on the same port and data dir we can check:
every acknowledged record is at the offset it was acknowledged with, exactly once; the log
is a gap-free prefix of what was sent (an idempotent producer's batches are appended in
sequence order or not at all); offsets are contiguous from 0.

Two ways the producer lives through the crash:
- it is stopped while the broker is down (what the durability rule needs);
- it keeps running and retries into the restarted broker: its in-flight batches may have
  been written before the kill without the answer getting out, so the broker must
  recognise the retries as duplicates from producer state recovered from the log.
"""

from __future__ import annotations

import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.java_client import JavaTools
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(240)

ACKED_BEFORE_KILL = 1500  # the kill lands once this many records were acknowledged


def value(i: int) -> str:
    return f"rec-{i:06d}"


class FedProducer:
    """A ConsoleProducer --print-acks fed numbered lines by a thread, ~10,000 lines/s.

    Fast enough that the producer nearly always has a Produce request in flight (linger.ms
    is 5), slow enough that the kill, which waits for the first acks, lands mid-stream.
    """

    def __init__(self, java_tools: JavaTools, bootstrap: str, topic: str):
        self.proc = java_tools.popen("ConsoleProducer", "--bootstrap-server", bootstrap, "--topic", topic,
                                     "--print-acks", stdin=subprocess.PIPE, bufsize=1)
        self.acks: list[tuple[int, int, str]] = []
        self.stderr: list[str] = []
        self.fed = 0
        self._stop_feeding = threading.Event()
        self._acks_changed = threading.Condition()
        self._threads = [threading.Thread(target=f, daemon=True) for f in (self._feed, self._read_acks,
                                                                          self._read_stderr)]
        for t in self._threads:
            t.start()

    def _feed(self) -> None:
        try:
            while not self._stop_feeding.is_set():
                self.proc.stdin.write("".join(f"{value(self.fed + k)}\n" for k in range(50)))
                self.proc.stdin.flush()
                self.fed += 50
                time.sleep(0.005)
        except (BrokenPipeError, ValueError, OSError):
            pass  # the producer is gone (the test stopped it)

    def _read_acks(self) -> None:
        for line in self.proc.stdout:
            partition, offset, val = line.rstrip("\n").split("\t")
            with self._acks_changed:
                self.acks.append((int(partition), int(offset), val))
                self._acks_changed.notify_all()

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait_for_acks(self, n: int, timeout: float = 60.0) -> None:
        with self._acks_changed:
            ok = self._acks_changed.wait_for(lambda: len(self.acks) >= n or self.proc.poll() is not None, timeout)
        assert ok and len(self.acks) >= n, (f"only {len(self.acks)} of {n} acks after {timeout}s "
                                            f"(producer rc {self.proc.poll()})\n{''.join(self.stderr[-30:])}")

    def stop_feeding(self) -> None:
        self._stop_feeding.set()
        self._threads[0].join()

    def finish(self, timeout: float = 120.0) -> int:
        """Stop feeding, close stdin (EOF: flush and exit), wait; returns the exit code."""
        self.stop_feeding()
        self.proc.stdin.close()
        try:
            rc = self.proc.wait(timeout)
        finally:
            self.kill()
        return rc

    def kill(self) -> None:
        """SIGKILL the producer (if still running) and collect what it printed."""
        self.stop_feeding()
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for t in self._threads[1:]:
            t.join(10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except (BrokenPipeError, OSError):
                pass


@pytest.fixture
def producers():
    """Every FedProducer a test starts is killed at the end, even when the test fails."""
    started: list[FedProducer] = []
    yield started
    for p in started:
        p.kill()


def consume_all(java_tools: JavaTools, bootstrap: str, topic: str) -> list[tuple[int, str]]:
    """(offset, value) of every record in partition 0 from the beginning: as many as
    the partition's end offset says there are (not what arrives before the consumer
    is idle for a while, which is less on a loaded machine)."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        end = reader.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)[1]
    finally:
        reader.close()
    args = ["--from-beginning", "--partition", 0, "--property", "print.offset=true",
            "--max-messages", end, "--timeout-ms", 30000]
    res = java_tools.consume(bootstrap, topic, *args, timeout=90).check()
    rows = []
    for line in res.lines:
        off, val = line.split("\t", 1)
        assert off.startswith("Offset:"), line
        rows.append((int(off[len("Offset:"):]), val))
    return rows


def check_log(rows: list[tuple[int, str]], acks: list[tuple[int, int, str]]) -> None:
    offsets = [o for o, _ in rows]
    values = [v for _, v in rows]
    assert offsets == list(range(len(rows))), "offsets are not contiguous from 0"
    assert len(set(values)) == len(values), "some record is in the log more than once"
    # The log is exactly the first N lines sent, in order: no gap, nothing reordered.
    assert values == [value(i) for i in range(len(values))]
    # Every acknowledged record is there, at the offset it was acknowledged with.
    assert {p for p, _, _ in acks} == {0}
    assert len({v for _, _, v in acks}) == len(acks), "a record was acknowledged twice"
    missing = [(o, v) for _, o, v in acks if o >= len(values) or values[o] != v]
    assert not missing, f"{len(missing)} acknowledged records are lost or moved, first {missing[:5]}"


def test_sigkill_mid_stream_keeps_every_acknowledged_record_once(java_tools: JavaTools, broker, producers):
    topic = "crash-stop"
    producer = FedProducer(java_tools, broker.bootstrap, topic)
    producers.append(producer)
    producer.wait_for_acks(ACKED_BEFORE_KILL)

    broker.kill()
    # The producer keeps sending into the void: the lines fed after the kill become
    # requests that fail and queue up.
    fed_at_kill = producer.fed
    wait_until(lambda: producer.fed >= fed_at_kill + 2000, 30, "lines fed to the producer after the kill")
    producer.kill()
    assert producer.fed > len(producer.acks), "the kill did not land mid-stream"
    acks = list(producer.acks)

    broker.start()
    rows = consume_all(java_tools, broker.bootstrap, topic)
    check_log(rows, acks)
    assert len(rows) >= len(acks) >= ACKED_BEFORE_KILL


def test_producer_retries_into_restarted_broker_without_duplicates(java_tools: JavaTools, broker, producers):
    topic = "crash-retry"
    producer = FedProducer(java_tools, broker.bootstrap, topic)
    producers.append(producer)
    producer.wait_for_acks(ACKED_BEFORE_KILL)

    # Three crashes: each one is a fresh chance that a batch was written but not answered.
    for _ in range(3):
        broker.kill()
        acked_at_kill = len(producer.acks)
        broker.start()
        # Acks must come from the restarted broker before the next crash.
        producer.wait_for_acks(acked_at_kill + 1000)
    rc = producer.finish()
    assert rc == 0, "".join(producer.stderr[-30:])
    acks = list(producer.acks)
    assert len(acks) == producer.fed, f"{producer.fed} records sent, {len(acks)} acknowledged"

    rows = consume_all(java_tools, broker.bootstrap, topic)  # all of it, so a duplicate past the end shows
    check_log(rows, acks)
    assert len(rows) == producer.fed
