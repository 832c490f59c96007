"""Group APIs: FindCoordinator, membership (Join/Sync/Heartbeat/Leave), group admin
(Describe/List/Delete) and committed offsets (OffsetCommit/OffsetFetch/OffsetDelete).

Each handler only translates between the wire message of the version the client
spoke and the coordinator's plain-Python API (broker.groups, reached through
`ctx.broker.groups`, a CoordinatorBridge: these handlers run on the network
processor loops, the coordinator on the main loop). Version differences that are
pure wire shape (v0-v2 LeaveGroup's single member, OffsetFetch v8's many groups,
FindCoordinator v4's batched keys) are folded here so the coordinator never sees them.
"""
from __future__ import annotations

import binascii
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol, TypeVar

from samsa.protocol.errors import ErrorCode
from samsa.storage.checkpoints import topic_id_from_str
from samsa.protocol.messages import (DeleteGroupsRequest, DeleteGroupsResponse, DescribeGroupsRequest,
                               DescribeGroupsResponse, FindCoordinatorRequest,
                               FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse,
                               JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest,
                               LeaveGroupResponse, ListGroupsRequest, ListGroupsResponse,
                               OffsetCommitRequest, OffsetCommitResponse, OffsetDeleteRequest,
                               OffsetDeleteResponse, OffsetFetchRequest, OffsetFetchResponse,
                               SyncGroupRequest, SyncGroupResponse, TxnOffsetCommitRequest,
                               TxnOffsetCommitResponse)
from samsa.protocol.model import OFFSETS_TOPIC, TopicPartition

from ..groups.results import FetchedOffset, OffsetFetchResult
from ..metadata import BrokerEndpoint, MetadataUnavailableError
from ..security.acl import ResourceType
from . import authz
from .authz import Op
from .context import RequestContext, off_loop
from .share_admin import delete_share_groups
from .share import share_groups_listed
from .txn_verification import opens_transaction, verification_on, verify_opening
from .services import Commit, ConsumerRegistry, GroupCoordination, Services

log = logging.getLogger("broker.handlers.groups")

_T = TypeVar("_T")
_R = TypeVar("_R")

KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, KEY_TYPE_SHARE = 0, 1, 2
# DescribeGroups: "not requested" marker for authorized_operations (Kafka's Integer.MIN_VALUE)
NO_AUTHORIZED_OPERATIONS = authz.NOT_REQUESTED
TXN_OFFSET_COMMIT_V2 = 5  # TxnOffsetCommit v5: a transactions v2 producer


def _client_host(ctx: RequestContext) -> str:
    # Kafka reports the peer as InetAddress.toString() of an unresolved address: "/1.2.3.4"
    return "/" + (ctx.conn.peer_host or "")


def _groups(ctx: RequestContext) -> GroupCoordination:
    # The server bridges the coordinator before it listens (Broker.start), so a
    # handler never runs without one.
    groups = ctx.broker.groups
    if groups is None:
        raise RuntimeError("the group coordinator is not started")
    return groups


def _client_id(ctx: RequestContext) -> str:
    return ctx.header.client_id or ""


# ------------------------------------------------------------------ FindCoordinator

