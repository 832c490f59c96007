"""KIP-848 consumer groups: ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69), translated to and from the coordinator's
consumer-group calls (broker/groups/consumer/). Topics go by id on the wire;
the coordinator resolves subscriptions by name against the metadata."""
from __future__ import annotations

import uuid

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse,
                                     ConsumerGroupHeartbeatRequest,
                                     ConsumerGroupHeartbeatResponse)

from ..groups.consumer.machine import Heartbeat
from ..security.acl import ResourceType
from . import authz
from .authz import Op
from .context import RequestContext
from .groups import _client_host, _client_id, _groups

NO_AUTHORIZED_OPERATIONS = authz.NOT_REQUESTED


async def handle_consumer_group_heartbeat(ctx: RequestContext,
                                          req: ConsumerGroupHeartbeatRequest
                                          ) -> ConsumerGroupHeartbeatResponse:
    R = ConsumerGroupHeartbeatResponse
    if not authz.group(ctx, Op.READ, req.group_id):
        return R(throttle_time_ms=0, error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED,
                 member_epoch=-1, heartbeat_interval_ms=0)
    topics = list(req.subscribed_topic_names) if req.subscribed_topic_names is not None \
        else None
    if topics and not all(authz.topic(ctx, Op.DESCRIBE, t) for t in topics):
        return R(throttle_time_ms=0, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                 member_epoch=-1, heartbeat_interval_ms=0)
    owned = None if req.topic_partitions is None else [
        (tp.topic_id, list(tp.partitions)) for tp in req.topic_partitions]
    hb = Heartbeat(
        member_id=req.member_id, member_epoch=req.member_epoch, instance_id=req.instance_id,
        rack_id=req.rack_id, rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=topics,
        subscribed_topic_regex=req.subscribed_topic_regex if ctx.version >= 1 else None,
        server_assignor=req.server_assignor, owned=owned, client_id=_client_id(ctx),
        client_host=_client_host(ctx), version=ctx.version)
    res = await _groups(ctx).consumer_group_heartbeat(req.group_id, hb)
    assignment = None
    if res.assignment is not None:
        assignment = R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=t, partitions=ps) for t, ps in res.assignment.items()])
    return R(throttle_time_ms=0, error_code=res.error_code, error_message=res.error_message,
             member_id=res.member_id, member_epoch=res.member_epoch,
             heartbeat_interval_ms=res.heartbeat_interval_ms, assignment=assignment)


async def handle_consumer_group_describe(ctx: RequestContext,
                                         req: ConsumerGroupDescribeRequest
                                         ) -> ConsumerGroupDescribeResponse:
    R = ConsumerGroupDescribeResponse
    allowed = [authz.group(ctx, Op.DESCRIBE, g) for g in req.group_ids]
    may = [g for g, ok in zip(req.group_ids, allowed) if ok]
    described = iter(await _groups(ctx).consumer_group_describe(may) if may else ())
    names = {meta.topic_id: name for name, meta in ctx.broker.topics.topics().items()}

    def assignment(a: dict[uuid.UUID, list[int]]) -> ConsumerGroupDescribeResponse.Assignment:
        return R.Assignment(topic_partitions=[
            R.TopicPartitions(topic_id=t, topic_name=names.get(t, ""), partitions=ps)
            for t, ps in a.items()])

    groups = []
    for group_id, ok in zip(req.group_ids, allowed):
        if not ok:
            groups.append(R.DescribedGroup(
                error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id=group_id,
                group_state="", group_epoch=0, assignment_epoch=0, assignor_name="",
                members=[], authorized_operations=NO_AUTHORIZED_OPERATIONS))
            continue
        d = next(described)
        ops = (authz.authorized_operations(ctx, ResourceType.GROUP, group_id)
               if req.include_authorized_operations else NO_AUTHORIZED_OPERATIONS)
        groups.append(R.DescribedGroup(
            error_code=d.error_code, error_message=d.error_message, group_id=d.group_id,
            group_state=d.state, group_epoch=d.group_epoch,
            assignment_epoch=d.assignment_epoch, assignor_name=d.assignor,
            members=[R.Member(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id,
                member_epoch=m.member_epoch, client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=m.subscribed_topic_names,
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=assignment(m.assignment), target_assignment=assignment(m.target),
                # KIP-1099: 0 a classic member (an online migration), 1 a consumer one
                member_type=0 if m.classic else 1) for m in d.members],
            authorized_operations=ops))
    return R(throttle_time_ms=0, groups=groups)
