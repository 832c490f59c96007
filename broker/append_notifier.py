"""Wakes long-polling fetches when a partition they wait on gets data.

Appends happen on whichever processor thread served the Produce; the waiting
Fetch sits on its own processor's event loop. Each waiter is a future plus the
loop that owns it, and an append completes it through call_soon_threadsafe
(one call per loop, however many of its fetches wake; a plain call_soon on
the notifying thread's own loop).

Waiters say what they wait for, as Kafka's delayed fetches complete only on
what they can use: a follower reads up to the log end (``APPENDED``: an
append), a consumer up to the high watermark or last stable offset
(``READABLE``: they moved). A leader's append that commits nothing (the
followers have not fetched it yet) wakes only the followers; their fetch
that then moves the high watermark wakes the consumers.

A follower's incremental fetch may leave out the partitions of its session
that have nothing new (broker/handlers/fetch.py), so it cannot wait on them
by name; it waits as that follower instead (``wait_follower``), woken by an
append to any partition the leader counts it a replica of (``notify``'s
``followers``). Registering it costs the same for 10 partitions or 10,000.
Woken, it looks again only at the partitions appended to since it last
looked (``changes_since``: every notify naming followers is journalled), not
at every partition of its session. A leader journals the other news a
follower's fetch answers too (a high watermark moved, the ISR or the epoch
changed: ``notify`` naming followers without APPENDED), waking no follower:
the follower's next fetch looks at the partitions journalled since its last
(fetch_sessions.py's ``new_context``), not at all it follows.
"""
from __future__ import annotations

import asyncio
import threading
from asyncio import events as asyncio_events
from typing import Collection, Iterable, TypeVar

APPENDED = 1  # the log end moved: followers can read more
READABLE = 2  # the high watermark or last stable offset moved: consumers can
ANY = APPENDED | READABLE

# Entries the journal of notified partitions holds at most (see
# changes_since): past that the older half goes, so it keeps the last
# 0.65-1.3 s of appends at 100,000 a second (at most ~8 MB); a fetch that
# looked before what is kept looks at every partition of its session instead.
JOURNAL_KEPT = 1 << 17

# (loop, future, events waited for)
_Entry = tuple[asyncio.AbstractEventLoop, "asyncio.Future[object]", int]


class AppendNotifier:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[tuple[str, int], set[_Entry]] = {}
        # by follower broker id: fetches woken by an append to any partition it replicates
        self._followers: dict[int, set[_Entry]] = {}
        # Partitions notified with their followers named, in order, and the
        # position of the first one kept (see changes_since).
        self._journal: list[tuple[str, int]] = []
        self._journal_start = 0

    def wait_any(self, keys: Iterable[tuple[str, int]], loop: asyncio.AbstractEventLoop,
                 events: int = ANY) -> asyncio.Future[object]:
        """A future completed by the next of ``events`` on any of ``keys``
        (topic, partition)."""
        keys = list(keys)
        fut: asyncio.Future[object] = loop.create_future()
        entry = (loop, fut, events)
        with self._lock:
            for key in keys:
                self._waiters.setdefault(key, set()).add(entry)
        fut.add_done_callback(lambda _f: self._forget(keys, entry))
        return fut

    def _forget(self, keys: list[tuple[str, int]], entry: _Entry) -> None:
        with self._lock:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(entry)
                    if not waiters:
                        del self._waiters[key]

    def wait_follower(self, replica_id: int, loop: asyncio.AbstractEventLoop
                      ) -> asyncio.Future[object]:
        """A future completed by the next append to a partition whose
        ``notify`` names ``replica_id`` among its followers."""
        fut: asyncio.Future[object] = loop.create_future()
        entry = (loop, fut, APPENDED)
        with self._lock:
            self._followers.setdefault(replica_id, set()).add(entry)
        fut.add_done_callback(lambda _f: self._forget_follower(replica_id, entry))
        return fut

    def _forget_follower(self, replica_id: int, entry: _Entry) -> None:
        with self._lock:
            waiters = self._followers.get(replica_id)
            if waiters is not None:
                waiters.discard(entry)
                if not waiters:
                    del self._followers[replica_id]

    def position(self) -> int:
        """Where the journal of notified partitions ends now (``changes_since``)."""
        with self._lock:
            return self._journal_start + len(self._journal)

    def changes_since(self, position: int) -> tuple[set[tuple[str, int]] | None, int]:
        """The partitions notified with followers named since ``position`` (None
        when the journal no longer goes back that far: look at every one),
        and the position now."""
        with self._lock:
            end = self._journal_start + len(self._journal)
            if position < self._journal_start:
                return None, end
            since = self._journal[position - self._journal_start:]
        return set(since), end  # (made outside the lock every append takes)

    def notify(self, topic: str, partition: int, events: int = ANY,
               followers: Collection[int] = ()) -> None:
        """``followers``: the brokers that replicate the partition from this
        leader: the partition is journalled for ``changes_since``, and an
        APPENDED event wakes their ``wait_follower`` (``events`` 0: journalled
        alone)."""
        with self._lock:
            if followers:
                journal = self._journal
                journal.append((topic, partition))
                if len(journal) > JOURNAL_KEPT:
                    dropped = len(journal) // 2
                    del journal[:dropped]
                    self._journal_start += dropped
            waiting = self._waiters.get((topic, partition))
            due = [(loop, fut) for loop, fut, wanted in waiting if wanted & events] if waiting else []
            if followers and events & APPENDED and self._followers:
                for replica_id in followers:
                    as_follower = self._followers.get(replica_id)
                    if as_follower:
                        due += [(loop, fut) for loop, fut, _ in as_follower]
        if not due:
            return
        resolve_on_their_loops((loop, fut, None) for loop, fut in due)


_T = TypeVar("_T")


def resolve_on_their_loops(
        answers: Iterable[tuple[asyncio.AbstractEventLoop, asyncio.Future[_T], _T]]) -> None:
    """Each future's result set on its own event loop (they belong to processor
    threads): one wake-up per loop, not one per future, and a plain call_soon on
    the calling thread's own loop. Used for fetches woken by an append and for
    acks=all produces answered by the high watermark (replication/leader.py)."""
    by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[_T], _T]]] = {}
    for loop, fut, value in answers:
        by_loop.setdefault(loop, []).append((fut, value))
    here = asyncio_events._get_running_loop()
    for loop, results in by_loop.items():
        try:
            if loop is here:
                loop.call_soon(_resolve, results)
            else:
                loop.call_soon_threadsafe(_resolve, results)
        except RuntimeError:  # that loop is closed: its connections are gone
            pass


def _resolve(results: list[tuple[asyncio.Future[_T], _T]]) -> None:
    for fut, value in results:
        if not fut.done():
            fut.set_result(value)