def _coordinator(ctx: RequestContext, key_type: int, key: str | None
                 ) -> tuple[int, str | None, BrokerEndpoint | None]:
    """(error_code, message, node) for one key: the broker that coordinates it."""
    broker = ctx.broker
    if key_type == KEY_TYPE_TRANSACTION:
        locator = broker.txn_coordinators
        if key is None or key == "":
            return ErrorCode.INVALID_REQUEST, "Transactional id is empty", None
        if not authz.transactional_id(ctx, Op.DESCRIBE, key):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, None
    elif key_type == KEY_TYPE_GROUP:
        locator = broker.coordinators
        if key is None:
            return ErrorCode.INVALID_REQUEST, "Group id is null", None
        if not authz.group(ctx, Op.DESCRIBE, key):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, None, None
    elif key_type == KEY_TYPE_SHARE:
        # the share coordinator of a share-partition, "group:topicId:partition":
        # brokers ask (share-partition leaders), as Kafka allows only them
        locator = broker.share_coordinators
        if not authz.cluster(ctx, Op.CLUSTER_ACTION):
            return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, None
        if key is None or not _share_coordinator_key(key):
            return ErrorCode.INVALID_REQUEST, f"Invalid share coordinator key {key!r}", None
    else:
        return ErrorCode.INVALID_REQUEST, f"Unsupported key type {key_type}", None
    if locator is None:  # no transaction coordinator in this broker (yet)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.", None
    answer = locator.locate(key)
    # A coordinator without the client's listener cannot be reached by it (Kafka).
    node = answer.node.for_listener(ctx.listener) \
        if not answer.error and answer.node is not None else None
    if node is None:
        return answer.error or ErrorCode.COORDINATOR_NOT_AVAILABLE, \
            "The coordinator is not available.", None
    return ErrorCode.NONE, None, node


def _share_coordinator_key(key: str) -> bool:
    """Whether ``key`` is "group:topicId:partition" (the group may hold colons)."""
    group, _, rest = key.rpartition(":")
    group, _, topic_id = group.rpartition(":")
    if not group or not rest.isdigit():
        return False
    try:
        topic_id_from_str(topic_id)
    except (ValueError, binascii.Error):
        return False
    return True


async def handle_find_coordinator(ctx: RequestContext, req: FindCoordinatorRequest
                                  ) -> FindCoordinatorResponse:
    R = FindCoordinatorResponse
    if ctx.version >= 4:
        coordinators = []
        for key in req.coordinator_keys:
            code, msg, node = _coordinator(ctx, req.key_type, key)
            coordinators.append(R.Coordinator(
                key=key, node_id=node.node_id if node else -1, host=node.host if node else "",
                port=node.port if node else -1, error_code=code, error_message=msg))
        return R(throttle_time_ms=0, coordinators=coordinators)
    code, msg, node = _coordinator(ctx, req.key_type if ctx.version >= 1 else KEY_TYPE_GROUP,
                                   req.key)
    return R(throttle_time_ms=0, error_code=code, error_message=msg,
             node_id=node.node_id if node else -1, host=node.host if node else "",
             port=node.port if node else -1)


# ------------------------------------------------------------------ membership

