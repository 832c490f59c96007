"""Many znodes read, and watched, in few requests: ZooKeeper's multiRead
(3.6+) and SetWatches, which kazoo does not offer, as kazoo requests.

A pipelined ``get`` per znode costs kazoo about a millisecond of Python per
request (a queue entry, a wake-up write, a send, an answer matched and a
waiting thread signalled): a controller taking office at 30,000 partitions
spent 9 s reading their states that way on a busy machine, about 0.7 s as
multiReads of READS_PER_REQUEST. multiRead sets no watches (the server
ignores the flag), so it serves reads that need none.

Watches for many znodes are set with one SetWatches request (what ZooKeeper's
own client sends after a reconnection), ``relative`` to a zxid: the server
fires at once the watch of a znode modified after it or gone (an existence
watch: of a znode that exists now), else it registers the watch. With the
zxid this client had seen before it read the znodes, that is a watch set
with the read: a change the read may have missed fires it. Relative to the
zxid the read itself was made at (``PendingReads.read_at``: a multiRead
answer's header), it does not fire for the changes the read saw either
(with pipelined gets, before ZooKeeper 3.6, only a lower bound is known: the
first znode's last modification, so the others changed may still fire and be
read twice).

A server that does not know multiRead (before 3.6) answers with an
error (ZooKeeper 3.8 answers an unknown one UnimplementedError, then closes
the connection; the session lives on) or an answer that does not decode: the
client then falls back to pipelined gets for the rest of its life, saying so
once, and reads again once kazoo has connected again.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Sequence
from weakref import WeakSet

from kazoo.client import KazooClient
import struct

from kazoo.exceptions import (EXCEPTIONS, APIError, BadArgumentsError, ConnectionLoss,
                              MarshallingError, NoNodeError, SystemZookeeperError,
                              UnimplementedError)
from kazoo.protocol.serialization import (GetData, MultiHeader, int_struct, long_struct, read_buffer,
                                          stat_struct, write_string)
from kazoo.protocol.states import WatchedEvent, ZnodeStat

log = logging.getLogger("broker.metadata.zookeeper")

READS_PER_REQUEST = 500  # a few hundred KB of answer at most, well under jute.maxbuffer
MULTI_READ = 22  # ZooKeeper's OpCode.multiRead
SET_WATCHES = 101  # ZooKeeper's OpCode.setWatches
GET_DATA = GetData.type
ERROR = -1  # a failed operation's type in a multi answer

Found = tuple[bytes, ZnodeStat] | None
"""A znode's data and stat, or None: no such znode."""

_without_multi_read: WeakSet[KazooClient] = WeakSet()  # clients whose server lacks it
_fallback_lock = threading.Lock()
# What a server that does not know multiRead may answer it with (or what
# decoding its answer as one raises); any other error is the read's own.
_NOT_UNDERSTOOD = (UnimplementedError, MarshallingError, BadArgumentsError, APIError,
                   SystemZookeeperError, ValueError, struct.error, IndexError)


class MultiRead:
    """The request on the wire: a getData (no watch) per path, in one multiRead.
    kazoo sends ``serialize()`` after its header and hands the answer to
    ``deserialize``; ``watcher`` None: kazoo registers no watch for it."""
    type = MULTI_READ
    watcher = None

    def __init__(self, paths: Sequence[str], client: KazooClient | None = None) -> None:
        self.paths = paths
        self._client = client
        # The zxid in the answer's header: the state the server read every
        # path at (it applies no write in between); 0 until answered.
        self.read_zxid = 0

    def serialize(self) -> bytes:
        out = bytearray()
        for path in self.paths:
            out += MultiHeader(GET_DATA, False, -1).serialize()
            out += GetData(path, None).serialize()
        out += MultiHeader(-1, True, -1).serialize()
        return bytes(out)

    def deserialize(self, data: bytes, offset: int) -> list[Found | Exception]:
        if self._client is not None:
            # kazoo has just taken this answer's header zxid as the latest the
            # client has seen, on this thread (connection.py's _read_response)
            self.read_zxid = int(self._client.last_zxid or 0)
        return decode_answer(data, offset, len(self.paths))


