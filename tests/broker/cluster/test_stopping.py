"""A stopping broker's reading of the controller's answers to its controlled
shutdown (broker/cluster/stopping.py): when it is done, when it asks again, and
when a stale broker epoch means it will never be heard."""
from __future__ import annotations

from samsa.broker.cluster.stopping import Next, ShutdownAnswers, describe
from samsa.protocol.errors import ErrorCode

STALE = ErrorCode.STALE_BROKER_EPOCH


def test_nothing_left_led_here_is_done():
    assert ShutdownAnswers().next([], 7, 7) is Next.MOVED


def test_partitions_still_led_no_controller_or_an_unknown_broker_ask_again():
    answers = ShutdownAnswers()
    for answer in ([("t", 0)], None, ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.NOT_CONTROLLER):
        assert answers.next(answer, 7, 7) is Next.ASK_AGAIN


def test_a_stale_epoch_is_asked_again_once_and_given_up_when_refused_again():
    answers = ShutdownAnswers()
    assert answers.next(STALE, 7, 7) is Next.ASK_AGAIN
    assert answers.next(STALE, 7, 7) is Next.STOP_WITHOUT


def test_a_stale_epoch_then_our_new_registration_is_asked_with_it():
    """A new session registered while the request was out: the refusal was
    of the old epoch, and the new one gets its own second chance."""
    answers = ShutdownAnswers()
    assert answers.next(STALE, 7, 9) is Next.ASK_AGAIN    # registered anew meanwhile
    assert answers.next(STALE, 9, 9) is Next.ASK_AGAIN    # the first refusal of 9
    assert answers.next([], 9, 9) is Next.MOVED


def test_a_refusal_of_an_epoch_no_longer_ours_does_not_end_it():
    answers = ShutdownAnswers()
    assert answers.next(STALE, 7, 7) is Next.ASK_AGAIN
    assert answers.next(STALE, 7, 9) is Next.ASK_AGAIN    # 7 refused twice, but 9 is ours now
    assert answers.next([("t", 1)], 9, 9) is Next.ASK_AGAIN
    assert answers.next([], 9, 9) is Next.MOVED


def test_each_answer_is_described_for_the_log():
    assert describe(None) == "no answer from the controller"
    assert describe([("t", 0), ("t", 1)]) == "2 partition(s) still led here"
    assert "earlier registration" in describe(STALE)
    assert describe(ErrorCode.NOT_CONTROLLER) == "the controller answered NOT_CONTROLLER"
    assert describe(12345) == "the controller answered error 12345"
