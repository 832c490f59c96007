"""Followers copy their leaders' logs (Kafka's replica fetcher threads).

One thread runs an event loop with one task per leader broker this broker
follows partitions of; each task holds one connection to that leader and
asks, with this broker's id as ``replica_id`` (so the leader counts the fetch
as the follower's progress and serves beyond the high watermark):

1. OffsetForLeaderEpoch for partitions just taken up (new leader, new epoch,
   or after a restart): the follower truncates its log to where it diverges
   from the leader's (KIP-101/279), so logs never differ after a failover;
2. Fetch from each partition's log end, appending the leader's batches
   unchanged (same offsets, same bytes) and taking the leader's high
   watermark; a fetch offset the leader does not have (it was truncated, or
   deleted below) is resolved with ListOffsets. The fetches go through a fetch
   session with the leader (KIP-227, ``fetch_session.py``): after a first full
   request, each names only the partitions whose fetch offset moved, were
   added or dropped, and the answer holds only partitions with news.

A partition handed back (``unfollow``: this broker became leader, or the
partition moved) is marked inactive under its lock, which every append to it
holds, so once ``unfollow`` returns no follower append reaches the log.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Callable, Protocol

try:
    import uvloop
    _new_event_loop: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
except ImportError:  # pragma: no cover - uvloop is a declared dependency
    _new_event_loop = asyncio.new_event_loop

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import FetchRequest, ListOffsetsRequest, OffsetForLeaderEpochRequest
from samsa.protocol.records import iter_batch_headers
from samsa.storage import AppendOrigin
from samsa.storage.errors import OffsetsOutOfOrderError

from samsa.client.aio import ConnectionClosedError, KafkaConnection
from ..network.log_limit import RateLimitedLog
from ..metadata import BrokerEndpoint
from ..security.inter_broker import PLAINTEXT, InterBrokerSecurity
from .fetch_session import FetchState, FollowerFetchSession

log = logging.getLogger("broker.replication.fetcher")
_disk_log = RateLimitedLog(log)  # the follower's disk errors (see _apply's caller)

FETCH, LIST_OFFSETS, OFFSET_FOR_LEADER_EPOCH = 1, 2, 23
FETCH_VERSION = 12            # topic names, replica_id in the request body
LIST_OFFSETS_VERSION = 4      # current leader epoch
EPOCH_VERSION = 3             # replica_id
EARLIEST, LATEST = -2, -1
UNDEFINED_EPOCH = -1

# Errors that mean "the leader is not (yet) what the metadata told us": wait
# for the metadata to move on, then go on.
_WAIT_FOR_METADATA = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH,
                      ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.LEADER_NOT_AVAILABLE}
# Errors a leader answers while it has not taken up the leadership we were told
# of: brokers learn leadership through ZooKeeper watches, and a follower may hear
# of it a few milliseconds before the new leader does. Retried after
# QUICK_RETRY_S, doubling up to replica.fetch.backoff.ms, rather than after the
# whole back-off (1 s by default): acks=all produces wait for this follower.
_LEADER_CATCHING_UP = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
                       ErrorCode.LEADER_NOT_AVAILABLE}
QUICK_RETRY_S = 0.025
# Every followed log's fetch state (end, start) is read at least this often;
# between, only those of partitions an answer named (see ReplicaFetcher._fetch_states).
STATE_REFRESH_S = 1.0
# A leader that lost or never had our fetch session: fetch in full, at once
_SESSION_ERRORS = {ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
                   ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR}


class LeaderEpochs(Protocol):
    """What the fetcher reads of a log's leader-epoch cache (storage's LeaderEpochCache)."""
    @property
    def latest_epoch(self) -> int: ...


class FollowerLog(Protocol):
    """What the fetcher uses of a storage.Log it follows (read-only attributes:
    the log moves its offsets itself)."""
    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def log_end_offset(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def leader_epochs(self) -> LeaderEpochs: ...

    def append(self, payload, leader_epoch: int = 0, *, origin: AppendOrigin = ...) -> object: ...
    def update_high_watermark(self, offset: int) -> bool: ...
    def truncate_to(self, offset: int) -> int: ...
    def truncate_fully_and_start_at(self, offset: int) -> None: ...
    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]: ...
    def delete_records_before(self, offset: int) -> int: ...


class FetcherConfig(Protocol):
    """What the fetcher reads of the BrokerConfig (read-only, as it is)."""
    @property
    def broker_id(self) -> int: ...
    @property
    def replica_fetch_max_bytes(self) -> int: ...
    @property
    def replica_fetch_response_max_bytes(self) -> int: ...
    @property
    def replica_fetch_wait_max_ms(self) -> int: ...
    @property
    def replica_fetch_min_bytes(self) -> int: ...
    @property
    def replica_fetch_backoff_ms(self) -> int: ...
    @property
    def replica_socket_timeout_ms(self) -> int: ...


class _Followed:
    """One partition this broker follows, at one leader epoch."""
    __slots__ = ("log", "key", "leader", "leader_epoch", "truncated", "active", "lock",
                 "retry_at", "leader_high_watermark", "quick_retries", "fetch_state")

    def __init__(self, log_: FollowerLog, leader: int, leader_epoch: int) -> None:
        self.log = log_
        self.key = (log_.topic, log_.partition)
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.truncated = False   # divergence resolved with this leader at this epoch
        self.active = True
        self.lock = threading.Lock()  # held by every append; cleared active under it
        self.retry_at = 0.0
        self.leader_high_watermark = 0  # as the last fetch answered
        self.quick_retries = 0  # answers of a leader still taking its leadership up
        # The FetchState last read from the log, kept until something may have
        # moved it (see ReplicaFetcher._fetch_states); None: read it again.
        self.fetch_state: FetchState | None = None


class _NewlyFollowed:
    """Partitions followed from one leader since the last hand-over to the loop."""
    __slots__ = ("first", "epoch", "count")

    def __init__(self, first: tuple[str, int], epoch: int) -> None:
        self.first, self.epoch, self.count = first, epoch, 1


class ReplicaFetcher:
    def __init__(self, config: Callable[[], FetcherConfig],
                 endpoint: Callable[[int], BrokerEndpoint | None],
                 notify: Callable[[str, int], None] = lambda topic, partition: None,
                 security: InterBrokerSecurity = PLAINTEXT) -> None:
        self._config = config
        self._security = security  # TLS and SASL login of the inter-broker listener
        self._endpoint = endpoint
        self._unregistered_leaders: set[int] = set()  # warned about once each
        # told when a followed log's high watermark moved: consumers reading
        # this follower (KIP-392) long-poll on it
        self._notify = notify
        self._followed: dict[tuple[str, int], _Followed] = {}
        # the same, by leader: a round with one leader looks at its partitions
        # only (a broker following 20,000 partitions of two leaders walked all
        # of them in each round with either)
        self._of_leader: dict[int, dict[tuple[str, int], _Followed]] = {}
        self._new: dict[int, _NewlyFollowed] = {}  # by leader, not handed over yet
        self._lock = threading.Lock()
        # uvloop, as the processors: a follower's loop turns over once per chunk
        # of each 1 MiB Fetch answer, and the pure-Python selector loop cost
        # ~8% of the follower's CPU per replicated MB (0.81 -> 0.75 ms/MB).
        self._loop = _new_event_loop()
        self._tasks: dict[int, asyncio.Task] = {}
        # A leader loop waiting in a long-polling Fetch, by leader: a partition
        # newly followed from that leader interrupts the wait (see _ensure_task).
        self._polling: dict[int, KafkaConnection] = {}
        self._interrupted: set[int] = set()
        # KIP-227: the fetch session with each leader (only the leader's loop touches it)
        self._sessions: dict[int, FollowerFetchSession[tuple[str, int]]] = {}
        # per leader: the replica.fetch.max.bytes its FetchStates were all read
        # at, and when they are all read again (see _fetch_states)
        self._states_read: dict[int, tuple[int, float]] = {}
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name="samsa-replica-fetcher", daemon=True)
        self._stopped = False
        self.fetched_bytes = 0

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop every leader's fetches run on (its own thread)."""
        return self._loop

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped = True
        with self._lock:
            for f in self._followed.values():
                with f.lock:
                    f.active = False
            self._followed.clear()
            self._of_leader.clear()
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._cancel_all(), self._loop).result(timeout=10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    async def _cancel_all(self) -> None:
        tasks = list(self._tasks.values())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # ------------------------------------------------------------ roles

    def follow(self, log_: FollowerLog, leader: int, leader_epoch: int) -> None:
        key = (log_.topic, log_.partition)
        with self._lock:
            current = self._followed.get(key)
            if (current is not None and current.leader == leader
                    and current.leader_epoch == leader_epoch and current.log is log_):
                return
            if current is not None:
                with current.lock:
                    current.active = False
                self._of_leader[current.leader].pop(key, None)
            self._followed[key] = self._of_leader.setdefault(leader, {})[key] = _Followed(
                log_, leader, leader_epoch)
            # Handed to the fetcher's loop in batches: a roles pass follows
            # thousands of partitions, and one wake-up of the loop (and one
            # interrupt of a long poll) per partition kept both threads busy.
            first = not self._new
            batch = self._new.get(leader)
            if batch is None:
                self._new[leader] = _NewlyFollowed(key, leader_epoch)
            else:
                batch.count += 1
        log.debug("following %s-%d: leader %d, epoch %d", key[0], key[1], leader, leader_epoch)
        if first and not self._stopped:
            self._loop.call_soon_threadsafe(self._hand_over)

    def _hand_over(self) -> None:
        """(On the loop) The partitions followed since the last hand-over, to
        their leaders' loops: one line and one wake-up per leader."""
        with self._lock:
            batches, self._new = self._new, {}
        for leader, b in batches.items():
            if b.count == 1:
                log.info("following %s-%d: leader %d, epoch %d", b.first[0], b.first[1],
                         leader, b.epoch)
            else:
                log.info("following %d more partitions of leader %d (%s-%d at epoch %d, ...)",
                         b.count, leader, b.first[0], b.first[1], b.epoch)
            self._ensure_task(leader)

    def unfollow(self, topic: str, partition: int) -> None:
        with self._lock:
            current = self._followed.pop((topic, partition), None)
            if current is not None:
                self._of_leader[current.leader].pop(current.key, None)
        if current is not None:
            with current.lock:  # waits out an append in progress
                current.active = False

    def keep_only(self, keys: set[tuple[str, int]]) -> None:
        """Stop following partitions whose logs are gone (a deleted topic)."""
        with self._lock:
            gone = [k for k in self._followed if k not in keys]
        for key in gone:
            self.unfollow(*key)

    def lag(self) -> dict[tuple[str, int], int]:
        """Per followed partition: the leader's high watermark as last seen minus
        this log's end (0 when caught up), as Kafka's fetcher lag."""
        with self._lock:
            followed = list(self._followed.values())
        return {f.key: max(0, f.leader_high_watermark - f.log.log_end_offset) for f in followed}

    def session_requests(self) -> tuple[int, int]:
        """(full, incremental) Fetch requests sent to all leaders since start."""
        sessions = list(self._sessions.values())
        return (sum(s.full_requests for s in sessions),
                sum(s.incremental_requests for s in sessions))

    def _partitions_of(self, leader: int) -> list[_Followed]:
        with self._lock:
            return [f for f in self._of_leader.get(leader, {}).values() if f.active]

    def _ensure_task(self, leader: int) -> None:
        task = self._tasks.get(leader)
        if task is None or task.done():
            self._tasks[leader] = self._loop.create_task(self._leader_loop(leader))
            return
        polling = self._polling.pop(leader, None)
        if polling is not None:
            # The loop waits in a Fetch (up to replica.fetch.wait.max.ms) for the
            # partitions it had; one connection answers in order, so the new
            # partition (a leadership that just moved here: acks=all produces
            # wait for us) would wait behind it. Drop that connection; the loop
            # reconnects at once and adds the new partitions to its fetch
            # session (fetch_session.py: the session survives this drop).
            self._interrupted.add(leader)
            self._loop.create_task(polling.close())

    # ------------------------------------------------------------ the loop

    async def _leader_loop(self, leader: int) -> None:
        conn: KafkaConnection | None = None
        try:
            while not self._stopped:
                followed = self._partitions_of(leader)
                if not followed:
                    return
                cfg = self._config()
                backoff = cfg.replica_fetch_backoff_ms / 1000
                if conn is None or conn.closed:
                    self._interrupted.discard(leader)  # (its wait ended before the close)
                    conn = await self._connect(leader, cfg)
                    if conn is None:
                        await asyncio.sleep(backoff)
                        continue
                try:
                    now = time.monotonic()
                    due = [f for f in followed if f.retry_at <= now]
                    if not due:
                        await asyncio.sleep(min(f.retry_at for f in followed) - now)
                        continue
                    fresh = [f for f in due if not f.truncated]
                    if fresh:
                        await self._truncate(conn, fresh, cfg)
                    ready = [f for f in due if f.truncated and f.active]
                    if ready:
                        await self._fetch(conn, ready, cfg)
                except (ConnectionClosedError, OSError, asyncio.TimeoutError) as e:
                    await conn.close()
                    conn = None
                    if leader in self._interrupted:
                        self._interrupted.discard(leader)
                        continue  # a newly followed partition: fetch again now
                    log.info("replica fetch from broker %d failed (%s); retrying in %g s",
                             leader, e or type(e).__name__, backoff)
                    await asyncio.sleep(backoff)
                except Exception:  # a bug must not stop replication for good
                    log.exception("replica fetcher for broker %d failed", leader)
                    await asyncio.sleep(backoff)
        finally:
            if conn is not None:
                await conn.close()
            if self._tasks.get(leader) is asyncio.current_task():
                del self._tasks[leader]
                if self._partitions_of(leader) and not self._stopped:
                    self._ensure_task(leader)  # partitions were added while ending

    async def _connect(self, leader: int, cfg: FetcherConfig) -> KafkaConnection | None:
        ep = self._endpoint(leader)
        if ep is None:
            if leader not in self._unregistered_leaders:
                self._unregistered_leaders.add(leader)
                log.warning("leader broker %d has no registration this broker knows of: "
                            "waiting for it to fetch its partitions", leader)
            return None
        self._unregistered_leaders.discard(leader)
        try:
            return await KafkaConnection.connect(
                ep.host, ep.port, client_id=f"samsa-replica-fetcher-{cfg.broker_id}",
                timeout=cfg.replica_socket_timeout_ms / 1000,
                tls=self._security.tls, sasl=self._security.sasl)
        except (ConnectionClosedError, OSError, asyncio.TimeoutError) as e:
            log.info("cannot reach leader broker %d at %s:%d: %s", leader, ep.host, ep.port, e)
            return None

    async def _call(self, conn: KafkaConnection, request: object, api_key: int, version: int,
                    cfg: FetcherConfig, extra_wait_ms: int = 0) -> Any:
        """The decoded response: an instance of a message class compiled at import,
        which the checker cannot see (samsa.protocol.messages answers them as Any)."""
        timeout = (cfg.replica_socket_timeout_ms + extra_wait_ms) / 1000
        # (asyncio.timeout, not wait_for: no task of its own, so the request
        # leaves in this turn of the loop, not the next; same TimeoutError)
        async with asyncio.timeout(timeout):
            return await conn.call(request, api_key=api_key, version=version)

    def _delay(self, f: _Followed, cfg: FetcherConfig, error: int | None = None) -> None:
        backoff = cfg.replica_fetch_backoff_ms / 1000
        if error in _LEADER_CATCHING_UP:
            backoff = min(backoff, QUICK_RETRY_S * (1 << min(f.quick_retries, 16)))
            f.quick_retries += 1
        f.retry_at = time.monotonic() + backoff

    # ------------------------------------------------------------ truncation

    async def _truncate(self, conn: KafkaConnection, fresh: list[_Followed],
                        cfg: FetcherConfig) -> None:
        R = OffsetForLeaderEpochRequest
        by_topic: dict[str, list] = {}
        for followed in fresh:  # (f below: the one an answer names, if any)
            followed.fetch_state = None  # (its log is about to be cut back)
            by_topic.setdefault(followed.log.topic, []).append(R.OffsetForLeaderPartition(
                partition=followed.log.partition, current_leader_epoch=followed.leader_epoch,
                leader_epoch=followed.log.leader_epochs.latest_epoch))
        resp = await self._call(conn, R(replica_id=cfg.broker_id, topics=[
            R.OffsetForLeaderTopic(topic=t, partitions=ps) for t, ps in by_topic.items()]),
            OFFSET_FOR_LEADER_EPOCH, EPOCH_VERSION, cfg)
        index = {f.key: f for f in fresh}
        for t in resp.topics:
            for p in t.partitions:
                f = index.get((t.topic, p.partition))
                if f is None:
                    continue
                if p.error_code:
                    self._delay(f, cfg, p.error_code)
                    continue
                with f.lock:
                    if not f.active:
                        continue
                    try:
                        f.truncated = self._truncate_one(f, p.leader_epoch, p.end_offset)
                    except Exception:  # this partition waits, the others go on
                        log.exception("%s-%d: truncation failed", t.topic, p.partition)
                        self._delay(f, cfg)

    @staticmethod
    def _truncate_one(f: _Followed, leader_epoch: int, leader_end: int) -> bool:
        """Cut the log back to where it stops agreeing with the leader's
        (KIP-101/279, as Kafka's fetcher decides it); False when another round
        of OffsetForLeaderEpoch is needed (we did not have the leader's epoch)."""
        lg = f.log
        before = lg.log_end_offset
        done = True
        if leader_epoch == UNDEFINED_EPOCH or leader_end < 0:
            # The leader knows nothing of our epochs (or we have none): keep
            # what is committed, as Kafka does without epoch information.
            target = min(lg.high_watermark, before)
        else:
            local_epoch, local_end = lg.end_offset_for_epoch(leader_epoch)
            if local_epoch == UNDEFINED_EPOCH:
                target = min(leader_end, before)
            elif local_epoch != leader_epoch:
                # Our largest epoch below the leader's answer is an older one: cut
                # to where it ends here and ask again about the epoch before it.
                target, done = min(local_end, before), False
            else:
                target = min(leader_end, local_end)
        lg.truncate_to(target)  # also at the end: drops an epoch begun with no records
        if lg.log_end_offset < before:
            log.info("%s-%d: truncated from %d to %d to match leader %d (epoch %d)",
                     lg.topic, lg.partition, before, lg.log_end_offset, f.leader, f.leader_epoch)
        return done

    # ------------------------------------------------------------ fetching

    async def _fetch(self, conn: KafkaConnection, ready: list[_Followed],
                     cfg: FetcherConfig) -> None:
        R = FetchRequest
        leader = ready[0].leader
        session = self._sessions.setdefault(leader, FollowerFetchSession())
        max_bytes = cfg.replica_fetch_max_bytes
        states, index = self._fetch_states(leader, ready, max_bytes)
        nxt = session.build(states)
        by_topic: dict[str, list] = {}
        for key in nxt.send:
            offset, start, epoch, _ = states[key]
            by_topic.setdefault(key[0], []).append(R.FetchPartition(
                partition=key[1], current_leader_epoch=epoch, fetch_offset=offset,
                last_fetched_epoch=-1, log_start_offset=start,
                partition_max_bytes=max_bytes, high_watermark=-1))
        forgotten: dict[str, list[int]] = {}
        for topic, partition in nxt.forget:
            forgotten.setdefault(topic, []).append(partition)
        # A full request (the first to a leader, or after the session broke)
        # is answered at once, not long-polled: partitions followed meanwhile
        # would otherwise interrupt it, and each full request interrupted made
        # the next full again (while a roles pass hands partitions over, one
        # after another). The session it opens makes the next one incremental,
        # which long-polls and may be interrupted (fetch_session.py).
        wait_ms = 0 if nxt.full and not session.refused else cfg.replica_fetch_wait_max_ms
        # (Fetch v12: replica_id in the body; no topic ids, replica state or directory id yet)
        request = R(cluster_id=None, replica_id=cfg.broker_id,
                    max_wait_ms=wait_ms,
                    min_bytes=cfg.replica_fetch_min_bytes,
                    max_bytes=cfg.replica_fetch_response_max_bytes, isolation_level=0,
                    session_id=nxt.session_id, session_epoch=nxt.epoch,
                    topics=[R.FetchTopic(topic=t, partitions=ps)
                            for t, ps in by_topic.items()],
                    forgotten_topics_data=[R.ForgottenTopic(topic=t, partitions=ps)
                                           for t, ps in forgotten.items()],
                    rack_id="")
        if wait_ms:
            self._polling[leader] = conn
        try:
            resp = await self._call(conn, request, FETCH, FETCH_VERSION, cfg,
                                    extra_wait_ms=wait_ms)
        except BaseException:
            if leader in self._interrupted:
                session.interrupted()  # on purpose, to add partitions: the session goes on
            else:
                session.failed()  # the leader may have moved the session on: start over
            raise
        finally:
            if self._polling.get(leader) is conn:
                del self._polling[leader]
        if not session.answered(resp.error_code, resp.session_id):
            if resp.error_code in _SESSION_ERRORS:
                log.info("fetch session with broker %d: %s; fetching in full", leader,
                         ErrorCode(resp.error_code).name)
                return  # the next round sends a full request, at once
        if resp.error_code:
            for followed in ready:
                self._delay(followed, cfg)
            return
        out_of_range = []
        for t in resp.responses:
            for p in t.partitions:
                f = index.get((t.topic, p.partition_index))
                if f is None:
                    continue
                f.fetch_state = None  # appended, truncated, reset or delayed below
                if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    out_of_range.append(f)
                elif p.error_code:
                    if p.error_code not in _WAIT_FOR_METADATA:
                        log.warning("replica fetch of %s-%d from broker %d: %s", t.topic,
                                    p.partition_index, f.leader, ErrorCode(p.error_code).name)
                    self._delay(f, cfg, p.error_code)
                else:
                    try:
                        self._apply(f, p)
                    except OSError as e:
                        # a full or failing disk fails every fetch of every
                        # partition the same way: one line per interval
                        _disk_log.log(f"apply-{e.errno}", logging.ERROR,
                                      "%s-%d: applying the leader's records failed: %s",
                                      t.topic, p.partition_index, e)
                        self._delay(f, cfg)
                    except Exception:  # this partition waits, the others go on
                        log.exception("%s-%d: applying the leader's records failed",
                                      t.topic, p.partition_index)
                        self._delay(f, cfg)
        if out_of_range:
            await self._reset_out_of_range(conn, out_of_range, cfg)

    def _fetch_states(self, leader: int, ready: list[_Followed], max_bytes: int
                      ) -> tuple[dict[tuple[str, int], FetchState], dict[tuple[str, int], _Followed]]:
        """Each ready partition's FetchState, and the partitions by key.

        Only this fetcher writes a followed log (appends, truncations, resets,
        each after an answer naming the partition, which drops the state kept),
        so a partition no answer named since its state was read still has it:
        a round reads only the logs that moved. Retention moving a follower's
        log start is the one change from elsewhere: every state is read again
        at least every STATE_REFRESH_S, and when replica.fetch.max.bytes changes.
        """
        now = time.monotonic()
        read_at_bytes, refresh_at = self._states_read.get(leader, (-1, 0.0))
        refresh = read_at_bytes != max_bytes or now >= refresh_at
        if refresh:
            self._states_read[leader] = (max_bytes, now + STATE_REFRESH_S)
        states: dict[tuple[str, int], FetchState] = {}
        index: dict[tuple[str, int], _Followed] = {}
        for followed in ready:
            state = followed.fetch_state
            if state is None or refresh:
                lg = followed.log
                state = followed.fetch_state = (lg.log_end_offset, lg.log_start_offset,
                                                followed.leader_epoch, max_bytes)
            key = followed.key
            states[key] = state
            index[key] = followed
        return states, index

    def _apply(self, f: _Followed, p: Any) -> None:  # p: a FetchResponse partition
        records = p.records
        with f.lock:
            if not f.active:
                return
            lg = f.log
            if records:
                try:
                    self._append_replicated(lg, records)
                except OffsetsOutOfOrderError as e:
                    log.warning("%s-%d: leader %d's batches do not follow this log (%s); "
                                "resolving the divergence again", lg.topic, lg.partition,
                                f.leader, e)
                    f.truncated = False
                    f.retry_at = time.monotonic() + self._config().replica_fetch_backoff_ms / 1000
                    return
                self.fetched_bytes += len(records)
            f.leader_high_watermark = p.high_watermark
            f.quick_retries = 0
            if lg.update_high_watermark(min(p.high_watermark, lg.log_end_offset)):
                self._notify(lg.topic, lg.partition)
            if lg.log_start_offset < p.log_start_offset <= lg.high_watermark:
                lg.delete_records_before(p.log_start_offset)  # retention/DeleteRecords there

    @staticmethod
    def _append_replicated(lg: FollowerLog, records) -> None:
        try:
            lg.append(records, origin=AppendOrigin.REPLICATION)
        except OffsetsOutOfOrderError:
            # An empty log starting inside the leader's first batch (the leader's
            # log start moved into a batch, by DeleteRecords or retention): start
            # at that batch instead, as Kafka's follower does.
            first = next(iter_batch_headers(records), (0, None))[1]
            end = lg.log_end_offset
            if (first is None or end != lg.log_start_offset
                    or not first.base_offset < end <= first.base_offset + first.last_offset_delta):
                raise
            lg.truncate_fully_and_start_at(first.base_offset)
            lg.append(records, origin=AppendOrigin.REPLICATION)

    async def _reset_out_of_range(self, conn: KafkaConnection, followed: list[_Followed],
                                  cfg: FetcherConfig) -> None:
        """The leader has not got our fetch offset: we are ahead of it (truncate
        to its end) or behind its log start (start over there)."""
        ends = await self._list_offsets(conn, followed, LATEST, cfg)
        starts = await self._list_offsets(conn, followed, EARLIEST, cfg)
        for f in followed:
            end, start = ends.get(f.key), starts.get(f.key)
            with f.lock:
                if not f.active or end is None or start is None:
                    self._delay(f, cfg)
                    continue
                lg = f.log
                if lg.log_end_offset > end:
                    log.warning("%s-%d: log end %d is past leader %d's %d: truncating",
                                lg.topic, lg.partition, lg.log_end_offset, f.leader, end)
                    lg.truncate_to(end)
                elif lg.log_end_offset < start:
                    log.info("%s-%d: leader %d's log starts at %d, past this log's end %d: "
                             "starting over there", lg.topic, lg.partition, f.leader, start,
                             lg.log_end_offset)
                    lg.truncate_fully_and_start_at(start)

    async def _list_offsets(self, conn: KafkaConnection, followed: list[_Followed],
                            timestamp: int, cfg: FetcherConfig) -> dict[tuple[str, int], int]:
        R = ListOffsetsRequest
        by_topic: dict[str, list] = {}
        for f in followed:
            by_topic.setdefault(f.log.topic, []).append(R.ListOffsetsPartition(
                partition_index=f.log.partition, current_leader_epoch=f.leader_epoch,
                timestamp=timestamp, max_num_offsets=1))
        resp = await self._call(conn, R(replica_id=cfg.broker_id, isolation_level=0, topics=[
            R.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
            timeout_ms=0), LIST_OFFSETS, LIST_OFFSETS_VERSION, cfg)
        return {(t.name, p.partition_index): p.offset for t in resp.topics
                for p in t.partitions if not p.error_code}
