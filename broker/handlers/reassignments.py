"""AlterPartitionReassignments and ListPartitionReassignments
(kafka-reassign-partitions, Admin.alterPartitionReassignments): answered by
the controller, which starts each move and lets it complete in the
background; any other broker answers NOT_CONTROLLER, as Kafka's do."""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AlterPartitionReassignmentsRequest,
                               AlterPartitionReassignmentsResponse,
                               ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse)

from . import authz
from .authz import Op
from .context import RequestContext, off_loop

ALTER = AlterPartitionReassignmentsResponse
LIST = ListPartitionReassignmentsResponse


def _not_controller(message: str = "this broker is not the controller") -> tuple[ErrorCode, str]:
    return ErrorCode.NOT_CONTROLLER, message


async def handle_alter_partition_reassignments(ctx: RequestContext, req: AlterPartitionReassignmentsRequest
                                               ) -> AlterPartitionReassignmentsResponse:
    requests = {(t.name, p.partition_index): (None if p.replicas is None else list(p.replicas))
                for t in req.topics for p in t.partitions}
    controller = ctx.broker.controller
    results = None
    allow = req.allow_replication_factor_change if ctx.version >= 1 else True
    if not authz.cluster(ctx, Op.ALTER):
        return ALTER(throttle_time_ms=0, allow_replication_factor_change=allow,
                     error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                     error_message=authz.CLUSTER_DENIED,
                     responses=[])
    if controller is not None and controller.active:
        try:
            results = await off_loop(controller.reassign, requests,
                                     max(req.timeout_ms, 1000) / 1000, allow)
        except TimeoutError as e:  # still queued: it may be carried out later
            return ALTER(throttle_time_ms=0, allow_replication_factor_change=allow,
                         error_code=ErrorCode.REQUEST_TIMED_OUT, error_message=str(e),
                         responses=[])
    if results is None:
        code, message = _not_controller()
        return ALTER(throttle_time_ms=0, allow_replication_factor_change=allow, error_code=code,
                     error_message=message, responses=[])
    by_topic: dict[str, list[ALTER.ReassignablePartitionResponse]] = {}
    for (topic, partition), (result_code, result_message) in sorted(results.items()):
        by_topic.setdefault(topic, []).append(ALTER.ReassignablePartitionResponse(
            partition_index=partition, error_code=result_code, error_message=result_message))
    return ALTER(throttle_time_ms=0, allow_replication_factor_change=allow,
                 error_code=ErrorCode.NONE, error_message=None, responses=[
        ALTER.ReassignableTopicResponse(name=t, partitions=ps) for t, ps in by_topic.items()])


async def handle_list_partition_reassignments(ctx: RequestContext, req: ListPartitionReassignmentsRequest
                                              ) -> ListPartitionReassignmentsResponse:
    if not authz.cluster(ctx, Op.DESCRIBE):
        return LIST(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                    error_message=authz.CLUSTER_DENIED, topics=[])
    controller = ctx.broker.controller
    running = controller.reassignments() if controller is not None else None
    if running is None:
        code, message = _not_controller()
        return LIST(throttle_time_ms=0, error_code=code, error_message=message, topics=[])
    if req.topics is not None:  # only the partitions asked about
        wanted = {(t.name, p) for t in req.topics for p in t.partition_indexes}
        running = {tp: r for tp, r in running.items() if tp in wanted}
    by_topic: dict[str, list[LIST.OngoingPartitionReassignment]] = {}
    for (topic, partition), r in sorted(running.items()):
        by_topic.setdefault(topic, []).append(LIST.OngoingPartitionReassignment(
            partition_index=partition, replicas=list(r.full), adding_replicas=list(r.adding),
            removing_replicas=list(r.removing)))
    return LIST(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, topics=[
        LIST.OngoingTopicReassignment(name=t, partitions=ps) for t, ps in by_topic.items()])
