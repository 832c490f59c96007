"""Fetch: file regions straight from the logs, long-polled until min_bytes.

The response carries the storage engine's FileRegion objects as record values;
the codec emits each as its own part and the network layer sendfiles it from
the page cache. Fetch v0-3 (message formats v0/v1) are the exception: their
data is read and down-converted in memory.

Fetch sessions (KIP-227, v7+): a fetcher's first request may open a session
(broker/fetch_sessions.py decides), after which it names only the partitions
whose fetch state changed and is answered only the partitions with news.
A consumer's session is read whole on each fetch, as Kafka does. A
follower's is not: its partitions that have nothing to tell and nothing to
change here are left out (``_settled_check``), so a follower of 10,000 quiet
partitions costs its leader the few that moved.

A Fetch that names many logs not loaded yet (storage/lazy_log.py) has them
loaded on one loader thread first (``_LOADER``), so the processor loop keeps
serving its other connections meanwhile.

Down-conversion (Fetch v0-3) is the one place a small request makes the
broker work hard: one 60 KB gzip batch of zeros decompresses to 64 MiB. So
it happens once, when the answer is final (not on every pass of a long
poll), on a worker thread (``_CONVERTERS``, two broker-wide) instead of the
processor loop that serves other connections, and within the fetch's limits:
at most max_bytes (partition_max_bytes per partition) are decoded, beyond
the first batch, which is always converted so a fetcher gets past it (see
protocol.records.downconvert_within).

Consumers read up to the high watermark; with isolation_level=1
(read_committed, v4+) up to the last stable offset, and the answer lists the
aborted transactions overlapping the records returned (KIP-98), so the client
can drop their records. A follower (a broker: ``replica_id``
is its id) reads up to the log end, and its fetch offset tells the leader how
far its copy goes, which moves the high watermark and the ISR.

KIP-392 (Fetch v11+): a consumer may read from a follower, up to the
follower's high watermark; and with ``replica.selector.class`` set, the
leader sends a consumer that names its rack to an in-sync replica in that
rack (``preferred_read_replica``, no records) and answers at once.
"""
from __future__ import annotations

import asyncio
import time
import uuid
from typing import Callable, Collection, TypeVar
from concurrent.futures import ThreadPoolExecutor

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import FetchRequest, FetchResponse
from samsa.protocol.messages.wire import Records
from samsa.protocol.records import downconvert_within

from ..append_notifier import APPENDED, READABLE
from ..fetch_sessions import (INITIAL_EPOCH, NO_SESSION, Changed, FetchContext,
                              FetchSessionCache, Kind, PartitionKey, SessionPartition, Settled, Wanted)
from ..metadata import brokers_on_listener
from samsa.storage import FileRegion

from ..partition_log import PartitionLog
from ..partitions import READ_COMMITTED, LeaderLookup
from . import authz
from .authz import Op
from .errors import error_code_for
from .context import RequestContext
from .services import Connection, Metrics, Services

R = FetchResponse
_INT32_MAX = 0x7FFFFFFF
_T = TypeVar("_T")
# Where down-conversions run: bounded, so old fetchers cannot take every core
# (nor hold more than two conversions' memory), and off the processor loops.
_CONVERTERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="samsa-downconvert")
# Where a Fetch that names many logs not yet loaded (storage/lazy_log.py: a
# log is read from disk on its first use) loads them: a follower's first
# Fetch after a restart names thousands, and loading them inline held the
# processor loop (every connection it serves) for seconds. One thread, so
# such loads do not compete for the disk; a few logs still load inline.
_LOADER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="samsa-fetch-load")
_LOAD_OFF_LOOP_AT = 32
# A Fetch naming more partitions than this (a follower's session: thousands
# after a restart or a controller's take-over) is resolved and read a slice at
# a time, giving the event loop back between slices: at 10,000 partitions a
# pass held the loop, and every connection on it (one network thread by
# default), for a few hundred milliseconds, so Metadata answers waited seconds.
_SLICE = 500
# How often at most a follower's incremental fetch looks at every partition of
# its session (see _look_at_every_one_ms), not only at those that changed.
LOOK_AT_EVERY_ONE_MS = 1000


def _slices(items: list[_T]) -> list[list[_T]]:
    """``items`` in pieces of at most _SLICE (itself when it is one)."""
    if len(items) <= _SLICE:
        return [items]
    return [items[i:i + _SLICE] for i in range(0, len(items), _SLICE)]


