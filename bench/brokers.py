"""The two brokers a benchmark runs against: samsa (system under test) and Tansu 0.6 (peer).

Both are started through the test harness's process helpers (tests/support), so
they are launched exactly as the integration tests launch them. Every scenario
gets fresh brokers: Tansu keeps its data in memory, and samsa's data directory
should not carry one scenario's segments into the next.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Mapping

from tests.support.broker_process import BrokerProcess
from tests.support.tansu import TansuProcess, ensure_tansu

BROKERS = ("samsa", "tansu")


def peak_rss_bytes(pid: int | None) -> int | None:
    """VmHWM (the kernel's high-water mark of resident memory) of a live process."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def cpu_seconds(pid: int | None) -> float | None:
    """User+system CPU time of a live process, all its threads (/proc/<pid>/stat)."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    # after "pid (comm)": state is field 3, utime/stime are fields 14/15 (1-based)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_quiet(pid: int | None, busy_share: float = 0.05, window: float = 0.5,
               timeout: float = 120.0) -> float:
    """Wait until the process uses under ``busy_share`` of a core over ``window``
    seconds (or ``timeout`` passes); returns the seconds waited. Between a warm-up and
    a timed window: work a warm-up set off in the background (a partition's first
    append has its index files created by the log scheduler, 20,000 file creates at
    10,000 partitions) would otherwise be charged to the timed window."""
    t0 = time.monotonic()
    last = cpu_seconds(pid)
    while last is not None and time.monotonic() - t0 < timeout:
        time.sleep(window)
        now = cpu_seconds(pid)
        if now is None or now - last < busy_share * window:
            break
        last = now
    return time.monotonic() - t0


@contextmanager
def running(kind: str, work_root: Path | None = None,
            overrides: Mapping[str, object] | None = None) -> Iterator:
    """A fresh broker of ``kind`` ('samsa' or 'tansu'); removed with its data afterwards."""
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{kind}-", dir=work_root))
    if kind == "samsa":
        proc = BrokerProcess(tmp, overrides=dict(overrides or {}), startup_timeout=60)
    elif kind == "tansu":
        ensure_tansu()
        proc = TansuProcess(tmp, startup_timeout=60)
    else:
        raise ValueError(kind)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def create_topic(bootstrap: str, topic: str, partitions: int = 1, timeout: float = 120.0,
                 replication_factor: int = 1) -> None:
    """CreateTopics through the client's admin API, then wait until metadata shows every leader
    (and, with replication, every replica in sync)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                                   replication_factor=replication_factor)],
                                  operation_timeout=timeout, request_timeout=timeout)
    futures[topic].result(timeout)
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(topic, timeout=30).topics.get(topic)
        if md is not None and md.error is None and len(md.partitions) == partitions \
                and all(p.leader >= 0 and len(p.isrs) == replication_factor
                        for p in md.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} with {partitions} partitions not ready after {timeout:.0f}s")
        time.sleep(0.1)
