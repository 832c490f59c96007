"""`samsa get-offsets`: kafka-get-offsets over the wire.

    samsa get-offsets --bootstrap-server H:P --topic T [--partitions 0,1] [--time -1|-2|-3|MS]

Prints ``topic:partition:offset`` per partition, as Kafka's tool does: for
``--time -1`` (the default) the log end, ``-2`` the log start, ``-3`` the
offset of the largest timestamp, or a timestamp in milliseconds (the first
offset at or after it).
"""
from __future__ import annotations

import argparse
import sys

from protocol.messages import ListOffsetsRequest, MetadataRequest

from .client import SimpleClient, error_text, run_tool

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3


def _partitions_of(client: SimpleClient, topic: str) -> list[int] | None:
    meta = client.call(3, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                          allow_auto_topic_creation=False))
    t = meta.topics[0]
    if t.error_code:
        print(f"samsa get-offsets: topic {topic}: {error_text(t.error_code)}", file=sys.stderr)
        return None
    return sorted(p.partition_index for p in t.partitions)


def _get_offsets(client: SimpleClient, args) -> int:
    available = _partitions_of(client, args.topic)
    if available is None:
        return 1
    wanted = available if args.partitions is None else args.partitions
    missing = sorted(set(wanted) - set(available))
    if missing:
        print(f"samsa get-offsets: topic {args.topic} has no partition(s) "
              f"{','.join(map(str, missing))}", file=sys.stderr)
        return 1
    L = ListOffsetsRequest
    version = client.version_for(2)
    if args.time == MAX_TIMESTAMP and version < 7:
        print("samsa get-offsets: the broker does not support --time -3 (ListOffsets v7+)",
              file=sys.stderr)
        return 1
    resp = client._call(2, version, L(replica_id=-1, isolation_level=0, topics=[
        L.ListOffsetsTopic(name=args.topic, partitions=[
            L.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1,
                                   timestamp=args.time, max_num_offsets=1)
            for p in wanted])]))
    rc = 0
    for part in sorted(resp.topics[0].partitions, key=lambda p: p.partition_index):
        if part.error_code:
            print(f"samsa get-offsets: {args.topic}:{part.partition_index}: "
                  f"{error_text(part.error_code)}", file=sys.stderr)
            rc = 1
            continue
        offset = part.offset if part.offset != -1 or args.time < 0 else ""
        print(f"{args.topic}:{part.partition_index}:{offset}")
    return rc


def _partition_list(text: str) -> list[int]:
    try:
        return sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected partition numbers like 0,1,2, got {text!r}")


def main(argv) -> int:
    p = argparse.ArgumentParser(prog="samsa get-offsets",
                                description="Offsets of a topic's partitions at a point in time.")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=_partition_list, default=None,
                   help="comma-separated partitions (default: all)")
    p.add_argument("--time", type=int, default=LATEST,
                   help="-1 latest (default), -2 earliest, -3 max timestamp, or epoch ms")
    args = p.parse_args(argv)
    return run_tool("samsa get-offsets", args.bootstrap_server,
                    lambda client: _get_offsets(client, args))
