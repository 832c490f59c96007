"""Turns (broker/network/turns.py): requests of a connection go on in the order
they took their turns, whichever of them waits before getting there."""
from __future__ import annotations

import asyncio

from samsa.broker.network.turns import Turns


def _run(coro):
    return asyncio.run(coro)


def test_a_turn_whose_earlier_turns_ended_does_not_wait():
    order = Turns()
    first, second = order.take(), order.take()
    assert order.is_turn(first) and not order.is_turn(second)
    order.end(first)
    assert order.is_turn(second)


def test_later_requests_append_after_one_that_waited_first():
    async def scenario() -> list[str]:
        order = Turns()
        appended: list[str] = []
        coordinator = asyncio.Event()

        async def request(name: str, turn: int, waits_first: bool) -> None:
            try:
                if waits_first:
                    await coordinator.wait()
                await order.wait_for(turn)
                appended.append(name)
                order.end(turn)
            finally:
                order.end(turn)

        turns = [order.take() for _ in range(3)]
        tasks = [asyncio.create_task(request("x", turns[0], True)),
                 asyncio.create_task(request("y", turns[1], False)),
                 asyncio.create_task(request("z", turns[2], False))]
        await asyncio.sleep(0)
        assert appended == []  # y and z wait for x
        coordinator.set()
        await asyncio.gather(*tasks)
        return appended

    assert _run(scenario()) == ["x", "y", "z"]


def test_a_turn_that_ended_early_does_not_let_later_ones_pass_an_earlier_one():
    async def scenario() -> list[str]:
        order = Turns()
        appended: list[str] = []
        first, refused, last = order.take(), order.take(), order.take()
        order.end(refused)  # answered without appending, while the first still waits
        waiter = asyncio.create_task(order.wait_for(last))
        await asyncio.sleep(0)
        assert not waiter.done()
        appended.append("first")
        order.end(first)
        await waiter
        appended.append("last")
        order.end(last)
        order.end(last)  # a second end (the dispatcher's) changes nothing
        assert order.is_turn(order.take())
        return appended

    assert _run(scenario()) == ["first", "last"]


def test_a_cancelled_request_ends_its_turn_and_the_next_goes_on():
    async def scenario() -> bool:
        order = Turns()
        stuck, cancelled, next_one = order.take(), order.take(), order.take()
        waiting = asyncio.create_task(order.wait_for(cancelled))
        following = asyncio.create_task(order.wait_for(next_one))
        await asyncio.sleep(0)
        waiting.cancel()
        order.end(cancelled)  # the dispatcher's finally
        await asyncio.sleep(0)
        assert not following.done()  # the first turn has not ended
        order.end(stuck)
        await asyncio.wait_for(following, 5)
        return waiting.cancelled()

    assert _run(scenario())
