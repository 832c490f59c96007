"""`samsa consumer-groups`: kafka-consumer-groups over the wire: --list (asks
every broker), --describe (offsets and lag per partition, with the member that
owns it), --reset-offsets and --delete. Group requests go to the group's
coordinator (FindCoordinator), offset look-ups to each partition's leader.

    samsa consumer-groups --bootstrap-server H:P --list [--type [consumer,classic]]
    samsa consumer-groups --bootstrap-server H:P --describe --group G
        [--members | --state] [--verbose]
    samsa consumer-groups --bootstrap-server H:P --group G --reset-offsets --to-earliest \\
        (--topic T[:p,p] | --all-topics) [--dry-run | --execute]
    samsa consumer-groups --bootstrap-server H:P --delete --group G
"""
from __future__ import annotations

import argparse
import sys
from typing import NamedTuple, Sequence

from samsa.protocol.errors import ErrorCode, ProtocolError
from samsa.protocol.messages import (ConsumerGroupDescribeRequest, DeleteGroupsRequest,
                                     DescribeGroupsRequest, OffsetCommitRequest, OffsetFetchRequest)
from samsa.protocol.model import TopicPartition
from samsa.protocol.model import ApiKey

from samsa.client.blocking import ClientError, Cluster, SimpleClient, error_text, run_cluster_tool
from samsa.client.properties import add_command_config, command_config_or_exit
from samsa.broker.groups.consumer_protocol import assignment_partitions

from . import consumer_group_views
from .group_listing import list_groups_everywhere
from .reset_options import add_reset_arguments

PROG = "samsa consumer-groups"
_LAST_GROUP_ID_OFFSET_FETCH = 7  # v8+ nests several groups per request
LATEST, EARLIEST = -1, -2
# States in which nobody consumes, so offsets may be rewritten under the group.
_INACTIVE = ("Empty", "Dead")



# kafka-consumer-groups' tables (ConsumerGroupCommand): a blank line, then
# left-justified columns separated by one space. --describe pads the group,
# topic, consumer id and host columns to at least 15 characters (wider when a
# value is), the partition to 10 and the three offsets to 15 (a longer value
# overflows, as Java's %-10s does), and leaves the last column unpadded.
# --reset-offsets pads every column to a fixed width, the last one included.
_DESCRIBE_WIDTHS = (15, 15, -10, -15, -15, -15, 15, 15, 0)  # <0: fixed, 0: unpadded
_RESET_WIDTHS = (-30, -30, -10, -15)


def _print_table(rows: Sequence[tuple[str, ...]], widths: tuple[int, ...]) -> None:
    """Kafka's printf formats: a positive width is a minimum that grows with the
    widest value below the header, a negative one is fixed, 0 is no padding."""
    data = rows[1:]
    cols = [abs(w) if w <= 0 else max([w] + [len(r[i]) for r in data])
            for i, w in enumerate(widths)]
    print()
    for r in rows:
        print(" ".join(v.ljust(w) for v, w in zip(r, cols)))


def _describe_group(cluster: Cluster, group_id: str):
    conn = cluster.coordinator(group_id)
    return conn.call(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(groups=[group_id],
                                               include_authorized_operations=False)).groups[0]


class _Described(NamedTuple):
    """A group as --describe shows it, from DescribeGroups (classic) or
    ConsumerGroupDescribe (KIP-848 consumer groups)."""
    error_code: int
    error_message: str | None
    state: str
    # (topic, partition) -> (consumer id, host, client id)
    owners: dict[TopicPartition, tuple[str, str, str]]


def _describe_either(cluster: Cluster, group_id: str) -> _Described:
    group = _describe_group(cluster, group_id)
    if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND or (
            group.error_code == 0 and group.group_state == "Dead"):
        # not a classic group: a consumer-protocol one, if the broker has those
        try:
            found = cluster.coordinator(group_id).call(
                ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest(
                    group_ids=[group_id], include_authorized_operations=False)).groups[0]
        except ClientError:
            found = None
        if found is not None and found.error_code == 0:
            members = {(tp.topic_name, p): (m.member_id, m.client_host, m.client_id)
                      for m in found.members for tp in m.assignment.topic_partitions
                      for p in tp.partitions}
            return _Described(0, None, found.group_state, members)
        return _Described(int(ErrorCode.GROUP_ID_NOT_FOUND), None, "Dead", {})
    owners: dict[TopicPartition, tuple[str, str, str]] = {}
    for m in group.members:
        try:
            assigned = assignment_partitions(bytes(m.member_assignment or b""))
        except ProtocolError:
            assigned = {}  # not the consumer protocol: no partitions to show
        for topic, parts in assigned.items():
            for p in parts:
                owners[(topic, p)] = (m.member_id, m.client_host, m.client_id)
    return _Described(group.error_code, group.error_message, group.group_state, owners)


