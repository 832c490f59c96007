"""`samsa consumer-groups`: kafka-consumer-groups' --list and --describe
(offsets and lag per partition, with the member that owns it), over the wire.

    samsa consumer-groups --bootstrap-server H:P --list
    samsa consumer-groups --bootstrap-server H:P --describe --group G
"""
from __future__ import annotations

import argparse
import sys

from protocol.errors import ErrorCode, ProtocolError
from protocol.messages import (DescribeGroupsRequest, ListGroupsRequest, ListOffsetsRequest,
                               OffsetFetchRequest)

from .client import SimpleClient, error_text, run_tool
from .groups.consumer_protocol import assignment_partitions

_LAST_GROUP_ID_OFFSET_FETCH = 7  # v8+ nests several groups per request


def _list(client: SimpleClient, args) -> int:
    resp = client.call(16, ListGroupsRequest(states_filter=[], types_filter=[]))
    if resp.error_code:
        print(f"samsa consumer-groups: {error_text(resp.error_code)}", file=sys.stderr)
        return 1
    for g in sorted(resp.groups, key=lambda g: g.group_id):
        print(g.group_id)
    return 0


def _log_ends(client: SimpleClient, partitions: set[tuple[str, int]]) -> dict:
    by_topic: dict[str, list[int]] = {}
    for t, p in partitions:
        by_topic.setdefault(t, []).append(p)
    L = ListOffsetsRequest
    resp = client.call(2, L(replica_id=-1, isolation_level=0, topics=[
        L.ListOffsetsTopic(name=t, partitions=[
            L.ListOffsetsPartition(partition_index=p, current_leader_epoch=-1, timestamp=-1,
                                   max_num_offsets=1) for p in sorted(ps)])
        for t, ps in sorted(by_topic.items())]))
    return {(t.name, p.partition_index): p.offset for t in resp.topics for p in t.partitions
            if p.error_code == 0}


def _describe(client: SimpleClient, args) -> int:
    described = client.call(15, DescribeGroupsRequest(groups=[args.group],
                                                      include_authorized_operations=False))
    group = described.groups[0]
    if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND or (
            group.error_code == 0 and group.group_state == "Dead"):
        print(f"Error: Consumer group '{args.group}' does not exist.", file=sys.stderr)
        return 1
    if group.error_code:
        print(f"Error: {error_text(group.error_code, group.error_message)}", file=sys.stderr)
        return 1
    owners: dict[tuple[str, int], tuple[str, str, str]] = {}
    for m in group.members:
        try:
            assigned = assignment_partitions(bytes(m.member_assignment or b""))
        except ProtocolError:
            assigned = {}  # not the consumer protocol: no partitions to show
        for topic, parts in assigned.items():
            for p in parts:
                owners[(topic, p)] = (m.member_id, m.client_host, m.client_id)
    version = min(client.version_for(9), _LAST_GROUP_ID_OFFSET_FETCH)
    fetched = client._call(9, version, OffsetFetchRequest(group_id=args.group, topics=None,
                                                           require_stable=False))
    committed = {(t.name, p.partition_index): p.committed_offset
                 for t in fetched.topics for p in t.partitions
                 if p.error_code == 0 and p.committed_offset >= 0}
    partitions = set(committed) | set(owners)
    if not partitions:
        print(f"\nConsumer group '{args.group}' has no active members.")
        return 0
    ends = _log_ends(client, partitions)
    rows = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
             "CONSUMER-ID", "HOST", "CLIENT-ID")]
    for tp in sorted(partitions):
        current = committed.get(tp)
        end = ends.get(tp)
        lag = end - current if current is not None and end is not None else None
        member, host, client_id = owners.get(tp, ("-", "-", "-"))
        rows.append((args.group, tp[0], str(tp[1]), "-" if current is None else str(current),
                     "-" if end is None else str(end), "-" if lag is None else str(lag),
                     member, host, client_id))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    print()
    for r in rows:
        print(" ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
    return 0


def main(argv) -> int:
    p = argparse.ArgumentParser(prog="samsa consumer-groups",
                                description="List consumer groups, or describe one's offsets and lag.")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true")
    action.add_argument("--describe", action="store_true")
    p.add_argument("--group")
    args = p.parse_args(argv)
    if args.describe and not args.group:
        p.error("--describe needs --group")
    fn = _list if args.list else _describe
    return run_tool("samsa consumer-groups", args.bootstrap_server, lambda c: fn(c, args))
