"""``samsa dump-log``: print segment files exactly as Kafka's ``kafka-dump-log`` does.

Usage: ``--files A.log,B.index[,...] [--print-data-log] [--deep-iteration]``.
``.log`` files print one line per batch (v2) or top-level message (v0/v1), and
with ``--deep-iteration`` / ``--print-data-log`` one ``| ...`` line per record;
``.index`` prints ``offset: X position: Y``; ``.timeindex`` prints
``timestamp: T offset: O``; ``.snapshot`` prints producer state; ``.txnindex``
prints one ``version: V producerId: P firstOffset: F lastOffset: L
lastStableOffset: S`` line per aborted transaction. Control batches (transaction
markers) print ``isControl: true`` and, deep, ``endTxnMarker: COMMIT
coordinatorEpoch: N``. A batch whose
CRC does not match prints ``isvalid: false`` and the walk goes on with the next
one; bytes that cannot be a batch at all end the walk with Kafka's
"Found N invalid bytes at the end of" line.

``samsa dump-log`` calls ``main(argv)`` (tools/cli.py).
"""
from __future__ import annotations

import argparse
import os
import struct
import sys
from collections.abc import Iterator

from samsa.protocol.errors import ProtocolError
from samsa.protocol.records import (BatchHeader, LegacyMessage, Record, expand_wrapper,
                                    iter_message_set, iter_records, parse_control_record)
from samsa.storage.entries import EntryScanner, entry_is_valid
from samsa.storage.index import OFFSET_ENTRY, TIME_ENTRY
from samsa.storage.producer_state import decode_snapshot
from samsa.storage.txn_index import decode_entries

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
INT32_MAX = 0x7FFFFFFF


def _b(v: bool) -> str:
    return "true" if v else "false"


def _ts_type_name(magic: int, attributes: int) -> str:
    if magic == 0:
        return "NoTimestampType"
    return "LogAppendTime" if attributes & 0x08 else "CreateTime"


def _start_offset(path: str) -> int:
    stem = os.path.basename(path).split(".")[0]
    if not stem.isdigit():
        raise ValueError(f"{path}: not a segment file (its name must be its base offset, "
                         f"e.g. 00000000000000000000.log)")
    return int(stem)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="samsa dump-log",
        description="This tool helps to parse a log file and dump its contents to the console, "
                    "useful for debugging a seemingly corrupt log segment.")
    parser.add_argument("--files", required=True,
                        help="REQUIRED: The comma separated list of data and index log files to be dumped.")
    parser.add_argument("--print-data-log", action="store_true",
                        help="If set, printing the messages content when dumping data logs.")
    parser.add_argument("--deep-iteration", action="store_true",
                        help="If set, uses deep instead of shallow iteration.")
    parser.add_argument("--verify-index-only", action="store_true")
    parser.add_argument("--index-sanity-check", action="store_true")
    parser.add_argument("--max-message-size", type=int, default=5 * 1024 * 1024)
    parser.add_argument("--max-bytes", type=int, default=INT32_MAX)
    parser.add_argument("--skip-record-metadata", action="store_true")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    out = sys.stdout
    deep = args.deep_iteration or args.print_data_log
    non_consecutive: dict[str, list[tuple[int, int]]] = {}
    failed = False
    for name in [f for f in args.files.split(",") if f]:
        print(f"Dumping {name}", file=out)
        base = os.path.basename(name)
        suffix = base[base.rfind("."):] if "." in base else ""
        try:
            if suffix == ".log":
                _dump_log(name, args.print_data_log, deep, args.skip_record_metadata,
                          args.max_bytes, non_consecutive, out)
            elif suffix == ".index":
                _dump_index(name, args.verify_index_only, out)
            elif suffix == ".timeindex":
                _dump_time_index(name, args.verify_index_only, out)
            elif suffix == ".snapshot":
                _dump_snapshot(name, out)
            elif suffix == ".txnindex":
                _dump_txn_index(name, out)
            else:
                print(f"Ignoring unknown file {name}", file=sys.stderr)
        except BrokenPipeError:
            raise  # the reader went away (| head): the command line ends quietly
        except OSError as exc:
            print(f"Could not read {name}: {exc.strerror or exc}", file=sys.stderr)
            failed = True
        except ValueError as exc:
            print(f"Could not dump {exc}", file=sys.stderr)
            failed = True
    for fname, pairs in non_consecutive.items():
        print(f"Non-consecutive offsets in {fname}", file=sys.stderr)
        for a, b in pairs:
            print(f"  {a} is followed by {b}", file=sys.stderr)
    out.flush()
    return 1 if failed else 0