def decode_answer(data: bytes, offset: int, expected: int) -> list[Found | Exception]:
    """A multiRead answer: per operation its data and stat, None for a missing
    znode, or the error ZooKeeper gave. ValueError when it is not that (a
    server that does not know multiRead)."""
    out: list[Found | Exception] = []
    while True:
        header, offset = MultiHeader.deserialize(data, offset)
        if header.done:
            break
        if header.type == GET_DATA:
            value, offset = read_buffer(data, offset)
            stat = ZnodeStat._make(stat_struct.unpack_from(data, offset))
            offset += stat_struct.size
            out.append((value if value is not None else b"", stat))
        elif header.type == ERROR:
            code = int_struct.unpack_from(data, offset)[0]
            offset += int_struct.size
            error = EXCEPTIONS[code]()
            out.append(None if isinstance(error, NoNodeError) else error)
        else:
            raise ValueError(f"unexpected operation {header.type} in a multiRead answer")
    if len(out) != expected:
        raise ValueError(f"a multiRead answer of {len(out)} operations for {expected}")
    return out


class PendingReads:
    """Reads sent (``send_reads``), their answers not yet awaited: several
    batches can be in flight at once, each one round trip of its own.

    Once ``get`` has answered: ``read_zxids``, for each answer a zxid the
    server had reached when it made that read (a multiRead's answer header:
    the state the read was made at; a pipelined get's: the znode's last
    modification, a lower bound, or 0 for a znode not found), and
    ``read_at``, the first answer's. A session's requests are answered in
    order, so every read was made at ``read_at`` or later: a watch set
    relative to it fires for a change after the read, and not for the
    changes the read saw."""

    def __init__(self, client: KazooClient, paths: Sequence[str], per_request: int) -> None:
        self._client = client
        self._paths = paths
        self._requests: list[MultiRead] = []
        self._sent: list[object] = []
        self.read_zxids: list[int] = []
        self.read_at = 0
        if not paths or client in _without_multi_read:
            return
        chroot = client.chroot or ""
        for i in range(0, len(paths), per_request):
            request = MultiRead([(chroot + p).rstrip("/") or "/"
                                 for p in paths[i:i + per_request]], client)
            result = client.handler.async_result()
            client._call(request, result)
            self._requests.append(request)
            self._sent.append(result)

    def get(self, timeout: float | None = None) -> list[Found]:
        """As ``read_many`` answers."""
        out, zxids = self._answers(timeout)
        # (the gets' lower bounds, for what no multiRead answered)
        zxids += [0 if f is None else f[1].mzxid for f in out[len(zxids):]]
        self.read_zxids, self.read_at = zxids, (zxids[0] if zxids else 0)
        return out

    def _answers(self, timeout: float | None) -> tuple[list[Found], list[int]]:
        """The answers, and the read zxids of those a multiRead gave."""
        client, paths = self._client, self._paths
        if not self._sent:
            return _pipelined(client, paths), []
        out: list[Found] = []
        zxids: list[int] = []
        for request, result in zip(self._requests, self._sent):
            try:
                answers = result.get(timeout=timeout)  # type: ignore[attr-defined]
            except _NOT_UNDERSTOOD as e:
                return out + _fall_back(client, paths[len(out):], e), zxids
            except ConnectionLoss as e:
                # A server that refuses an operation answers so and closes the
                # connection; with more requests in flight, a write into the
                # closed connection can lose that answer (kazoo fails them all
                # as ConnectionLoss). One multiRead alone tells which it was.
                if client not in _without_multi_read and _refuses_multi_read(
                        client, self._requests[0].paths[0]):
                    return out + _fall_back(client, paths[len(out):], e), zxids
                raise
            for answer in answers:
                if isinstance(answer, Exception):
                    raise answer
                out.append(answer)
            zxids += [request.read_zxid] * len(answers)
        return out, zxids


def send_reads(client: KazooClient, paths: Sequence[str],
               per_request: int = READS_PER_REQUEST) -> PendingReads:
    """``read_many``'s requests sent; ``.get()`` awaits their answers."""
    return PendingReads(client, paths, per_request)


def read_many(client: KazooClient, paths: Sequence[str],
              per_request: int = READS_PER_REQUEST, timeout: float | None = None) -> list[Found]:
    """Each znode's data and stat (None: no such znode), READS_PER_REQUEST to
    a request, all requests sent before the first answer is awaited. kazoo's
    errors as its ``get`` raises them (a lost connection: ConnectionLoss;
    no answer within ``timeout`` s of waiting for one: KazooTimeoutError)."""
    return send_reads(client, paths, per_request).get(timeout)


