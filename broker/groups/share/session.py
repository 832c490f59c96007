"""Share sessions (KIP-932): what a member fetches from one broker, kept
between its ShareFetch requests so each names only what changed.

ShareSessionEpoch 0 opens a session (replacing the member's old one), -1
closes it (acknowledgements in that request still count), anything else must
be the session's next epoch: a session unknown here answers
SHARE_SESSION_NOT_FOUND, a wrong epoch INVALID_SHARE_SESSION_EPOCH, as
Kafka's SharePartitionManager does. ShareAcknowledge takes the same epochs
but cannot open a session (0 is INVALID_SHARE_SESSION_EPOCH).
"""
from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field

from samsa.protocol.errors import ErrorCode

# (topic id, partition)
SessionKey = tuple[uuid.UUID, int]

OPEN, CLOSE = 0, -1


@dataclass
class ShareSession:
    group_id: str
    member_id: str
    epoch: int = 1  # the epoch the next request must carry
    partitions: set[SessionKey] = field(default_factory=set)


class ShareSessions:
    def __init__(self) -> None:
        self._sessions: dict[tuple[str, str], ShareSession] = {}

    def check(self, group_id: str, member_id: str, epoch: int, *, fetch: bool
              ) -> tuple[ErrorCode, ShareSession | None]:
        """Whether a request of this epoch may go on, and its session (a new
        one for epoch 0); nothing changes until ``advance``/``close``."""
        key = (group_id, member_id)
        if epoch == OPEN:
            if not fetch:
                return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
            return ErrorCode.NONE, ShareSession(group_id, member_id)
        session = self._sessions.get(key)
        if session is None:
            return ErrorCode.SHARE_SESSION_NOT_FOUND, None
        if epoch != CLOSE and epoch != session.epoch:
            return ErrorCode.INVALID_SHARE_SESSION_EPOCH, None
        return ErrorCode.NONE, session

    def advance(self, session: ShareSession, add: Iterable[SessionKey],
                forget: Iterable[SessionKey], opened: bool) -> None:
        if opened:
            self._sessions[(session.group_id, session.member_id)] = session
        else:
            session.epoch = session.epoch + 1 if session.epoch < 0x7FFFFFFF else 1
        session.partitions.update(add)
        session.partitions.difference_update(forget)

    def close(self, group_id: str, member_id: str) -> ShareSession | None:
        return self._sessions.pop((group_id, member_id), None)

    def of_group(self, group_id: str) -> list[ShareSession]:
        return [s for (g, _), s in self._sessions.items() if g == group_id]
