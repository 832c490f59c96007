"""KIP-932 share groups: ShareGroupHeartbeat (76), ShareGroupDescribe (77),
ShareFetch (78) and ShareAcknowledge (79), over the share service
(broker/groups/share/service.py).

ShareFetch reads a share-partition's log from its first acquirable offset
(up to the high watermark) and answers the record batches read with the
offsets this member acquired among them (AcquiredRecords); the client keeps
only those. Acknowledgements piggybacked on the fetch are applied first, so
a member that accepts its last batch and fetches again in one request gets
the next records. The long poll wakes on an append to any of the session's
partitions or when an acquisition lock runs out (records offered again).
"""
from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterable, Sequence

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (DescribeShareGroupOffsetsRequest,
                                     DescribeShareGroupOffsetsResponse, ShareAcknowledgeRequest, ShareAcknowledgeResponse,
                                     ShareFetchRequest, ShareFetchResponse,
                                     ShareGroupDescribeRequest, ShareGroupDescribeResponse,
                                     ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse)
from samsa.protocol.messages.wire import Records
from samsa.protocol.records.batch import iter_batch_headers

from ..groups.results import ListedGroup
from ..groups.share.service import Bounds, ShareKey, ShareService
from ..groups.share.session import CLOSE, OPEN
from . import authz
from .authz import Op
from .context import RequestContext
from .services import Services
from .share_coordination import coordinator_error
from ..partitions import LeaderLookup
from ..security.acl import ResourceType

_INT32_MAX = 0x7FFFFFFF
_START_WAIT_S = 5.0
# what a ShareFetch reads of one partition at most (Kafka's max.partition.fetch.bytes
# default; a batch larger than this is still sent whole)
_PARTITION_BYTES = 1 << 20
# Kafka 4.x's share-group assignor
SHARE_ASSIGNOR = "simple"
# Kafka answers acknowledgements of a partition the member may not read this way
_NO_TOPIC = ErrorCode.UNKNOWN_TOPIC_ID


def _topics_view(broker: Services) -> dict[str, tuple[uuid.UUID, int]]:
    return {name: (meta.topic_id, meta.num_partitions)
            for name, meta in broker.topics.topics().items()}


async def handle_share_group_heartbeat(ctx: RequestContext, req: ShareGroupHeartbeatRequest
                                       ) -> ShareGroupHeartbeatResponse:
    R = ShareGroupHeartbeatResponse

    def fail(code: ErrorCode, message: str | None = None) -> ShareGroupHeartbeatResponse:
        return R(throttle_time_ms=0, error_code=code, error_message=message, member_id=None,
                 member_epoch=-1, heartbeat_interval_ms=0, assignment=None)

    if not authz.group(ctx, Op.READ, req.group_id):
        return fail(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not req.group_id:
        return fail(ErrorCode.INVALID_REQUEST, "GroupId can't be empty.")
    subscribed = req.subscribed_topic_names
    if subscribed is not None and not all(authz.topic(ctx, Op.DESCRIBE, t) for t in subscribed):
        return fail(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    code = coordinator_error(ctx, req.group_id)
    service = ctx.broker.share_groups
    if code or service is None:
        return fail(code or ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    answer, interval = service.heartbeat(
        req.group_id, req.member_id, req.member_epoch, req.rack_id,
        list(subscribed) if subscribed is not None else None,
        ctx.header.client_id or "", "/" + ctx.conn.peer_host, _topics_view(ctx.broker))
    if answer.error:
        return fail(answer.error, answer.message)
    if answer.assignment:
        await _start_assigned(service, req.group_id, answer.assignment)
    if service.persistence is not None:
        # the group's epoch and share-partitions, in __consumer_offsets
        await service.persistence.flush_group(req.group_id)
    assignment = None
    if answer.assignment is not None:
        assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=t, partitions=sorted(p))
            for t, p in sorted(answer.assignment.items())])
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             member_id=answer.member_id, member_epoch=answer.epoch,
             heartbeat_interval_ms=interval, assignment=assignment)