# ----------------------------------------------------------------------------- .log
def _dump_log(path, print_contents, deep, skip_meta, max_bytes, non_consecutive, out) -> None:
    print(f"Log starting offset: {_start_offset(path)}", file=out)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        end = min(size, max_bytes)
        scanner = EntryScanner(f.fileno(), 0, end, keep_data=True)
        last_offset = -1
        for e in scanner:
            data = scanner.last_data
            valid = entry_is_valid(data, 0, e)
            print(_batch_line(e, data, valid), file=out)
            if not deep:
                continue
            for line, offset in _record_lines(e, data, print_contents, skip_meta):
                if offset is not None:
                    if last_offset != -1 and offset != last_offset + 1:
                        non_consecutive.setdefault(os.path.abspath(path), []).append(
                            (last_offset, offset))
                    last_offset = offset
                print(line, file=out)
        trailing = size - scanner.valid_end
        if trailing > 0 and max_bytes == INT32_MAX:
            print(f"Found {trailing} invalid bytes at the end of {os.path.basename(path)}", file=out)


def _batch_line(e, data, valid: bool) -> str:
    if e.magic == 2:
        h = e.header
        horizon = (f"OptionalLong[{h.base_timestamp}]" if h.attributes & 0x40
                   else "OptionalLong.empty")
        head = (f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
                f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
                f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
                f"partitionLeaderEpoch: {h.partition_leader_epoch} "
                f"isTransactional: {_b(h.is_transactional)} isControl: {_b(h.is_control)} "
                f"deleteHorizonMs: {horizon}")
        attrs, crc = h.attributes, h.crc
    else:
        head = f"offset: {e.last_offset}"
        (crc,) = struct.unpack_from(">I", data, 12)
        attrs = data[17]
    return (f"{head} position: {e.position} {_ts_type_name(e.magic, attrs)}: {e.max_timestamp} "
            f"size: {e.size} magic: {e.magic} compresscodec: {CODEC_NAMES.get(attrs & 7, 'unknown')} "
            f"crc: {crc} isvalid: {_b(valid)}")


def _text(b) -> str:
    if isinstance(b, str):
        return b
    return bytes(b).decode("utf-8", "replace")


def _record_lines(e, data, print_contents: bool, skip_meta: bool) -> Iterator[tuple[str, int]]:
    """(line, offset) per record; a batch that cannot be decoded yields nothing."""
    # decoded here, whole, so that a batch that cannot be decoded yields no line at all
    lines: Iterator[tuple[str, int]]
    try:
        if e.magic == 2:
            lines = _v2_lines(e.header, list(iter_records(bytes(data))), print_contents,
                              skip_meta)
        else:
            messages: list[LegacyMessage] = []
            for m in iter_message_set(bytes(data), verify_crc=False):
                messages.extend(expand_wrapper(m, verify_crc=False) if m.is_wrapper else [m])
            lines = _legacy_lines(messages, print_contents, skip_meta)
    except (ProtocolError, ValueError, struct.error):
        return
    yield from lines


def _v2_lines(h: BatchHeader, records: list[Record], print_contents: bool,
              skip_meta: bool) -> Iterator[tuple[str, int]]:
    ts_type = _ts_type_name(2, h.attributes)
    for r in records:
        offset = r.absolute_offset(h.base_offset)
        prefix = "| "
        parts = []
        if not skip_meta:
            seq = -1 if h.base_sequence < 0 else (h.base_sequence + (offset - h.base_offset)) & INT32_MAX
            keys = ",".join(_text(k) for k, _ in (r.headers or ()))
            parts.append(f"{prefix}offset: {offset} {ts_type}: {r.timestamp} "
                         f"keySize: {-1 if r.key is None else len(r.key)} "
                         f"valueSize: {-1 if r.value is None else len(r.value)} "
                         f"sequence: {seq} headerKeys: [{keys}]")
            prefix = " "
            if h.is_control:
                parts.append(_control_text(r))
        if print_contents and not h.is_control:
            if r.key is not None:
                parts.append(f"{prefix}key: {_text(r.key)}")
                prefix = " "
            if r.value is not None:
                parts.append(f" payload: {_text(r.value)}")
        yield "".join(parts), offset


