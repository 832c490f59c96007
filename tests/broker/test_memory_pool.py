"""The request-memory budget shared by the network threads: grants while
anything is left (one frame bigger than the budget still passes), queues
the rest first come first served, and hands memory back exactly once."""
from __future__ import annotations

import asyncio

from broker.network.memory import RequestMemoryPool


async def test_grants_while_anything_is_left_then_queues_in_order():
    loop = asyncio.get_running_loop()
    pool = RequestMemoryPool(100)
    assert pool.try_reserve(150)  # bigger than the budget, but it was empty
    assert not pool.try_reserve(1)
    granted = []
    pool.wait(loop, 60, lambda n: granted.append(("a", n)))
    pool.wait(loop, 60, lambda n: granted.append(("b", n)))
    assert pool.waiting == 2
    assert not pool.try_reserve(1)  # nobody jumps the queue
    pool.release(150)
    await asyncio.sleep(0)
    # 0 < 100: a is granted (60); 60 < 100: b too (120, one frame over)
    assert granted == [("a", 60), ("b", 60)] and pool.used == 120 and pool.waiting == 0
    pool.release(60)
    pool.release(60)
    assert pool.used == 0


async def test_a_cancelled_waiter_is_skipped_and_a_late_grant_is_the_callers():
    loop = asyncio.get_running_loop()
    pool = RequestMemoryPool(10)
    assert pool.try_reserve(10)
    granted = []
    gone = pool.wait(loop, 5, lambda n: granted.append(("gone", n)))
    pool.wait(loop, 5, lambda n: granted.append(("next", n)))
    pool.cancel(gone)
    pool.release(10)
    await asyncio.sleep(0)
    assert granted == [("next", 5)] and pool.used == 5
