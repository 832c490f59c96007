"""`samsa console-consumer`: kafka-console-consumer over the wire.

    samsa console-consumer --bootstrap-server H:P --topic T [--from-beginning]
        [--partition N [--offset earliest|latest|N]] [--max-messages N] [--group G]
        [--property print.key=true ...] [--timeout-ms N]
        [--consumer.config client.properties] [--consumer-property KEY=VALUE ...]

Fetches every partition (or one) from its leader and prints each record in
the console consumer's default format. Without --group it starts at the log
end (or the log start with --from-beginning). With --group it starts at the
group's committed offsets and commits where it stopped when it ends; it does
not join the group (no rebalancing with other members): its commits are
"simple" ones (generation -1, no member id), which the coordinator accepts
while the group has no active members.

The consumer's properties are Kafka's: ``--consumer.config FILE`` (or
``--command-config``, its name since Kafka 4.2) and then each
``--consumer-property KEY=VALUE`` (``--command-property``) over it. Of them
it uses group.id (as --group) and the security keys (security.protocol,
sasl.*, ssl.*: to reach an SSL or SASL listener); others are ignored, as the
Java client ignores keys it does not know.

It ends after --max-messages records, after --timeout-ms without a record,
or on Ctrl-C, and then reports "Processed a total of N messages" on stderr.
Ctrl-C takes effect between records and between fetches (within one long
poll), never inside a request; a second Ctrl-C stops at once, without a commit.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any, BinaryIO

from samsa.protocol.errors import ErrorCode, ProtocolError
from samsa.protocol.messages import FetchRequest, OffsetCommitRequest, OffsetFetchRequest
from samsa.protocol.model import ApiKey
from samsa.protocol.records import decode_batch, iter_batch_headers
from samsa.protocol.records.batch import NO_TIMESTAMP

from samsa.client.blocking import RETRIABLE, ClientError, Cluster, error_text, run_cluster_tool
from samsa.client.properties import ClientConfigFlags, key_value_properties

PROG = "samsa console-consumer"
LATEST, EARLIEST = -1, -2
_LAST_FETCH_BY_NAME = 12          # v13 names topics by id
_LAST_OFFSET_FETCH_ONE_GROUP = 7  # v8 nests groups
_PARTITION_MAX_BYTES = 1 << 20
_LEADER_ATTEMPTS = 30             # about 3 s of failed fetches before giving up


@dataclass(frozen=True)
class Formatter:
    """The console consumer's default message format: optional timestamp,
    partition, offset, headers and key columns, each followed by
    key.separator, then the value and line.separator."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool = False
    print_value: bool = True
    key_separator: bytes = b"\t"
    line_separator: bytes = b"\n"
    headers_separator: bytes = b","
    null_literal: bytes = b"null"

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "Formatter":
        def flag(name: str, default: bool = False) -> bool:
            return props.get(name, str(default)).strip().lower() == "true"
        return cls(print_timestamp=flag("print.timestamp"),
                   print_partition=flag("print.partition"), print_offset=flag("print.offset"),
                   print_headers=flag("print.headers"), print_key=flag("print.key"),
                   print_value=flag("print.value", True),
                   key_separator=props.get("key.separator", "\t").encode(),
                   line_separator=props.get("line.separator", "\n").encode(),
                   headers_separator=props.get("headers.separator", ",").encode(),
                   null_literal=props.get("null.literal", "null").encode())

    def format(self, partition: int, offset: int, timestamp_type: int, timestamp: int,
               headers, key: bytes | None, value: bytes | None) -> bytes:
        columns: list[bytes] = []
        if self.print_timestamp:
            if timestamp == NO_TIMESTAMP:
                columns.append(b"NO_TIMESTAMP")
            else:
                kind = b"LogAppendTime" if timestamp_type else b"CreateTime"
                columns.append(kind + b":" + str(timestamp).encode())
        if self.print_partition:
            columns.append(b"Partition:" + str(partition).encode())
        if self.print_offset:
            columns.append(b"Offset:" + str(offset).encode())
        if self.print_headers:
            columns.append(self.headers_separator.join(
                _text(k) + b":" + (self.null_literal if v is None else v) for k, v in headers)
                or b"NO_HEADERS")
        if self.print_key:
            columns.append(self.null_literal if key is None else key)
        if self.print_value:
            columns.append(self.null_literal if value is None else value)
        return self.key_separator.join(columns) + self.line_separator


