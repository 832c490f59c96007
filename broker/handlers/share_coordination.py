"""Whether this broker is a share group's coordinator: the one rule that the
share-group handlers (heartbeat, describe, admin), ListGroups and the
share-group gauges all follow. A share group's coordinator is its group
coordinator (the leader of its __consumer_offsets partition); a broker that
only leads some of the group's share-partitions serves their records but does
not answer for the group."""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from .context import RequestContext
from .services import CoordinatorLocation


def coordination_error(locator: CoordinatorLocation, broker_id: int, group_id: str
                       ) -> ErrorCode:
    """NONE if broker ``broker_id`` coordinates the group, else Kafka's answer
    to a group request sent here (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE)."""
    found = locator.locate(group_id)
    if found.error:
        return found.error
    if found.node is None or found.node.node_id != broker_id:
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.NONE


def coordinator_error(ctx: RequestContext, group_id: str) -> ErrorCode:
    """A share-group request's answer when this broker may not serve the
    group: not its coordinator, or the group's records not read yet (the
    share groups not started, or its __consumer_offsets partition loading)."""
    broker = ctx.broker
    if broker.share_groups is None:
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    code = coordination_error(broker.coordinators, broker.config.broker_id, group_id)
    if not code and broker.share_groups.loading(group_id):
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return code
