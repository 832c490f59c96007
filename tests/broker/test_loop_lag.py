"""The event-loop watch (broker/loop_lag.py): a loop held by a callback that
blocks is counted as a stall, logged once, and its length kept."""
from __future__ import annotations

import asyncio
import logging
import threading
import time

from samsa.broker.loop_lag import LoopLag, LoopLags
from samsa.broker.metrics import BrokerMetrics
from samsa.broker.network.log_limit import RateLimitedLog


def test_lateness_is_added_up_and_a_long_one_is_a_stall(caplog):
    lag = LoopLag("network-0", RateLimitedLog(logging.getLogger("test.lag")), stall_s=1.0)
    with caplog.at_level(logging.WARNING, logger="test.lag"):
        lag.fired(due=10.0, now=9.9)   # early: nothing
        lag.fired(due=10.0, now=10.3)  # late, not a stall
        lag.fired(due=20.0, now=22.5)
        lag.fired(due=30.0, now=31.5)
    assert abs(lag.late_s - 4.3) < 1e-9
    assert lag.stalls == 2 and lag.longest_s == 2.5
    lines = [r.getMessage() for r in caplog.records]
    # one line per loop per interval: the second stall is counted in the next one
    assert len(lines) == 1 and "network-0 was held 2.50 s" in lines[0]


def test_a_blocking_callback_on_a_watched_loop_is_a_stall(caplog):
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    lags = LoopLags(logging.getLogger("test.loops"), period_s=0.05, stall_s=0.2)
    lag = lags.watch("worker", loop)
    metrics = BrokerMetrics()
    lags.add_metrics(metrics)
    try:
        with caplog.at_level(logging.WARNING, logger="test.loops"):
            # held at least 0.5 s, the timer due within 0.05 s of its start: late >= 0.45 s
            asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(10)
            loop.call_soon_threadsafe(time.sleep, 0.5)
            deadline = time.monotonic() + 30
            # (the log line is the last thing a stall does)
            while not any("event loop worker was held" in r.getMessage() for r in caplog.records):
                assert time.monotonic() < deadline, "no stall seen"
                time.sleep(0.05)
        assert lag.stalls >= 1 and lag.longest_s >= 0.45
        scraped = {s.name: s for family in metrics.collect()
                   if family.name.startswith("samsa_event_loop") for s in family.samples}
        assert scraped["samsa_event_loop_stalls"].labels == {"loop": "worker"}
        assert scraped["samsa_event_loop_stalls"].value >= 1
        assert scraped["samsa_event_loop_longest_stall_seconds"].value >= 0.45
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