def _refuses_multi_read(client: KazooClient, server_path: str) -> bool:
    """Whether the server refuses a multiRead: one, of one znode, sent alone
    once the connection is back (alone, its refusal is read before the close)."""
    def probe() -> object:
        result = client.handler.async_result()
        client._call(MultiRead([server_path], client), result)
        return result.get()
    try:
        client.retry(probe)
    except _NOT_UNDERSTOOD:
        return True
    except Exception:  # noqa: BLE001 - lost again, or anything else: no refusal seen
        return False
    return False


def _fall_back(client: KazooClient, paths: Sequence[str], why: Exception) -> list[Found]:
    with _fallback_lock:
        if client not in _without_multi_read:
            _without_multi_read.add(client)
            log.warning("ZooKeeper did not answer a multiRead (%s%s; before 3.6?): reading "
                        "znodes one request each", type(why).__name__, f": {why}" if str(why) else "")
    # The server may have closed the connection on refusing: kazoo's retry
    # waits for the next one (the session, and its watches, live on).
    return client.retry(_pipelined, client, paths)


def _pipelined(client: KazooClient, paths: Sequence[str]) -> list[Found]:
    pending = [client.get_async(path) for path in paths]
    out: list[Found] = []
    for result in pending:
        try:
            out.append(result.get())
        except NoNodeError:
            out.append(None)
    return out


class SetWatches:
    """The request on the wire: ``relative_zxid``, then the paths to set data
    watches on, existence watches on, and (none here) child watches on.

    ``watcher`` goes into kazoo's table of watches (by server path: kazoo
    delivers an event to the watchers registered for its path then) as the
    request is encoded, on kazoo's connection thread: before the request goes
    (the server may fire a watch while handling it, before its answer), and
    on the thread that empties that table when a connection is lost (from
    another thread, the table could change while kazoo goes through it)."""
    type = SET_WATCHES
    watcher = None  # (kazoo's own registration after the answer: not for this request)

    def __init__(self, relative_zxid: int, data: Sequence[str], exist: Sequence[str],
                 client: KazooClient, watcher: Callable[[WatchedEvent], None]) -> None:
        self.relative_zxid = relative_zxid
        self.data = data
        self.exist = exist
        self._client = client
        self._watcher = watcher

    def serialize(self) -> bytes:
        for path in (*self.data, *self.exist):
            self._client._data_watchers[path].add(self._watcher)
        out = bytearray(long_struct.pack(self.relative_zxid))
        for paths in (self.data, self.exist, ()):
            out += int_struct.pack(len(paths))
            for path in paths:
                out += write_string(path)
        return bytes(out)

    def deserialize(self, data: bytes, offset: int) -> None:
        return None  # the answer is its header alone


def seen_zxid(client: KazooClient) -> int:
    """The latest zxid this client has seen an answer at: a read sent after
    it sees every change up to it (ZooKeeper answers a session in order)."""
    return int(client.last_zxid or 0)


class PendingWatches:
    """A SetWatches sent (``send_watches``), its answer not yet awaited."""

    def __init__(self, result: object | None) -> None:
        self._result = result

    def get(self, timeout: float | None = None) -> None:
        if self._result is not None:
            self._result.get(timeout=timeout)  # type: ignore[attr-defined]


def send_watches(client: KazooClient, relative_zxid: int, data: Sequence[str],
                 exist: Sequence[str], watcher: Callable[[WatchedEvent], None]
                 ) -> PendingWatches:
    """``watch_many``'s request sent; ``.get()`` awaits its answer."""
    if not data and not exist:
        return PendingWatches(None)
    chroot = client.chroot or ""
    full_data = [(chroot + p).rstrip("/") or "/" for p in data]
    full_exist = [(chroot + p).rstrip("/") or "/" for p in exist]
    result = client.handler.async_result()
    client._call(SetWatches(relative_zxid, full_data, full_exist, client, watcher), result)
    return PendingWatches(result)


def watch_many(client: KazooClient, relative_zxid: int, data: Sequence[str], exist: Sequence[str],
               watcher: Callable[[WatchedEvent], None], timeout: float | None = None) -> None:
    """``watcher`` on each znode of ``data`` (fired when it changes or goes)
    and of ``exist`` (fired when it is created), in one request; a znode
    modified after ``relative_zxid`` (``exist``: one that exists now; ``data``:
    gone meanwhile) fires at once. kazoo calls it on its callback thread, as
    for its own watches, and forgets it when it has fired."""
    send_watches(client, relative_zxid, data, exist, watcher).get(timeout)
