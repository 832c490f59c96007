"""Many znodes read in few requests: ZooKeeper's multiRead (3.6+), which
kazoo does not offer, as a kazoo request.

A pipelined ``get`` per znode costs kazoo about a millisecond of Python per
request (a queue entry, a wake-up write, a send, an answer matched and a
waiting thread signalled): a controller taking office at 30,000 partitions
spent 9 s reading their states that way on a busy machine, about 0.7 s as
multiReads of READS_PER_REQUEST. multiRead sets no watches (the server
ignores the flag), so it serves reads that need none.

A server that does not know the operation (before 3.6) answers with an
error (ZooKeeper 3.8 answers an unknown one UnimplementedError, then closes
the connection; the session lives on) or an answer that does not decode: the
client then falls back to pipelined gets for the rest of its life, saying so
once, and reads again once kazoo has connected again.
"""
from __future__ import annotations

import logging
import threading
from typing import Sequence
from weakref import WeakSet

from kazoo.client import KazooClient
import struct

from kazoo.exceptions import (EXCEPTIONS, APIError, BadArgumentsError, MarshallingError,
                              NoNodeError, SystemZookeeperError, UnimplementedError)
from kazoo.protocol.serialization import GetData, MultiHeader, int_struct, read_buffer, stat_struct
from kazoo.protocol.states import ZnodeStat

log = logging.getLogger("broker.metadata.zookeeper")

READS_PER_REQUEST = 500  # a few hundred KB of answer at most, well under jute.maxbuffer
MULTI_READ = 22  # ZooKeeper's OpCode.multiRead
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

    def __init__(self, paths: Sequence[str]) -> None:
        self.paths = paths

    def serialize(self) -> bytes:
        out = bytearray()
        for path in self.paths:
            out += MultiHeader(GET_DATA, False, -1).serialize()
            out += GetData(path, None).serialize()
        out += MultiHeader(-1, True, -1).serialize()
        return bytes(out)

    def deserialize(self, data: bytes, offset: int) -> list[Found | Exception]:
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


def read_many(client: KazooClient, paths: Sequence[str],
              per_request: int = READS_PER_REQUEST) -> list[Found]:
    """Each znode's data and stat (None: no such znode), READS_PER_REQUEST to
    a request, all requests sent before the first answer is awaited. kazoo's
    errors as its ``get`` raises them (a lost connection: ConnectionLoss)."""
    if not paths:
        return []
    if client in _without_multi_read:
        return _pipelined(client, paths)
    chroot = client.chroot or ""
    batches = [paths[i:i + per_request] for i in range(0, len(paths), per_request)]
    sent = []
    for batch in batches:
        result = client.handler.async_result()
        client._call(MultiRead([(chroot + p).rstrip("/") or "/" for p in batch]), result)
        sent.append(result)
    out: list[Found] = []
    for batch, result in zip(batches, sent):
        try:
            answers = result.get()
        except _NOT_UNDERSTOOD as e:
            return out + _fall_back(client, paths[len(out):], e)
        for answer in answers:
            if isinstance(answer, Exception):
                raise answer
            out.append(answer)
    return out


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