class _Target:
    """One requested partition, resolved to its log (or the error to answer)."""
    __slots__ = ("topic", "topic_id", "partition", "fetch_offset", "max_bytes", "lookup",
                 "read_replica", "log_start_offset")

    def __init__(self, topic: str, topic_id: uuid.UUID, partition: int, fetch_offset: int,
                 max_bytes: int, lookup: LeaderLookup, log_start_offset: int = -1) -> None:
        self.topic, self.topic_id, self.partition = topic, topic_id, partition
        self.fetch_offset, self.max_bytes = fetch_offset, max_bytes
        self.log_start_offset = log_start_offset  # the fetcher's own (v5+; a follower's)
        self.lookup: LeaderLookup = lookup  # the log to read, or the error to answer
        self.read_replica = -1  # KIP-392: the replica the consumer should read from instead


def _wanted(req: FetchRequest, version: int) -> list[Wanted]:
    """The partitions a request names, with where to read them."""
    out = []
    for t in req.topics:
        topic = t.topic if version < 13 else None  # (v13+: resolved from the id when read)
        for p in t.partitions:
            out.append(Wanted(topic, t.topic_id, p.partition, p.fetch_offset,
                              p.partition_max_bytes,
                              p.current_leader_epoch if version >= 9 else -1,
                              p.log_start_offset if version >= 5 else -1))
    return out


def _forgotten(req: FetchRequest, version: int) -> list[PartitionKey]:
    """The partitions an incremental request drops from its session (v7+)."""
    return [(t.topic_id if version >= 13 else t.topic, p)
            for t in req.forgotten_topics_data for p in t.partitions]


