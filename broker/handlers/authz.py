"""The one place handlers ask "may this connection do that?".

With no authorizer configured (authorizer.class.name empty) everything is
allowed, as before ACLs existed. The principal is the connection's
(ctx.conn.principal), the host its peer address, as Kafka's
AuthorizableRequestContext gives them.
"""
from __future__ import annotations

from typing import Callable

from ..security.acl import CLUSTER_NAME, AclOperation, ResourceType
from ..security.acl.model import OPERATIONS_BY_RESOURCE
from .context import RequestContext

Op = AclOperation

# What the authorized-operations fields hold when nobody asked for them.
NOT_REQUESTED = -2147483648

# Kafka's words for a refusal: its Errors' default messages, and the
# "Authorization failed." its topic admin APIs write. A refusal carries one
# wherever Kafka's does (librdkafka aborts on some null messages).
DENIED = "Authorization failed."
TOPIC_DENIED = "Topic authorization failed."
CLUSTER_DENIED = "Cluster authorization failed."

def enabled(ctx: RequestContext) -> bool:
    return ctx.broker.acls is not None


def allowed(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    acls = ctx.broker.acls
    if acls is None:
        return True
    return acls.authorizer.authorize(ctx.conn.principal, ctx.conn.peer_host, operation,
                                     resource_type, name)


def topic(ctx: RequestContext, operation: AclOperation, name: str) -> bool:
    return allowed(ctx, operation, ResourceType.TOPIC, name)


def group(ctx: RequestContext, operation: AclOperation, name: str) -> bool:
    return allowed(ctx, operation, ResourceType.GROUP, name)


def cluster(ctx: RequestContext, operation: AclOperation) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def transactional_id(ctx: RequestContext, operation: AclOperation, name: str) -> bool:
    return allowed(ctx, operation, ResourceType.TRANSACTIONAL_ID, name)


def any_of_type(ctx: RequestContext, operation: AclOperation, resource_type: ResourceType) -> bool:
    """May the connection do ``operation`` on some resource of the type
    (Kafka's authorizeByResourceType)?"""
    acls = ctx.broker.acls
    if acls is None:
        return True
    return acls.authorizer.authorize_any_of_type(ctx.conn.principal, ctx.conn.peer_host,
                                                 operation, resource_type)


def authorized_operations(ctx: RequestContext, resource_type: ResourceType, name: str) -> int:
    """The bit field of Metadata's, DescribeGroups' and DescribeCluster's
    authorized operations fields."""
    acls = ctx.broker.acls
    if acls is None:  # every operation Kafka defines for the type
        return sum(1 << op for op in OPERATIONS_BY_RESOURCE[resource_type])
    return acls.authorizer.authorized_operations(ctx.conn.principal, ctx.conn.peer_host,
                                                 resource_type, name)


def topic_checker(ctx: RequestContext, operation: AclOperation) -> Callable[[str], bool]:
    """``allowed(topic name) -> bool`` for one request, deciding each name once."""
    if not enabled(ctx):
        return _always
    decided: dict[str, bool] = {}

    def check(name: str) -> bool:
        verdict = decided.get(name)
        if verdict is None:
            verdict = decided[name] = topic(ctx, operation, name)
        return verdict
    return check


def _always(_name: str) -> bool:
    return True
