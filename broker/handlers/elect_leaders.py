"""ElectLeaders (kafka-leader-election, Admin.electLeaders): the controller
moves leadership to each partition's preferred replica, or (unclean) to any
live replica of a partition without a leader."""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ElectLeadersRequest, ElectLeadersResponse
from samsa.protocol.model import TopicPartition

from . import authz
from .authz import Op
from .context import RequestContext, off_loop

R = ElectLeadersResponse
PREFERRED, UNCLEAN = 0, 1


def _answer(version: int, top: ErrorCode, results: dict[TopicPartition, ErrorCode]
            ) -> ElectLeadersResponse:
    by_topic: dict[str, list[R.PartitionResult]] = {}
    for (topic, partition), code in sorted(results.items()):
        by_topic.setdefault(topic, []).append(R.PartitionResult(
            partition_id=partition, error_code=code,
            error_message=None if code == ErrorCode.NONE else code.name))
    return R(throttle_time_ms=0, error_code=top, replica_election_results=[
        R.ReplicaElectionResult(topic=t, partition_result=ps) for t, ps in by_topic.items()])


async def handle_elect_leaders(ctx: RequestContext, req: ElectLeadersRequest
                               ) -> ElectLeadersResponse:
    version = ctx.version
    wanted = None
    if req.topic_partitions is not None:
        wanted = [(t.topic, p) for t in req.topic_partitions for p in t.partitions]
    election = req.election_type if version >= 1 else PREFERRED
    controller = ctx.broker.controller
    results = None
    if not authz.cluster(ctx, Op.ALTER):
        if version >= 1:
            return _answer(version, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, {})
        return _answer(version, ErrorCode.NONE, {
            tp: ErrorCode.CLUSTER_AUTHORIZATION_FAILED for tp in wanted or ()})
    if election in (PREFERRED, UNCLEAN) and controller is not None and controller.active:
        timeout = max(req.timeout_ms, 1000) / 1000
        results = await off_loop(controller.elect_leaders, wanted, election == UNCLEAN, timeout)
    if results is None:
        code = (ErrorCode.INVALID_REQUEST if election not in (PREFERRED, UNCLEAN)
                else ErrorCode.NOT_CONTROLLER)
        if version >= 1:
            return _answer(version, code, {})
        return _answer(version, ErrorCode.NONE, {tp: code for tp in wanted or ()})
    return _answer(version, ErrorCode.NONE, results)
