"""scripts/cluster.sh: the README's one command for a cluster on this machine
(ZooKeeper from Debian's package and three brokers on loopback), and the one
that stops it."""
from __future__ import annotations

import os
import socket
import subprocess
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient

from tests.support.broker_process import REPO_ROOT
from tests.support.kafka_wire import free_port
from tests.support.waiting import wait_until

SCRIPT = REPO_ROOT / "scripts" / "cluster.sh"


def _consecutive_free_ports(n: int) -> int:
    """A base port with n free ports after it (tried until one fits)."""
    for _ in range(50):
        base = free_port()
        if base + n >= 65536:
            continue
        ok = True
        for port in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise AssertionError("no run of free ports")


def _running(pid: int) -> bool:
    """Alive and not a zombie (an exited orphan not yet reaped is gone for a user)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _run(*args, env):
    return subprocess.run([str(SCRIPT), *args], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=180)


def test_cluster_script_starts_three_brokers_and_stops_them(tmp_path: Path):
    base = _consecutive_free_ports(3)
    env = {**os.environ, "ZK_PORT": str(free_port()), "PORT_BASE": str(base)}
    where = tmp_path / "cluster"
    started = _run("start", str(where), env=env)
    try:
        assert started.returncode == 0, started.stderr
        bootstrap = ",".join(f"127.0.0.1:{base + i}" for i in range(3))
        assert bootstrap in started.stdout
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{base}"})
        # every broker in the metadata (each learns the others' registrations by a
        # ZooKeeper watch, which may land just after the script saw them start)
        wait_until(lambda: sorted(admin.list_topics(timeout=30).brokers) == [0, 1, 2],
                   what="all three brokers in the metadata")
        # a round trip through the cluster, bootstrapped from one broker
        topic = f"t-{uuid.uuid4().hex[:8]}"
        p = Producer({"bootstrap.servers": f"127.0.0.1:{base + 1}"})
        for i in range(30):
            p.produce(topic, b"%d" % i)
        assert p.flush(30) == 0
        c = Consumer({"bootstrap.servers": f"127.0.0.1:{base + 2}", "group.id": "g",
                      "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        got = []
        for _ in range(200):
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m.value())
            if len(got) == 30:
                break
        c.close()
        assert sorted(got) == sorted(b"%d" % i for i in range(30))
    finally:
        pids = [int(f.read_text()) for f in where.glob("*/pid")]
        stopped = _run("stop", str(where), env=env)
    assert stopped.returncode == 0, stopped.stderr
    assert len(pids) == 4  # ZooKeeper and three brokers
    for pid in pids:
        assert not _running(pid), f"process {pid} left running"
    for port in [int(env["ZK_PORT"])] + [base + i for i in range(3)]:
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still served"