def _bytes(b) -> bytes | None:
    return None if b is None else bytes(b)


def _text(k) -> bytes:
    return k.encode() if isinstance(k, str) else bytes(k)


class ConsumeError(Exception):
    pass


class Consumer:
    """Positions per partition of one topic, fetched from each partition's leader."""

    def __init__(self, cluster: Cluster, topic: str, reset: int) -> None:
        self.cluster = cluster
        self.topic = topic
        self.reset = reset              # where an out-of-range position goes
        self.leaders = cluster.leaders(topic)
        self.positions: dict[int, int] = {}
        self._failures = 0              # fetches in a row that found no leader to ask

    def start(self, starts: dict[int, int]) -> None:
        """Positions from offsets, where -1/-2 mean the log end/start."""
        symbolic = {(self.topic, p): at for p, at in starts.items() if at < 0}
        resolved = self.cluster.list_offsets(symbolic) if symbolic else {}
        for p, at in starts.items():
            self.positions[p] = resolved[(self.topic, p)] if at < 0 else at

    def poll(self, max_wait_ms: int) -> list[tuple]:
        """Records after the positions, from every leader once; advances the positions.
        Items: (partition, offset, timestamp type, timestamp, headers, key, value)."""
        by_leader: dict[int, list[int]] = {}
        for p in sorted(self.positions):
            by_leader.setdefault(self.leaders.get(p, -1), []).append(p)
        out: list[tuple] = []
        stale = -1 in by_leader
        # with several leaders, a long poll on one would hold up the others
        wait = max_wait_ms if len(by_leader) == 1 else min(max_wait_ms, 100)
        for leader, parts in by_leader.items():
            if leader >= 0:
                stale |= self._fetch(leader, parts, wait, out)
        if stale:
            time.sleep(0.1)
            self.leaders = self.cluster.leaders(self.topic)
        return out

    def _fetch(self, leader: int, parts: list[int], wait: int, out: list[tuple]) -> bool:
        F = FetchRequest
        req = F(replica_id=-1, max_wait_ms=wait, min_bytes=1, max_bytes=50 << 20,
                isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=[],
                rack_id="", topics=[F.FetchTopic(topic=self.topic, partitions=[
                    F.FetchPartition(partition=p, current_leader_epoch=-1,
                                     fetch_offset=self.positions[p], last_fetched_epoch=-1,
                                     log_start_offset=-1,
                                     partition_max_bytes=_PARTITION_MAX_BYTES)
                    for p in parts])])
        try:
            resp = self.cluster.broker(leader).call(ApiKey.FETCH, req, highest=_LAST_FETCH_BY_NAME)
        except ClientError as e:
            # the leader is gone or unreachable: ask Metadata (through the
            # bootstrap broker, whose failure does end the tool) who leads now,
            # for a while (an election takes seconds), not for ever
            self.cluster.forget(leader)
            self._failures += 1
            if self._failures >= _LEADER_ATTEMPTS:
                raise ConsumeError(str(e)) from None
            return True
        self._failures = 0
        if resp.error_code:
            raise ConsumeError(error_text(resp.error_code))
        stale = False
        for t in resp.responses:
            for pd in t.partitions:
                p = pd.partition_index
                if pd.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self.positions[p] = self.cluster.list_offsets({(self.topic, p): self.reset})[
                        (self.topic, p)]
                elif pd.error_code in RETRIABLE:
                    stale = True
                elif pd.error_code:
                    raise ConsumeError(f"{self.topic}-{p}: {error_text(pd.error_code)}")
                else:
                    try:
                        self._take(p, bytes(pd.records or b""), out)
                    except ProtocolError as e:
                        raise ConsumeError(f"{self.topic}-{p}: corrupt records from the broker "
                                           f"at offset {self.positions[p]}: {e}") from None
        return stale

    def _take(self, partition: int, data: bytes, out: list[tuple]) -> None:
        position = self.positions[partition]
        for pos, hdr in iter_batch_headers(data):
            if hdr.is_control or hdr.next_offset <= position:
                position = max(position, hdr.next_offset)
                continue
            for r in decode_batch(data, pos, header=hdr)[1]:
                offset = r.absolute_offset(hdr.base_offset)  # (r.offset: None when building)
                if offset >= position:  # a batch may begin before the position
                    out.append((partition, offset, hdr.timestamp_type, r.timestamp,
                                r.headers, _bytes(r.key), _bytes(r.value)))
            position = hdr.next_offset
        self.positions[partition] = position


