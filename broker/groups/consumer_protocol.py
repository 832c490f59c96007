"""The few bytes of the consumer embedded protocol the coordinator must read.

A group with protocol_type "consumer" carries, per member, a
ConsumerProtocolSubscription: int16 version, then topics (int32 count of
int16-length strings), user_data, owned partitions (v1+), ... Only the topic
list matters here: OffsetDelete must refuse (GROUP_SUBSCRIBED_TO_TOPIC) to
delete offsets of topics the group actively consumes, and offset expiry keeps
offsets of subscribed topics. The topics come first in every version, so a
version newer than we know still parses. The format is not flexible.
"""
from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from samsa.protocol.errors import ProtocolError

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscription_topics(metadata: bytes) -> list[str]:
    """Topics of a consumer subscription; ProtocolError when it is not one."""
    buf = memoryview(metadata)
    if len(buf) < 6:
        raise ProtocolError("consumer subscription shorter than its header")
    version, count = struct.unpack_from(">hi", buf, 0)
    if version < 0:
        raise ProtocolError(f"bad consumer subscription version {version}")
    if count < 0 or count > len(buf):
        raise ProtocolError(f"bad topic count {count}")
    pos = 6
    topics = []
    for _ in range(count):
        if pos + 2 > len(buf):
            raise ProtocolError("truncated topic name", pos)
        (n,) = struct.unpack_from(">h", buf, pos)
        pos += 2
        if n < 0 or pos + n > len(buf):
            raise ProtocolError("bad topic name length", pos)
        try:
            topics.append(bytes(buf[pos:pos + n]).decode("utf-8"))
        except UnicodeDecodeError:
            raise ProtocolError("topic name is not UTF-8", pos) from None
        pos += n
    return topics


def assignment_partitions(assignment: bytes) -> dict[str, list[int]]:
    """Topic -> partitions of a ConsumerProtocolAssignment (int16 version, then
    topics: int16-length name and an int32 array of partitions, in every
    version); ProtocolError when it is not one. Empty bytes: no assignment."""
    buf = memoryview(assignment)
    if len(buf) == 0:
        return {}
    if len(buf) < 6:
        raise ProtocolError("consumer assignment shorter than its header")
    version, count = struct.unpack_from(">hi", buf, 0)
    if version < 0 or count < 0 or count > len(buf):
        raise ProtocolError(f"bad consumer assignment (version {version}, {count} topics)")
    pos = 6
    out: dict[str, list[int]] = {}
    try:
        for _ in range(count):
            (n,) = struct.unpack_from(">h", buf, pos)
            pos += 2
            if n < 0 or pos + n > len(buf):
                raise ProtocolError("bad topic name length", pos)
            topic = bytes(buf[pos:pos + n]).decode("utf-8")
            pos += n
            (k,) = struct.unpack_from(">i", buf, pos)
            pos += 4
            if k < 0 or pos + 4 * k > len(buf):
                raise ProtocolError("bad partition count", pos)
            out[topic] = list(struct.unpack_from(f">{k}i", buf, pos))
            pos += 4 * k
    except (struct.error, UnicodeDecodeError) as e:
        raise ProtocolError(f"truncated consumer assignment: {e}", pos) from None
    return out


def encode_subscription(topics: list[str], user_data: bytes | None = None) -> bytes:
    """A version-0 subscription (what old consumers send); for tests and tools."""
    out = bytearray(struct.pack(">hi", 0, len(topics)))
    for t in topics:
        b = t.encode("utf-8")
        out += struct.pack(">h", len(b)) + b
    if user_data is None:
        out += struct.pack(">i", -1)
    else:
        out += struct.pack(">i", len(user_data)) + user_data
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes):
        self.buf = memoryview(data)
        self.pos = 0

    def take(self, fmt: str) -> int:
        try:
            (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        except struct.error:
            raise ProtocolError("truncated consumer protocol message", self.pos) from None
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str | None:
        n = self.take(">h")
        if n < 0:
            return None
        if self.pos + n > len(self.buf):
            raise ProtocolError("bad string length", self.pos)
        try:
            out = bytes(self.buf[self.pos:self.pos + n]).decode("utf-8")
        except UnicodeDecodeError:
            raise ProtocolError("string is not UTF-8", self.pos) from None
        self.pos += n
        return out

    def skip_bytes(self) -> None:
        n = self.take(">i")
        if n > 0:
            self.pos += n

    def done(self) -> bool:
        return self.pos >= len(self.buf)


class Subscription(NamedTuple):
    version: int
    topics: list[str]
    owned: dict[str, list[int]]  # v1+: what the member holds as it joins
    rack_id: str | None  # v3+


def parse_subscription(metadata: bytes) -> Subscription:
    """A ConsumerProtocolSubscription in full (what a classic member in a
    KIP-848 group brings: its topics, the partitions it still owns, its rack);
    ProtocolError when it is not one. Fields of versions newer than the
    bytes carry are left empty."""
    r = _Reader(metadata)
    version = r.take(">h")
    if version < 0:
        raise ProtocolError(f"bad consumer subscription version {version}")
    topics = [t or "" for t in (r.string() for _ in range(max(r.take(">i"), 0)))]
    owned: dict[str, list[int]] = {}
    rack: str | None = None
    if not r.done():
        r.skip_bytes()  # user data
    if version >= 1 and not r.done():
        for _ in range(max(r.take(">i"), 0)):
            name = r.string() or ""
            owned[name] = [r.take(">i") for _ in range(max(r.take(">i"), 0))]
    if version >= 2 and not r.done():
        r.take(">i")  # the generation the member last had
    if version >= 3 and not r.done():
        rack = r.string()
    return Subscription(version, topics, owned, rack)


def encode_assignment(partitions: Mapping[str, Iterable[int]], version: int = 0) -> bytes:
    """A ConsumerProtocolAssignment (no user data) in the member's version
    (the layout is the same in every version)."""
    out = bytearray(struct.pack(">hi", max(version, 0), len(partitions)))
    for topic in sorted(partitions):
        b = topic.encode("utf-8")
        ps = sorted(partitions[topic])
        out += struct.pack(">h", len(b)) + b + struct.pack(f">i{len(ps)}i", len(ps), *ps)
    out += struct.pack(">i", -1)
    return bytes(out)
