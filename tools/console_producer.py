"""`samsa console-producer`: kafka-console-producer over the wire.

    samsa console-producer --bootstrap-server H:P --topic T \\
        [--property parse.key=true --property key.separator=:] [--producer-property acks=all]
        [--producer.config client.properties]

The producer's properties are Kafka's: ``--producer.config FILE`` (or
``--command-config``, its name since Kafka 4.2) and then each
``--producer-property KEY=VALUE`` (``--command-property``) over it; Kafka
refuses the two names of one flag together, and so does this tool. Of them it
uses acks,
compression.type and the security keys (security.protocol, sasl.*, ssl.*: to
reach an SSL or SASL listener); others are ignored, as the Java client
ignores keys it does not know.

Reads stdin, one record per line, and sends each partition's records to that
partition's leader (as Metadata advertises it) in v2 record batches with
CreateTime timestamps.

Partitioning follows Kafka's default partitioner where it is observable:
a keyed record goes to ``murmur2(key) & 0x7fffffff % partitions``, so samsa
and the Java client put the same key in the same partition. Keyless records
are sticky per read: everything read from stdin in one go (a pasted block, a
chunk of a pipe) goes to one partition, and the next read moves on to the
next partition, round robin; typed lines thus spread one by one.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time
from dataclasses import dataclass
from typing import Callable, ClassVar, Iterator

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ProduceRequest
from samsa.protocol.model import ApiKey
from samsa.protocol.records import build_batch, codec_for_name

from samsa.client.blocking import RETRIABLE, AuthenticationError, ClientError, Cluster, error_text, run_cluster_tool
from samsa.client.properties import ClientConfigFlags, key_value_properties

PROG = "samsa console-producer"
_LAST_PRODUCE_BY_NAME = 12   # v13 names topics by id
_READ_SIZE = 512 * 1024      # one read of stdin = one request per leader at most


def murmur2(data: bytes) -> int:
    """The 32-bit MurmurHash2 (seed 0x9747b28c) of Kafka's default partitioner,
    as a signed int like Java's."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    tail = length & ~3
    for i in range(0, tail, 4):
        k = int.from_bytes(data[i:i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


class StickyPartitioner:
    """Keyless records: one partition per read of stdin, round robin across reads."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._next = random.randrange(partitions)

    def next_partition(self) -> int:
        p = self._next
        self._next = (p + 1) % self.partitions
        return p


@dataclass(frozen=True)
class LineFormat:
    """How a line becomes a record: kafka-console-producer's reader properties."""

    parse_key: bool = False
    key_separator: bytes = b"\t"
    ignore_error: bool = False
    null_marker: bytes | None = None

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "LineFormat":
        marker = props.get("null.marker")
        return cls(parse_key=props.get("parse.key", "false").lower() == "true",
                   key_separator=props.get("key.separator", "\t").encode(),
                   ignore_error=props.get("ignore.error", "false").lower() == "true",
                   null_marker=marker.encode() if marker is not None else None)

    def parse(self, line: bytes, number: int) -> tuple[bytes | None, bytes | None]:
        key: bytes | None = None
        value: bytes | None = line
        if self.parse_key:
            at = line.find(self.key_separator)
            if at >= 0:
                key, value = line[:at], line[at + len(self.key_separator):]
            elif not self.ignore_error:
                raise LineError(f"No key separator found on line number {number}: "
                                f"'{line.decode(errors='replace')}'")
        if self.null_marker is not None:
            key = None if key == self.null_marker else key
            value = None if value == self.null_marker else value
        return key, value


class LineError(Exception):
    pass


def read_chunks(fd: int) -> Iterator[list[bytes]]:
    """Complete lines of ``fd``, as many as one read returns (a line cut by a
    read waits for the next); the last line may lack its newline."""
    partial = b""
    while True:
        data = os.read(fd, _READ_SIZE)
        if not data:
            if partial:
                yield [partial.rstrip(b"\r")]
            return
        lines = (partial + data).split(b"\n")
        partial = lines.pop()
        if lines:
            yield [line[:-1] if line.endswith(b"\r") else line for line in lines]


class ProducerError(Exception):
    pass


@dataclass(frozen=True)
class RetryPolicy:
    """How long a batch meeting retriable errors (a leader moving, too few
    replicas in sync) is sent again: Kafka's producer keeps at it until
    ``delivery.timeout.ms`` (two minutes) has passed since the first send,
    waiting ``retry.backoff.ms`` doubled each time up to
    ``retry.backoff.max.ms``, with a fifth of jitter either way. A tool that
    gave up after a second failed whenever an election was under way."""

    delivery_timeout_s: float = 120.0
    backoff_s: float = 0.1
    backoff_max_s: float = 1.0

    _KEYS: ClassVar[dict[str, str]] = {"delivery.timeout.ms": "delivery_timeout_s", "retry.backoff.ms": "backoff_s",
             "retry.backoff.max.ms": "backoff_max_s"}

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "RetryPolicy":
        """Raises ValueError naming the key of a value that is not a count of ms."""
        given = {}
        for key, field in cls._KEYS.items():
            if key in props:
                text = props[key].strip()
                if not text.isdigit():
                    raise ValueError(f"{key} must be a non-negative number of ms, got {text!r}")
                given[field] = int(text) / 1000
        return cls(**given)

    def backoff(self, attempt: int) -> float:
        """The wait before send ``attempt + 1`` (0: after the first); a maximum
        below the first wait leaves the first wait constant, as in Kafka."""
        if self.backoff_max_s <= self.backoff_s:
            return self.backoff_s
        wait = min(self.backoff_max_s, self.backoff_s * 2 ** min(attempt, 32))
        return wait * random.uniform(0.8, 1.2)


class Sender:
    """Sends each partition's records to its leader, looking leaders up again
    when one moves, and fails on the first error that retrying cannot help."""

    def __init__(self, cluster: Cluster, topic: str, acks: int, codec: int,
                 retry: RetryPolicy = RetryPolicy(),
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.cluster = cluster
        self.topic = topic
        self.acks = acks
        self.codec = codec
        self.retry = retry
        self._clock, self._sleep = clock, sleep
        self.leaders = cluster.leaders(topic, auto_create=True)

    @property
    def partitions(self) -> int:
        return len(self.leaders)

    def send(self, records: dict[int, list[tuple]]) -> None:
        batches = {p: build_batch(recs, codec=self.codec) for p, recs in records.items() if recs}
        deadline = self._clock() + self.retry.delivery_timeout_s
        attempt = 0
        while True:
            failed = self._send_once(batches)
            if not failed:
                return
            final = {p: e for p, e in failed.items() if e[0] not in RETRIABLE}
            left = deadline - self._clock()
            if final or left <= 0:
                p, (code, message) = next(iter(sorted((final or failed).items())))
                raise ProducerError(f"error when sending to {self.topic}-{p}: "
                                    f"{error_text(code, message)}")
            self._sleep(min(self.retry.backoff(attempt), left))
            attempt += 1
            batches = {p: batches[p] for p in failed}
            try:
                self.leaders = self.cluster.leaders(self.topic, auto_create=True)
            except AuthenticationError:
                raise
            except ClientError:
                # Metadata unanswered for now (an election): the leaders known are
                # tried again, and a final error from them ends the send
                pass

    def _send_once(self, batches: dict[int, bytes]) -> dict[int, tuple[int, str | None]]:
        """One Produce per leader; returns {partition: (error code, message)} of the failures."""
        by_leader: dict[int, list[int]] = {}
        failed: dict[int, tuple[int, str | None]] = {}
        for p in batches:
            leader = self.leaders.get(p, -1)
            if leader < 0:
                failed[p] = (ErrorCode.LEADER_NOT_AVAILABLE, None)
            else:
                by_leader.setdefault(leader, []).append(p)
        P = ProduceRequest
        for leader, parts in by_leader.items():
            req = P(transactional_id=None, acks=self.acks, timeout_ms=30000, topic_data=[
                P.TopicProduceData(name=self.topic, partition_data=[
                    P.PartitionProduceData(index=p, records=batches[p]) for p in parts])])
            try:
                conn = self.cluster.broker(leader)
                if self.acks == 0:
                    conn.send(ApiKey.PRODUCE, req, highest=_LAST_PRODUCE_BY_NAME)
                    continue
                resp = conn.call(ApiKey.PRODUCE, req, highest=_LAST_PRODUCE_BY_NAME)
            except ClientError as e:
                # the leader went away: retried after Metadata names the next one
                self.cluster.forget(leader)
                failed.update({p: (ErrorCode.NETWORK_EXCEPTION, str(e)) for p in parts})
                continue
            for t in resp.responses:
                for r in t.partition_responses:
                    if r.error_code:
                        failed[r.index] = (r.error_code, r.error_message)
        return failed


def _produce(cluster: Cluster, args, fmt: LineFormat, acks: int, codec: int,
             retry: RetryPolicy) -> int:
    sender = Sender(cluster, args.topic, acks, codec, retry)
    sticky = StickyPartitioner(sender.partitions)
    number = 0
    for lines in read_chunks(sys.stdin.fileno()):
        now = int(time.time() * 1000)
        keyless = sticky.next_partition()
        records: dict[int, list[tuple]] = {}
        bad: LineError | None = None
        for line in lines:
            number += 1
            try:
                key, value = fmt.parse(line, number)
            except LineError as e:
                bad = e  # what came before it is still sent, as Kafka's reader does
                break
            p = keyless if key is None else partition_for_key(key, sender.partitions)
            records.setdefault(p, []).append((key, value, (), now))
        try:
            sender.send(records)
        except ProducerError as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            return 1
        if bad is not None:
            print(f"{PROG}: {bad}", file=sys.stderr)
            return 1
    return 0


_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
_CLIENT_CONFIG = ClientConfigFlags(files=("--producer.config", "--command-config"),
                                   overrides=("--producer-property", "--command-property"))


def main(argv) -> int:
    p = argparse.ArgumentParser(prog=PROG, description="Send each line of stdin as a record.")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="parse.key, key.separator, ignore.error, null.marker")
    _CLIENT_CONFIG.add_to(p, "producer", uses="acks (all|-1|1|0), compression.type, "
                          "delivery.timeout.ms, retry.backoff.ms, retry.backoff.max.ms")
    p.add_argument("--request-required-acks", choices=sorted(_ACKS))
    p.add_argument("--compression-codec", nargs="?", const="gzip",
                   help="none, gzip (the default when given without a value), snappy, lz4, zstd")
    args = p.parse_args(argv)
    try:
        fmt = LineFormat.from_properties(key_value_properties(args.property))
    except ValueError as e:
        p.error(f"--property {e}")
    client = _CLIENT_CONFIG.load(p, args)
    producer_props = client.properties  # acks, compression.type, retries; the security keys
    acks_text = args.request_required_acks or producer_props.get("acks", "all")
    if acks_text not in _ACKS:
        p.error(f"acks must be one of all, -1, 1, 0; got {acks_text!r}")
    codec_name = args.compression_codec or producer_props.get("compression.type", "none")
    try:
        codec = int(codec_for_name(codec_name))
    except ValueError:
        p.error(f"unknown compression codec {codec_name!r} (none, gzip, snappy, lz4, zstd)")
    try:
        retry = RetryPolicy.from_properties(producer_props)
    except ValueError as e:
        p.error(str(e))
    try:
        return run_cluster_tool(PROG, args.bootstrap_server,
                                lambda cluster: _produce(cluster, args, fmt, _ACKS[acks_text],
                                                         codec, retry),
                                sasl=client.sasl, tls=client.tls)
    except KeyboardInterrupt:
        return 0  # Ctrl-C ends typing, as it does for Kafka's tool