def _legacy_lines(messages: list[LegacyMessage], print_contents: bool,
                  skip_meta: bool) -> Iterator[tuple[str, int]]:
    for r in messages:
        prefix = "| "
        parts = []
        ts_type = "NoTimestampType" if r.magic == 0 else (
            "LogAppendTime" if r.timestamp_type == 1 else "CreateTime")
        if not skip_meta:
            parts.append(f"{prefix}offset: {r.offset} {ts_type}: {r.timestamp} "
                         f"keySize: {-1 if r.key is None else len(r.key)} "
                         f"valueSize: {-1 if r.value is None else len(r.value)} "
                         f"isValid: true crc: {r.crc}}}")
            prefix = " "
        if print_contents:
            if r.key is not None:
                parts.append(f"{prefix}key: {_text(r.key)}")
                prefix = " "
            if r.value is not None:
                parts.append(f" payload: {_text(r.value)}")
        yield "".join(parts), r.offset


def _control_text(r) -> str:
    try:
        ctype, coord = parse_control_record(r.key, r.value)
    except (ProtocolError, ValueError, struct.error, TypeError):
        return " controlType: UNKNOWN(-1)"
    if ctype in (0, 1):
        return f" endTxnMarker: {'ABORT' if ctype == 0 else 'COMMIT'} coordinatorEpoch: {coord}"
    return f" controlType: UNKNOWN({ctype})"


# ----------------------------------------------------------------------------- indexes
def _dump_index(path, verify_only, out) -> None:
    base = _start_offset(path)
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // OFFSET_ENTRY.size
    if n == 0:
        print(f"{path} is empty.", file=out)
        return
    for i in range(n):
        rel, pos = OFFSET_ENTRY.unpack_from(data, i * OFFSET_ENTRY.size)
        if rel == 0 and i > 0:
            return  # preallocated zero tail of an untrimmed index
        if not verify_only:
            print(f"offset: {base + rel} position: {pos}", file=out)


def _dump_time_index(path, verify_only, out) -> None:
    base = _start_offset(path)
    with open(path, "rb") as f:
        data = f.read()
    n = len(data) // TIME_ENTRY.size
    for i in range(n):
        ts, rel = TIME_ENTRY.unpack_from(data, i * TIME_ENTRY.size)
        if rel == 0 and i > 0:
            return
        if not verify_only:
            print(f"timestamp: {ts} offset: {base + rel}", file=out)


def _dump_snapshot(path, out) -> None:
    with open(path, "rb") as f:
        data = f.read()
    try:
        entries = decode_snapshot(data)
    except (ValueError, struct.error) as exc:
        print(f"Snapshot {path} is corrupt: {exc}", file=sys.stderr)
        return
    for e in entries:
        line = (f"producerId: {e.producer_id} producerEpoch: {e.epoch} "
                f"coordinatorEpoch: {e.coordinator_epoch} "
                f"currentTxnFirstOffset: {e.current_txn_first_offset} "
                f"lastTimestamp: {e.last_timestamp} ")
        if e.batches:
            b = e.batches[0]
            line += (f"firstSequence: {b.first_seq} lastSequence: {b.last_seq} "
                     f"lastOffset: {b.last_offset} offsetDelta: {b.last_offset - b.first_offset} "
                     f"timestamp: {b.timestamp}")
        print(line, file=out)



def _dump_txn_index(path, out) -> None:
    """kafka-dump-log's lines for a TransactionIndex: one per AbortedTxn."""
    _start_offset(path)
    with open(path, "rb") as f:
        data = f.read()
    for t in decode_entries(data):
        print(f"version: {t.version} producerId: {t.producer_id} firstOffset: {t.first_offset} "
              f"lastOffset: {t.last_offset} lastStableOffset: {t.last_stable_offset}", file=out)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