class Group:
    """The group's committed offsets, read and written at its coordinator."""

    def __init__(self, cluster: Cluster, group_id: str, topic: str) -> None:
        self.cluster = cluster
        self.group_id = group_id
        self.topic = topic

    def committed(self, partitions: list[int]) -> dict[int, int]:
        conn = self.cluster.coordinator(self.group_id)
        O = OffsetFetchRequest
        resp = conn.call(ApiKey.OFFSET_FETCH, O(group_id=self.group_id, require_stable=False, topics=[
            O.OffsetFetchRequestTopic(name=self.topic, partition_indexes=partitions)]),
            highest=_LAST_OFFSET_FETCH_ONE_GROUP)
        if resp.error_code:
            raise ConsumeError(f"group {self.group_id}: {error_text(resp.error_code)}")
        return {p.partition_index: p.committed_offset for t in resp.topics for p in t.partitions
                if p.error_code == 0 and p.committed_offset >= 0}

    def commit(self, positions: dict[int, int]) -> None:
        conn = self.cluster.coordinator(self.group_id)
        C = OffsetCommitRequest
        resp = conn.call(ApiKey.OFFSET_COMMIT, C(group_id=self.group_id, generation_id_or_member_epoch=-1,
                              member_id="", group_instance_id=None, retention_time_ms=-1,
                              topics=[C.OffsetCommitRequestTopic(name=self.topic, partitions=[
                                  C.OffsetCommitRequestPartition(
                                      partition_index=p, committed_offset=o,
                                      committed_leader_epoch=-1, committed_metadata="")
                                  for p, o in sorted(positions.items())])]))
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise ConsumeError(f"committing offsets of group {self.group_id}: "
                                       f"{error_text(p.error_code)}")


def _starts(args, consumer: Consumer, group: Group | None) -> dict[int, int]:
    partitions = sorted(consumer.leaders)
    if args.partition is not None:
        if args.partition not in consumer.leaders:
            raise ConsumeError(f"topic {args.topic} has no partition {args.partition}")
        partitions = [args.partition]
    default = EARLIEST if args.from_beginning else LATEST
    starts = {p: default for p in partitions}
    if group is not None:
        starts.update(group.committed(partitions))
    if args.offset is not None:  # an explicit offset wins over the group's
        starts = {p: args.offset for p in partitions}
    return starts


class StopRequest:
    """Ctrl-C as a request to stop, not an exception wherever it lands.

    A KeyboardInterrupt can land between any two bytecodes: after a line went
    out on stdout but before it was counted (the report then says one record
    fewer than were printed), or inside a request/response exchange (half a
    request sent, an answer read from the socket but not yet parsed), after
    which the final commit reads another request's answer. So the first SIGINT
    only sets ``requested``, which the consume loop checks between records and
    between fetches; a second one raises KeyboardInterrupt, for a tool stuck
    on a broker that does not answer."""

    def __init__(self) -> None:
        self.requested = False
        # what signal.signal answers: the handler before ours (None: one not set from Python)
        self._previous: Callable[[int, FrameType | None], Any] | int | None = None
        self._installed = False

    def __enter__(self) -> "StopRequest":
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle)
            self._installed = True
        except ValueError:  # not the main thread: Ctrl-C cannot reach us anyway
            pass
        return self

    def __exit__(self, *exc) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous if self._previous is not None
                          else signal.default_int_handler)

    def _handle(self, signum, frame) -> None:
        if self.requested:
            raise KeyboardInterrupt
        self.requested = True


def _consume(cluster: Cluster, args, fmt: Formatter, out: BinaryIO) -> int:
    with StopRequest() as stop:
        return _consume_until(cluster, args, fmt, out, stop)