def _resolve(broker: Services, wanted: list[Wanted], version: int, replica_id: int,
             allowed: Callable[[str], bool]) -> list[_Target]:
    """``allowed(topic)``: whether the fetcher may read the topic (ACLs)."""
    targets = []
    partitions = broker.partitions
    topics = broker.topics
    missing = ErrorCode.UNKNOWN_TOPIC_ID if version >= 13 else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    last: object = None  # the topic of the partition before (requests group them)
    meta = None
    for w in wanted:
        ident = w.topic_id if version >= 13 else w.topic
        if ident != last:
            last = ident
            meta = topics.by_id(w.topic_id) if version >= 13 else topics.get(w.topic or "")
        epoch = w.leader_epoch
        # refused before "unknown", so a missing topic's name reveals nothing
        name = meta.name if meta is not None else w.topic
        if name is not None and not allowed(name):
            found = LeaderLookup(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        elif meta is None:
            found = LeaderLookup(missing)
        elif replica_id >= 0:
            found = partitions.replica_log(meta.name, w.partition, epoch, replica_id)
        else:
            found = partitions.consumer_log(meta.name, w.partition, epoch,
                                            may_read_follower=version >= 11)
        targets.append(_Target(name or "", w.topic_id, w.partition, w.fetch_offset,
                               w.max_bytes, found, w.log_start_offset))
    return targets


class _Unconverted:
    """Fetch v0-3: a partition's regions, to be down-converted once the answer
    is final (``_downconvert``)."""
    __slots__ = ("regions",)

    def __init__(self, regions: list[FileRegion]) -> None:
        self.regions = regions

    @property
    def length(self) -> int:
        """The bytes before conversion (a records value that is not bytes has a length)."""
        return _region_size(self.regions)


def _records_value(regions: list[FileRegion], version: int) -> Records:
    if not regions:
        return b""
    if version <= 3:
        return _Unconverted(regions)
    if len(regions) == 1:
        return regions[0]
    return b"".join(r.read_bytes() for r in regions)


def _region_size(regions: list[FileRegion]) -> int:
    return sum(r.length for r in regions)


def _replica_id(req: FetchRequest, version: int) -> int:
    """The fetching broker's id; -1 for a consumer."""
    if version >= 15:
        state = req.replica_state
        return state.replica_id if state is not None else -1
    return req.replica_id


def _aborted(log: PartitionLog, fetch_offset: int, regions: list[FileRegion]
             ) -> list[FetchResponse.AbortedTransaction]:
    return [R.AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
            for t in log.aborted_transactions(fetch_offset, regions)]


# A partition's answer, before it is grouped by topic
_Answer = tuple[_Target, FetchResponse.PartitionData]


async def _read_sliced(targets: list[_Target], max_bytes: int, version: int, follower: bool,
                       isolation: int = 0) -> tuple[list[_Answer], int]:
    """_read_all, a slice at a time (see _SLICE)."""
    pieces = _slices(targets)
    if len(pieces) == 1:
        return _read_all(targets, max_bytes, version, follower, isolation)
    answers: list[_Answer] = []
    gathered = 0
    for n, piece in enumerate(pieces):
        if n:
            await asyncio.sleep(0)
        more, gathered = _read_all(piece, max_bytes, version, follower, isolation, gathered)
        answers += more
    return answers, gathered


def _read_all(targets: list[_Target], max_bytes: int, version: int, follower: bool,
              isolation: int = 0, gathered: int = 0) -> tuple[list[_Answer], int]:
    """One pass over every partition: (partition answers, bytes gathered, with
    the ``gathered`` of the partitions read before them).
    ``isolation``: the consumer's isolation level (READ_COMMITTED: up to the
    last stable offset, with the aborted transactions)."""
    committed = isolation == READ_COMMITTED and not follower
    answers: list[_Answer] = []
    remaining = max_bytes - gathered
    for t in targets:
        if t.lookup.error:
            leader = t.lookup.leader
            answers.append((t, R.PartitionData(
                partition_index=t.partition, error_code=t.lookup.error, high_watermark=-1,
                last_stable_offset=-1, log_start_offset=-1, aborted_transactions=None,
                preferred_read_replica=-1, records=b"", current_leader=R.LeaderIdAndEpoch(
                    leader_id=leader.node_id if leader else -1,
                    leader_epoch=t.lookup.leader_epoch if leader else -1))))
            continue
        log = t.lookup.found_log
        if t.read_replica >= 0:
            answers.append((t, R.PartitionData(
                partition_index=t.partition, error_code=ErrorCode.NONE,
                high_watermark=log.high_watermark, last_stable_offset=log.last_stable_offset,
                log_start_offset=log.log_start_offset,
                aborted_transactions=None, preferred_read_replica=t.read_replica, records=b"")))
            continue
        limit = max(0, min(t.max_bytes, remaining))
        aborted = None
        try:
            # At least one batch from the first partition that has data, so a
            # consumer always makes progress past a batch larger than its limits.
            # fetch_upper_bound(log, isolation), inlined: the hot path of every fetch
            rr = log.read(t.fetch_offset, limit, min_one_batch=(gathered == 0),
                          max_offset=None if follower else (
                              log.last_stable_offset if committed else log.high_watermark))
            regions = rr.regions
            if committed:
                aborted = _aborted(log, t.fetch_offset, regions)
            size = _region_size(regions) if regions else 0
            records = _records_value(regions, version)
            error = ErrorCode.NONE
            hw, lso, lstart = rr.high_watermark, rr.last_stable_offset, rr.log_start_offset
        except Exception as e:  # every failure is an error code
            error = error_code_for(e)
            size, records = 0, b""
            hw, lso, lstart = log.high_watermark, log.last_stable_offset, log.log_start_offset
        remaining -= size
        gathered += size
        answers.append((t, R.PartitionData(
            partition_index=t.partition, error_code=error, high_watermark=hw,
            last_stable_offset=lso, log_start_offset=lstart, aborted_transactions=aborted,
            preferred_read_replica=-1, records=records)))
    return answers, gathered


def _refresh_offsets(answers: list[_Answer]) -> None:
    """The logs' current high watermark, last stable and log start offsets into
    answers read earlier (without errors, nor records)."""
    for t, p in answers:
        log = t.lookup.found_log
        p.high_watermark = log.high_watermark
        p.last_stable_offset = log.last_stable_offset
        p.log_start_offset = log.log_start_offset


def _response(answers: list[_Answer], listener: str | None, session_id: int) -> FetchResponse:
    topics: list[FetchResponse.FetchableTopicResponse] = []
    by_topic: dict[tuple[str, uuid.UUID], FetchResponse.FetchableTopicResponse] = {}
    # KIP-951: where the partitions this broker does not lead are led now
    leaders = {t.lookup.leader.node_id: t.lookup.leader for t, _ in answers
               if t.lookup.leader is not None}
    for t, pdata in answers:
        key = (t.topic, t.topic_id)
        entry = by_topic.get(key)
        if entry is None:
            entry = R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[])
            by_topic[key] = entry
            topics.append(entry)
        entry.partitions.append(pdata)
    return R(throttle_time_ms=0, error_code=0, session_id=session_id, responses=topics,
             node_endpoints=[R.NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port,
                                            rack=b.rack)
                             for b in brokers_on_listener(list(leaders.values()), listener)]
             if leaders else [])


