"""Incremental fetch sessions on the broker (KIP-227, Kafka's FetchSession.scala).

A fetcher that names thousands of partitions need not name them all on every
Fetch: its first request (v7+, session id 0, epoch 0) makes a session holding
each partition's fetch state, and each later request (that id, the next
epoch) names only the partitions whose fetch offset, limits or leader epoch
changed, plus ``forgotten_topics_data`` to drop some. The answer to such an
incremental request lists only the partitions worth telling about: records,
an error, a moved high watermark, last stable or log start offset, or a
preferred read replica (Kafka's rules).

This module is the decision alone: plain, typed state fed each request's
partitions and each answer's outcomes, the time given by the caller. The
Fetch handler (broker/handlers/fetch.py) turns the wire messages into
``Wanted`` and ``Outcome`` and back. One lock guards the cache and every
session in it: the network threads (each its own event loop) share one cache,
and every section it guards is a few dictionary operations per partition.
The requests are counted by kind per thread (``RequestCounts``): a fetch
without a session takes no lock, and a count shared by the threads would lose
increments to one another.

Session ids and epochs (``FetchMetadata`` in Kafka):

- id 0, epoch -1: a fetch without a session (older clients, or no session
  wanted); id N, epoch -1: close session N, then the same;
- id 0 or N, epoch 0: a full fetch (closing N first) that opens a session when
  the cache has room (``max.incremental.fetch.session.cache.slots``);
- id N, epoch E > 0: incremental; an unknown id is FETCH_SESSION_ID_NOT_FOUND,
  another epoch than the session's INVALID_FETCH_SESSION_EPOCH, a request that
  names topics otherwise (ids v13+, names before) than the session was made
  with FETCH_SESSION_TOPIC_ID_ERROR. An incremental request that leaves the
  session empty closes it (answered without a session).

When the cache is full a new session may take the place of another, as in
Kafka: first one unused for ``eviction_ms``; else a follower's (privileged)
session may take a consumer's, or an older-than-``eviction_ms`` one, and a
consumer's only an older-than-``eviction_ms`` consumer's; among those the one
with the fewest partitions goes (a session is worth its partitions).
"""
from __future__ import annotations

import dataclasses
import enum
import random
import threading
import uuid
from typing import Callable, Collection, Hashable, Iterable, Iterator, Protocol, Sequence

from samsa.protocol.errors import ErrorCode

from .per_thread import PerThread

NO_SESSION = 0       # Kafka's INVALID_SESSION_ID
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
DEFAULT_SLOTS = 1000
DEFAULT_EVICTION_MS = 120_000   # min.incremental.fetch.session.eviction.ms

# A partition as a session knows it: by topic id (v13+) or by name, and index
PartitionKey = tuple[Hashable, int]


