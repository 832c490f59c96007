"""samsa.testing used as another project uses it: tests/testkit_sample/ is a project of
its own (its conftest only loads the plugin), run here by pytest in a process of its own.

What a user would notice: its tests pass against real brokers and a real cluster; a
failing test's report carries its broker's log; after the run no broker, ZooKeeper or
fork server is left running and no directory is left behind.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.support.waiting import wait_until


SAMPLE = Path(__file__).resolve().parent.parent / "testkit_sample"
ROOT = SAMPLE.parent.parent


def _sample_env(record: Path) -> dict[str, str]:
    env = {**os.environ, "SAMSA_SAMPLE_RECORD": str(record),
           # samsa importable as if installed; nothing else of this repository
           "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_ADDOPTS", None)
    return env


def _recorded(record: Path) -> list[dict]:
    lines = record.read_text().splitlines() if record.exists() else []
    return [json.loads(line) for line in lines]


def _run_sample(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    record = tmp_path / "record.jsonl"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
                          cwd=SAMPLE, env=_sample_env(record), capture_output=True, text=True,
                          timeout=600)
    return done, _recorded(record)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def _nothing_left(seen: list[dict]) -> None:
    assert seen
    assert [s for s in seen if _alive(s["pid"])] == []
    assert [s for s in seen if s["dir"] and Path(s["dir"]).exists()] == []


def test_a_project_runs_its_tests_on_the_kits_brokers_and_leaves_nothing(tmp_path):
    done, seen = _run_sample(tmp_path)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "25 passed" in done.stdout, done.stdout[-2000:]
    # 20 brokers of their own, 4 brokers and a ZooKeeper for the cluster, 3 more
    assert len({s["pid"] for s in seen}) >= 20 + 4 + 3
    _nothing_left(seen)


def test_a_failing_tests_report_carries_its_brokers_log(tmp_path):
    done, seen = _run_sample(tmp_path, "failing_on_purpose.py")
    assert done.returncode == 1, done.stdout[-4000:]
    assert "failing on purpose" in done.stdout
    assert "samsa broker 127.0.0.1:" in done.stdout and "visible-in-the-log" in done.stdout
    _nothing_left(seen)


def test_a_killed_test_run_leaves_no_process_and_no_directory(tmp_path):
    # SIGKILL: no fixture teardown, no atexit. ZooKeeper (a JVM) and the brokers die
    # by their parent-death signal, the directories go with the kit's reaper.
    record = tmp_path / "record.jsonl"
    ready = Path(str(record) + ".ready")
    run = subprocess.Popen([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                            "killed_on_purpose.py"], cwd=SAMPLE, env=_sample_env(record),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_until(lambda: ready.exists() or run.poll() is not None, timeout=180,
                   what="the sample's cluster and broker up")
        assert run.poll() is None, run.stdout.read().decode(errors="replace")[-4000:]
    finally:
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    seen = _recorded(record)
    pids = {s["pid"] for s in seen if s["pid"]}
    dirs = {s["dir"] for s in seen if s["dir"]}
    assert len(pids) >= 1 + 3 + 1 + 1  # ZooKeeper, 3 + 1 brokers, the fork server
    assert any(d.startswith("/dev/shm/") for d in dirs) or not os.path.isdir("/dev/shm")
    wait_until(lambda: not [p for p in pids if _alive(p)], timeout=60,
               what=lambda: f"no process left of {sorted(p for p in pids if _alive(p))}")
    wait_until(lambda: not [d for d in dirs if Path(d).exists()], timeout=60,
               what=lambda: f"no directory left of {sorted(d for d in dirs if Path(d).exists())}")