def _convert(jobs: list[tuple[list[FileRegion], int]], magic: int, budget: int,
             conn: Connection) -> list[bytes | Exception] | None:
    """On a converter thread: each (regions, partition max bytes) as a message
    set of ``magic``, or the exception that stopped it. Together they decode
    at most ``budget`` bytes (each at most its partition's), beyond the
    first batch of the first partition with records. None: the fetcher went
    away while this waited for a thread, so nobody wants the work."""
    if conn.closed:
        return None
    out: list[bytes | Exception] = []
    first = True
    for regions, partition_max in jobs:
        try:
            data = b"".join(r.read_bytes() for r in regions)
            records, decoded = downconvert_within(data, magic, min(partition_max, budget),
                                                  first_batch=first)
        except Exception as e:  # answered as the partition's error code
            out.append(e)
            continue
        budget -= decoded
        first = first and not records
        out.append(records)
    return out


async def _downconvert(ctx: RequestContext, answers: list[_Answer], version: int, max_bytes: int
                      ) -> bool:
    """Down-convert the partitions read for Fetch v0-3, off the loop; False
    when the connection closed before it was done."""
    pending = [(t, p, p.records) for t, p in answers if isinstance(p.records, _Unconverted)]
    if not pending:
        return True
    results = await asyncio.get_running_loop().run_in_executor(
        _CONVERTERS, _convert, [(records.regions, t.max_bytes) for t, _, records in pending],
        0 if version <= 1 else 1, max_bytes, ctx.conn)
    if results is None:
        return False
    for (_, p, _), result in zip(pending, results):
        if isinstance(result, Exception):
            p.error_code, p.records = error_code_for(result), b""
        else:
            p.records = result
    return True


async def _answer(ctx: RequestContext, answers: list[_Answer], version: int, max_bytes: int,
                  follower: bool, session: FetchContext) -> FetchResponse | None:
    if version <= 3 and not await _downconvert(ctx, answers, version, max_bytes):
        return None  # no connection to answer on
    if ctx.conn.peer_gone and session.kind is not Kind.SESSIONLESS:
        # Nobody reads this answer (a follower drops a long-polling connection
        # to fetch partitions it just took up: the broker sees its EOF, and
        # still answers what it received): the session must not count its
        # news as told, nor a full fetch open a session nobody will use.
        return None
    session_id, told = _through_session(ctx.broker.fetch_sessions, session, answers, ctx.conn)
    if told is None:  # the session moved on meanwhile (fetch_sessions.finish)
        return R(throttle_time_ms=0, error_code=ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                 session_id=session_id, responses=[])
    answers = told
    _count_out(ctx.broker.metrics, answers, follower)
    return _response(answers, ctx.listener, session_id)


def _through_session(sessions: FetchSessionCache, session: FetchContext,
                     answers: list[_Answer], peer: object) -> tuple[int, list[_Answer] | None]:
    """The session id to answer and the partitions to answer: all of them,
    but for an incremental fetch only those with news (fetch_sessions.py).
    None for the partitions: a later request took the session meanwhile."""
    if session.kind is Kind.SESSIONLESS:
        return NO_SESSION, answers
    session_id, chosen = sessions.finish(session, [p for _, p in answers], _now_ms(), peer)
    if chosen is None:
        return session_id, None
    if len(chosen) != len(answers):
        answers = [answers[i] for i in chosen]
    return session_id, answers


