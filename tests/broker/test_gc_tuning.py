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
from samsa.broker.gc_tuning import YOUNG_THRESHOLD, settle_for_serving, start_up_loads_done
kept = [[i] for i in range(100_000)]  # what a broker holds for good once started
before = len(gc.get_objects())
settle_for_serving()
walked = len(gc.get_objects())
loaded_later = [[i] for i in range(50_000)]  # the logs the background pass loads
walked_while_loading = len(gc.get_objects())
start_up_loads_done()
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