async def handle_join_group(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    v = ctx.version
    session = req.session_timeout_ms
    # JoinGroup v0 has no rebalance timeout: Kafka uses the session timeout for both
    rebalance = req.rebalance_timeout_ms if v >= 1 else session
    R = JoinGroupResponse
    if not authz.group(ctx, Op.READ, req.group_id):
        return R(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                 generation_id=-1, protocol_type=None, protocol_name=None if v >= 7 else "",
                 leader="", member_id=req.member_id, members=[])
    res = await _groups(ctx).join_group(
        req.group_id, req.member_id, req.group_instance_id if v >= 5 else None,
        _client_id(ctx), _client_host(ctx), session, rebalance, req.protocol_type,
        [(p.name, p.metadata) for p in req.protocols], require_known_member_id=v >= 4,
        reason=req.reason if v >= 8 else None)
    protocol_name = res.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""  # non-nullable before v7
    return R(throttle_time_ms=0, error_code=res.error_code, generation_id=res.generation_id,
             protocol_type=res.protocol_type, protocol_name=protocol_name, leader=res.leader,
             skip_assignment=res.skip_assignment, member_id=res.member_id,
             members=[R.JoinGroupResponseMember(member_id=mid, group_instance_id=iid,
                                                metadata=meta)
                      for mid, iid, meta in res.members])


async def handle_sync_group(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    v = ctx.version
    if not authz.group(ctx, Op.READ, req.group_id):
        return SyncGroupResponse(throttle_time_ms=0,
                                 error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                                 protocol_type=None, protocol_name=None, assignment=b"")
    res = await _groups(ctx).sync_group(
        req.group_id, req.generation_id, req.member_id,
        req.group_instance_id if v >= 3 else None,
        req.protocol_type if v >= 5 else None, req.protocol_name if v >= 5 else None,
        [(a.member_id, a.assignment) for a in req.assignments])
    return SyncGroupResponse(throttle_time_ms=0, error_code=res.error_code,
                             protocol_type=res.protocol_type, protocol_name=res.protocol_name,
                             assignment=res.assignment or b"")


async def handle_heartbeat(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    if not authz.group(ctx, Op.READ, req.group_id):
        return HeartbeatResponse(throttle_time_ms=0,
                                 error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED)
    code = await _groups(ctx).heartbeat(
        req.group_id, req.generation_id, req.member_id,
        req.group_instance_id if ctx.version >= 3 else None)
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


async def handle_leave_group(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    v = ctx.version
    R = LeaveGroupResponse
    if not authz.group(ctx, Op.READ, req.group_id):
        return R(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                 members=[])
    if v <= 2:
        res = await _groups(ctx).leave_group(req.group_id, [(req.member_id, None, None)])
        code = res.error_code
        if code == ErrorCode.NONE and res.members:
            code = res.members[0].error_code
        return R(throttle_time_ms=0, error_code=code)
    res = await _groups(ctx).leave_group(
        req.group_id, [(m.member_id, m.group_instance_id, m.reason if v >= 5 else None)
                       for m in req.members])
    return R(throttle_time_ms=0, error_code=res.error_code,
             members=[R.MemberResponse(member_id=m.member_id,
                                       group_instance_id=m.group_instance_id,
                                       error_code=m.error_code) for m in res.members])


# ------------------------------------------------------------------ group admin

async def handle_describe_groups(ctx: RequestContext, req: DescribeGroupsRequest
                                 ) -> DescribeGroupsResponse:
    v = ctx.version
    R = DescribeGroupsResponse
    allowed = [authz.group(ctx, Op.DESCRIBE, g) for g in req.groups]
    may = [g for g, ok in zip(req.groups, allowed) if ok]
    # one answer per group asked about, in order
    described = iter(await _groups(ctx).describe_groups(
        may, unknown_is_error=v >= 6) if may else ())
    with_ops = v >= 3 and req.include_authorized_operations
    groups = []
    for group_id, ok in zip(req.groups, allowed):
        if not ok:
            groups.append(R.DescribedGroup(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message=None,
                group_id=group_id, group_state="", protocol_type="", protocol_data="",
                members=[], authorized_operations=NO_AUTHORIZED_OPERATIONS))
            continue
        d = next(described)
        ops = authz.authorized_operations(ctx, ResourceType.GROUP, group_id) if with_ops \
            else NO_AUTHORIZED_OPERATIONS
        msg = None
        if v >= 6 and d.error_code == ErrorCode.GROUP_ID_NOT_FOUND:
            msg = f"Group {d.group_id} not found."
        groups.append(R.DescribedGroup(
            error_code=d.error_code, error_message=msg, group_id=d.group_id,
            group_state=d.state, protocol_type=d.protocol_type, protocol_data=d.protocol,
            members=[R.DescribedGroupMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id,
                client_id=m.client_id, client_host=m.client_host,
                member_metadata=m.metadata or b"", member_assignment=m.assignment or b"")
                for m in d.members],
            authorized_operations=ops))
    return R(throttle_time_ms=0, groups=groups)


async def handle_list_groups(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    v = ctx.version
    code, listed = await _groups(ctx).list_groups(
        list(req.states_filter or ()) if v >= 4 else None,
        list(req.types_filter or ()) if v >= 5 else None)
    listed = [*listed, *share_groups_listed(ctx, list(req.states_filter or ()) if v >= 4 else None,
                                            list(req.types_filter or ()) if v >= 5 else None)]
    R = ListGroupsResponse
    if not authz.cluster(ctx, Op.DESCRIBE):  # then only the groups it may describe
        listed = [g for g in listed if authz.group(ctx, Op.DESCRIBE, g.group_id)]
    return R(throttle_time_ms=0, error_code=code,
             groups=[R.ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type,
                                   group_state=g.state, group_type=g.group_type)
                     for g in listed])


async def handle_delete_groups(ctx: RequestContext, req: DeleteGroupsRequest
                               ) -> DeleteGroupsResponse:
    R = DeleteGroupsResponse
    may = [g for g in req.groups_names if authz.group(ctx, Op.DELETE, g)]
    results: dict[str, int] = {**await delete_share_groups(ctx, may)}
    rest = [g for g in may if g not in results]
    results.update(dict(await _groups(ctx).delete_groups(rest)) if rest else {})
    return R(throttle_time_ms=0, results=[
        R.DeletableGroupResult(group_id=gid, error_code=results.get(
            gid, ErrorCode.GROUP_AUTHORIZATION_FAILED)) for gid in req.groups_names])


# ------------------------------------------------------------------ committed offsets

def _partition_exists(broker: Services, topic: str, partition: int) -> bool:
    meta = broker.topics.get(topic)
    return meta is not None and 0 <= partition < meta.num_partitions


class _CommitPartition(Protocol):
    """A partition of an OffsetCommit or TxnOffsetCommit request."""
    @property
    def partition_index(self) -> int: ...
    @property
    def committed_offset(self) -> int: ...
    @property
    def committed_leader_epoch(self) -> int: ...
    @property
    def committed_metadata(self) -> str | None: ...


class _CommitTopic(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def partitions(self) -> Sequence[_CommitPartition]: ...


class _AskedTopic(Protocol):
    """A topic of an OffsetFetch request (its v0-v7 and v8+ shapes)."""
    @property
    def name(self) -> str: ...
    @property
    def partition_indexes(self) -> Sequence[int]: ...


def _commits_of_known_partitions(broker: Services, topics: Sequence[_CommitTopic],
                                 with_epoch: bool, refused: int | None = None,
                                 may_read: Callable[[str], bool] | None = None
                                 ) -> tuple[dict[tuple[str, int], int], list[Commit]]:
    """({partition: error} for partitions refused (``refused``: the whole
    request; ``may_read(topic)`` False: that topic) or that do not exist,
    [(topic, partition, offset, leader epoch, metadata)] for the rest): an
    OffsetCommit's or TxnOffsetCommit's topics, as the coordinator takes them."""
    codes: dict[tuple[str, int], int] = {}
    wanted: list[Commit] = []
    for t in topics:
        for p in t.partitions:
            if refused:
                codes[(t.name, p.partition_index)] = refused
                continue
            if may_read is not None and not may_read(t.name):
                codes[(t.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            if not _partition_exists(broker, t.name, p.partition_index):
                codes[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            wanted.append((t.name, p.partition_index, p.committed_offset,
                           p.committed_leader_epoch if with_epoch else -1,
                           p.committed_metadata))
    return codes, wanted


def _commit_answers(topics: Sequence[_CommitTopic], codes: dict[tuple[str, int], int],
                    topic_cls: Callable[..., _T], partition_cls: Callable[..., object]
                    ) -> list[_T]:
    """An OffsetCommit's or TxnOffsetCommit's answer: each partition asked
    about, in the request's order, with its error code."""
    return [topic_cls(name=t.name, partitions=[
        partition_cls(partition_index=p.partition_index,
                      error_code=codes[(t.name, p.partition_index)])
        for p in t.partitions]) for t in topics]


async def handle_offset_commit(ctx: RequestContext, req: OffsetCommitRequest
                               ) -> OffsetCommitResponse:
    v = ctx.version
    broker = ctx.broker
    R = OffsetCommitResponse
    refused = (ErrorCode.GROUP_AUTHORIZATION_FAILED
               if not authz.group(ctx, Op.READ, req.group_id) else None)
    codes, wanted = _commits_of_known_partitions(broker, req.topics, with_epoch=v >= 6,
                                                 refused=refused,
                                                 may_read=authz.topic_checker(ctx, Op.READ))
    registry = broker.zk_registry
    if wanted and v == 0 and registry is not None:
        # Kafka's v0 commits are ZooKeeper's (/consumers/<group>/offsets), written
        # by whichever broker receives them; a 0.8-era consumer reads them back
        # with OffsetFetch v0 from any broker, across restarts and coordinator moves.
        failed = await _zookeeper_call(registry.commit, req.group_id,
                                       {(t, p): off for t, p, off, _, _ in wanted})
        code = failed if failed is not None else ErrorCode.NONE
        for t, p, *_ in wanted:
            codes[(t, p)] = code
        wanted = []
    if wanted:
        # v0 has no generation/member: a commit from outside group management
        # (in ZooKeeper mode those went to ZooKeeper above)
        generation = req.generation_id_or_member_epoch if v >= 1 else -1
        member = req.member_id if v >= 1 else ""
        retention = req.retention_time_ms if 2 <= v <= 4 else -1
        results = await _groups(ctx).commit_offsets(
            req.group_id, generation, member, req.group_instance_id if v >= 7 else None,
            wanted, retention_ms=retention if retention >= 0 else None)
        for r in results:
            codes[(r.topic, r.partition)] = r.error_code
        if registry is not None:
            # the dual commit of Kafka 0.8.2: a copy for ZooKeeper-era tools (batched)
            committed = {(t, p): off for t, p, off, _, _ in wanted if codes[(t, p)] == 0}
            registry.mirror(req.group_id, committed)
    return R(throttle_time_ms=0, topics=_commit_answers(
        req.topics, codes, R.OffsetCommitResponseTopic, R.OffsetCommitResponsePartition))


async def handle_txn_offset_commit(ctx: RequestContext, req: TxnOffsetCommitRequest
                                   ) -> TxnOffsetCommitResponse:
    """TxnOffsetCommit: a transactional producer's offsets for the group,
    visible once its transaction commits (the coordinator keeps them pending
    until the marker reaches the group's offsets partition)."""
    v = ctx.version
    broker = ctx.broker
    R = TxnOffsetCommitResponse
    refused = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
               if not authz.transactional_id(ctx, Op.WRITE, req.transactional_id)
               else ErrorCode.GROUP_AUTHORIZATION_FAILED
               if not authz.group(ctx, Op.READ, req.group_id) else None)
    codes, wanted = _commits_of_known_partitions(broker, req.topics, with_epoch=v >= 2,
                                                 refused=refused,
                                                 may_read=authz.topic_checker(ctx, Op.READ))
    verdict = await _verify_offsets_partition(ctx, req) if wanted else ErrorCode.NONE
    if verdict:
        for t, p, *_ in wanted:
            codes[(t, p)] = verdict
        wanted = []
    if wanted:
        results = await _groups(ctx).commit_txn_offsets(
            req.group_id, req.producer_id, req.producer_epoch,
            req.generation_id if v >= 3 else -1, req.member_id if v >= 3 else "",
            req.group_instance_id if v >= 3 else None, wanted)
        for r in results:
            codes[(r.topic, r.partition)] = r.error_code
    return R(throttle_time_ms=0, topics=_commit_answers(
        req.topics, codes, R.TxnOffsetCommitResponseTopic, R.TxnOffsetCommitResponsePartition))


async def _verify_offsets_partition(ctx: RequestContext, req: TxnOffsetCommitRequest) -> ErrorCode:
    """KIP-890 part 1 for TxnOffsetCommit, as for Produce: the group's offsets
    partition must be in the producer's open transaction (AddOffsetsToTxn)
    before its first transactional commit there, or that commit would stay
    pending forever (read_committed consumers asking with require_stable would
    wait on it for good)."""
    broker = ctx.broker
    v2 = ctx.version >= TXN_OFFSET_COMMIT_V2  # transactions v2: the partition joins here
    if not verification_on(broker, v2):
        return ErrorCode.NONE
    tp = (OFFSETS_TOPIC, broker.coordinators.partition_of(req.group_id))
    found = broker.partitions.leader_log(*tp)
    if not found.ok:
        return ErrorCode.NOT_COORDINATOR
    if not opens_transaction(broker, found, req.producer_id, req.producer_epoch):
        return ErrorCode.NONE
    verdicts = await verify_opening(broker, req.transactional_id,
                                    {(req.producer_id, req.producer_epoch): [tp]}, add=v2)
    return verdicts[tp]


def _by_topic(fetched: Iterable[FetchedOffset]) -> dict[str, list[FetchedOffset]]:
    """[FetchedOffset] -> {topic: [FetchedOffset]} keeping first-seen topic order."""
    out: dict[str, list[FetchedOffset]] = {}
    for f in fetched:
        out.setdefault(f.topic, []).append(f)
    return out


async def _zookeeper_call(fn: Callable[..., _R], *args: object) -> _R | ErrorCode:
    """A consumer-registry call, off the network loop (ZooKeeper round trips);
    a ZooKeeper that cannot be reached is a retriable COORDINATOR_NOT_AVAILABLE."""
    try:
        result = await off_loop(fn, *args)
    except MetadataUnavailableError as e:
        log.warning("ZooKeeper consumer registry: %s", e)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return result


_Fetch = Callable[[list[TopicPartition] | None], Awaitable[OffsetFetchResult]]


async def _fetch_group(ctx: RequestContext, group_id: str, topics: Sequence[_AskedTopic] | None,
                       require_stable: bool = False, fetch: _Fetch | None = None,
                       member: tuple[str | None, int] = (None, -1)) -> OffsetFetchResult:
    """One group's OffsetFetch: topics None = everything committed. Needs
    Describe on the group; topics without Describe are refused (named) or
    left out (everything). ``fetch(partitions)``: where the offsets come from
    (the group coordinator unless told; v0 in ZooKeeper mode: ZooKeeper).
    member: (member id, member epoch) of a v9+ request."""
    if not authz.group(ctx, Op.DESCRIBE, group_id):
        return OffsetFetchResult(ErrorCode.GROUP_AUTHORIZATION_FAILED, [])
    may_describe = authz.topic_checker(ctx, Op.DESCRIBE)
    partitions: list[TopicPartition] | None = None
    refused: list[FetchedOffset] = []
    if topics is not None:
        partitions = [(t.name, p) for t in topics for p in t.partition_indexes
                      if may_describe(t.name)]
        refused = [FetchedOffset(t.name, p, -1, -1, "", ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                   for t in topics for p in t.partition_indexes if not may_describe(t.name)]
    if fetch is None:
        def fetch(wanted: list[TopicPartition] | None) -> Awaitable[OffsetFetchResult]:
            return _groups(ctx).fetch_offsets(group_id, wanted, require_stable, *member)
    res = await fetch(partitions) if partitions or partitions is None \
        else OffsetFetchResult(ErrorCode.NONE, [])
    if topics is None:
        return res._replace(partitions=[f for f in res.partitions if may_describe(f.topic)])
    return res._replace(partitions=res.partitions + refused) if refused else res


async def _fetch_group_from_zookeeper(registry: ConsumerRegistry, group_id: str,
                                      wanted: list[tuple[str, int]]) -> OffsetFetchResult:
    """OffsetFetch v0 in ZooKeeper mode: the offsets v0 commits wrote there."""
    found = await _zookeeper_call(registry.fetch, group_id, wanted)
    if isinstance(found, ErrorCode):
        return OffsetFetchResult(found, [FetchedOffset(t, p, -1, -1, "", found)
                                         for t, p in wanted])
    return OffsetFetchResult(ErrorCode.NONE, [FetchedOffset(t, p, found[(t, p)], -1, "",
                                                            ErrorCode.NONE)
                                              for t, p in wanted])


async def handle_offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    v = ctx.version
    broker = ctx.broker
    R = OffsetFetchResponse
    if v >= 8:
        groups = []
        for g in req.groups:
            member = (g.member_id, g.member_epoch) if v >= 9 else (None, -1)
            res = await _fetch_group(ctx, g.group_id, g.topics, req.require_stable,
                                     member=member)
            groups.append(R.OffsetFetchResponseGroup(
                group_id=g.group_id, error_code=res.error_code,
                topics=[R.OffsetFetchResponseTopics(name=topic, partitions=[
                    R.OffsetFetchResponsePartitions(
                        partition_index=f.partition, committed_offset=f.offset,
                        committed_leader_epoch=f.leader_epoch, metadata=f.metadata,
                        error_code=f.error_code) for f in fs])
                    for topic, fs in _by_topic(res.partitions).items()]))
        return R(throttle_time_ms=0, groups=groups)
    # v0-v1 cannot ask for "all" (topics is not nullable there)
    topics = req.topics if v >= 2 else (req.topics or [])
    registry = broker.zk_registry
    if v == 0 and registry is not None:
        async def from_zookeeper(wanted: list[TopicPartition] | None) -> OffsetFetchResult:
            # v0 names its topics (never "all"), so there is a list to read
            return await _fetch_group_from_zookeeper(registry, req.group_id, wanted or [])
        # the same Describe rules as the coordinator's offsets (Kafka: v0's
        # topics without Describe are TOPIC_AUTHORIZATION_FAILED too)
        res = await _fetch_group(ctx, req.group_id, topics, fetch=from_zookeeper)
    else:
        res = await _fetch_group(ctx, req.group_id, topics, v >= 7 and req.require_stable)
    fetched = res.partitions
    if res.error_code != ErrorCode.NONE and v < 2 and topics:
        # no top-level error field before v2: report it on every partition asked for
        fetched = [FetchedOffset(t.name, p, -1, -1, "", res.error_code)
                   for t in topics for p in t.partition_indexes]
    return R(throttle_time_ms=0, error_code=res.error_code, topics=[
        R.OffsetFetchResponseTopic(name=topic, partitions=[
            R.OffsetFetchResponsePartition(
                partition_index=f.partition, committed_offset=f.offset,
                committed_leader_epoch=f.leader_epoch, metadata=f.metadata,
                error_code=f.error_code) for f in fs])
        for topic, fs in _by_topic(fetched).items()])


async def handle_offset_delete(ctx: RequestContext, req: OffsetDeleteRequest
                               ) -> OffsetDeleteResponse:
    R = OffsetDeleteResponse
    broker = ctx.broker
    if not authz.group(ctx, Op.DELETE, req.group_id):
        return R(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, throttle_time_ms=0, topics=[])
    may_read = authz.topic_checker(ctx, Op.READ)
    codes: dict[tuple[str, int], int] = {}
    wanted = []
    for t in req.topics:
        for p in t.partitions:
            if not may_read(t.name):
                codes[(t.name, p.partition_index)] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif _partition_exists(broker, t.name, p.partition_index):
                wanted.append((t.name, p.partition_index))
            else:
                codes[(t.name, p.partition_index)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    res = await _groups(ctx).delete_offsets(req.group_id, wanted)
    codes.update({(r.topic, r.partition): r.error_code for r in res.partitions})
    if res.error_code != ErrorCode.NONE:
        return R(error_code=res.error_code, throttle_time_ms=0, topics=[])
    return R(error_code=ErrorCode.NONE, throttle_time_ms=0, topics=[
        R.OffsetDeleteResponseTopic(name=t.name, partitions=[
            R.OffsetDeleteResponsePartition(
                partition_index=p.partition_index,
                error_code=codes.get((t.name, p.partition_index), ErrorCode.NONE))
            for p in t.partitions])
        for t in req.topics])
