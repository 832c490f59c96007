"""One broker per log dir (issue 24, item 1).

A second broker started on a running broker's data directory (another port)
used to recover the first one's "unflushed" segments and then hand out offsets
the first had already acknowledged, overwriting those records. Now it refuses
to start in one line naming the dir, as Kafka does ("Failed to acquire lock on
file .lock"), and the first broker serves on, its records intact; the lock
dies with its process, so a broker killed with SIGKILL restarts.
"""
from __future__ import annotations

import subprocess

from confluent_kafka import Consumer, Producer

from tests.support.broker_process import BrokerProcess


def _produce(bootstrap: str, values: list[bytes]) -> list[int]:
    """The offsets the broker acknowledged (acks=all) for ``values``, in order."""
    offsets: list[int] = []

    def delivered(err, msg):
        assert err is None, err
        offsets.append(msg.offset())
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        producer.produce("t", v, on_delivery=delivered)
        producer.flush(30)  # one at a time: the offsets come back in order
    assert len(offsets) == len(values)
    return offsets


def _read_all(bootstrap: str, count: int) -> dict[int, bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "lock-check",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe(["t"])
    seen: dict[int, bytes] = {}
    try:
        for _ in range(120):
            msg = consumer.poll(1.0)
            if msg is not None and not msg.error():
                seen[msg.offset()] = msg.value()
            if len(seen) >= count:
                break
    finally:
        consumer.close()
    return seen


def test_a_second_broker_on_the_same_log_dir_refuses_and_the_first_keeps_its_records(tmp_path):
    first = BrokerProcess(tmp_path / "first", overrides={"offsets.topic.num.partitions": "1"})
    try:
        first.start()
        acked = dict(zip(_produce(first.bootstrap, [b"a0", b"a1"]), [b"a0", b"a1"]))

        second = BrokerProcess(tmp_path / "second",
                               overrides={"log.dirs": str(first.data_dir),
                                          "offsets.topic.num.partitions": "1"})
        proc = subprocess.run(second.argv, cwd=second.cwd, env=second.env,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode != 0, proc.stderr
        lines = [line for line in proc.stderr.splitlines() if line.startswith("samsa:")]
        assert len(lines) == 1, proc.stderr
        assert str(first.data_dir) in lines[0] and "in use" in lines[0], lines[0]
        assert "Traceback" not in proc.stderr
        # it touched nothing: no recovery of the running broker's segments
        assert "recovering" not in proc.stderr
        assert not (first.data_dir / ".kafka_cleanshutdown").exists()

        # The first broker serves on; what it acknowledged is where it was.
        more = _produce(first.bootstrap, [b"a2"])
        assert more == [2]
        acked[2] = b"a2"
        assert _read_all(first.bootstrap, 3) == acked

        # A SIGKILL leaves the .lock file behind but not the lock: a restart works.
        first.kill()
        assert (first.data_dir / ".lock").exists()
        first.start()
        assert _read_all(first.bootstrap, 3) == acked
    finally:
        first.stop()
