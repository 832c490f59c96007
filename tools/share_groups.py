"""`samsa share-groups`: kafka-share-groups (KIP-932) over the wire, with its
flags and its tables: --list (with --state: a GROUP STATE table),
--describe of share groups' offsets (start offset and lag per partition),
--members or --state, each with --verbose.

    samsa share-groups --bootstrap-server H:P --list [--state [S,S]]
    samsa share-groups --bootstrap-server H:P --describe (--group G | --all-groups)
        [--members | --state | --offsets] [--verbose]

Not yet: --reset-offsets, --delete, --delete-offsets (the broker does not
serve AlterShareGroupOffsets, DeleteShareGroups or DeleteShareGroupOffsets).
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from samsa.client.blocking import Cluster, error_text, run_cluster_tool
from samsa.client.properties import add_command_config, command_config_or_exit
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (DescribeShareGroupOffsetsRequest, ShareGroupDescribeRequest)
from samsa.protocol.model import ApiKey

from .group_listing import list_groups_everywhere

PROG = "samsa share-groups"
MISSING = "-"
SHARE_STATES = ("Dead", "Empty", "Stable", "Unknown")


def _row(widths: Sequence[int], values: Sequence[object]) -> str:
    """Java's "%-Ns" columns joined by one space; the last one unpadded."""
    cells = [str(v).ljust(w) for v, w in zip(values[:-1], widths)]
    return " ".join([*cells, str(values[-1])])


def _listed(cluster: Cluster, states: list[str]) -> list[tuple[str, str]] | None:
    """(group, state) of every share group, from every broker's ListGroups."""
    groups, failed = list_groups_everywhere(cluster, PROG, states=states, types=["share"])
    return None if failed else sorted({g.group_id: g.group_state for g in groups}.items())


def _list(cluster: Cluster, args: argparse.Namespace) -> int:
    states = [] if not args.state else [s.strip() for s in args.state.split(",")]
    unknown = [s for s in states if s.lower() not in {x.lower() for x in SHARE_STATES}]
    if unknown:
        print(f"Invalid state list '{args.state}'. Valid states are: "
              f"{', '.join(SHARE_STATES)}", file=sys.stderr)
        return 1
    listed = _listed(cluster, states)
    if listed is None:
        return 1
    if args.state is None:
        for group, _state in listed:
            print(group)
        return 0
    width = max([15] + [len(g) for g, _ in listed])
    print(_row([width], ["GROUP", "STATE"]))
    for group, state in listed:
        print(_row([width], [group, state]))
    return 0


def _describe_group(cluster: Cluster, group: str):  # type: ignore[no-untyped-def]
    conn = cluster.coordinator(group)
    resp = conn.call(ApiKey.SHARE_GROUP_DESCRIBE, ShareGroupDescribeRequest(
        group_ids=[group], include_authorized_operations=False))
    return conn, resp.groups[0]


def _absent(group: str, described: object) -> bool:
    code = getattr(described, "error_code", 0)
    if code == ErrorCode.GROUP_ID_NOT_FOUND or getattr(described, "group_state", "") == "Dead":
        print(f"\nError: Share group '{group}' does not exist.")
        return True
    if code:
        print(f"\nError: {error_text(code)}")
        return True
    return False


def _offsets(cluster: Cluster, group: str, verbose: bool) -> None:
    conn = cluster.coordinator(group)
    R = DescribeShareGroupOffsetsRequest
    resp = conn.call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, R(groups=[
        R.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]))
    g = resp.groups[0]
    if g.error_code:
        print(f"\nError: {error_text(g.error_code)}")
        return
    rows = sorted((t.topic_name, p.partition_index, p.leader_epoch, p.start_offset, p.lag)
                  for t in g.topics for p in t.partitions if not p.error_code)
    if not rows:
        print(f"\nShare group '{group}' has no offset information.")
        return
    widths = [max(15, len(group)), max([15] + [len(r[0]) for r in rows]), 10]
    print()
    if verbose:
        widths += [13, 13]
        print(_row(widths, ["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET",
                            "LAG"]))
    else:
        widths += [13]
        print(_row(widths, ["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"]))
    for topic, partition, epoch, start, lag in rows:
        shown = [str(start) if start >= 0 else MISSING, str(lag) if lag >= 0 else MISSING]
        cells: list[object] = [group, topic, partition]
        if verbose:
            cells.append(epoch if start >= 0 else MISSING)
        print(_row(widths, [*cells, *shown]))


