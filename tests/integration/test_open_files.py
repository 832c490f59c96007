"""Open files (issue 15, item 7): partitions cost no descriptors until used,
so a broker with more partitions than its descriptor limit starts, serves,
and starts again after a crash. Each partition used to hold three (its
active segment's .log, .index and .timeindex): 1,050 partitions did not
start under a limit of 1,024. And the segment files open at once are capped
(samsa.log.open.segment.files.max, issue 29): partitions holding data may
outnumber the cap, and all of them are served."""
from __future__ import annotations

import os
import sys
import shutil
import stat
import tempfile
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker_process import BrokerProcess

PARTITIONS = 1050
LIMIT = 1024
CACHED = 60   # samsa.log.open.segment.files.max: fewer than the partitions used


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.fixture
def limited_broker(tmp_path):
    """A broker whose process runs under RLIMIT_NOFILE = LIMIT (soft and hard)."""
    wrapper = tmp_path / "python-limited"
    wrapper.write_text(f"#!/bin/sh\nulimit -n {LIMIT}\nexec {sys.executable} \"$@\"\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    work = Path(tempfile.mkdtemp(prefix="samsa-fds-"))
    broker = BrokerProcess(work, python=str(wrapper), startup_timeout=120,
                           overrides={"samsa.log.open.segment.files.max": CACHED})
    try:
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)


def _round_trip(bootstrap: str, partitions: list[int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for p in partitions:
        producer.produce("wide", value=f"v{p}".encode(), partition=p)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g-fds",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    from confluent_kafka import TopicPartition
    consumer.assign([TopicPartition("wide", p, 0) for p in partitions])
    seen = set()
    try:
        for _ in range(200 + 2 * len(partitions)):   # (a poll returns one message)
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                seen.add(msg.partition())
            if seen >= set(partitions):
                break
    finally:
        consumer.close()
    assert seen >= set(partitions)


def test_more_partitions_than_descriptors_start_serve_and_recover(limited_broker):
    broker = limited_broker
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("wide", PARTITIONS, 1)], operation_timeout=120)["wide"].result(180)
    assert len(admin.list_topics("wide", timeout=30).topics["wide"].partitions) == PARTITIONS
    used = list(range(0, PARTITIONS, 5))  # 210 partitions spread over the topic
    _round_trip(broker.bootstrap, used)
    print(f"\n{PARTITIONS} partitions (+50 of __consumer_offsets), {len(used)} used: "
          f"{_fds(broker.pid)} descriptors open under a limit of {LIMIT}, "
          f"segment files capped at {CACHED}")
    # each partition written holds a segment file until the cap lets it go:
    # past it, 210 partitions with data hold no more than the cap does
    assert _fds(broker.pid) < CACHED + 100 < len(used)

    broker.stop()
    broker.start()  # after a clean stop
    assert _fds(broker.pid) < 200
    broker.kill()
    broker.start()  # after kill -9: recovery checks every partition's last segment
    assert _fds(broker.pid) < 200
    _round_trip(broker.bootstrap, used)
    assert "Too many open files" not in broker.log_path.read_text()
