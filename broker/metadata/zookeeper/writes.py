"""ZooKeeper as the controller and the consumer registry use it: single
znodes (``Znodes``) and, for the controller, watches and the conditional
multi-operation writes (``ControllerZooKeeper``), behind interfaces rather
than the raw kazoo client.

Every write the controller makes after taking office is one ZooKeeper
transaction that first checks the version of ``/controller_epoch``
(``commit_fenced``): a controller replaced without noticing cannot overwrite
its successor's decisions. ``ZooKeeperWrites`` implements both interfaces
over a kazoo client (the broker's store's, or any other).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from itertools import islice
from typing import Callable, Iterable, Protocol, Sequence, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError
from kazoo.protocol.states import ZnodeStat

from .. import zk_layout as z
from .multi_read import read_many


WRITES_PER_REQUEST = 100  # fenced transactions to a ZooKeeper multi
# Of those multis, sent and not yet answered. A multi's answer took about
# 300 ms on a busy 3-broker cluster (its watch events go out to every broker
# first): with 8 in flight 10,000 decisions took 4.1 s to write there, all at
# once 1.2-1.7 s; alone on ZooKeeper 30,000 took 2.5 s with 8, 2.2 s with 32,
# 1.8 s all at once. 64 keep the server's pipeline full and still bound what
# the session's other requests queue behind.
REQUESTS_IN_FLIGHT = 64


class NotControllerError(Exception):
    """This broker's term as controller has ended (a newer epoch exists)."""


@dataclass(frozen=True)
class SetData:
    """Write ``data`` to ``path`` if its version is still ``version``."""
    path: str
    data: bytes
    version: int


@dataclass(frozen=True)
class Create:
    """Create ``path`` with ``data``."""
    path: str
    data: bytes


@dataclass(frozen=True)
class ControllerClaim:
    """What standing for controller came to: ``won`` with the epoch znode's
    new version, or lost, ``taken`` when another broker holds /controller
    (its watch says when it goes) rather than a znode having moved meanwhile
    (look again)."""
    won: bool
    taken: bool = False
    epoch_version: int = -1


class Znodes(Protocol):
    """Single znodes, as kazoo reads and writes them (its exceptions too)."""

    def get(self, path: str) -> tuple[bytes, ZnodeStat]: ...

    def get_children(self, path: str) -> list[str]: ...

    def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False,
               makepath: bool = False) -> str: ...

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat: ...

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None: ...

    def session_id(self) -> int | None:
        """This client's ZooKeeper session (None: not connected); an ephemeral
        znode's ``ephemeralOwner`` is the session that holds it."""
        ...


class ControllerZooKeeper(Znodes, Protocol):
    """What the controller needs: znodes, watches, and its fenced writes."""

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """Each znode's data and stat (None: no such znode), read in a few
        requests (multi_read.py) rather than one round trip each."""
        ...

    def watch_data(self, path: str,
                   callback: Callable[[bytes | None, ZnodeStat | None], bool | None]) -> None:
        """``callback(data, stat)`` now and on every change, until it returns False."""
        ...

    def watch_children(self, path: str, callback: Callable[[list[str]], bool | None]) -> None:
        """``callback(children)`` now and on every change, until it returns False."""
        ...

    def claim_controller(self, controller: bytes, held_version: int | None,
                         epoch: bytes, epoch_version: int | None) -> ControllerClaim: ...

    def commit_fenced(self, epoch_version: int, writes: Sequence[SetData | Create]) -> list[int]:
        ...

    def commit_fenced_each(self, epoch_version: int, transactions: Iterable[Sequence[SetData | Create]],
                           together: int = WRITES_PER_REQUEST,
                           in_flight: int = REQUESTS_IN_FLIGHT) -> list[list[int] | Exception]:
        """Per transaction taken, its versions or its error; once refused for
        the epoch, no more are taken (the answer is shorter): ZooKeeperWrites'."""
        ...

    def create_each(self, paths: Sequence[str]) -> list[Exception | None]: ...

    def delete_each(self, paths: Sequence[str]) -> None:
        """Each znode of ``paths`` deleted (in one pipeline); one already gone is fine."""
        ...

    def connection_cpu_s(self) -> float | None:
        """CPU seconds the client's connection thread has used so far (None:
        not known), for the controller's log of a long write."""
        ...


Writing = Callable[[Sequence[str]], None]
"""Told of the znodes a fenced write is about to write, before it goes."""
Written = Callable[[Sequence[tuple[str, bytes, ZnodeStat]], Sequence[str]], None]
"""Told of fenced writes committed (each znode's path, data and stat after the
write), of all the paths ``Writing`` was told of (each as often)."""