def _committed(cluster: Cluster, group_id: str) -> dict[TopicPartition, int]:
    resp = cluster.coordinator(group_id).call(
        9, OffsetFetchRequest(group_id=group_id, topics=None, require_stable=False),
        highest=_LAST_GROUP_ID_OFFSET_FETCH)
    if resp.error_code:
        raise ClientError(f"group {group_id}: {error_text(resp.error_code)}")
    return {(t.name, p.partition_index): p.committed_offset
            for t in resp.topics for p in t.partitions
            if p.error_code == 0 and p.committed_offset >= 0}


def _offsets(cluster: Cluster, partitions, timestamp: int) -> dict[TopicPartition, int]:
    return cluster.list_offsets({tp: timestamp for tp in partitions})


# ------------------------------------------------------------------ --list

def _list(cluster: Cluster, args) -> int:
    """Every broker's ListGroups, merged: a broker lists only the groups it
    coordinates (as Kafka's AdminClient.listConsumerGroups asks each broker).
    A broker that does not answer is one line on stderr; the others' groups
    are still listed."""
    types = [t.strip().lower() for t in (args.type or "").split(",") if t.strip()]
    listed, failed = list_groups_everywhere(cluster, PROG, types=types)
    groups = {g.group_id: g.group_type or "classic" for g in listed  # group id -> its type
              if not types or (g.group_type or "classic").lower() in types}
    if args.type is None:
        for g in sorted(groups):
            print(g)
    else:
        # kafka-consumer-groups --list --type: the group column 10 wider than
        # the longest id (at least 15), then the type (Kafka's GroupType names)
        width = max([15] + [len(g) for g in groups]) + 10
        print(f"{'GROUP':<{width}} {'TYPE':<20}")
        for g in sorted(groups):
            print(f"{g:<{width}} {groups[g].capitalize():<20}")
    return 1 if failed else 0


# ------------------------------------------------------------------ --describe