def next_epoch(epoch: int) -> int:
    """The epoch after ``epoch``: 1 after the initial one, wrapping past int32 to 1."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch >= 0x7FFFFFFF else epoch + 1


@dataclasses.dataclass(slots=True)
class Wanted:
    """One partition a request names: where to read and how much."""
    topic: str | None          # None: named by an id this broker does not know
    topic_id: uuid.UUID
    partition: int
    fetch_offset: int
    max_bytes: int
    leader_epoch: int = -1     # current_leader_epoch (v9+)
    log_start_offset: int = -1  # the fetcher's own (a follower's, v5+)
    # The Fetch handler's lookup of the partition, kept while the session holds
    # this state (a partition named again gets a new Wanted): what its
    # ``settled`` check reads instead of looking the partition up again.
    found: object = None

    def key(self, uses_topic_ids: bool) -> PartitionKey:
        return (self.topic_id if uses_topic_ids else self.topic, self.partition)


class Outcome(Protocol):
    """What a partition's answer says, as far as the session cares (the Fetch
    response's PartitionData is one: no copy is made per partition)."""
    @property
    def error_code(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def last_stable_offset(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def preferred_read_replica(self) -> int: ...
    @property
    def records(self) -> object: ...  # empty (falsy) when the answer has none


@dataclasses.dataclass(slots=True)
class Answered:
    """An Outcome of its own (tests, and callers without a response at hand)."""
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: object = b""
    preferred_read_replica: int = -1


@dataclasses.dataclass(slots=True)
class SessionPartition:
    """A partition in a session: the fetch state the fetcher last sent, and the
    offsets it was last told (-1: tell it again)."""
    wanted: Wanted
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    place: int = 0   # in the session's fetch order (FetchSession.placed)

    def must_answer(self, out: Outcome) -> bool:
        """Whether an incremental answer lists this partition; remembers what it tells."""
        must = bool(out.records) or out.preferred_read_replica >= 0
        if out.error_code:
            self.high_watermark = -1  # so the partition is answered again once it recovers
            return True
        if self.high_watermark != out.high_watermark:
            self.high_watermark = out.high_watermark
            must = True
        if self.last_stable_offset != out.last_stable_offset:
            self.last_stable_offset = out.last_stable_offset
            must = True
        if self.log_start_offset != out.log_start_offset:
            self.log_start_offset = out.log_start_offset
            must = True
        return must


class FetchSession:
    """One fetcher's session: its partitions in fetch order (dicts keep it)."""
    __slots__ = ("id", "privileged", "uses_topic_ids", "partitions", "epoch", "created_ms",
                 "last_used_ms", "answered_on", "last_told", "looked_through", "carried",
                 "every_one_looked_at_ms", "placed")

    def __init__(self, session_id: int, privileged: bool, uses_topic_ids: bool,
                 partitions: dict[PartitionKey, SessionPartition], now_ms: int) -> None:
        self.id = session_id
        self.privileged = privileged  # a follower's: evicted last
        self.uses_topic_ids = uses_topic_ids
        self.partitions = partitions
        self.epoch = next_epoch(INITIAL_EPOCH)  # the epoch the next request must carry
        self.created_ms = now_ms
        self.last_used_ms = now_ms
        # The connection the last answer went out on, and the partitions it
        # told: a next request on another connection may come from a fetcher
        # that never read that answer (a follower drops a long poll to add
        # partitions, and the answer was already on its way), so those
        # partitions are told again (see new_context).
        self.answered_on: object | None = None
        self.last_told: list[PartitionKey] = list(partitions)
        # Where a follower's incremental fetches looking at what changed left
        # off (see new_context's ``changed``): the position in the journal of
        # changes the last answered request had looked through (None: look at
        # every partition), the partitions it read (not settled when looked
        # at), and when every partition was last looked at.
        self.looked_through: int | None = None
        self.carried: set[PartitionKey] = set()
        self.every_one_looked_at_ms = now_ms
        # The fetch order as numbers too (each entry's ``place``, the last one
        # given ``placed``), so a few entries are put in it without a walk of all.
        self.placed = 0
        for entry in partitions.values():
            self.place_last(entry)

    def place_last(self, entry: SessionPartition) -> None:
        self.placed += 1
        entry.place = self.placed

    def __len__(self) -> int:
        return len(self.partitions)


Settled = Callable[[SessionPartition], bool]
"""Whether reading a session partition would find nothing to answer nor to
do (the caller knows its logs): such a partition, not named by the request,
is left out of an incremental fetch."""

Changed = Callable[[int], "Collection[PartitionKey] | None"]
"""The session partitions (keys as the session's) whose ``Settled`` answer
may have changed since a position in the caller's journal of changes (None:
not known that far back)."""


class Kind(enum.Enum):
    SESSIONLESS = "sessionless"  # answered in full, session id 0
    FULL = "full"                # answered in full; opens a session if there is room
    INCREMENTAL = "incremental"  # the session's partitions; only those that changed answered
    ERROR = "error"              # a session error: answered with the code alone


@dataclasses.dataclass
class FetchContext:
    """How to serve one Fetch: which partitions to read, and (``finish``) what to answer."""
    kind: Kind
    partitions: list[Wanted]  # to read, in this order
    error: ErrorCode = ErrorCode.NONE
    session: FetchSession | None = None  # INCREMENTAL
    privileged: bool = False
    uses_topic_ids: bool = False
    epoch: int = INITIAL_EPOCH  # INCREMENTAL: the session's epoch once this request took it
    # INCREMENTAL with a ``settled`` check: the keys of ``partitions``, and the check
    reading: set[PartitionKey] | None = None
    settled: Settled | None = None
    # and with ``changed``: the position in the caller's journal of changes
    # up to which this request has looked at what changed (the caller's to
    # keep up to date; None: the next request looks at every partition)
    looked_through: int | None = None


# Each Kind's place in a RequestCounts tally, in Kind's order: an index counts faster
# than the enum itself (an Enum's hash is Python code).
_TALLY_SESSIONLESS, _TALLY_FULL, _TALLY_INCREMENTAL, _TALLY_ERROR = range(4)


class RequestCounts:
    """Fetch requests by how their session was handled, exact across the
    network threads without a lock on the request path (broker/per_thread.py),
    as broker/metrics.py counts requests."""

    def __init__(self) -> None:
        self._tallies: PerThread[list[int]] = PerThread(lambda: [0] * len(Kind))

    def add(self, place: int) -> None:
        self._tallies.mine()[place] += 1

    def by_kind(self) -> dict[Kind, int]:
        tallies = self._tallies.every()
        return {kind: sum(t[place] for t in tallies) for place, kind in enumerate(Kind)}


class FetchSessionCache:
    """Every session on this broker, shared by the network threads."""

    def __init__(self, max_sessions: int = DEFAULT_SLOTS,
                 eviction_ms: int = DEFAULT_EVICTION_MS) -> None:
        self.max_sessions = max_sessions
        self.eviction_ms = eviction_ms
        self._sessions: dict[int, FetchSession] = {}
        self._lock = threading.Lock()
        self._random = random.Random()
        # counted for the metrics endpoint: the requests by kind (a full one
        # is a fetch that asked for a session, epoch 0; an incremental one
        # that emptied its session counts as incremental), and the evictions
        # (under the lock, as every eviction is)
        self.requests = RequestCounts()
        self.evictions = 0

    # ------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def cached_partitions(self) -> int:
        with self._lock:
            return sum(len(s) for s in self._sessions.values())

    # ------------------------------------------------------------ a request

    def new_context(self, session_id: int, epoch: int, wanted: list[Wanted],
                    forgotten: Iterable[PartitionKey], *, privileged: bool,
                    uses_topic_ids: bool, now_ms: int, peer: object = None,
                    settled: Settled | None = None, changed: Changed | None = None,
                    look_at_every_one_ms: int = 1000) -> FetchContext:
        """Decide how to serve a Fetch v7+ (older ones are SESSIONLESS: see
        ``sessionless``); ``peer``: the connection it came on (None: not known).

        ``settled``: an incremental fetch reads only the session's partitions
        that the request names or that ``settled`` says may have news; the
        others are neither read nor answered (as they would not have been),
        so a follower's fetch costs the partitions that moved, not all it
        follows (``more_to_read`` adds those that move while it waits).

        ``changed``: and ``settled`` is asked only of the partitions that may
        have moved since the session's last answered request looked (named
        now, read then, or ``changed`` since what it had looked through:
        ``finish``'s ``looked_through``), not of every one: a follower of
        15,000 quiet partitions spent 10-20% of its leader's interpreter
        asking it of each on every fetch. Every ``look_at_every_one_ms`` it
        is asked of every partition again: what moves without an entry in
        the journal (a log start offset, a leadership or ISR membership,
        and the follower's time caught up, which the ask counts) is told
        that much later at most."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != NO_SESSION:
                with self._lock:
                    self._sessions.pop(session_id, None)
            if epoch == FINAL_EPOCH:
                self.requests.add(_TALLY_SESSIONLESS)
                return FetchContext(Kind.SESSIONLESS, wanted)
            self.requests.add(_TALLY_FULL)
            return FetchContext(Kind.FULL, wanted, privileged=privileged,
                                uses_topic_ids=uses_topic_ids)
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                error = ErrorCode.FETCH_SESSION_ID_NOT_FOUND
            elif session.epoch != epoch:
                error = ErrorCode.INVALID_FETCH_SESSION_EPOCH
            elif session.uses_topic_ids != uses_topic_ids:
                error = ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR
            else:
                error = ErrorCode.NONE
                if peer is not session.answered_on and session.answered_on is not None:
                    # (Kafka's follower starts again with a full fetch after an
                    # answer it did not read; ours keeps the session, so the
                    # leader tells again what that answer may have told)
                    for key in session.last_told:
                        lost = session.partitions.get(key)
                        if lost is not None:
                            lost.high_watermark = -1
                session.last_told = []
                named: set[PartitionKey] = set()
                for w in wanted:  # added, or updated in place (keeping its place)
                    key = w.key(uses_topic_ids)
                    named.add(key)
                    cached = session.partitions.get(key)
                    if cached is None:
                        session.partitions[key] = added = SessionPartition(w)
                        session.place_last(added)
                    else:
                        before = cached.wanted
                        if (w.leader_epoch != before.leader_epoch
                                or w.fetch_offset < before.fetch_offset):
                            # a new leader epoch, a truncated follower or a
                            # consumer's seek back: whatever it was told may be
                            # stale to it now, so tell it all again
                            cached.high_watermark = -1
                        cached.wanted = w
                for key in forgotten:  # one never in the session is no error (as in Kafka)
                    session.partitions.pop(key, None)
                if not session.partitions:
                    del self._sessions[session.id]
                    self.requests.add(_TALLY_INCREMENTAL)
                    return FetchContext(Kind.SESSIONLESS, [])
                session.last_used_ms = now_ms
                session.epoch = next_epoch(session.epoch)
                self.requests.add(_TALLY_INCREMENTAL)
                if settled is None:
                    return FetchContext(Kind.INCREMENTAL,
                                        [c.wanted for c in session.partitions.values()],
                                        session=session, privileged=session.privileged,
                                        uses_topic_ids=uses_topic_ids, epoch=session.epoch)
                epoch = session.epoch
                looked_through, carried = session.looked_through, session.carried
                every_one = (changed is None or looked_through is None
                             or now_ms - session.every_one_looked_at_ms >= look_at_every_one_ms)
                if every_one:
                    session.every_one_looked_at_ms = now_ms
                    held = list(session.partitions.items())
        if error:
            self.requests.add(_TALLY_ERROR)
            return FetchContext(Kind.ERROR, [], error=error)
        assert session is not None and settled is not None  # (else answered above)
        if not every_one:
            assert changed is not None and looked_through is not None
            since = changed(looked_through)   # (outside the lock every fetch takes)
            look = None if since is None else named.union(carried, since)
            with self._lock:
                held = self._entries(session, look)
        # (checked outside the lock: see more_to_read)
        reading = [(key, c.wanted) for key, c in held if key in named or not settled(c)]
        keys = {key for key, _ in reading}
        with self._lock:
            # Carried at once, not only by ``finish``: this request may never
            # be finished (a later one takes the session, its fetcher goes),
            # and the next would not name what it named (sent, for its fetcher).
            session.carried = session.carried | keys
        return FetchContext(Kind.INCREMENTAL, [w for _, w in reading],
                            session=session, privileged=session.privileged,
                            uses_topic_ids=uses_topic_ids, epoch=epoch,
                            reading=keys, settled=settled)

    def more_to_read(self, ctx: FetchContext, touched: Collection[PartitionKey] | None = None
                     ) -> list[Wanted] | None:
        """For an incremental fetch that leaves settled partitions out (see
        ``new_context``): those of its session that its ``settled`` check now
        finds unsettled (an append while the fetch waited), added to the end
        of ``ctx.partitions`` and returned; only those of ``touched`` (keys as
        the session's) are looked at, when given. None once a later request
        took the session (this one's answer will tell nothing: ``finish``)."""
        session, reading, settled = ctx.session, ctx.reading, ctx.settled
        if session is None or reading is None or settled is None:
            return []
        with self._lock:
            if session.epoch != ctx.epoch:
                return None
            held = self._entries(session, touched)
        # Checked outside the lock (every network thread's fetches take it): what
        # a check reads of an entry is written only by this request's ``finish``
        # or by a later request, which makes ``finish`` drop this answer.
        more = [(key, c.wanted) for key, c in held if key not in reading and not settled(c)]
        reading.update(key for key, _ in more)
        ctx.partitions += [w for _, w in more]
        return [w for _, w in more]

    @staticmethod
    def _entries(session: FetchSession, keys: Collection[PartitionKey] | None
                 ) -> list[tuple[PartitionKey, SessionPartition]]:
        """The session's entries of ``keys`` (None: all), in fetch order (what
        had records went last: see finish). Called holding the lock."""
        parts = session.partitions
        if keys is None:
            return list(parts.items())
        if 4 * len(keys) >= len(parts):
            return [(key, entry) for key, entry in parts.items() if key in keys]
        # A few: put in fetch order (a response's max_bytes goes to the
        # first ones) by their places, without a walk of all.
        few = [(key, entry) for key in keys if (entry := parts.get(key)) is not None]
        few.sort(key=lambda item: item[1].place)
        return few

    @staticmethod
    def sessionless(wanted: list[Wanted]) -> FetchContext:
        return FetchContext(Kind.SESSIONLESS, wanted)

    def finish(self, ctx: FetchContext, outcomes: Sequence[Outcome], now_ms: int,
               peer: object = None) -> tuple[int, list[int] | None]:
        """Once the partitions of ``ctx`` were read (``outcomes`` in the same
        order) and are to be answered on connection ``peer``: (the session id
        to answer, the indexes of the partitions to answer).

        None instead of the indexes: a later request of the session came in
        while this one long-polled (its fetcher gave up waiting for this answer,
        as a follower does to fetch partitions it just took up), so this answer
        is INVALID_FETCH_SESSION_EPOCH and tells nothing, as Kafka's
        IncrementalFetchContext answers it; counting its news as told would
        keep them from the answer the fetcher does read."""
        everything = list(range(len(outcomes)))
        if ctx.kind is Kind.FULL:
            return self._maybe_create(ctx, outcomes, now_ms, peer), everything
        if ctx.kind is not Kind.INCREMENTAL:
            return NO_SESSION, everything
        session = ctx.session
        assert session is not None
        answered: list[int] = []
        with self._lock:
            if session.epoch != ctx.epoch:
                return session.id, None
            parts = session.partitions
            moved: list[PartitionKey] = []
            told: list[PartitionKey] = []
            for i, (w, out) in enumerate(zip(ctx.partitions, outcomes)):
                key = w.key(session.uses_topic_ids)
                cached = parts.get(key)
                if cached is None:  # forgotten by a later request meanwhile
                    continue
                if cached.must_answer(out):
                    answered.append(i)
                    told.append(key)
                    if out.records:
                        moved.append(key)
            session.answered_on, session.last_told = peer, told
            # Where the next request's look at what changed starts: whatever
            # was not settled when looked at was read (and may still not be).
            if ctx.reading is not None:
                session.looked_through, session.carried = ctx.looked_through, ctx.reading
            # Partitions that had records go to the end of the fetch order, so
            # a response's max_bytes does not always go to the same ones.
            for key in moved:
                parts[key] = entry = parts.pop(key)
                session.place_last(entry)
        return session.id, answered

    def throttled(self, session_id: int, full: bool,
                  told: Iterable[tuple[str | None, uuid.UUID, int]]) -> int:
        """An answer sent without its partitions, as a client quota throttles
        it (quotas/enforcement.py): Kafka's getThrottledResponse, which a full
        fetch opens no session by and an incremental one tells nothing by. So
        the session the full fetch opened is dropped (the client starts again
        with a full fetch, as after any answer naming no session), and the
        partitions ``told`` (topic, topic id, index) are answered again next
        time. The session id to answer."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return NO_SESSION
            if full:
                del self._sessions[session_id]
                return NO_SESSION
            for topic, topic_id, partition in told:
                cached = session.partitions.get(
                    (topic_id if session.uses_topic_ids else topic, partition))
                if cached is not None:
                    cached.high_watermark = -1
            return session_id

    # ------------------------------------------------------------ sessions

    def _maybe_create(self, ctx: FetchContext, outcomes: Sequence[Outcome], now_ms: int,
                      peer: object) -> int:
        if not ctx.partitions:
            return NO_SESSION
        with self._lock:
            if len(self._sessions) >= self.max_sessions and not self._evict_for(
                    ctx.privileged, len(ctx.partitions), now_ms):
                return NO_SESSION
            partitions: dict[PartitionKey, SessionPartition] = {}
            for w, out in zip(ctx.partitions, outcomes):
                cached = SessionPartition(w)
                cached.must_answer(out)
                partitions[w.key(ctx.uses_topic_ids)] = cached
            session_id = self._new_id()
            session = FetchSession(session_id, ctx.privileged, ctx.uses_topic_ids,
                                   partitions, now_ms)
            session.answered_on = peer
            self._sessions[session_id] = session
            return session_id

    def _new_id(self) -> int:
        while True:
            session_id = self._random.randint(1, 0x7FFFFFFF)
            if session_id not in self._sessions:
                return session_id

    def _evict_for(self, privileged: bool, size: int, now_ms: int) -> bool:
        """Make room for a new session of ``size`` partitions (under the lock)."""
        if not self._sessions:
            return False
        stale = min(self._sessions.values(), key=lambda s: s.last_used_ms)
        if now_ms - stale.last_used_ms > self.eviction_ms:
            self._evict(stale)
            return True
        # (privileged, size, id): the least valuable first, as Kafka's EvictableKey
        candidates = [s for s in self._evictable(privileged, now_ms)
                      if (s.privileged, len(s)) <= (privileged, size)]
        if not candidates:
            return False
        self._evict(min(candidates, key=lambda s: (s.privileged, len(s), s.id)))
        return True

    def _evictable(self, privileged: bool, now_ms: int) -> Iterator[FetchSession]:
        for s in self._sessions.values():
            old = now_ms - s.created_ms > self.eviction_ms
            if old or (privileged and not s.privileged):
                yield s

    def _evict(self, session: FetchSession) -> None:
        del self._sessions[session.id]
        self.evictions += 1
