"""samsa.testing's Broker from plain Python: start-up time, security listeners,
clean stop, the fault endpoint refused without loopback. Real clients (confluent-kafka)."""
from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from confluent_kafka import Producer

import samsa.testing


def _produce_one(config: dict, topic: str = "t") -> None:
    p = Producer({**config, "message.timeout.ms": 20000})
    errors = []
    p.produce(topic, b"v", on_delivery=lambda err, msg: err and errors.append(err))
    assert p.flush(30) == 0 and errors == []


def test_a_broker_is_forked_warm_and_leaves_nothing_behind():
    # Start-up time is measured in bench/bench_testkit.py (~0.1 s idle); what makes it
    # fast is checked here: every broker after the first is forked from the warm fork
    # server, not started as a new interpreter that imports samsa again.
    from samsa.testing.forkserver import ForkedProcess
    with samsa.testing.Broker():  # the first pays the fork server's import
        pass
    with samsa.testing.Broker() as b:
        assert isinstance(b.process.proc, ForkedProcess)
        work_dir, pid = b.work_dir, b.process.pid
        b.create_topic("t", partitions=2)
        _produce_one(b.client_config())
    assert not Path(work_dir).exists()
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split(") ")[1][:1]


def test_a_broker_stops_and_cleans_up_when_the_with_block_raises():
    with pytest.raises(RuntimeError):
        with samsa.testing.Broker() as b:
            work_dir = b.work_dir
            raise RuntimeError("the test died")
    assert not Path(work_dir).exists() and not b.process.is_running()


def test_sasl_and_tls_listeners_with_users_and_certificates_on_request():
    with samsa.testing.Broker(sasl_users={"alice": "alice-secret"}, tls=True) as b:
        config = b.client_config("alice")
        assert config["security.protocol"] == "SASL_SSL"
        b.create_topic("t")
        _produce_one(config)
        # a wrong password is refused, as Kafka refuses it
        p = Producer({**config, "sasl.password": "wrong", "message.timeout.ms": 3000})
        errors = []
        p.produce("t", b"v", on_delivery=lambda err, msg: errors.append(err))
        p.flush(10)
        assert errors and errors[0] is not None


def test_fault_injection_refuses_to_start_with_a_listener_beyond_loopback(tmp_path):
    cfg = tmp_path / "server.properties"
    cfg.write_text(f"listeners=PLAINTEXT://0.0.0.0:0\nlog.dirs={tmp_path / 'data'}\n"
                   "samsa.testing.faults.enable=true\n")
    done = subprocess.run([sys.executable, "-m", "samsa", "server", str(cfg)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "samsa.testing.faults.enable" in done.stderr and "0.0.0.0" in done.stderr


def test_samsa_testing_serve_prints_the_bootstrap_address_and_stops_cleanly():
    import os
    import signal
    serve = subprocess.Popen([sys.executable, "-m", "samsa", "testing", "serve", "num.partitions=2"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        bootstrap = serve.stdout.readline().strip()
        faults_line = serve.stdout.readline()
        assert bootstrap.startswith("127.0.0.1:") and "faults http://127.0.0.1:" in faults_line
        _produce_one({"bootstrap.servers": bootstrap})
        root = Path("/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir())
        work_dirs = [p.parent for p in root.glob("samsa-testing-*/server.properties")
                     if bootstrap in p.read_text()]
        assert len(work_dirs) == 1
    finally:
        serve.send_signal(signal.SIGINT)
        assert serve.wait(60) == 0, serve.stderr.read()
    assert not [d for d in work_dirs if d.exists()]
