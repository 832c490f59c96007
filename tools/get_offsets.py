"""`samsa get-offsets`: kafka-get-offsets over the wire.

    samsa get-offsets --bootstrap-server H:P --topic T [--partitions 0,1] [--time -1|-2|-3|MS]
                      [--command-config FILE]

Prints ``topic:partition:offset`` per partition, as Kafka's tool does: for
``--time -1`` (the default) the log end, ``-2`` the log start, ``-3`` the
offset of the largest timestamp, or a timestamp in milliseconds (the first
offset at or after it).
"""
from __future__ import annotations

import argparse
import sys

from samsa.protocol.model import ApiKey

from samsa.client.blocking import Cluster, run_cluster_tool
from samsa.client.properties import ClientConfigFlags

LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
_CLIENT_CONFIG = ClientConfigFlags(files=("--command-config",))  # kafka-get-offsets' flag


def _get_offsets(cluster: Cluster, args) -> int:
    """Each partition's offset from its leader (in a cluster, as Kafka's tool
    asks each leader)."""
    available = sorted(cluster.leaders(args.topic))
    wanted = available if args.partitions is None else args.partitions
    missing = sorted(set(wanted) - set(available))
    if missing:
        print(f"samsa get-offsets: topic {args.topic} has no partition(s) "
              f"{','.join(map(str, missing))}", file=sys.stderr)
        return 1
    if args.time == MAX_TIMESTAMP and cluster.bootstrap.version_for(ApiKey.LIST_OFFSETS) < 7:
        print("samsa get-offsets: the broker does not support --time -3 (ListOffsets v7+)",
              file=sys.stderr)
        return 1
    offsets = cluster.list_offsets({(args.topic, p): args.time for p in wanted})
    for p in wanted:
        offset = offsets[(args.topic, p)]
        print(f"{args.topic}:{p}:{offset if offset != -1 or args.time < 0 else ''}")
    return 0


def _partition_list(text: str) -> list[int]:
    try:
        return sorted({int(p) for p in text.split(",") if p.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected partition numbers like 0,1,2, got {text!r}") from None


def main(argv) -> int:
    p = argparse.ArgumentParser(prog="samsa get-offsets",
                                description="Offsets of a topic's partitions at a point in time.")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    p.add_argument("--topic", required=True)
    p.add_argument("--partitions", type=_partition_list, default=None,
                   help="comma-separated partitions (default: all)")
    p.add_argument("--time", type=int, default=LATEST,
                   help="-1 latest (default), -2 earliest, -3 max timestamp, or epoch ms")
    _CLIENT_CONFIG.add_to(p, "admin client")
    args = p.parse_args(argv)
    client = _CLIENT_CONFIG.load(p, args)
    return run_cluster_tool("samsa get-offsets", args.bootstrap_server,
                            lambda cluster: _get_offsets(cluster, args), client.sasl, client.tls)
