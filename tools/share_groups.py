"""`samsa share-groups`: kafka-share-groups (KIP-932) over the wire, with its
flags and its tables: --list (with --state: a GROUP STATE table),
--describe of share groups' offsets (start offset and lag per partition),
--members or --state, each with --verbose; --reset-offsets (AlterShareGroupOffsets,
the group must be empty), --delete (DeleteGroups) and --delete-offsets
(DeleteShareGroupOffsets).

    samsa share-groups --bootstrap-server H:P --list [--state [S,S]]
    samsa share-groups --bootstrap-server H:P --describe (--group G | --all-groups)
        [--members | --state | --offsets] [--verbose]
    samsa share-groups --bootstrap-server H:P --reset-offsets --group G
        (--topic T[:P,P] | --all-topics)
        (--to-earliest | --to-latest | --to-datetime D | --to-offset N | --to-current)
        (--dry-run | --execute)
    samsa share-groups --bootstrap-server H:P --delete (--group G... | --all-groups)
    samsa share-groups --bootstrap-server H:P --delete-offsets --group G --topic T...
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from samsa.client.blocking import Cluster, error_text, run_cluster_tool
from samsa.client.properties import add_command_config, command_config_or_exit
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AlterShareGroupOffsetsRequest, DeleteGroupsRequest,
                                     DeleteShareGroupOffsetsRequest,
                                     DescribeShareGroupOffsetsRequest, ShareGroupDescribeRequest)
from samsa.protocol.model import ApiKey

from .reset_options import add_reset_arguments
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
    conn, described = _describe_group(cluster, group)  # Kafka's tool describes first
    if _absent(group, described):
        return
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


# ------------------------------------------------------------------ changes

# the messages of Kafka's exceptions for the errors these answers carry (the
# Java tool prints them)
_MESSAGES = {
    ErrorCode.NON_EMPTY_GROUP: "The group is not empty.",
    ErrorCode.GROUP_ID_NOT_FOUND: "The group id does not exist.",
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.GROUP_AUTHORIZATION_FAILED: "Group authorization failed.",
    ErrorCode.TOPIC_AUTHORIZATION_FAILED: "Topic authorization failed.",
    ErrorCode.INVALID_GROUP_ID: "The configured groupId is invalid.",
}
EARLIEST, LATEST = -2, -1


def _message(code: int, message: str | None = None) -> str:
    return message or _MESSAGES.get(ErrorCode(code), error_text(code))


def _exception(code: int, message: str | None = None) -> str:
    """How Java prints the exception: its class, then its message."""
    name = "".join(w.capitalize() for w in ErrorCode(code).name.split("_"))
    name = {"NonEmptyGroup": "GroupNotEmpty"}.get(name, name)
    return f"org.apache.kafka.common.errors.{name}Exception: {_message(code, message)}"


def _current_offsets(cluster: Cluster, group: str) -> dict[tuple[str, int], int] | None:
    """The group's share-partitions and start offsets (None: the group's error printed)."""
    R = DescribeShareGroupOffsetsRequest
    resp = cluster.coordinator(group).call(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, R(groups=[
        R.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]))
    g = resp.groups[0]
    if g.error_code:
        print(f"\nError: {_message(g.error_code, g.error_message)}")
        return None
    return {(t.topic_name, p.partition_index): p.start_offset
            for t in g.topics for p in t.partitions if not p.error_code}


def _reset_targets(cluster: Cluster, args: argparse.Namespace,
                   current: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    if args.all_topics:
        partitions = sorted(current)
    else:
        partitions = []
        for topic, parts in args.topic:
            partitions += [(topic, p) for p in (parts or sorted(cluster.leaders(topic)))]
    if args.to_earliest:
        return cluster.list_offsets({tp: EARLIEST for tp in partitions})
    if args.to_latest:
        return cluster.list_offsets({tp: LATEST for tp in partitions})
    if args.to_current:
        fresh = [tp for tp in partitions if tp not in current]
        return {**{tp: current[tp] for tp in partitions if tp in current},
                **(cluster.list_offsets({tp: LATEST for tp in fresh}) if fresh else {})}
    if args.to_datetime is not None:
        found = cluster.list_offsets({tp: args.to_datetime for tp in partitions})
        empty = [tp for tp, o in found.items() if o < 0]
        for topic, partition in empty:
            print(f"\nWarn: Partition {partition} from topic {topic} is empty. "
                  "Falling back to latest known offset.")
        return {**found, **(cluster.list_offsets({tp: LATEST for tp in empty}) if empty else {})}
    # --to-offset, moved into [log start, log end] as Kafka's tool does
    starts = cluster.list_offsets({tp: EARLIEST for tp in partitions})
    ends = cluster.list_offsets({tp: LATEST for tp in partitions})
    return {tp: min(max(args.to_offset, starts[tp]), ends[tp]) for tp in partitions}


def _reset(cluster: Cluster, args: argparse.Namespace) -> int:
    [group] = args.groups
    _conn, described = _describe_group(cluster, group)
    if not described.error_code and described.group_state not in ("Empty", "Dead"):
        print(f"Share group '{group}' is not empty.", file=sys.stderr)
        return 1
    if described.error_code and described.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
        print(f"\nError: Executing share group command failed due to "
              f"{_message(described.error_code, described.error_message)}")
        return 1
    current = {} if described.error_code else _current_offsets(cluster, group)
    if current is None:
        return 1
    targets = _reset_targets(cluster, args, current)
    if args.execute and targets:
        A = AlterShareGroupOffsetsRequest
        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (t, p), o in sorted(targets.items()):
            by_topic.setdefault(t, []).append((p, o))
        resp = cluster.coordinator(group).call(ApiKey.ALTER_SHARE_GROUP_OFFSETS, A(
            group_id=group, topics=[A.AlterShareGroupOffsetsRequestTopic(
                topic_name=t, partitions=[A.AlterShareGroupOffsetsRequestPartition(
                    partition_index=p, start_offset=o) for p, o in parts])
                for t, parts in by_topic.items()]))
        failed = resp.error_code or next((p.error_code for t in resp.responses
                                          for p in t.partitions if p.error_code), 0)
        if failed:
            print(f"\nError: Executing share group command failed due to "
                  f"{_message(failed, resp.error_message)}")
            return 1
    if targets:
        widths = [max(15, len(group)), max([15] + [len(t) for t, _ in targets]), 10]
        print()
        print(_row(widths, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]))
        for (t, p), o in sorted(targets.items()):
            print(_row(widths, [group, t, p, o]))
    return 0


def _quoted(groups: Sequence[str]) -> str:
    return ", ".join("'" + g + "'" for g in groups)


def _delete(cluster: Cluster, args: argparse.Namespace) -> int:
    """As kafka-share-groups: the groups are checked against ListGroups first
    (not a share group, not empty), the rest deleted with DeleteGroups."""
    listed = _listed(cluster, [])
    if listed is None:
        return 1
    states = dict(listed)
    groups = list(states) if args.all_groups else list(dict.fromkeys(args.groups))
    failed: dict[str, str] = {}
    for g in groups:
        if g not in states:
            failed[g] = ("org.apache.kafka.common.errors.GroupIdNotFoundException: "
                         f"Group '{g}' is not a share group.")
        elif states[g] == "Dead":
            failed[g] = f"java.lang.IllegalStateException: Share group '{g}' group state is DEAD."
        elif states[g] != "Empty":
            failed[g] = ("org.apache.kafka.common.errors.GroupNotEmptyException: "
                         f"Share group '{g}' is not EMPTY.")
    done = []
    for g in groups:
        if g in failed:
            continue
        resp = cluster.coordinator(g).call(ApiKey.DELETE_GROUPS,
                                           DeleteGroupsRequest(groups_names=[g]))
        code = resp.results[0].error_code
        if code:
            failed[g] = _exception(code)
        else:
            done.append(g)
    if not failed:
        print(f"Deletion of requested share groups ({_quoted(done)}) was successful.")
        return 0
    print("\nError: Deletion of some share groups failed:")
    for g, why in failed.items():
        print(f"* Group '{g}' could not be deleted due to: {why}")
    if done:
        print(f"\nThese share groups were deleted successfully: {_quoted(done)}")
    return 0


def _delete_offsets(cluster: Cluster, args: argparse.Namespace) -> int:
    [group] = args.groups
    topics = sorted({t for t, _parts in args.topic})
    D = DeleteShareGroupOffsetsRequest
    resp = cluster.coordinator(group).call(ApiKey.DELETE_SHARE_GROUP_OFFSETS, D(
        group_id=group, topics=[D.DeleteShareGroupOffsetsRequestTopic(topic_name=t)
                                for t in topics]))
    status: dict[str, str] = {}
    if resp.error_code:
        message = _message(resp.error_code, resp.error_message)
        if resp.error_code in _MESSAGES:
            print(f"\nError: {message}")
        else:
            print(f"\nError: Encounter some unknown error: {_exception(resp.error_code)}")
        # Kafka's Admin fails every topic with the group's error too
        status = {t: f"Error: {message}" for t in topics}
    else:
        answered = {t.topic_name: t for t in resp.responses}
        for t in topics:
            got = answered.get(t)
            status[t] = ("Successful" if got is not None and not got.error_code else
                         f"Error: {_message(got.error_code, got.error_message)}"
                         if got is not None else "Error: no answer")
    width = max([15] + [len(t) for t in topics])
    print()
    print(_row([width], ["TOPIC", "STATUS"]))
    for t in topics:
        print(_row([width], [t, status[t]]))
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="List and describe share groups.")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    add_command_config(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true")
    action.add_argument("--describe", action="store_true")
    action.add_argument("--reset-offsets", action="store_true")
    action.add_argument("--delete", action="store_true")
    action.add_argument("--delete-offsets", action="store_true")
    p.add_argument("--group", dest="groups", action="append", default=[], metavar="GROUP")
    p.add_argument("--all-groups", action="store_true")
    add_reset_arguments(p, shift_by=False)
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
    if args.delete:
        if not args.groups and not args.all_groups:
            p.error("Option [delete] takes the options [group] or [all-groups]")
        if args.groups and args.all_groups:
            p.error("Option [delete] takes either [group] or [all-groups], not both.")
    if args.delete_offsets and (len(args.groups) != 1 or not args.topic):
        p.error("Option [delete-offsets] takes the following options: [group], [topic]")
    if args.reset_offsets:
        if not args.dry_run and not args.execute:
            p.error("Option [reset-offsets] takes the option: [execute] or [dry-run]")
        if len(args.groups) != 1:
            p.error("Option [reset-offsets] takes the option: [group]")
        if not any((args.to_earliest, args.to_latest, args.to_current,
                    args.to_offset is not None, args.to_datetime is not None)):
            p.error("Option [reset-offsets] requires one of the following scenarios: "
                    "[to-datetime], [to-earliest], [to-latest], [to-offset], [to-current]")
        if not args.topic and not args.all_topics:
            p.error("Option [reset-offsets] takes --topic or --all-topics")
    fn = (_list if args.list else _reset if args.reset_offsets else _delete if args.delete
          else _delete_offsets if args.delete_offsets else _describe)
    sasl, tls = command_config_or_exit(p, args.command_config)
    return run_cluster_tool(PROG, args.bootstrap_server, lambda cluster: fn(cluster, args),
                            sasl=sasl, tls=tls)
