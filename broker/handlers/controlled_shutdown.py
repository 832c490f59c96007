"""ControlledShutdown: a broker about to stop asks the controller to move its
partitions' leadership elsewhere first (ZooKeeper-mode Kafka's API 7)."""
from __future__ import annotations

from samsa.broker.cluster.controller_events import ShutdownRefused
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ControlledShutdownRequest, ControlledShutdownResponse

from . import authz
from .authz import Op
from .context import off_loop
from .context import RequestContext

R = ControlledShutdownResponse
DECISION_TIMEOUT_S = 30.0

# Kafka's answers. (Asked with a broker epoch by a broker it does not know,
# Kafka's controller fails looking the epoch up and answers
# UNKNOWN_SERVER_ERROR; without one, BROKER_NOT_AVAILABLE: that is what it
# means, so it is the answer either way here.)
REFUSED_AS = {
    ShutdownRefused.UNKNOWN_BROKER: ErrorCode.BROKER_NOT_AVAILABLE,
    ShutdownRefused.STALE_BROKER_EPOCH: ErrorCode.STALE_BROKER_EPOCH,
}


async def handle_controlled_shutdown(ctx: RequestContext, req: ControlledShutdownRequest
                                     ) -> ControlledShutdownResponse:
    if not authz.cluster(ctx, Op.CLUSTER_ACTION):
        return R(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, remaining_partitions=[])
    controller = ctx.broker.controller
    if controller is None or not controller.active:
        return R(error_code=ErrorCode.NOT_CONTROLLER, remaining_partitions=[])
    remaining = await off_loop(controller.controlled_shutdown, req.broker_id, req.broker_epoch,
                               DECISION_TIMEOUT_S)
    if remaining is None:
        return R(error_code=ErrorCode.NOT_CONTROLLER, remaining_partitions=[])
    if isinstance(remaining, ShutdownRefused):
        return R(error_code=REFUSED_AS[remaining], remaining_partitions=[])
    return R(error_code=ErrorCode.NONE, remaining_partitions=[
        R.RemainingPartition(topic_name=t, partition_index=p) for t, p in remaining])