class ZooKeeperWrites:
    """``Znodes`` and ``ControllerZooKeeper`` over a kazoo client. ``written``
    is told of the fenced SetData ZooKeeper committed, once a call's writes
    are all answered (the store hands the controller's partition states to
    its own snapshot: state_watch.py's ``written``), and ``writing`` of each
    transaction's znodes before it goes (so that the watch does not read
    back what this session writes: state_watch.py's ``writing``)."""

    def __init__(self, client: KazooClient, written: Written | None = None,
                 writing: Writing | None = None) -> None:
        self.client = client
        self._written = written
        self._writing = writing

    # ------------------------------------------------------------ znodes

    def get(self, path: str) -> tuple[bytes, ZnodeStat]:
        return self.client.get(path)

    def get_children(self, path: str) -> list[str]:
        return self.client.get_children(path)

    def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        return read_many(self.client, paths)

    def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False,
               makepath: bool = False) -> str:
        return self.client.create(path, value, ephemeral=ephemeral, makepath=makepath)

    def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return self.client.set(path, value, version=version)

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> None:
        self.client.delete(path, version=version, recursive=recursive)

    def session_id(self) -> int | None:
        session = self.client.client_id
        return None if session is None else session[0]

    # ------------------------------------------------------------ watches

    def watch_data(self, path: str,
                   callback: Callable[[bytes | None, ZnodeStat | None], bool | None]) -> None:
        self.client.DataWatch(path, callback)

    def watch_children(self, path: str, callback: Callable[[list[str]], bool | None]) -> None:
        self.client.ChildrenWatch(path, callback)

    # ------------------------------------------------------------ transactions

    def transaction(self):
        """A kazoo transaction: the one place the writes below open one."""
        return self.client.transaction()

    def claim_controller(self, controller: bytes, held_version: int | None,
                         epoch: bytes, epoch_version: int | None) -> ControllerClaim:
        """/controller (created ephemeral, or checked to be still the one
        held at ``held_version``) and the epoch bump of /controller_epoch
        (created, or set from ``epoch_version``), in one transaction, as
        Kafka registers its controller: a broker never holds office at an
        epoch it bumped without holding /controller."""
        txn = self.transaction()
        if held_version is None:
            txn.create(z.CONTROLLER, controller, ephemeral=True)
        else:
            txn.check(z.CONTROLLER, held_version)
        if epoch_version is None:
            txn.create(z.CONTROLLER_EPOCH, epoch)
        else:
            txn.set_data(z.CONTROLLER_EPOCH, epoch, epoch_version)
        results = txn.commit()
        failed = [r for r in results if isinstance(r, Exception)
                  and not isinstance(r, RolledBackError)]
        if failed:
            return ControllerClaim(False, taken=held_version is None
                                   and isinstance(results[0], NodeExistsError))
        epoch_result = results[1]
        return ControllerClaim(True, epoch_version=(epoch_result.version if isinstance(
            epoch_result, ZnodeStat) else 0))

    def commit_fenced(self, epoch_version: int, writes: Sequence[SetData | Create]) -> list[int]:
        """``writes`` in one transaction that holds only while
        /controller_epoch is at ``epoch_version``; the znodes' versions after
        it, in order.
        NotControllerError when the epoch moved (we were replaced); else a
        failed write raises its error (a version conflict: BadVersionError)."""
        outcome = self.commit_fenced_each(epoch_version, [writes])[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def commit_fenced_each(self, epoch_version: int, transactions: Iterable[Sequence[SetData | Create]],
                           together: int = WRITES_PER_REQUEST,
                           in_flight: int = REQUESTS_IN_FLIGHT) -> list[list[int] | Exception]:
        """Each of ``transactions`` as ``commit_fenced`` commits one, per
        transaction its versions or its error. Up to ``together`` of them go in
        one ZooKeeper transaction (one request and one log sync for all: kazoo
        spends about a millisecond per request, so thousands of partitions'
        decisions one request each took seconds), ``in_flight`` requests
        on their way at a time: the next goes as the oldest is answered, its
        transactions taken from ``transactions`` only then (a generator
        deciding them as it goes keeps ZooKeeper busy meanwhile). Sending
        them all at once queued every other request of the session (the
        broker's own state reads, its ISR writes) behind 300 of them at
        30,000 partitions; enough in flight keep ZooKeeper as busy (REQUESTS_IN_FLIGHT).

        A group refused as a whole names the operation that failed (ZooKeeper
        answers the others RolledBackError): that member gets the error, and
        the rest of the group is sent again together, as many rounds as the
        group has conflicts (a leader's ISR change on one partition does not
        cost its 99 neighbours a request each). Refused for the epoch (a newer
        controller), nothing more is sent and nothing more is taken from
        ``transactions`` (a generator is not run on to decide the rest, for
        nothing: at 30,000 partitions a replaced controller spent its CPU
        deciding thousands of partitions it could no longer write): every
        transaction taken and not yet answered gets NotControllerError, and
        the answer ends with the last one taken."""
        fresh = iter(transactions)
        taken: list[Sequence[SetData | Create]] = []  # from ``fresh`` so far
        out: list[list[int] | Exception] = []
        pending: deque[list[int]] = deque()  # groups to send again
        sent: deque[tuple[list[int], object]] = deque()
        committed: list[tuple[str, bytes, ZnodeStat]] = []  # SetData, for ``written``
        attempted: list[str] = []  # every path told to ``writing``, as often
        try:
            fenced = False
            while True:
                while len(sent) < max(1, in_flight) and not fenced:
                    if pending:
                        group = pending.popleft()
                    else:
                        # The next ones are taken (the caller may be deciding them
                        # as they are asked for) only when there is room to send.
                        batch = list(islice(fresh, together))
                        if not batch:
                            break
                        group = list(range(len(taken), len(taken) + len(batch)))
                        taken += batch
                        out += [NotControllerError()] * len(batch)
                    paths = [w.path for i in group for w in taken[i]]
                    if self._writing is not None:
                        self._writing(paths)
                    attempted += paths
                    txn = self.transaction()
                    txn.check(z.CONTROLLER_EPOCH, epoch_version)
                    for write in (w for i in group for w in taken[i]):
                        if isinstance(write, SetData):
                            txn.set_data(write.path, write.data, write.version)
                        else:
                            txn.create(write.path, write.data)
                    sent.append((group, txn.commit_async()))
                if not sent:
                    break
                group, result = sent.popleft()
                results = result.get()  # type: ignore[attr-defined]
                outcome = _fenced_outcome([w for i in group for w in taken[i]], results)
                if not isinstance(outcome, Exception):
                    at = 0
                    for i in group:
                        out[i] = outcome[at:at + len(taken[i])]
                        at += len(taken[i])
                    committed += [(w.path, w.data, stat) for w, stat in zip(
                        (w for i in group for w in taken[i]), results[1:])
                        if isinstance(w, SetData) and isinstance(stat, ZnodeStat)]
                elif isinstance(outcome, NotControllerError):
                    fenced = True  # nothing more is sent; the rest answer NotControllerError
                    pending.clear()
                elif len(group) == 1:
                    out[group[0]] = outcome
                else:
                    culprit = _failed_member(group, taken, results)
                    if culprit is None:  # not told which: each on its own
                        pending.extend([i] for i in group)
                    else:
                        out[culprit] = outcome
                        pending.append([i for i in group if i != culprit])
        finally:
            # Told once all are answered (or the call failed): handing them
            # over on the way (a snapshot copy each time) held up the next
            # requests (a 30,000-partition take-over's writes cost the
            # controller's thread 0.5 s more CPU with a thousand at a time).
            if attempted and self._written is not None:
                self._written(committed, attempted)
        return out

    def create_each(self, paths: Sequence[str]) -> list[Exception | None]:
        """Each empty znode of ``paths`` created (in one pipeline); per path
        None, or the error (NodeExistsError, NoNodeError: its parent is gone)."""
        pending = [self.client.create_async(path, b"") for path in paths]
        out: list[Exception | None] = []
        for result in pending:
            try:
                result.get()
                out.append(None)
            except (NodeExistsError, NoNodeError) as e:
                out.append(e)
        return out

    def connection_cpu_s(self) -> float | None:
        # kazoo's connection loop runs on the thread its handler spawned
        thread = getattr(getattr(self.client, "_connection", None), "_connection_routine", None)
        ident = getattr(thread, "ident", None)
        if ident is None:
            return None
        try:
            return time.clock_gettime(time.pthread_getcpuclockid(ident))
        except (OSError, AttributeError):  # the thread ended; or not Linux
            return None

    def delete_each(self, paths: Sequence[str]) -> None:
        pending = [self.client.delete_async(path) for path in paths]
        for result in pending:
            try:
                result.get()
            except NoNodeError:
                pass


def _fenced_outcome(writes: Sequence[SetData | Create], results: list[object]) -> list[int] | Exception:
    # The first operation checks our epoch: failing it means we were replaced.
    if results and isinstance(results[0], BadVersionError):
        return NotControllerError()
    # A failed transaction reports RolledBackError for the operations before
    # the one that failed and RuntimeInconsistency for those after it: the
    # first other than RolledBackError is the error (a version conflict, say).
    failed = [r for r in results[1:] if isinstance(r, Exception)]
    for r in failed:
        if not isinstance(r, RolledBackError):
            return r
    if failed:
        return failed[0]
    return [_version_after(write, result) for write, result in zip(writes, results[1:])]


def _failed_member(group: Sequence[int], transactions: Sequence[Sequence[SetData | Create]],
                   results: list[object]) -> int | None:
    """Which of ``group``'s transactions holds the operation a refused
    ZooKeeper transaction failed on (after the epoch check: ``results[0]``)."""
    failed = next((at for at, r in enumerate(results[1:])
                   if isinstance(r, Exception) and not isinstance(r, RolledBackError)), None)
    if failed is None:
        return None
    for i in group:
        if failed < len(transactions[i]):
            return i
        failed -= len(transactions[i])
    return None


def _version_after(write: SetData | Create, result: object) -> int:
    if isinstance(write, Create):
        return 0
    return result.version if isinstance(result, ZnodeStat) else write.version + 1


T = TypeVar("T")


def over_kazoo(zk: KazooClient | T) -> ZooKeeperWrites | T:
    """``zk`` as the interfaces: a raw kazoo client (a tool's, a test's) is
    wrapped, anything else is taken to implement them."""
    return ZooKeeperWrites(zk) if isinstance(zk, KazooClient) else zk
