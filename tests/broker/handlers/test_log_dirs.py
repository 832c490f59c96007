"""DescribeLogDirs reads the log manager under its lock, which a move
between log dirs holds through its renames and fsyncs: the handler does that
off the event loop, so the broker's other connections are served meanwhile."""
from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

from samsa.broker.handlers.log_dirs import handle_describe_log_dirs
from samsa.config.topic import TopicConfig
from samsa.protocol.messages import DescribeLogDirsRequest
from samsa.storage.manager import LogManager


async def test_describe_log_dirs_does_not_block_the_loop_while_the_manager_is_busy(tmp_path):
    lm = LogManager([str(tmp_path / "a")], TopicConfig(), 0, "cid", log_cleaner_enable=False)
    lm.startup()
    try:
        lm.create_log("t", 0)
        ctx = SimpleNamespace(broker=SimpleNamespace(acls=None, logs=lm))
        held, loop_went_on, released_by_loop = threading.Event(), threading.Event(), []

        def busy_manager():   # as a swap holding the lock through its renames
            with lm._lock:
                held.set()
                # (a fallback, so a blocked loop fails the test instead of hanging it)
                released_by_loop.append(loop_went_on.wait(30))
        holder = threading.Thread(target=busy_manager)
        holder.start()
        await asyncio.get_running_loop().run_in_executor(None, held.wait)
        task = asyncio.ensure_future(handle_describe_log_dirs(ctx, DescribeLogDirsRequest(topics=None)))
        for _ in range(3):   # the handler runs up to where it waits for the lock
            await asyncio.sleep(0)
        loop_went_on.set()   # reached only if the loop was not stuck in the handler
        resp = await task
        holder.join()
        assert released_by_loop == [True]
        assert resp.error_code == 0
        assert [p.partition_index for t in resp.results[0].topics for p in t.partitions] == [0]
    finally:
        lm.shutdown()