def _consume_until(cluster: Cluster, args, fmt: Formatter, out: BinaryIO,
                   stop: StopRequest) -> int:
    reset = EARLIEST if args.from_beginning or args.offset == EARLIEST else LATEST
    group = Group(cluster, args.group, args.topic) if args.group else None
    count = 0
    try:
        consumer = Consumer(cluster, args.topic, reset)
        consumer.start(_starts(args, consumer, group))
        last_data = time.monotonic()
        while not stop.requested and (args.max_messages is None or count < args.max_messages):
            wait = 500
            if args.timeout_ms is not None:
                left = args.timeout_ms / 1000 - (time.monotonic() - last_data)
                if left <= 0:
                    break
                wait = max(1, min(wait, int(left * 1000)))
            records = consumer.poll(wait)
            if records:
                last_data = time.monotonic()
            for partition, offset, ts_type, ts, headers, key, value in records:
                if stop.requested or (args.max_messages is not None
                                      and count >= args.max_messages):
                    # stop exactly after the last one printed, so a group resumes there
                    consumer.positions[partition] = min(consumer.positions[partition], offset)
                    continue
                out.write(fmt.format(partition, offset, ts_type, ts, headers, key, value))
                count += 1
            out.flush()
    except KeyboardInterrupt:
        # a second Ctrl-C: the exchange it cut short may have been anything, so
        # commit nothing rather than positions that may not match what was printed
        if group is not None:
            print(f"{PROG}: interrupted; the offsets of group {group.group_id} were not "
                  f"committed", file=sys.stderr)
        _report(count)
        return 1
    except (ConsumeError, ClientError) as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        _report(count)
        return 1
    if group is not None:
        try:
            group.commit(consumer.positions)
        except (ConsumeError, ClientError) as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            _report(count)
            return 1
        except KeyboardInterrupt:
            print(f"{PROG}: interrupted while committing the offsets of group "
                  f"{group.group_id}", file=sys.stderr)
            _report(count)
            return 1
    _report(count)
    return 0


def _report(count: int) -> None:
    print(f"Processed a total of {count} messages", file=sys.stderr)


def _offset(text: str) -> int:
    named = {"earliest": EARLIEST, "latest": LATEST}
    if text.lower() in named:
        return named[text.lower()]
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected earliest, latest or an offset, got {text!r}") from None
    if value < EARLIEST:
        raise argparse.ArgumentTypeError(f"expected earliest, latest or an offset, got {text!r}") from None
    return value


_CLIENT_CONFIG = ClientConfigFlags(files=("--consumer.config", "--command-config"),
                                   overrides=("--consumer-property", "--command-property"))


def main(argv) -> int:
    p = argparse.ArgumentParser(prog=PROG, description="Print a topic's records on stdout.")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--from-beginning", action="store_true",
                   help="start at the log start when there is no committed offset")
    p.add_argument("--partition", type=int, help="consume this partition only")
    p.add_argument("--offset", type=_offset,
                   help="earliest, latest (the default) or an offset; needs --partition")
    p.add_argument("--max-messages", type=int)
    p.add_argument("--timeout-ms", type=int,
                   help="stop when no record arrived for this long")
    p.add_argument("--group", help="start at this group's committed offsets and commit at the end")
    p.add_argument("--property", action="append", metavar="KEY=VALUE",
                   help="print.timestamp, print.key, print.partition, print.offset, "
                        "print.headers, print.value, key.separator, line.separator, null.literal")
    _CLIENT_CONFIG.add_to(p, "consumer", uses="group.id")
    args = p.parse_args(argv)
    if args.offset is not None and args.partition is None:
        p.error("the partition is required when offset is specified")
    if args.offset is not None and args.from_beginning:
        p.error("--from-beginning and --offset cannot be specified together")
    if args.max_messages is not None and args.max_messages < 0:
        p.error("--max-messages must not be negative")
    try:
        fmt = Formatter.from_properties(key_value_properties(args.property))
    except ValueError as e:
        p.error(f"--property {e}")
    client = _CLIENT_CONFIG.load(p, args)
    group_id = client.properties.get("group.id")
    if group_id is not None and args.group is not None and group_id != args.group:
        p.error("The group ids provided in different places (directly using '--group', via "
                "'--consumer-property', or via '--consumer.config') do not match. Detected "
                f"group ids: '{args.group}', '{group_id}'")
    args.group = args.group or group_id
    out = sys.stdout.buffer
    try:
        return run_cluster_tool(PROG, args.bootstrap_server,
                                lambda cluster: _consume(cluster, args, fmt, out),
                                sasl=client.sasl, tls=client.tls)
    except KeyboardInterrupt:
        _report(0)  # interrupted while connecting
        return 0
