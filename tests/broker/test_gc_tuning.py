"""A started broker process sets the cyclic collector for serving
(broker/gc_tuning.py): full collections no longer walk what the broker holds
for good, so they stop its threads for far less. In a child process: the
freeze is process-wide."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.integration  # (a child process)

_CHILD = """
import gc, json
from samsa.broker.gc_tuning import YOUNG_THRESHOLD, keep_for_good, settle_for_serving
kept = [[i] for i in range(100_000)]  # what a broker holds for good once started
before = len(gc.get_objects())
settle_for_serving()
walked = len(gc.get_objects())
loaded_later = [[i] for i in range(50_000)]  # the logs the background pass loads
walked_while_loading = len(gc.get_objects())
keep_for_good()
print(json.dumps({"before": before, "walked": walked,
                  "walked_while_loading": walked_while_loading,
                  "walked_after_loads": len(gc.get_objects()),
                  "young": gc.get_threshold()[0], "expected_young": YOUNG_THRESHOLD}))
"""


def test_a_full_collection_after_start_walks_only_what_came_since():
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         check=True, timeout=60).stdout
    got = json.loads(out)
    assert got["before"] > 100_000
    assert got["walked"] < 1_000  # (the permanent generation is not collected)
    assert got["walked_while_loading"] > 50_000
    assert got["walked_after_loads"] < 1_000   # what start-up left to load: frozen too
    assert got["young"] == got["expected_young"]


_CHILD_BROKER = """
import asyncio, gc, json, sys, threading, time, weakref
from samsa.broker.gc_tuning import settle_for_serving
from samsa.broker.server import Broker
from samsa.client.blocking import SimpleClient
from samsa.config.broker import BrokerConfig
from samsa.protocol.messages import CreateTopicsRequest as C, DeleteTopicsRequest as D

async def main():
    broker = Broker(BrokerConfig.from_dict({"listeners": "PLAINTEXT://127.0.0.1:0",
                                            "log.dirs": sys.argv[1],
                                            "log.segment.delete.delay.ms": "0"}))
    await broker.start()
    settle_for_serving()  # as run_until_signalled does in the broker's process
    port = broker.networks[0].port
    walked = {}

    def create(name, partitions):
        with SimpleClient(f"127.0.0.1:{port}") as c:
            r = c.call(19, C(timeout_ms=60000, validate_only=False, topics=[C.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=1,
                assignments=[], configs=[])]))
        assert r.topics[0].error_code == 0, r

    def client():
        create("few", 3)
        walked["after_few"] = len(gc.get_objects())
        create("many", 600)
        walked["after_many"] = len(gc.get_objects())
        deleted = weakref.ref(broker.services.logs.get_log("many", 0))
        with SimpleClient(f"127.0.0.1:{port}") as c:
            r = c.call(20, D(timeout_ms=60000, topic_names=["many"], topics=[]), highest=5)
        assert r.responses[0].error_code == 0, r
        # once its files are gone, the deleted topic's log is freed, frozen or not
        deadline = time.monotonic() + 120
        while deleted() is not None and time.monotonic() < deadline:
            gc.collect()
            time.sleep(0.05)
        walked["deleted_log_freed"] = deleted() is None
    t = threading.Thread(target=client)
    t.start()
    while t.is_alive():
        await asyncio.sleep(0.05)
    await broker.stop()
    print(json.dumps(walked))

asyncio.run(main())
"""


def test_the_logs_of_a_topic_of_many_partitions_created_later_are_frozen_until_deleted(tmp_path):
    """A topic of hundreds of partitions created after the start is what the broker
    keeps for good too: its logs' objects are not left for every full collection to
    walk (10,000 of them stopped a cluster broker's threads for 0.1-0.6 s each time);
    and once it is deleted, its logs are freed, not kept frozen for good."""
    out = subprocess.run([sys.executable, "-c", _CHILD_BROKER, str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    # a few partitions are left to the collector; 600 partitions' logs (each
    # dozens of objects) are frozen with the rest of what was alive then
    assert got["after_many"] < got["after_few"] + 5_000, got
    assert got["deleted_log_freed"], got
