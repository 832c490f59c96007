"""Partition scale on one broker: create, restart and stop with N partitions.

Starts a real broker (``python -m samsa server``, embedded default) in a temporary
directory and, for the largest size in ``--sizes`` (default 1,000 and 10,000; each
size is its own topic):

- create: wall time until confluent-kafka's AdminClient has the create acknowledged,
  and the broker's CPU seconds (user + system, from /proc/<pid>/stat) meanwhile;
- then one record is produced to every partition (the restarts load logs holding data);
- restart, clean: SIGTERM, then a new broker started, to the first record acked
  (acks=all) by a producer started once the port answers; wall time from the start and
  the new broker's CPU up to the ack;
- restart after kill -9: the same, from a SIGKILL instead;
- SIGTERM to exit: wall time and the broker's CPU spent from the signal to its exit.

The machine is shared: CPU seconds are the figure to compare, wall time is reported
next to them. Targets (issue 29, 10,000 partitions): create < 5 s, clean restart to
first ack < 3 s, kill -9 restart < 5 s, SIGTERM to exit < 2 s.

Usage: ``python bench/bench_topic_scale.py [--sizes 1000,10000] [--dir DIR] [--py-spy OUT]
[--override KEY=VALUE] [--profile-phase create|first-stop|restart|restart-kill|stop]``
(not part of the test run; ``--override``: a broker config key, repeatable;
``--py-spy`` attaches ``py-spy record`` to the broker during the phase named
(default create; first-stop: the SIGTERM of the broker that created and wrote every
partition; stop: the last SIGTERM, after the kill -9 restart; a restart from the
moment its process exists), raw collapsed stacks into OUT; the profile's cost
inflates the figures). After each stop the broker's own account of it (its log's
lines: shutting down, what the logs' close took, stopped) is printed too.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.filesystem import describe
from tests.support.broker_process import BrokerProcess

_TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[str, float] | None:
    """(state, user + system CPU seconds of ``pid`` and its threads), None once reaped.
    A zombie (state Z: exited, not yet waited for) still reports its final times."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[0], (int(fields[11]) + int(fields[12])) / _TICKS


def cpu_seconds(pid: int) -> float:
    st = _stat(pid)
    assert st is not None, f"process {pid} is gone"
    return st[1]


class Spy:
    """py-spy attached to one pid until ``stop``."""

    def __init__(self, out: str | None):
        self.out = out
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, pid: int, settle: float = 1) -> None:
        if not self.out:
            return
        exe = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
        self.proc = subprocess.Popen([exe, "record", "-p", str(pid), "--format", "raw", "-o",
                                      os.path.abspath(self.out)])
        time.sleep(settle)   # attached before the phase starts

    def attach_on_start(self, broker: BrokerProcess) -> None:
        """Attach as soon as ``broker``'s next process exists (a thread waits for it):
        a restart is sampled from its first moments, not from when it is ready."""
        if not self.out:
            return
        old = broker.proc

        def wait() -> None:
            while broker.proc is old:
                time.sleep(0.001)
            self.start(broker.proc.pid, settle=0)
        threading.Thread(target=wait, daemon=True).start()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGINT)   # py-spy writes its output on ^C
            self.proc.wait(60)
            self.proc = None


def produce_everywhere(bootstrap: str, topic: str, partitions: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    for i in range(partitions):
        p.produce(topic, b"x" * 100, partition=i)
        p.poll(0)
    assert p.flush(300) == 0, "records left unacknowledged"


def first_ack(bootstrap: str, topic: str) -> None:
    """One record acked (acks=all) by a fresh producer: what a restarted broker's
    clients wait for."""
    acked: list[bool] = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0,
                  "reconnect.backoff.ms": 10, "reconnect.backoff.max.ms": 100,
                  "retry.backoff.ms": 10, "retry.backoff.max.ms": 100})
    p.produce(topic, b"first", partition=0,
              on_delivery=lambda err, _m: acked.append(err is None))
    assert p.flush(300) == 0 and acked == [True], "the first record after the restart failed"