def _log_ends(cluster: Cluster, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
    """Log ends per partition; a topic that cannot be asked (deleted since the
    commit) shows as "-" rather than failing the whole table."""
    ends: dict[TopicPartition, int] = {}
    for topic in sorted({t for t, _ in partitions}):
        try:
            ends.update(_offsets(cluster, [tp for tp in partitions if tp[0] == topic], LATEST))
        except ClientError:
            pass
    return ends


def _describe_one(cluster: Cluster, group_id: str) -> int:
    group = _describe_either(cluster, group_id)
    if group.error_code == ErrorCode.GROUP_ID_NOT_FOUND or (
            group.error_code == 0 and group.state == "Dead"):
        print(f"Error: Consumer group '{group_id}' does not exist.", file=sys.stderr)
        return 1
    if group.error_code:
        print(f"Error: {error_text(group.error_code, group.error_message)}", file=sys.stderr)
        return 1
    owners = group.owners
    # Kafka's notes on the group's state, on stderr ahead of the table.
    if group.state == "Empty":
        print(f"\nConsumer group '{group_id}' has no active members.", file=sys.stderr)
    elif group.state in ("PreparingRebalance", "CompletingRebalance", "Assigning",
                         "Reconciling"):
        print(f"\nWarning: Consumer group '{group_id}' is rebalancing.", file=sys.stderr)
    committed = _committed(cluster, group_id)
    partitions = set(committed) | set(owners)
    if not partitions:
        return 0
    ends = _log_ends(cluster, partitions)
    rows = [("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
             "CONSUMER-ID", "HOST", "CLIENT-ID")]
    for tp in sorted(partitions):
        current = committed.get(tp)
        end = ends.get(tp)
        lag = end - current if current is not None and end is not None else None
        member, host, client_id = owners.get(tp, ("-", "-", "-"))
        rows.append((group_id, tp[0], str(tp[1]), "-" if current is None else str(current),
                     "-" if end is None else str(end), "-" if lag is None else str(lag),
                     member, host, client_id))
    _print_table(rows, _DESCRIBE_WIDTHS)
    return 0


def _describe(cluster: Cluster, args) -> int:
    if args.members:
        return max(consumer_group_views.print_members(cluster, g, args.verbose)
                   for g in args.groups)
    if args.state is not None:
        return max(consumer_group_views.print_state(cluster, g, args.verbose)
                   for g in args.groups)
    return max(_describe_one(cluster, g) for g in args.groups)


# ------------------------------------------------------------------ --delete

def _delete(cluster: Cluster, args) -> int:
    # one DeleteGroups per coordinator, naming the groups it coordinates
    by_coordinator: dict[int, tuple[SimpleClient, list[str]]] = {}
    for g in dict.fromkeys(args.groups):
        conn = cluster.coordinator(g)
        by_coordinator.setdefault(id(conn), (conn, []))[1].append(g)
    results: dict[str, int] = {}
    for conn, groups in by_coordinator.values():
        resp = conn.call(ApiKey.DELETE_GROUPS, DeleteGroupsRequest(groups_names=groups))
        results.update({r.group_id: r.error_code for r in resp.results})
    failed = {g: code for g, code in results.items() if code}
    done = [g for g in results if not results[g]]
    if not failed:
        names = ", ".join(f"'{g}'" for g in done)
        print(f"Deletion of requested consumer groups ({names}) was successful.")
        return 0
    lines = ["Deletion of some consumer groups failed:"]
    lines += [f"* Group '{g}' could not be deleted due to: {error_text(code)}"
              for g, code in failed.items()]
    if done:
        lines.append("These consumer groups were deleted successfully: "
                     + ", ".join(f"'{g}'" for g in done))
    print("\n".join(lines), file=sys.stderr)
    return 1


# ------------------------------------------------------------------ --reset-offsets

class ResetPlan(NamedTuple):
    """Where --reset-offsets moves a group's partitions."""

    group: str
    offsets: dict[TopicPartition, int]


def _scope(cluster: Cluster, args, committed: dict[TopicPartition, int]) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    out: list[TopicPartition] = []
    for topic, parts in args.topic:
        leaders = cluster.leaders(topic)
        missing = sorted(set(parts or ()) - set(leaders))
        if missing:
            raise ClientError(f"topic {topic} has no partition(s) "
                              f"{','.join(map(str, missing))}")
        out += [(topic, p) for p in (parts or sorted(leaders))]
    return sorted(set(out))


def _clamp(wanted: dict[TopicPartition, int], cluster: Cluster) -> dict[TopicPartition, int]:
    """Offsets outside [log start, log end] move to the nearer end, as Kafka's tool does."""
    starts = _offsets(cluster, wanted, EARLIEST)
    ends = _offsets(cluster, wanted, LATEST)
    out = {}
    for tp, offset in wanted.items():
        if offset < starts[tp]:
            print(f"WARN: New offset ({offset}) is lower than earliest offset for topic "
                  f"partition {tp[0]}-{tp[1]}. Value will be set to {starts[tp]}",
                  file=sys.stderr)
            offset = starts[tp]
        elif offset > ends[tp]:
            print(f"WARN: New offset ({offset}) is higher than latest offset for topic "
                  f"partition {tp[0]}-{tp[1]}. Value will be set to {ends[tp]}",
                  file=sys.stderr)
            offset = ends[tp]
        out[tp] = offset
    return out


def _new_offsets(cluster: Cluster, args, partitions: list[TopicPartition],
                 committed: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    if args.to_earliest:
        return _offsets(cluster, partitions, EARLIEST)
    if args.to_latest:
        return _offsets(cluster, partitions, LATEST)
    if args.to_offset is not None:
        return _clamp({tp: args.to_offset for tp in partitions}, cluster)
    if args.shift_by is not None:
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            raise ClientError(f"cannot shift the offset of {missing[0][0]}-{missing[0][1]}: "
                              "the group has no committed offset for it")
        return _clamp({tp: committed[tp] + args.shift_by for tp in partitions}, cluster)
    if args.to_datetime is not None:
        found = _offsets(cluster, partitions, args.to_datetime)
        after = [tp for tp, o in found.items() if o < 0]  # no record that late: the log end
        return {**found, **(_offsets(cluster, after, LATEST) if after else {})}
    # --to-current: where the group is; the log end where it has not committed
    fresh = [tp for tp in partitions if tp not in committed]
    return {**{tp: committed[tp] for tp in partitions if tp in committed},
            **(_offsets(cluster, fresh, LATEST) if fresh else {})}


def _commit(cluster: Cluster, plan: ResetPlan) -> None:
    """A commit from outside the group (generation -1, no member id), which
    the coordinator accepts while the group has no members."""
    C = OffsetCommitRequest
    by_topic: dict[str, list[tuple[int, int]]] = {}
    for (t, p), o in sorted(plan.offsets.items()):
        by_topic.setdefault(t, []).append((p, o))
    resp = cluster.coordinator(plan.group).call(ApiKey.OFFSET_COMMIT, C(
        group_id=plan.group, generation_id_or_member_epoch=-1, member_id="",
        group_instance_id=None, retention_time_ms=-1, topics=[
            C.OffsetCommitRequestTopic(name=t, partitions=[
                C.OffsetCommitRequestPartition(partition_index=p, committed_offset=o,
                                               committed_leader_epoch=-1, committed_metadata="")
                for p, o in parts]) for t, parts in by_topic.items()]))
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code:
                raise ClientError(f"committing {t.name}-{p.partition_index} for group "
                                  f"{plan.group}: {error_text(p.error_code)}")


def _reset_one(cluster: Cluster, args, group_id: str) -> int:
    group = _describe_group(cluster, group_id)
    if group.error_code and group.error_code != ErrorCode.GROUP_ID_NOT_FOUND:
        print(f"Error: {error_text(group.error_code, group.error_message)}", file=sys.stderr)
        return 1
    if not group.error_code and group.group_state not in _INACTIVE:
        print(f"Error: Assignments can only be reset if the group '{group_id}' is inactive, "
              f"but the current state is {group.group_state}.", file=sys.stderr)
        return 1
    committed = _committed(cluster, group_id)
    partitions = _scope(cluster, args, committed)
    plan = ResetPlan(group_id, _new_offsets(cluster, args, partitions, committed))
    if args.execute:
        _commit(cluster, plan)
    rows = [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")]
    rows += [(group_id, t, str(p), str(o)) for (t, p), o in sorted(plan.offsets.items())]
    _print_table(rows, _RESET_WIDTHS)
    return 0


def _reset(cluster: Cluster, args) -> int:
    if not args.dry_run and not args.execute:
        print("WARN: No action will be performed as the --execute option is missing. "
              "Add --dry-run to keep this behaviour explicitly, or --execute to reset.",
              file=sys.stderr)
    return max(_reset_one(cluster, args, g) for g in args.groups)


# ------------------------------------------------------------------ arguments

_RESET_TO = ("to_earliest", "to_latest", "to_offset", "shift_by", "to_datetime", "to_current")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="List, describe, reset offsets of "
                                                       "and delete consumer groups.")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    add_command_config(p)

    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--list", action="store_true")
    action.add_argument("--describe", action="store_true")
    action.add_argument("--delete", action="store_true")
    action.add_argument("--reset-offsets", action="store_true")
    p.add_argument("--group", dest="groups", action="append", default=[], metavar="GROUP")
    # --list --type: show each group's type; with values, only those types
    p.add_argument("--type", nargs="?", const="", default=None, metavar="TYPE[,TYPE]")
    # --describe: members (epochs and assignments with --verbose) or the group's state
    p.add_argument("--members", action="store_true")
    p.add_argument("--state", nargs="?", const="", default=None, metavar="STATE[,STATE]")
    p.add_argument("--verbose", action="store_true")
    add_reset_arguments(p, shift_by=True)
    return p


def main(argv) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if (args.describe or args.delete or args.reset_offsets) and not args.groups:
        action = "describe" if args.describe else "delete" if args.delete else "reset-offsets"
        p.error(f"--{action} needs --group")
    if args.reset_offsets:
        if not any(getattr(args, k) not in (None, False) for k in _RESET_TO):
            p.error("--reset-offsets needs one of --to-earliest, --to-latest, --to-current, "
                    "--to-offset, --shift-by, --to-datetime")
        if not args.topic and not args.all_topics:
            p.error("--reset-offsets needs --topic or --all-topics")
    fn = {"list": _list, "describe": _describe, "delete": _delete,
          "reset_offsets": _reset}[next(k for k in ("list", "describe", "delete",
                                                     "reset_offsets") if getattr(args, k))]
    sasl, tls = command_config_or_exit(p, args.command_config)
    return run_cluster_tool(PROG, args.bootstrap_server, lambda cluster: fn(cluster, args),
                            sasl=sasl, tls=tls)
