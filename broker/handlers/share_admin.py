"""The admin side of KIP-932 share groups: AlterShareGroupOffsets (91),
DeleteShareGroupOffsets (92) and DeleteGroups of share groups, over the
share service (broker/groups/share/service.py).

Kafka's rules: the group must have no members (NON_EMPTY_GROUP); Alter needs
READ on the group and on each topic, Delete needs DELETE on the group and
READ on each topic; an unknown topic is answered per topic/partition
(UNKNOWN_TOPIC_OR_PARTITION), the rest of the request goes through.

The durable state is the share coordinator's: a reset or a deletion goes
through SharePersistence (persistence.py: ``reset`` is InitializeShareGroupState
under a new state epoch, ``delete`` DeleteShareGroupState, a tombstone in
__share_group_state). The share-partitions a deletion covers are the group's
as its records in __consumer_offsets say (assigned to a member, or with
state: broker/groups/share/records.py) and any served here, wherever their
leader is, as DescribeShareGroupOffsets answers for them too; the records
follow (a deleted group's are tombstoned). The share-partitions go to
the coordinator together; a failure there is answered for its partition
(Alter) or topic (Delete), mapped as the share-partition leader maps it
(``persister_error``); the top-level code is only for the group.
"""
from __future__ import annotations

import asyncio
import uuid

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AlterShareGroupOffsetsRequest,
                                     AlterShareGroupOffsetsResponse,
                                     DeleteShareGroupOffsetsRequest,
                                     DeleteShareGroupOffsetsResponse)

from . import authz
from .authz import Op
from .context import RequestContext
from ..groups.share.persistence import persister_error
from ..groups.share.service import ShareKey, ShareService
from .share_coordination import coordinator_error

_NO_ID = uuid.UUID(int=0)
_UNKNOWN = "This server does not host this topic-partition."


def _group_refusal(ctx: RequestContext, group_id: str, op: Op) -> ErrorCode:
    if not authz.group(ctx, op, group_id):
        return ErrorCode.GROUP_AUTHORIZATION_FAILED
    if not group_id:
        return ErrorCode.INVALID_REQUEST
    return coordinator_error(ctx, group_id)


async def handle_alter_share_group_offsets(ctx: RequestContext,
                                           req: AlterShareGroupOffsetsRequest
                                           ) -> AlterShareGroupOffsetsResponse:
    R = AlterShareGroupOffsetsResponse
    broker, service = ctx.broker, ctx.broker.share_groups
    code = _group_refusal(ctx, req.group_id, Op.READ)
    if not code and service is not None and service.non_empty(req.group_id):
        code = ErrorCode.NON_EMPTY_GROUP

    def answer(name: str, topic_id: uuid.UUID, parts: list[int], err: ErrorCode,
               message: str | None = None) -> AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic:
        return R.AlterShareGroupOffsetsResponseTopic(
            topic_name=name, topic_id=topic_id, partitions=[
                R.AlterShareGroupOffsetsResponsePartition(
                    partition_index=p, error_code=err,
                    error_message=message if err else None) for p in parts])

    if code or service is None:
        code = code or ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return R(throttle_time_ms=0, error_code=code, error_message=None, responses=[
            answer(t.topic_name, _NO_ID, [p.partition_index for p in t.partitions], code)
            for t in req.topics])
    starts: dict[tuple[uuid.UUID, int], int] = {}
    topics = []
    for t in req.topics:
        meta = broker.topics.get(t.topic_name)
        if meta is not None and not authz.topic(ctx, Op.READ, t.topic_name):
            topics.append(answer(t.topic_name, _NO_ID, [p.partition_index for p in t.partitions],
                                 ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            continue
        if meta is None:
            topics.append(answer(t.topic_name, _NO_ID, [p.partition_index for p in t.partitions],
                                 ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN))
            continue
        parts = []
        for p in t.partitions:
            ok = 0 <= p.partition_index < meta.num_partitions and p.start_offset >= 0
            if ok:
                starts[(meta.topic_id, p.partition_index)] = p.start_offset
            parts.append(R.AlterShareGroupOffsetsResponsePartition(
                partition_index=p.partition_index,
                error_code=ErrorCode.NONE if ok else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                if not 0 <= p.partition_index < meta.num_partitions
                else ErrorCode.INVALID_REQUEST,
                error_message=None if ok else _UNKNOWN
                if not 0 <= p.partition_index < meta.num_partitions
                else "The start offset must not be negative."))
        topics.append(R.AlterShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=meta.topic_id, partitions=parts))
    code = service.alter_offsets(req.group_id, starts) if starts else ErrorCode.NONE
    if code:  # the group's answer (it has members): nothing changed
        return R(throttle_time_ms=0, error_code=code, error_message=None, responses=[
            answer(t.topic_name, _NO_ID, [p.partition_index for p in t.partitions], code)
            for t in req.topics])
    failed: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    if service.persistence is not None and starts:
        # the durable state is the share coordinator's: each share-partition
        # starts over there under a new state epoch (its leader's copy is
        # fenced and read again), all at once, each answered on its own;
        # read back here so the group shows it
        keys = [(req.group_id, t, p) for t, p in starts]
        codes = await asyncio.gather(*(service.persistence.reset(k, starts[(k[1], k[2])])
                                       for k in keys))
        failed = {(k[1], k[2]): persister_error(c) for k, c in zip(keys, codes) if c}
        done = [k for k in keys if (k[1], k[2]) not in failed]
        await service.persistence.ensure_loaded(done)
        service.mark_initialized(req.group_id, done,
                                 {t.topic_id: t.topic_name for t in topics})
    if service.persistence is not None:
        await service.persistence.flush_group(req.group_id)
        for topic in topics:
            for part in topic.partitions:
                err = failed.get((topic.topic_id, part.partition_index))
                if err is not None and not part.error_code:
                    part.error_code, part.error_message = err, None
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             responses=topics)


