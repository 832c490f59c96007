"""Wire-independent results of the coordinator's operations.

NamedTuples so handlers can unpack them positionally or by name and copy them
into the response message of whatever version the client asked for. Error
codes are plain ints (protocol.errors.ErrorCode values).
"""
from __future__ import annotations

from typing import NamedTuple

from samsa.protocol.errors import ErrorCode

NONE = int(ErrorCode.NONE)


class JoinResult(NamedTuple):
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None  # JoinGroup v7+ field; None before a generation
    protocol_name: str | None = None  # None -> "" for JoinGroup v0-v6 (non-nullable there)
    leader: str = ""
    skip_assignment: bool = False  # JoinGroup v9+: leader must not (re)assign
    member_id: str = ""
    # (member_id, group_instance_id, metadata bytes); filled for the leader only
    members: list[tuple[str, str | None, bytes]] = []


class SyncResult(NamedTuple):
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class LeaveMemberResult(NamedTuple):
    member_id: str
    group_instance_id: str | None
    error_code: int


class LeaveResult(NamedTuple):
    """error_code is the top-level error; for LeaveGroup v0-v2 (one member, no
    per-member list) the handler answers members[0].error_code when the
    top-level one is NONE."""

    error_code: int
    members: list[LeaveMemberResult] = []


class MemberDescription(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # only for Stable groups, else b""
    assignment: bytes  # only for Stable groups, else b""


class GroupDescription(NamedTuple):
    group_id: str
    error_code: int
    state: str  # "Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"
    protocol_type: str
    protocol: str  # "" unless Stable
    members: list[MemberDescription] = []


class ListedGroup(NamedTuple):
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


class PartitionError(NamedTuple):
    topic: str
    partition: int
    error_code: int


class FetchedOffset(NamedTuple):
    topic: str
    partition: int
    offset: int  # -1 when nothing committed
    leader_epoch: int  # -1 when unknown
    metadata: str
    error_code: int


class OffsetFetchResult(NamedTuple):
    error_code: int
    partitions: list[FetchedOffset] = []


class OffsetDeleteResult(NamedTuple):
    error_code: int
    partitions: list[PartitionError] = []


class GroupMembership(NamedTuple):
    """A consumer group's members now: member id -> (subscribed topics,
    {topic: [partitions assigned]}); empty when the group has none."""
    group_id: str
    members: dict[str, tuple[tuple[str, ...], dict[str, list[int]]]]