def _members(cluster: Cluster, group: str, verbose: bool) -> None:
    _conn, g = _describe_group(cluster, group)
    if _absent(group, g):
        return
    if g.group_state == "Empty":
        print(f"\nShare group '{group}' has no active members.", file=sys.stderr)
    members = sorted(g.members, key=lambda m: m.member_id)
    if not members:
        return

    def assignment(m) -> str:  # type: ignore[no-untyped-def]
        return ";".join(sorted(f"{tp.topic_name}:{','.join(map(str, sorted(tp.partitions)))}"
                               for tp in m.assignment.topic_partitions))

    def count(m) -> int:  # type: ignore[no-untyped-def]
        return sum(len(tp.partitions) for tp in m.assignment.topic_partitions)
    widths = [max(15, len(group)), max([15] + [len(m.member_id) for m in members]),
              max([15] + [len(m.client_host) for m in members]),
              max([15] + [len(m.client_id) for m in members]), 12]
    print()
    if verbose:
        widths.append(13)
        print(_row(widths, ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                            "MEMBER-EPOCH", "ASSIGNMENT"]))
        for m in members:
            print(_row(widths, [group, m.member_id, m.client_host, m.client_id, count(m),
                                m.member_epoch, assignment(m)]))
    else:
        print(_row(widths, ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS",
                            "ASSIGNMENT"]))
        for m in members:
            print(_row(widths, [group, m.member_id, m.client_host, m.client_id, count(m),
                                assignment(m)]))


def _state(cluster: Cluster, group: str, verbose: bool) -> None:
    _conn, g = _describe_group(cluster, group)
    if _absent(group, g):
        return
    if g.group_state == "Empty":
        print(f"\nShare group '{group}' has no active members.", file=sys.stderr)
    node_id, host, port, _code, _message = cluster._find_coordinator(group)
    coordinator = f"{host}:{port}  ({node_id})"
    widths = [max(15, len(group)), max(25, len(coordinator)), 15]
    print()
    if verbose:
        widths += [12, 17]
        print(_row(widths, ["GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH",
                            "ASSIGNMENT-EPOCH", "#MEMBERS"]))
        print(_row(widths, [group, coordinator, g.group_state, g.group_epoch,
                            g.assignment_epoch, len(g.members)]))
    else:
        print(_row(widths, ["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"]))
        print(_row(widths, [group, coordinator, g.group_state, len(g.members)]))


def _describe(cluster: Cluster, args: argparse.Namespace) -> int:
    groups = args.groups
    if args.all_groups:
        listed = _listed(cluster, [])
        if listed is None:
            return 1
        groups = [g for g, _ in listed]
    for group in sorted(set(groups)):
        if args.members:
            _members(cluster, group, args.verbose)
        elif args.state is not None:
            _state(cluster, group, args.verbose)
        else:
            _offsets(cluster, group, args.verbose)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="List and describe share groups.")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    add_command_config(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true")
    action.add_argument("--describe", action="store_true")
    p.add_argument("--group", dest="groups", action="append", default=[], metavar="GROUP")
    p.add_argument("--all-groups", action="store_true")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--members", action="store_true")
    what.add_argument("--offsets", action="store_true")
    # --state: with --list an optional filter (comma-separated), with --describe a view
    what.add_argument("--state", nargs="?", const="", default=None, metavar="STATES")
    p.add_argument("--verbose", action="store_true")
    return p


def main(argv: Sequence[str]) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.describe and not args.groups and not args.all_groups:
        p.error("--describe needs --group or --all-groups")
    fn = _list if args.list else _describe
    sasl, tls = command_config_or_exit(p, args.command_config)
    return run_cluster_tool(PROG, args.bootstrap_server, lambda cluster: fn(cluster, args),
                            sasl=sasl, tls=tls)
