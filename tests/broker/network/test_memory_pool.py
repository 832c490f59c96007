"""The request-memory budget shared by the network threads: grants while
anything is left (one frame bigger than the budget still passes), queues
the rest first come first served, lets one owner growing a frame overdraw so
half-received frames never wait on each other, and hands memory back
exactly once."""
from __future__ import annotations

import asyncio

from samsa.broker.network.memory import RequestMemoryPool


async def test_grants_while_anything_is_left_then_queues_in_order():
    loop = asyncio.get_running_loop()
    pool = RequestMemoryPool(100)
    assert pool.try_reserve("x", 150)  # bigger than the budget, but it was empty
    assert not pool.try_reserve("y", 1)
    granted = []
    pool.wait(loop, "a", 60, lambda n: granted.append(("a", n)))
    pool.wait(loop, "b", 60, lambda n: granted.append(("b", n)))
    assert pool.waiting == 2
    assert not pool.try_reserve("c", 1)  # nobody jumps the queue
    pool.release("x", 150)
    await asyncio.sleep(0)
    # 0 < 100: a is granted (60); 60 < 100: b too (120, one frame over)
    assert granted == [("a", 60), ("b", 60)] and pool.used == 120 and pool.waiting == 0
    pool.release("a", 60)
    pool.release("b", 60)
    assert pool.used == 0


async def test_a_cancelled_waiter_is_skipped_and_a_late_grant_is_the_callers():
    loop = asyncio.get_running_loop()
    pool = RequestMemoryPool(10)
    assert pool.try_reserve("x", 10)
    granted = []
    gone = pool.wait(loop, "gone", 5, lambda n: granted.append(("gone", n)))
    pool.wait(loop, "next", 5, lambda n: granted.append(("next", n)))
    pool.cancel(gone)
    pool.release("x", 10)
    await asyncio.sleep(0)
    assert granted == [("next", 5)] and pool.used == 5


async def test_one_owner_growing_a_frame_overdraws_until_it_gives_memory_back():
    """Connections a and b each hold part of a frame and the budget is used
    up: waiting for each other would wait forever. The first of them to ask
    for more (a, already queued) may overdraw and finish; b waits, a new
    frame (c) waits behind; once a's frame is handled (it releases), b is the
    one that may overdraw."""
    loop = asyncio.get_running_loop()
    pool = RequestMemoryPool(100)
    assert pool.try_reserve("a", 50) and pool.try_reserve("b", 50)
    granted = []
    pool.wait(loop, "c", 10, lambda n: granted.append(("c", n)))   # a new frame: waits
    pool.wait(loop, "a", 100, lambda n: granted.append(("a", n)))  # growing: overdraws
    await asyncio.sleep(0)
    assert granted == [("a", 100)] and pool.used == 200
    assert pool.try_reserve("a", 100)      # a keeps growing its frame
    assert not pool.try_reserve("b", 100)  # one owner at a time
    pool.wait(loop, "b", 100, lambda n: granted.append(("b", n)))
    pool.release("a", 250)                 # a's frame was handled
    await asyncio.sleep(0)
    # 50 < 100: c, first in line, is granted; 60 < 100: b too
    assert granted == [("a", 100), ("c", 10), ("b", 100)] and pool.used == 160
    pool.release("b", 150)
    pool.release("c", 10)
    assert pool.used == 0 and pool.waiting == 0