def stop_measured(broker: BrokerProcess, how: int) -> dict[str, float]:
    """Signal the broker, wait for its exit; wall time and the CPU it spent meanwhile."""
    pid = broker.pid
    assert pid is not None
    log_at = broker.log_path.stat().st_size
    cpu0, t0, signalled = cpu_seconds(pid), time.monotonic(), time.time()
    os.killpg(pid, how)
    last = cpu0
    while True:
        st = _stat(pid)
        if st is None or st[0] == "Z":
            last = st[1] if st is not None else last
            break
        last = st[1]
        time.sleep(0.005)
    wall = time.monotonic() - t0
    exited = time.time()
    broker.stop(timeout=120)   # reaps it
    with open(broker.log_path, errors="replace") as f:   # the stop's own account of its parts
        f.seek(log_at)
        lines = [line.strip() for line in f if "shutting down" in line or "logs in" in line
                 or "broker stopped" in line]
    if lines:
        stamp = lambda t: time.strftime("%H:%M:%S", time.localtime(t)) + f",{int(t % 1 * 1000):03d}"
        print(f"  signalled {stamp(signalled)}, exited {stamp(exited)}", file=sys.stderr)
        for line in lines:
            print("  broker:", line, file=sys.stderr)
    return {"wall_s": round(wall, 2), "broker_cpu_s": round(last - cpu0, 2)}


def restart_measured(broker: BrokerProcess, topic: str) -> dict[str, float]:
    t0 = time.monotonic()
    broker.start()
    pid = broker.pid
    assert pid is not None
    ready = time.monotonic() - t0
    first_ack(broker.bootstrap, topic)
    return {"wall_s": round(time.monotonic() - t0, 2), "ready_wall_s": round(ready, 2),
            "broker_cpu_s": round(cpu_seconds(pid), 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--py-spy", metavar="OUT", help="profile the broker into OUT (raw stacks)")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker config key (repeatable), e.g. "
                         "num.recovery.threads.per.data.dir=2")
    ap.add_argument("--profile-phase", default="create",
                    choices=["create", "first-stop", "restart", "restart-kill", "stop"])
    ap.add_argument("--dir", default=None,
                    help="where the broker's directory is made (default: the temporary dir)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-topic-scale-", dir=args.dir))
    print(describe(str(work)), file=sys.stderr, flush=True)
    broker = BrokerProcess(work, startup_timeout=300, overrides=args.override)
    spy = Spy(args.py_spy)
    out: dict[str, dict[str, float]] = {}

    def phase(name: str, fn: Callable[[], dict[str, float]]) -> None:
        out[name] = fn()
        print(name, out[name], file=sys.stderr, flush=True)

    try:
        broker.start()
        pid = broker.pid
        assert pid is not None
        if args.profile_phase == "create":
            spy.start(pid)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, "socket.timeout.ms": 300_000})
        for n in sizes:
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            futures = admin.create_topics([NewTopic(f"scale-{n}", n, 1)], operation_timeout=900,
                                          request_timeout=900)
            for fut in futures.values():
                fut.result(1000)
            phase(f"create_{n}", lambda: {"wall_s": round(time.monotonic() - t0, 2),
                                          "broker_cpu_s": round(cpu_seconds(pid) - cpu0, 2)})
        spy.stop()
        topic = f"scale-{max(sizes)}"
        produce_everywhere(broker.bootstrap, topic, max(sizes))

        if args.profile_phase == "first-stop":
            spy.start(pid)
        phase("sigterm_before_restart", lambda: stop_measured(broker, signal.SIGTERM))
        spy.stop()
        if args.profile_phase == "restart":
            spy.attach_on_start(broker)
        phase("restart_clean_to_first_ack", lambda: restart_measured(broker, topic))
        spy.stop()
        phase("kill9", lambda: stop_measured(broker, signal.SIGKILL))
        if args.profile_phase == "restart-kill":
            spy.attach_on_start(broker)
        phase("restart_kill9_to_first_ack", lambda: restart_measured(broker, topic))
        spy.stop()
        pid = broker.pid
        assert pid is not None
        if args.profile_phase == "stop":
            spy.start(pid)
        phase("sigterm_to_exit", lambda: stop_measured(broker, signal.SIGTERM))
        spy.stop()
    finally:
        spy.stop()
        if broker.is_running():
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
