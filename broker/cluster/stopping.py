"""A stopping broker's side of Kafka's controlled shutdown: what it makes of
each answer to its ControlledShutdown request (the controller's side is
``Controller.controlled_shutdown``; the loop that asks is the server's)."""
from __future__ import annotations

import enum

from samsa.protocol.errors import ErrorCode

# The controller's answer: the partitions still led here ([] when none), its
# error code, or None when no controller answered.
Answer = list[tuple[str, int]] | int | None


class Next(enum.Enum):
    MOVED = "every leadership moved: stop following and go"
    ASK_AGAIN = "ask again after the back-off"
    STOP_WITHOUT = "the controller will never take this registration's word: go without"


class ShutdownAnswers:
    """One controlled shutdown's answers, in order. STALE_BROKER_EPOCH once may
    be about our own new registration (a new session registers under a newer
    epoch, which this run has not read back yet): ask again with the epoch then
    held. Refused as stale twice with the same epoch while it is still ours,
    the controller knows this broker id by a registration that is not ours:
    asking on cannot succeed."""

    def __init__(self) -> None:
        self._refused_as_stale: int | None = None  # the epoch refused once already

    def next(self, answer: Answer, asked_with: int, registered_as: int) -> Next:
        """``asked_with``: the broker epoch the request carried; ``registered_as``:
        the epoch this broker's registration holds now."""
        if answer == []:
            return Next.MOVED
        if answer == ErrorCode.STALE_BROKER_EPOCH:
            if registered_as == asked_with and self._refused_as_stale == asked_with:
                return Next.STOP_WITHOUT
            self._refused_as_stale = asked_with
        return Next.ASK_AGAIN


def describe(answer: Answer) -> str:
    """An attempt's outcome, for the log."""
    if answer is None:
        return "no answer from the controller"
    if isinstance(answer, list):
        return f"{len(answer)} partition(s) still led here"
    if answer == ErrorCode.BROKER_NOT_AVAILABLE:
        return "the controller does not know this broker as live (yet)"
    if answer == ErrorCode.STALE_BROKER_EPOCH:
        return "refused as an earlier registration's epoch"
    try:
        return f"the controller answered {ErrorCode(answer).name}"
    except ValueError:
        return f"the controller answered error {answer}"