def throttled(sessions: FetchSessionCache, req: FetchRequest, response: FetchResponse) -> None:
    """(What a client quota calls before it empties a Fetch answer it throttles.)
    The session answered as Kafka's throttled response does: no session opened
    by a full fetch, nothing told by an incremental one (fetch_sessions.py)."""
    session_id = getattr(response, "session_id", NO_SESSION)
    if session_id == NO_SESSION:
        return
    response.session_id = sessions.throttled(
        session_id, req.session_epoch == INITIAL_EPOCH,
        [(t.topic, t.topic_id, p.partition_index) for t in response.responses
         for p in t.partitions])


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def _records_size(records: Records) -> int:
    if isinstance(records, (bytes, bytearray)):
        return len(records)
    if records is None:
        return 0
    if isinstance(records, memoryview):  # not what _read_all makes
        return records.nbytes
    return records.length  # a FileRegion, or _Unconverted


def _count_out(metrics: Metrics, answers: list[_Answer], follower: bool) -> None:
    """Bytes out to consumers per topic, to followers apart (as Kafka's
    BytesOutPerSec and ReplicationBytesOutPerSec)."""
    for t, pdata in answers:
        size = _records_size(pdata.records)
        if size:
            if follower:
                metrics.replicated_out(size)
            else:
                metrics.fetched(t.topic, size)


def _load(logs: list[PartitionLog]) -> None:
    """On the loader thread: load each log; one that cannot be loaded answers
    its error when read, as it would have inline."""
    for lg in logs:
        load = getattr(lg, "load", None)  # (gone once loaded: its class is Log then)
        try:
            if load is not None:
                load()
        except Exception:  # the read answers it as an error code
            continue


async def _load_off_loop(targets: list[_Target], loop: asyncio.AbstractEventLoop) -> None:
    # (``loaded``: storage.Log's, False on an UnloadedLog; not in the PartitionLog protocol)
    unloaded = [t.lookup.log for t in targets
                if t.lookup.log is not None and not getattr(t.lookup.log, "loaded", True)]
    if len(unloaded) >= _LOAD_OFF_LOOP_AT:
        await loop.run_in_executor(_LOADER, _load, unloaded)


async def _resolve_sliced(ctx: RequestContext, session: FetchContext, wanted: list[Wanted],
                          version: int, replica_id: int, allowed: Callable[[str], bool]
                          ) -> list[_Target] | None:
    """``wanted`` resolved a slice at a time (see _SLICE), each partition a
    follower fetches counted as its progress; None when the fetcher went away
    meanwhile (nobody reads the answer: see _answer)."""
    broker = ctx.broker
    follower = replica_id >= 0
    targets: list[_Target] = []
    for n, piece in enumerate(_slices(wanted)):
        if n:
            await asyncio.sleep(0)
            if session.kind is not Kind.SESSIONLESS and ctx.conn.peer_gone:
                return None
        resolved = _resolve(broker, piece, version, replica_id, allowed)
        if follower:
            for w, t in zip(piece, resolved):
                # (for _settled_check, once the session holds it; nothing kept of
                # a partition that is not led here)
                w.found = t.lookup if t.lookup.ok else None
                if t.lookup.ok:
                    broker.partitions.follower_fetched(t.lookup, replica_id, t.fetch_offset,
                                                       t.log_start_offset)
        targets += resolved
    return targets


def _settled_check(broker: Services, replica_id: int) -> Settled:
    """For a follower's incremental fetch (fetch_sessions.new_context): a
    partition is settled when the follower has the whole log, was told its
    current high watermark, last stable and log start offsets, and its
    fetch would change nothing on this leader, which still leads it at the
    epoch the follower named (then it counts as fetched at the log end:
    replication/leader.py's fetched_settled). Reading it would answer
    nothing, so it is left out: a follower of 10,000 quiet partitions costs
    its leader a few comparisons each and a read of those that moved, not a
    lookup, a progress update and a read of each on every fetch (28% of the
    new controller's interpreter in a 30,000-partition take-over)."""
    partitions = broker.partitions

    def settled(entry: SessionPartition) -> bool:
        w = entry.wanted
        found = w.found
        if not isinstance(found, LeaderLookup) or found.replica is None:
            return False
        replica = found.replica
        log = replica.log
        return (w.fetch_offset == log.log_end_offset
                and entry.high_watermark == log.high_watermark
                and entry.last_stable_offset == log.last_stable_offset
                and entry.log_start_offset == log.log_start_offset
                and (w.leader_epoch < 0 or w.leader_epoch == replica.leader_epoch)
                and partitions.still_leads(replica)
                and replica.fetched_settled(replica_id))  # (last: it counts the fetch)
    return settled


