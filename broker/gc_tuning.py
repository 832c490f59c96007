"""The cyclic garbage collector, set for serving once the broker has started.

A full (generation-2) collection walks every object the collector tracks and
holds the GIL while it does, so every thread of the broker stops: with what a
started broker keeps for good (compiled message classes, configuration, the
open logs' state: some 45,000 objects with a few partitions, 300,000 with
10,000) one took 30-45 ms every second or two in a 10,000 records/s acks=all
RF 3 run on a quiet machine (issue 29's latency target is a p99 of 20 ms), and
several times that on a busy one. Two changes, made once the broker serves:

- ``gc.freeze()``: what exists then moves to a permanent generation that
  collections skip (Python's advice for servers that set up first). Reference
  counting still frees those objects; only a reference cycle among them that
  becomes garbage later (a partition loaded at start whose topic is deleted)
  is kept: at most what existed at a freeze. The logs start-up left for the
  background pass (storage/lazy_log.py) are frozen too as it loads them, after
  each chunk of 500 (``keep_for_good``), and so is what came with every 500
  logs opened after the start (topics created, grown or placed here later).
- A first-generation threshold of ``YOUNG_THRESHOLD`` allocations instead of
  700: a request's short-lived objects mostly die before a young collection
  looks at them, so far fewer survive into the older generations, whose growth
  is what triggers full collections. A young collection then looks at up to
  that many objects: well under a millisecond.
"""
from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000

_settled = False


def settle_for_serving() -> None:
    """Called once, when the broker has started (not by brokers run inside a
    test process: their objects are the test's too)."""
    global _settled
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
    _settled = True


# Logs opened since the last freeze (topics created or grown, or placed here by
# the controller, after the start) at which the objects then alive are frozen.
FREEZE_AFTER_LOGS = 500


def keep_for_good() -> None:
    """Many logs were just opened: a chunk of 500 of the logs start-up left for
    later (storage/lazy_log.py), or 500 logs of topics created, grown, or
    placed here by the controller, after the start. They are what a broker
    keeps for good as much as what existed when it began serving, so they are
    frozen too: unfrozen, 10,000 logs' objects made each full collection of a
    cluster broker stop every thread for 0.1-0.6 s (Metadata answers and
    acks=all produces waited that long). A collection first, so no garbage
    already there is frozen with them (it walks only what came since the last
    freeze: called every 500 logs, a few milliseconds; once after 10,000, half
    a second on a restarted broker). Only in a process settled for serving."""
    if _settled:
        gc.collect()
        gc.freeze()