async def handle_delete_share_group_offsets(ctx: RequestContext,
                                            req: DeleteShareGroupOffsetsRequest
                                            ) -> DeleteShareGroupOffsetsResponse:
    R = DeleteShareGroupOffsetsResponse
    broker, service = ctx.broker, ctx.broker.share_groups
    code = _group_refusal(ctx, req.group_id, Op.DELETE)
    if not code and service is not None:
        if not service.exists(req.group_id):
            code = ErrorCode.GROUP_ID_NOT_FOUND
        elif service.non_empty(req.group_id):
            code = ErrorCode.NON_EMPTY_GROUP
    if code or service is None:
        return R(throttle_time_ms=0, error_code=code or ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                 error_message=None, responses=[])
    wanted: list[uuid.UUID] = []
    topics = []
    for t in req.topics:
        meta = broker.topics.get(t.topic_name)
        err, message = ErrorCode.NONE, None
        if meta is not None and not authz.topic(ctx, Op.READ, t.topic_name):
            err = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif meta is None:
            err, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, _UNKNOWN
        else:
            wanted.append(meta.topic_id)
        topics.append(R.DeleteShareGroupOffsetsResponseTopic(
            topic_name=t.topic_name, topic_id=meta.topic_id if meta is not None else _NO_ID,
            error_code=err, error_message=message))
    code, keys = service.deletable(req.group_id, wanted)
    if code:
        return R(throttle_time_ms=0, error_code=code, error_message=None, responses=[])
    failed = await _forget(service, keys)
    if service.persistence is not None:
        await service.persistence.flush_group(req.group_id)
    for topic in topics:  # a topic's answer: the first of its partitions that failed
        failure = next((c for k, c in failed.items() if k[1] == topic.topic_id), None)
        if failure is not None and not topic.error_code:
            topic.error_code, topic.error_message = failure, None
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
             responses=topics)


async def _forget(service: ShareService, keys: list[ShareKey],
                  group_id: str | None = None) -> dict[ShareKey, ErrorCode]:
    """The share-partitions' state removed for good: through the share
    coordinator (a tombstone in __share_group_state) when durable, all at
    once. Those that failed are not dropped here (nor, given ``group_id``,
    the group, so a retry finds it); their answers are returned, as the
    share-partition leader answers the coordinator's failures."""
    failed: dict[ShareKey, ErrorCode] = {}
    if service.persistence is not None:
        codes = await asyncio.gather(*(service.persistence.delete(k) for k in keys))
        failed = {k: persister_error(c) for k, c in zip(keys, codes) if c}
    service.drop([k for k in keys if k not in failed], None if failed else group_id)
    return failed


async def delete_share_groups(ctx: RequestContext, group_ids: list[str]
                              ) -> dict[str, ErrorCode]:
    """DeleteGroups' answers for the ids that name share groups here (the
    caller has checked DELETE on each); the others are left to the group
    coordinator."""
    service = ctx.broker.share_groups
    if service is None:
        return {}
    out = {}
    for gid in group_ids:
        if gid and service.exists(gid):
            code = coordinator_error(ctx, gid)
            if not code:
                code, keys = service.deletable(gid)
                if not code:
                    failed = await _forget(service, keys, gid)
                    code = next(iter(failed.values()), ErrorCode.NONE)
                    # tombstones: the group stays gone across a restart; not
                    # written, the deletion is not done (a retry writes them)
                    if service.persistence is not None \
                            and not await service.persistence.flush_group(gid) and not code:
                        code = ErrorCode.COORDINATOR_NOT_AVAILABLE
            out[gid] = code
    return out