async def handle_fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse | None:
    broker = ctx.broker
    version = ctx.version
    replica_id = _replica_id(req, version)
    follower = replica_id >= 0
    loop = asyncio.get_running_loop()
    # A follower's incremental fetch waits as that follower (it reads only the
    # partitions that moved: see _settled_check), registered before its
    # session is looked at, so an append in between wakes it.
    as_follower = (broker.notifier.wait_follower(replica_id, loop)
                   if follower and version >= 7 and req.session_epoch > 0 else None)
    try:
        return await _fetch(ctx, req, version, replica_id, loop, as_follower)
    finally:
        if as_follower is not None:
            as_follower.cancel()


async def _fetch(ctx: RequestContext, req: FetchRequest, version: int, replica_id: int,
                 loop: asyncio.AbstractEventLoop, as_follower: asyncio.Future[object] | None
                 ) -> FetchResponse | None:
    broker = ctx.broker
    max_bytes = req.max_bytes if version >= 3 else _INT32_MAX
    if max_bytes <= 0:
        max_bytes = _INT32_MAX
    follower = replica_id >= 0
    # (where the journal of changes ends before the session is looked at: a
    # wake looks at what changed since, see below)
    journal_mark = broker.notifier.position() if as_follower is not None else 0
    if version >= 7:
        uses_topic_ids = version >= 13
        session = broker.fetch_sessions.new_context(
            req.session_id, req.session_epoch, _wanted(req, version), _forgotten(req, version),
            privileged=follower, uses_topic_ids=uses_topic_ids, now_ms=_now_ms(), peer=ctx.conn,
            settled=_settled_check(broker, replica_id) if follower else None,
            changed=_changed(broker, uses_topic_ids) if as_follower is not None else None,
            look_at_every_one_ms=_look_at_every_one_ms(broker))
        if session.kind is Kind.ERROR:
            return R(throttle_time_ms=0, error_code=session.error, session_id=NO_SESSION,
                     responses=[])
    else:
        session = FetchSessionCache.sessionless(_wanted(req, version))
    skipping = session.reading is not None  # (a follower's incremental fetch)
    session.looked_through = journal_mark if skipping else None
    if follower:  # a broker, which needs ClusterAction
        follower_ok = authz.cluster(ctx, Op.CLUSTER_ACTION)
        allowed = lambda _topic: follower_ok
    else:
        allowed = authz.topic_checker(ctx, Op.READ)
    targets = await _resolve_sliced(ctx, session, session.partitions, version, replica_id,
                                    allowed)
    if targets is None:
        return None
    isolation = req.isolation_level if version >= 4 else 0
    redirected = False
    if not follower and version >= 11 and req.rack_id:
        for t in targets:
            if t.lookup.ok:
                t.read_replica = broker.partitions.preferred_read_replica(
                    t.lookup, t.fetch_offset, req.rack_id)
                redirected = redirected or t.read_replica >= 0
    await _load_off_loop(targets, loop)
    deadline = loop.time() + max(0, req.max_wait_ms) / 1000.0
    keys = [] if skipping else [(t.topic, t.partition) for t in targets if not t.lookup.error]
    waiter: asyncio.Future[object] | None = None
    try:
        while True:
            if session.kind is not Kind.SESSIONLESS and ctx.conn.peer_gone:
                return None  # nobody reads it (see _answer): no read pass for it either
            if skipping:
                if waiter is None:  # the first pass
                    waiter = as_follower  # (registered before the session was looked at)
                else:
                    # Woken: the partitions appended to since they were looked
                    # at (not every partition of the session), looked at once
                    # the next wait is registered (so an append in between is
                    # seen by one or the other).
                    waiter = broker.notifier.wait_follower(replica_id, loop)
                    moved = await _moved_since(ctx, session, version, replica_id, allowed)
                    if moved is None:
                        return None
                    if moved is _SUPERSEDED:
                        return await _answer(ctx, [], version, max_bytes, follower, session)
                    targets += moved
            else:
                # (a follower reads up to the log end, a consumer up to what is committed)
                waiter = (broker.notifier.wait_any(keys, loop, APPENDED if follower else READABLE)
                          if keys else None)
            answers, gathered = await _read_sliced(targets, max_bytes, version, follower,
                                                   isolation)
            any_error = any(p.error_code for _, p in answers)
            timeout = deadline - loop.time()
            # A consumer sent elsewhere learns it at once, as Kafka answers it.
            if (gathered >= req.min_bytes or any_error or redirected or timeout <= 0
                    or waiter is None):
                return await _answer(ctx, answers, version, max_bytes, follower, session)
            try:
                await asyncio.wait_for(waiter, timeout)
            except asyncio.TimeoutError:
                late: list[_Target] = []
                if skipping:
                    # what moved meanwhile without an append (a high watermark:
                    # journalled, not waking the wait) is told too
                    moved = await _moved_since(ctx, session, version, replica_id, allowed)
                    if moved is None:
                        return None
                    if moved is _SUPERSEDED:
                        return await _answer(ctx, [], version, max_bytes, follower, session)
                    late = moved
                    targets += late
                if follower and not gathered and not late:
                    # Nothing was appended to these logs while the follower waited
                    # (that wakes the wait): there are still no records to send,
                    # only offsets that moved (other followers' progress). Reading
                    # every partition again cost as much as the first pass.
                    _refresh_offsets(answers)
                else:
                    answers, _ = await _read_sliced(targets, max_bytes, version, follower,
                                                    isolation)
                return await _answer(ctx, answers, version, max_bytes, follower, session)
    finally:
        if waiter is not None:
            waiter.cancel()


