"""Topic creation at scale: wall time and broker CPU to create one topic of N partitions.

Starts a real broker (``python -m samsa server``, embedded default) in a temporary
directory, creates one topic per size in ``--sizes`` (default 1,000 and 10,000
partitions) with confluent-kafka's AdminClient, and reports for each the wall time
until the create is acknowledged and the broker's CPU seconds (user + system, from
/proc/<pid>/stat) spent meanwhile. CPU is the figure to compare on a busy machine.

Usage: ``python bench/bench_topic_scale.py [--sizes 1000,10000] [--py-spy out.txt]``
(not part of the test run; ``--py-spy`` attaches ``py-spy record`` to the broker
during the creates, collapsed stacks into OUT; the profile's cost inflates the figures).
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
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess

_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and its threads (fields 14 and 15 of stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000")
    ap.add_argument("--py-spy", metavar="OUT", help="profile the broker into OUT (svg)")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="samsa-bench-topic-scale-"))
    broker = BrokerProcess(work, startup_timeout=120)
    spy: subprocess.Popen[bytes] | None = None
    out: dict[str, dict[str, float]] = {}
    try:
        broker.start()
        pid = broker.pid
        assert pid is not None
        if args.py_spy:
            exe = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
            spy = subprocess.Popen([exe, "record", "-p", str(pid), "--format", "raw", "-o",
                                    os.path.abspath(args.py_spy)])
            time.sleep(1)  # attached before the first create
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for n in sizes:
            cpu0, t0 = cpu_seconds(pid), time.monotonic()
            futures = admin.create_topics([NewTopic(f"scale-{n}", n, 1)], operation_timeout=900,
                                          request_timeout=900)
            for fut in futures.values():
                fut.result(1000)
            out[str(n)] = {"create_wall_s": round(time.monotonic() - t0, 2),
                           "create_broker_cpu_s": round(cpu_seconds(pid) - cpu0, 2)}
            print(n, out[str(n)], file=sys.stderr, flush=True)
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes its output on ^C
            spy.wait(60)
        t0 = time.monotonic()
        broker.stop(timeout=120)
        out["sigterm_to_exit_s"] = {"wall_s": round(time.monotonic() - t0, 2)}
    finally:
        if broker.is_running():
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
