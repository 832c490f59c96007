"""A follower's side of a fetch session with one leader (KIP-227; Kafka's
FetchSessionHandler): what the next Fetch names, and what its answer does to
the session.

The first request is full (epoch 0: every partition) and asks the leader for
a session. While the leader keeps one, each request is incremental: it names
the partitions added or whose fetch state changed since the last request, and
forgets the ones dropped (no longer followed, or waiting out a back-off). The
leader answers only partitions with news, so a follower of thousands of quiet
partitions sends and reads a few bytes a round instead of all of them.

Whatever breaks the chain (a session error, a lost answer, a closed
connection) sends the next request full: with the old session id, so the
leader drops that session before opening the next one. One break does not:
the follower dropping a long-polling incremental request on purpose, to name
partitions it just took up without waiting for that answer. The leader took
that request (its session is at the next epoch and holds what it named) and
will not answer it, so the next request goes on incrementally, adding the new
partitions (``interrupted``); should the leader not have read it after all,
it answers INVALID_FETCH_SESSION_EPOCH and the chain starts over in full.
Plain state, no I/O.
"""
from __future__ import annotations

import dataclasses
from typing import Generic, Hashable, TypeVar

from samsa.protocol.errors import ErrorCode

NO_SESSION = 0
INITIAL_EPOCH = 0

K = TypeVar("K", bound=Hashable)


# What the leader keeps of a partition in the session, sent again when it
# changes: (fetch offset, log start offset, current leader epoch, max bytes).
# A plain tuple: one is made per partition and round, thousands a second.
FetchState = tuple[int, int, int, int]


@dataclasses.dataclass(slots=True)
class NextFetch(Generic[K]):
    """The request to send: its session id and epoch, the partitions to name, to forget."""
    session_id: int
    epoch: int
    send: list[K]
    forget: list[K]

    @property
    def full(self) -> bool:
        return self.epoch == INITIAL_EPOCH


def _next_epoch(epoch: int) -> int:
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


class FollowerFetchSession(Generic[K]):
    """The session with one leader, keyed by whatever names a partition (K)."""

    def __init__(self) -> None:
        self.session_id = NO_SESSION
        self.epoch = INITIAL_EPOCH  # of the next request; 0: full
        self._session: dict[K, FetchState] = {}  # as the leader holds it once it has our last
        # The leader answered the last full request without a session (no
        # room in its cache): every request stays full, so they long-poll too.
        self.refused = False
        self.full_requests = 0
        self.incremental_requests = 0

    def build(self, wanted: dict[K, FetchState]) -> NextFetch[K]:
        """The next request for ``wanted`` (every partition to fetch now and its
        state, in fetch order); from now on the session is taken to hold them."""
        if self.epoch == INITIAL_EPOCH:
            self.full_requests += 1
            request = NextFetch(self.session_id, INITIAL_EPOCH, list(wanted), [])
        else:
            self.incremental_requests += 1
            old = self._session
            send = [k for k, state in wanted.items() if old.get(k) != state]
            forget = [k for k in old if k not in wanted]
            request = NextFetch(self.session_id, self.epoch, send, forget)
        self._session = dict(wanted)
        return request

    def answered(self, error: int, session_id: int) -> bool:
        """The answer to the last request built arrived with this top-level
        error and session id; False when it carries no partition data (a
        session error: the next request is full)."""
        if error:
            if error == ErrorCode.FETCH_SESSION_ID_NOT_FOUND:
                self.session_id = NO_SESSION
            self.epoch = INITIAL_EPOCH  # (a known id is closed by the full request)
            return False
        if session_id == NO_SESSION:  # the leader keeps none (full, or session closed)
            self.refused = self.epoch == INITIAL_EPOCH
            self.session_id, self.epoch = NO_SESSION, INITIAL_EPOCH
            return True
        self.refused = False
        if self.epoch == INITIAL_EPOCH or session_id != self.session_id:
            self.session_id, self.epoch = session_id, _next_epoch(INITIAL_EPOCH)
        else:
            self.epoch = _next_epoch(self.epoch)
        return True

    def interrupted(self) -> None:
        """The follower closed the connection on purpose while the leader
        long-polled the last request (see the module doc): an incremental
        session goes on at the next epoch; a full request opened none."""
        if self.epoch != INITIAL_EPOCH:
            self.epoch = _next_epoch(self.epoch)

    def failed(self) -> None:
        """The last request's answer was lost (connection closed, timeout): what
        the leader holds is unknown, so start over, closing the old session."""
        self.epoch = INITIAL_EPOCH