# _moved's answer when a later request of the session took it (see more_to_read);
# told apart by identity, never added to
_SUPERSEDED: list[_Target] = []


def _session_keys(broker: Services, touched: set[tuple[str, int]] | None, uses_topic_ids: bool
                  ) -> Collection[PartitionKey] | None:
    """Partitions (topic name, index) as a session keys them (by topic id
    from v13); None (look at every partition) when a topic has no id now
    (deleted: the session's entries of it have an error to tell)."""
    if touched is None or not uses_topic_ids:
        return touched
    ids: dict[str, uuid.UUID | None] = {}
    keys: set[PartitionKey] = set()
    for topic, partition in touched:
        if topic not in ids:
            meta = broker.topics.get(topic)
            ids[topic] = None if meta is None else meta.topic_id
        topic_id = ids[topic]
        if topic_id is None:
            return None
        keys.add((topic_id, partition))
    return keys


def _changed(broker: Services, uses_topic_ids: bool) -> Changed:
    """The partitions journalled since a position, as a session keys them."""
    def changed(position: int) -> Collection[PartitionKey] | None:
        return _session_keys(broker, broker.notifier.changes_since(position)[0], uses_topic_ids)
    return changed


def _look_at_every_one_ms(broker: Services) -> int:
    """How often a follower's incremental fetch looks at every partition of
    its session, not just at those journalled as changed (fetch_sessions'
    new_context): it counts the follower caught up on each (the ISR's clock),
    so well within replica.lag.time.max.ms."""
    return min(LOOK_AT_EVERY_ONE_MS, broker.config.replica_lag_time_max_ms // 4)


async def _moved_since(ctx: RequestContext, session: FetchContext, version: int, replica_id: int,
                       allowed: Callable[[str], bool]) -> list[_Target] | None:
    """``_moved`` of the partitions journalled as changed since this request
    last looked (all of them when the journal no longer goes back that far),
    and where it has now looked through."""
    assert session.looked_through is not None  # (a follower's incremental fetch)
    touched, session.looked_through = ctx.broker.notifier.changes_since(session.looked_through)
    return await _moved(ctx, session, version, replica_id, allowed,
                        _session_keys(ctx.broker, touched, session.uses_topic_ids))


async def _moved(ctx: RequestContext, session: FetchContext, version: int, replica_id: int,
                 allowed: Callable[[str], bool],
                 touched: Collection[PartitionKey] | None = None) -> list[_Target] | None:
    """A follower's incremental fetch that left settled partitions out: those
    that moved since (resolved), of ``touched`` only when given (else of the
    whole session: the end of the wait looks for offsets that moved without an
    append); _SUPERSEDED when a later request took the session (this answer
    tells nothing, so it goes at once); None when the fetcher went away."""
    wanted = ctx.broker.fetch_sessions.more_to_read(session, touched)
    if wanted is None:
        return _SUPERSEDED
    return await _resolve_sliced(ctx, session, wanted, version, replica_id, allowed)