async def _start_assigned(service: ShareService, group_id: str,
                          assignment: dict[uuid.UUID, list[int]]) -> None:
    """share.auto.offset.reset is resolved when a partition is first assigned,
    so "latest" means the records produced from then on: the share-partitions
    this broker leads start now (their state read, or made and written); the
    others start at their leader's first ShareFetch."""
    persistence = service.persistence
    if persistence is None:
        return
    keys = [(group_id, t, p) for t, parts in assignment.items() for p in parts]

    async def start() -> None:
        await persistence.ensure_loaded(keys)
        started = [k for k in keys if service.fetch_position(k) is not None]
        if started:
            failed = await persistence.flush(started)
            service.mark_initialized(group_id, [k for k in started if k not in failed])
    try:
        # bounded: the heartbeat must answer within the member's session
        # (a share-partition not started now starts at its first ShareFetch)
        await asyncio.wait_for(start(), _START_WAIT_S)
    except asyncio.TimeoutError:
        pass


async def handle_share_group_describe(ctx: RequestContext, req: ShareGroupDescribeRequest
                                      ) -> ShareGroupDescribeResponse:
    R = ShareGroupDescribeResponse
    broker = ctx.broker
    names = {meta.topic_id: name for name, meta in broker.topics.topics().items()}
    groups = []
    for group_id in req.group_ids:
        code = ErrorCode.NONE
        if not authz.group(ctx, Op.DESCRIBE, group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        else:
            code = coordinator_error(ctx, group_id)
        found = (broker.share_groups.describe(group_id)
                 if not code and broker.share_groups is not None else None)
        if not code and found is None:
            code = ErrorCode.GROUP_ID_NOT_FOUND
        if code or found is None:
            groups.append(R.DescribedGroup(
                error_code=code, error_message=None, group_id=group_id, group_state="Dead",
                group_epoch=-1, assignment_epoch=-1, assignor_name="", members=[]))
            continue
        members = [R.Member(
            member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.epoch,
            client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=m.subscribed, assignment=R.Assignment(topic_partitions=[
                R.TopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=p)
                for t, p in sorted(m.assignment.items())]))
            for m in found.members]
        ops = (authz.authorized_operations(ctx, ResourceType.GROUP, group_id)
               if req.include_authorized_operations else -2147483648)
        groups.append(R.DescribedGroup(
            error_code=ErrorCode.NONE, error_message=None, group_id=group_id,
            group_state=found.state, group_epoch=found.group_epoch,
            assignment_epoch=found.assignment_epoch, assignor_name=SHARE_ASSIGNOR,
            members=members, authorized_operations=ops))
    return R(throttle_time_ms=0, groups=groups)


# (topic id, partition) -> its acknowledgement batches (first, last, types)
_Acks = dict[tuple[uuid.UUID, int], list[tuple[int, int, Sequence[int]]]]


def _acknowledge(ctx: RequestContext, service: ShareService, group_id: str, member_id: str,
                 acks: _Acks, readable: Callable[[uuid.UUID], str | None]
                 ) -> dict[tuple[uuid.UUID, int], ErrorCode]:
    out: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    for (topic_id, p), batches in acks.items():
        name = readable(topic_id)
        if name is None:
            out[(topic_id, p)] = _NO_TOPIC
            continue
        out[(topic_id, p)] = service.acknowledge((group_id, topic_id, p), member_id, batches)
    return out


async def _load(service: ShareService, group_id: str, keys: Sequence[tuple[uuid.UUID, int]]
                ) -> dict[tuple[uuid.UUID, int], ErrorCode]:
    """Read the durable state of the share-partitions not served here yet
    (the share coordinator's, persistence.py); the ones that failed."""
    if service.persistence is None:
        return {}
    failed = await service.persistence.ensure_loaded((group_id, t, p) for t, p in keys)
    return {(k[1], k[2]): code for k, code in failed.items()}


async def _flush(service: ShareService, group_id: str, keys: Iterable[tuple[uuid.UUID, int]]
                 ) -> dict[tuple[uuid.UUID, int], ErrorCode]:
    """Write the changes made to these share-partitions (acknowledgements,
    releases, expired locks) before they are answered; the ones that failed."""
    if service.persistence is None:
        return {}
    failed = await service.persistence.flush((group_id, t, p) for t, p in keys)
    return {(k[1], k[2]): code for k, code in failed.items()}


