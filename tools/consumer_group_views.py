"""`samsa consumer-groups --describe --members` and `--describe --state` (with
`--verbose`), in kafka-consumer-groups 4.x's layout (ConsumerGroupCommand's
printMembers and printStates): a KIP-848 consumer group is described with
ConsumerGroupDescribe (member epochs, current and target assignments, the
assignor, group and target assignment epochs), a classic group with
DescribeGroups (those columns are "-" there, as Kafka's admin client has no
value for them)."""
from __future__ import annotations

import sys
from typing import NamedTuple

from samsa.broker.groups.consumer_protocol import assignment_partitions
from samsa.client.blocking import ClientError, Cluster, error_text
from samsa.protocol.errors import ErrorCode, ProtocolError
from samsa.protocol.messages import ConsumerGroupDescribeRequest, DescribeGroupsRequest
from samsa.protocol.model import ApiKey

MISSING = "-"  # Kafka's MISSING_COLUMN_VALUE
_REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


class MemberRow(NamedTuple):
    consumer_id: str
    instance_id: str
    host: str
    client_id: str
    assignment: list[tuple[str, int]]
    target: list[tuple[str, int]]
    epoch: int | None
    upgraded: bool | None  # None: not a consumer group's member (no such field)


class GroupView(NamedTuple):
    group_id: str
    error_code: int
    error_message: str | None
    state: str
    assignor: str
    group_epoch: int | None
    target_epoch: int | None
    members: list[MemberRow]


def _pairs(assignment: dict[str, list[int]]) -> list[tuple[str, int]]:
    return [(t, p) for t, ps in assignment.items() for p in ps]


def describe(cluster: Cluster, group_id: str) -> GroupView:
    """The group as ConsumerGroupDescribe tells it, else DescribeGroups."""
    conn = cluster.coordinator(group_id)
    try:
        found = conn.call(ApiKey.CONSUMER_GROUP_DESCRIBE, ConsumerGroupDescribeRequest(
            group_ids=[group_id], include_authorized_operations=False)).groups[0]
    except ClientError:
        found = None
    if found is not None and found.error_code == 0:
        return GroupView(group_id, 0, None, found.group_state, found.assignor_name or "",
                         found.group_epoch, found.assignment_epoch, [
            MemberRow(m.member_id, m.instance_id or "", m.client_host, m.client_id,
                      [(tp.topic_name, p) for tp in m.assignment.topic_partitions
                       for p in tp.partitions],
                      [(tp.topic_name, p) for tp in m.target_assignment.topic_partitions
                       for p in tp.partitions],
                      m.member_epoch, None if m.member_type < 0 else m.member_type == 1)
            for m in found.members])
    g = conn.call(ApiKey.DESCRIBE_GROUPS, DescribeGroupsRequest(
        groups=[group_id], include_authorized_operations=False)).groups[0]
    rows = []
    for m in g.members:
        try:
            assigned = _pairs(assignment_partitions(bytes(m.member_assignment or b"")))
        except ProtocolError:
            assigned = []
        rows.append(MemberRow(m.member_id, m.group_instance_id or "", m.client_host,
                              m.client_id, assigned, [], None, None))
    return GroupView(group_id, g.error_code, g.error_message, g.group_state or "Dead",
                     g.protocol_data or "", None, None, rows)


def _missing(view: GroupView) -> bool:
    return view.error_code == ErrorCode.GROUP_ID_NOT_FOUND or (
        view.error_code == 0 and view.state == "Dead")


def _note_state(view: GroupView) -> None:
    """shouldPrintMemberState's notes, on stderr."""
    if view.state == "Empty":
        print(f"\nConsumer group '{view.group_id}' has no active members.", file=sys.stderr)
    elif view.state in _REBALANCING:
        print(f"\nWarning: Consumer group '{view.group_id}' is rebalancing.", file=sys.stderr)


def _failed(view: GroupView) -> int | None:
    if _missing(view):
        print(f"Error: Consumer group '{view.group_id}' does not exist.", file=sys.stderr)
        return 1
    if view.error_code:
        print(f"Error: {error_text(view.error_code, view.error_message)}", file=sys.stderr)
        return 1
    return None