def _first_errors(into: dict[tuple[uuid.UUID, int], ErrorCode],
                  more: dict[tuple[uuid.UUID, int], ErrorCode]) -> None:
    for key, code in more.items():
        if not into.get(key):
            into[key] = code


def _readable(ctx: RequestContext) -> Callable[[uuid.UUID], str | None]:
    """topic id -> its name if it exists and the member may read it."""
    broker = ctx.broker
    may_read = authz.topic_checker(ctx, Op.READ)

    def check(topic_id: uuid.UUID) -> str | None:
        meta = broker.topics.by_id(topic_id)
        if meta is None or not may_read(meta.name):
            return None
        return meta.name
    return check


async def handle_share_fetch(ctx: RequestContext, req: ShareFetchRequest) -> ShareFetchResponse:
    R = ShareFetchResponse
    broker = ctx.broker
    service = broker.share_groups

    def fail(code: ErrorCode, message: str | None = None) -> ShareFetchResponse:
        return R(throttle_time_ms=0, error_code=code, error_message=message,
                 acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])

    group_id, member_id = req.group_id or "", req.member_id or ""
    if not group_id or not member_id:
        return fail(ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required.")
    if not authz.group(ctx, Op.READ, group_id):
        return fail(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if service is None:
        return fail(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    epoch = req.share_session_epoch
    # the membership is known where the group is coordinated; in a cluster the
    # partition leaders asked are mostly other brokers, which take the member's word
    if (epoch == OPEN and coordinator_error(ctx, group_id) == ErrorCode.NONE
            and not service.is_member(group_id, member_id)):
        return fail(ErrorCode.UNKNOWN_MEMBER_ID)
    code, session = service.open_session(group_id, member_id, epoch, fetch=True)
    if code or session is None:
        return fail(code)
    readable = _readable(ctx)
    acks: _Acks = {}
    wanted: list[tuple[uuid.UUID, int]] = []
    for t in req.topics:
        for fp in t.partitions:
            wanted.append((t.topic_id, fp.partition_index))
            if fp.acknowledgement_batches:
                acks[(t.topic_id, fp.partition_index)] = [
                    (b.first_offset, b.last_offset, list(b.acknowledge_types))
                    for b in fp.acknowledgement_batches]
    if epoch == OPEN and acks:
        return fail(ErrorCode.INVALID_REQUEST, "Acknowledgements need an open share session.")
    forgotten = [(f.topic_id, p) for f in req.forgotten_topics_data for p in f.partitions]
    ack_errors = _acknowledge(ctx, service, group_id, member_id, acks, readable)
    lock_ms = service.settings(group_id).limits.lock_duration_ms
    if epoch == CLOSE:
        service.close_session(group_id, member_id)
        _first_errors(ack_errors, await _flush(service, group_id, {*acks, *session.partitions}))
        return _fetch_response(ctx, {}, ack_errors, {}, lock_ms)
    _first_errors(ack_errors, await _flush(service, group_id, acks))
    service.update_session(session, wanted, forgotten, opened=epoch == OPEN)
    targets = sorted(session.partitions)
    errors: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    found: dict[tuple[uuid.UUID, int], tuple[str, LeaderLookup]] = {}
    for topic_id, p in targets:
        name = readable(topic_id)
        if name is None:
            errors[(topic_id, p)] = _NO_TOPIC
            continue
        lookup = broker.partitions.leader_log(name, p)
        if not lookup.ok:
            errors[(topic_id, p)] = lookup.error
            continue
        found[(topic_id, p)] = (name, lookup)
    for key, code in (await _load(service, group_id, list(found))).items():
        errors[key] = code
        del found[key]
    max_records = req.max_records if req.max_records > 0 else 500
    max_bytes = req.max_bytes if req.max_bytes > 0 else _INT32_MAX
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(0, req.max_wait_ms) / 1000.0
    keys = [(name, p) for (name, p) in ((v[0], k[1]) for k, v in found.items())]
    while True:
        waiter = broker.notifier.wait_any(keys, loop) if keys else None
        got = _acquire_all(service, group_id, member_id, found, max_records, max_bytes)
        timeout = deadline - loop.time()
        if got or timeout <= 0 or waiter is None or errors:
            if waiter is not None:
                waiter.cancel()
            # locks that ran out meanwhile (records available again, or archived)
            for key, code in (await _flush(service, group_id, found)).items():
                errors.setdefault(key, code)
            return _fetch_response(ctx, got, ack_errors, errors, lock_ms)
        wake = service.wake_at((group_id, t, p) for t, p in found)
        if wake is not None:
            timeout = min(timeout, max(0.0, (wake - service.now_ms()) / 1000.0) + 0.005)
        try:
            await asyncio.wait_for(waiter, timeout)
        except asyncio.TimeoutError:
            pass


# (topic id, partition) -> (records, [(first, last, delivery count)])
_Got = dict[tuple[uuid.UUID, int], tuple[Records, list[tuple[int, int, int]]]]


def _acquire_all(service: ShareService, group_id: str, member_id: str,
                 found: dict[tuple[uuid.UUID, int], tuple[str, LeaderLookup]],
                 max_records: int, max_bytes: int) -> _Got:
    got: _Got = {}
    budget_records, budget_bytes = max_records, max_bytes
    for (topic_id, p), (_name, lookup) in found.items():
        if budget_records <= 0 or budget_bytes <= 0:
            break
        log = lookup.found_log
        key: ShareKey = (group_id, topic_id, p)
        position = service.fetch_position(key)
        if position is None:
            continue
        # share.isolation.level=read_committed: nothing past the last stable
        # offset, and aborted transactions' records archived, never delivered
        committed = service.settings(group_id).read_committed
        hw = log.last_stable_offset if committed else log.high_watermark
        if position >= hw:
            continue
        # at most a partition's worth of a fetch: the records acquired are at
        # most max_records, and what is read past them is not sent (below)
        rr = log.read(max(position, log.log_start_offset), min(budget_bytes, _PARTITION_BYTES),
                      min_one_batch=True, max_offset=hw)
        data = b"".join(r.read_bytes() for r in rr.regions)
        upper = position
        aborted_runs: list[tuple[int, int]] = []
        aborted = log.aborted_transactions(position, rr.regions) if committed else []
        ends: list[tuple[int, int]] = []  # (last offset, end position) of each batch
        for pos, hdr in iter_batch_headers(data):
            ends.append((hdr.last_offset, pos + hdr.size))
            upper = max(upper, min(hdr.last_offset + 1, hw))
            if aborted and hdr.is_transactional and not hdr.is_control and any(
                    a.producer_id == hdr.producer_id
                    and a.first_offset <= hdr.base_offset <= a.last_offset for a in aborted):
                aborted_runs.append((hdr.base_offset, hdr.last_offset))
        if upper <= position:
            continue
        acquired = service.acquire(key, member_id, budget_records, position, upper)
        if aborted_runs and acquired:
            acquired = service.archive_aborted(key, member_id, acquired, aborted_runs)
        if not acquired:
            continue
        # the batches up to the last one with an offset acquired: the member
        # keeps only the acquired records, so the rest would be sent for nothing
        last = max(a.last_offset for a in acquired)
        data = data[:next((end for lo, end in ends if lo >= last), len(data))]
        got[(topic_id, p)] = (data, [(a.first_offset, a.last_offset, a.delivery_count)
                                     for a in acquired])
        budget_records -= sum(a.last_offset - a.first_offset + 1 for a in acquired)
        budget_bytes -= len(data)
    return got


def _fetch_response(ctx: RequestContext, got: _Got, ack_errors: dict[tuple[uuid.UUID, int],
                    ErrorCode], errors: dict[tuple[uuid.UUID, int], ErrorCode],
                    lock_ms: int) -> ShareFetchResponse:
    R = ShareFetchResponse
    by_topic: dict[uuid.UUID, list[ShareFetchResponse.PartitionData]] = {}
    for key in sorted(set(got) | set(ack_errors) | set(errors)):
        records, acquired = got.get(key, (b"", []))
        by_topic.setdefault(key[0], []).append(R.PartitionData(
            partition_index=key[1], error_code=errors.get(key, ErrorCode.NONE),
            error_message=None, acknowledge_error_code=ack_errors.get(key, ErrorCode.NONE),
            acknowledge_error_message=None,
            current_leader=R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1),
            records=records, acquired_records=[
                R.AcquiredRecords(first_offset=f, last_offset=last, delivery_count=c)
                for f, last, c in acquired]))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             acquisition_lock_timeout_ms=lock_ms, responses=[
                 R.ShareFetchableTopicResponse(topic_id=t, partitions=parts)
                 for t, parts in by_topic.items()], node_endpoints=[])


async def handle_share_acknowledge(ctx: RequestContext, req: ShareAcknowledgeRequest
                                   ) -> ShareAcknowledgeResponse:
    R = ShareAcknowledgeResponse
    service = ctx.broker.share_groups

    def fail(code: ErrorCode, message: str | None = None) -> ShareAcknowledgeResponse:
        return R(throttle_time_ms=0, error_code=code, error_message=message, responses=[],
                 node_endpoints=[])

    group_id, member_id = req.group_id or "", req.member_id or ""
    if not group_id or not member_id:
        return fail(ErrorCode.INVALID_REQUEST, "GroupId and MemberId are required.")
    if not authz.group(ctx, Op.READ, group_id):
        return fail(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if service is None:
        return fail(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    code, session = service.open_session(group_id, member_id, req.share_session_epoch,
                                         fetch=False)
    if code or session is None:
        return fail(code)
    acks: _Acks = {}
    for t in req.topics:
        for ap in t.partitions:
            acks[(t.topic_id, ap.partition_index)] = [
                (b.first_offset, b.last_offset, list(b.acknowledge_types))
                for b in ap.acknowledgement_batches]
    errors = _acknowledge(ctx, service, group_id, member_id, acks, _readable(ctx))
    flushed = set(acks)
    if req.share_session_epoch == CLOSE:
        service.close_session(group_id, member_id)
        flushed |= session.partitions
    else:
        service.update_session(session, [], [], opened=False)
    _first_errors(errors, {k: c for k, c in (await _flush(service, group_id, flushed)).items()
                           if k in errors})
    by_topic: dict[uuid.UUID, list[ShareAcknowledgeResponse.PartitionData]] = {}
    for (topic_id, pi), err in sorted(errors.items()):
        by_topic.setdefault(topic_id, []).append(R.PartitionData(
            partition_index=pi, error_code=err, error_message=None,
            current_leader=R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, responses=[
        R.ShareAcknowledgeTopicResponse(topic_id=t, partitions=parts)
        for t, parts in by_topic.items()], node_endpoints=[])


def share_bounds(broker: Services) -> Callable[[uuid.UUID, int], Bounds | None]:
    """Where a share-partition may start on its log (for the share service)."""
    def bounds(topic_id: uuid.UUID, partition: int) -> Bounds | None:
        meta = broker.topics.by_id(topic_id)
        if meta is None:
            return None
        found = broker.partitions.leader_log(meta.name, partition)
        if not found.ok:
            return None
        log = found.found_log

        def offset_at(timestamp: int) -> int | None:
            hit = log.offset_for_timestamp(timestamp)
            return hit[0] if hit is not None else None
        return Bounds(log.log_start_offset, log.high_watermark, offset_at)
    return bounds


async def handle_describe_share_group_offsets(
        ctx: RequestContext, req: DescribeShareGroupOffsetsRequest
        ) -> DescribeShareGroupOffsetsResponse:
    """Each share-partition's start offset and (v1) lag: the records from the
    start offset to the high watermark not yet acknowledged or archived."""
    R = DescribeShareGroupOffsetsResponse
    broker = ctx.broker
    may_describe = authz.topic_checker(ctx, Op.DESCRIBE)
    groups = []
    for g in req.groups:
        code = (ErrorCode.GROUP_AUTHORIZATION_FAILED
                if not authz.group(ctx, Op.DESCRIBE, g.group_id)
                else coordinator_error(ctx, g.group_id))
        service = broker.share_groups
        state = service.offsets(g.group_id) if not code and service is not None else None
        if state is not None and service is not None:
            state.update(await _coordinated_offsets(service, g.group_id, state))
        if code:
            groups.append(R.DescribeShareGroupOffsetsResponseGroup(
                group_id=g.group_id, topics=[], error_code=code, error_message=None))
            continue
        state = state or {}
        wanted: list[tuple[str, list[int]]]
        if g.topics is None:
            by_id: dict[str, list[int]] = {}
            for (topic_id, p) in state:
                meta = broker.topics.by_id(topic_id)
                if meta is not None:
                    by_id.setdefault(meta.name, []).append(p)
            wanted = sorted((name, sorted(ps)) for name, ps in by_id.items())
        else:
            wanted = [(t.topic_name, list(t.partitions)) for t in g.topics]
        ends = await _partition_ends(broker, service, [
            (name, p) for name, parts in wanted for p in parts
            if (meta := broker.topics.get(name)) is not None and may_describe(name)
            and (meta.topic_id, p) in state])
        topics = []
        for name, parts in wanted:
            meta = broker.topics.get(name)
            answers = []
            for p in parts:
                err, start, lag = ErrorCode.NONE, -1, -1
                if meta is None or not may_describe(name) or not 0 <= p < meta.num_partitions:
                    err = (ErrorCode.TOPIC_AUTHORIZATION_FAILED
                           if meta is not None and not may_describe(name)
                           else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                elif (meta.topic_id, p) in state:
                    start, done = state[(meta.topic_id, p)]
                    end = ends.get((name, p))
                    if end is not None:
                        lag = max(0, end - start - done)
                answers.append(R.DescribeShareGroupOffsetsResponsePartition(
                    partition_index=p, start_offset=start, leader_epoch=0, lag=lag,
                    error_code=err, error_message=None))
            topics.append(R.DescribeShareGroupOffsetsResponseTopic(
                topic_name=name, topic_id=meta.topic_id if meta else uuid.UUID(int=0),
                partitions=answers))
        groups.append(R.DescribeShareGroupOffsetsResponseGroup(
            group_id=g.group_id, topics=topics, error_code=ErrorCode.NONE, error_message=None))
    return R(throttle_time_ms=0, groups=groups)


async def _partition_ends(broker: Services, service: ShareService | None,
                          partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The high watermark of each partition: its log's when led here, else
    its leader's answer (a share-partition led by another broker of the
    cluster); one unknown is left out (its lag -1)."""
    ends: dict[tuple[str, int], int] = {}
    remote = []
    for name, p in partitions:
        found = broker.partitions.leader_log(name, p)
        if found.ok:
            ends[(name, p)] = found.found_log.high_watermark
        else:
            remote.append((name, p))
    if remote and service is not None and service.persistence is not None:
        ends.update(await service.persistence.partition_ends(remote))
    return ends


async def _coordinated_offsets(service: ShareService, group_id: str,
                               known: dict[tuple[uuid.UUID, int], tuple[int, int]]
                               ) -> dict[tuple[uuid.UUID, int], tuple[int, int]]:
    """The group's share-partitions not served here (led by another broker,
    or not read since a restart), as their share coordinators keep them;
    those found there are initialized, as the group's records then say."""
    persistence = service.persistence
    if persistence is None:
        return {}
    missing = [k for k in service.share_partitions(group_id) if (k[1], k[2]) not in known]
    if not missing:
        return {}
    found = {k: v for k, v in (await persistence.summaries(missing)).items() if v is not None}
    if found:
        service.mark_initialized(group_id, found)
        await persistence.flush_group(group_id)
    return {(k[1], k[2]): v for k, v in found.items()}


def share_groups_listed(ctx: RequestContext, states: list[str] | None,
                        types: list[str] | None) -> list[ListedGroup]:
    """ListGroups' share groups (group type "share"), within its filters."""
    service = ctx.broker.share_groups
    if service is None or (types and "share" not in {t.lower() for t in types}):
        return []
    wanted = {s.lower() for s in states or ()}
    out = []
    for group_id in service.group_ids():
        if coordinator_error(ctx, group_id):
            continue  # known here by a share-partition led here: another broker's group
        found = service.describe(group_id)
        if found is None or (wanted and found.state.lower() not in wanted):
            continue
        out.append(ListedGroup(group_id, "share", found.state, "share"))
    return out