def assignment_string(pairs: list[tuple[str, int]]) -> str:
    """getAssignmentString: "topic:p,p" per topic, sorted, joined by ";"; "-" if none."""
    if not pairs:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for t, p in pairs:
        by_topic.setdefault(t, []).append(p)
    return ";".join(sorted(f"{t}:{','.join(map(str, sorted(ps)))}"
                           for t, ps in by_topic.items()))


def print_members(cluster: Cluster, group_id: str, verbose: bool) -> int:
    view = describe(cluster, group_id)
    failed = _failed(view)
    if failed is not None:
        return failed
    _note_state(view)
    rows = view.members
    group_w = max([15, len(group_id)])
    id_w = max([15] + [len(m.consumer_id) for m in rows])
    instance_w = max([17] + [len(m.instance_id) for m in rows])
    host_w = max([15] + [len(m.host) for m in rows])
    client_w = max([15] + [len(m.client_id) for m in rows])
    current_w = max([20] + [len(assignment_string(m.assignment)) for m in rows])
    target_w = max([20] + [len(assignment_string(m.target)) for m in rows])
    with_instance = any(m.instance_id for m in rows)
    migrating = any(m.upgraded is False for m in rows) and any(m.upgraded for m in rows)

    def head(*cols: str) -> str:
        if with_instance:
            g, c, i, h, cl, n = cols
            return (f"{g:<{group_w}} {c:<{id_w}} {i:<{instance_w}} {h:<{host_w}} "
                    f"{cl:<{client_w}} {n:<15} ")
        g, c, _, h, cl, n = cols
        return f"{g:<{group_w}} {c:<{id_w}} {h:<{host_w}} {cl:<{client_w}} {n:<15} "

    def tail(*cols: str) -> str:
        epoch, current, target_epoch, target = cols[:4]
        line = f"{epoch:<15} {current:<{current_w}} {target_epoch:<15} {target:<{target_w}}"
        return line + f" {cols[4]}" if migrating else line

    header = head("GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                  "#PARTITIONS")
    if verbose:
        header += tail("CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH",
                       "TARGET-ASSIGNMENT", "UPGRADED")
    print()
    print(header)
    for m in rows:
        line = head(group_id, m.consumer_id, m.instance_id, m.host, m.client_id,
                    str(len(m.assignment)))
        if verbose:
            line += tail(MISSING if m.epoch is None else str(m.epoch),
                         assignment_string(m.assignment),
                         MISSING if view.target_epoch is None else str(view.target_epoch),
                         assignment_string(m.target),
                         MISSING if m.upgraded is None else str(m.upgraded).lower())
        print(line)
    return 0


def print_state(cluster: Cluster, group_id: str, verbose: bool) -> int:
    view = describe(cluster, group_id)
    failed = _failed(view)
    if failed is not None:
        return failed
    _note_state(view)
    node, host, port = cluster.coordinator_node(group_id)
    coordinator = f"{host}:{port}  ({node})"
    group_w = max(15, len(group_id))
    coord_w = max(25, len(coordinator))
    strategy = view.assignor or MISSING
    if verbose:
        def line(*c: str) -> str:
            return (f"{c[0]:<{group_w}} {c[1]:<{coord_w}} {c[2]:<20} {c[3]:<20} {c[4]:<15} "
                    f"{c[5]:<25} {c[6]}")
        rows = [line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "GROUP-EPOCH",
                     "TARGET-ASSIGNMENT-EPOCH", "#MEMBERS"),
                line(group_id, coordinator, strategy, view.state,
                     MISSING if view.group_epoch is None else str(view.group_epoch),
                     MISSING if view.target_epoch is None else str(view.target_epoch),
                     str(len(view.members)))]
    else:
        def line(*c: str) -> str:
            return f"{c[0]:<{group_w}} {c[1]:<{coord_w}} {c[2]:<20} {c[3]:<20} {c[4]}"
        rows = [line("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"),
                line(group_id, coordinator, strategy, view.state, str(len(view.members)))]
    print()
    print("\n".join(rows))
    return 0
