"""The one place handlers ask "may this connection do that?".

With no authorizer configured (authorizer.class.name empty) everything is
allowed, as before ACLs existed. The principal is the connection's
(ctx.conn.principal), the host its peer address, as Kafka's
AuthorizableRequestContext gives them.
"""
from __future__ import annotations

from typing import Iterable, TypeVar

from protocol.errors import ErrorCode

from ..security.acl import CLUSTER_NAME, AclOperation, ResourceType

Op = AclOperation
T = TypeVar("T")

# Kafka's error for a refused operation, by the kind of resource refused.
DENIED_ERROR = {
    ResourceType.TOPIC: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
    ResourceType.GROUP: ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ResourceType.CLUSTER: ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ResourceType.TRANSACTIONAL_ID: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ResourceType.DELEGATION_TOKEN: ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
}
# What the authorized-operations fields hold when nobody asked for them.
NOT_REQUESTED = -2147483648
# ... and, with no authorizer, every operation Kafka defines for the type.
_EVERY_OPERATION = {
    ResourceType.TOPIC: sum(1 << op for op in (3, 4, 5, 6, 7, 8, 10, 11)),
    ResourceType.GROUP: sum(1 << op for op in (3, 6, 8)),
    ResourceType.CLUSTER: sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12)),
}


def enabled(ctx) -> bool:
    return getattr(ctx.broker, "acls", None) is not None


def allowed(ctx, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
    acls = getattr(ctx.broker, "acls", None)
    if acls is None:
        return True
    return acls.authorizer.authorize(ctx.conn.principal, ctx.conn.peer_host, operation,
                                     resource_type, name)


def topic(ctx, operation: AclOperation, name: str) -> bool:
    return allowed(ctx, operation, ResourceType.TOPIC, name)


def group(ctx, operation: AclOperation, name: str) -> bool:
    return allowed(ctx, operation, ResourceType.GROUP, name)


def cluster(ctx, operation: AclOperation) -> bool:
    return allowed(ctx, operation, ResourceType.CLUSTER, CLUSTER_NAME)


def transactional_id(ctx, operation: AclOperation, name: str) -> bool:
    return allowed(ctx, operation, ResourceType.TRANSACTIONAL_ID, name)


def any_of_type(ctx, operation: AclOperation, resource_type: ResourceType) -> bool:
    """May the connection do ``operation`` on some resource of the type
    (Kafka's authorizeByResourceType)?"""
    acls = getattr(ctx.broker, "acls", None)
    if acls is None:
        return True
    return acls.authorizer.authorize_any_of_type(ctx.conn.principal, ctx.conn.peer_host,
                                                 operation, resource_type)


def topics_allowed(ctx, operation: AclOperation, names: Iterable[str]) -> set[str]:
    """The subset of ``names`` the connection may do ``operation`` on."""
    return {n for n in names if topic(ctx, operation, n)}


def authorized_operations(ctx, resource_type: ResourceType, name: str) -> int:
    """The bit field of Metadata's, DescribeGroups' and DescribeCluster's
    authorized operations fields."""
    acls = getattr(ctx.broker, "acls", None)
    if acls is None:
        return _EVERY_OPERATION[resource_type]
    return acls.authorizer.authorized_operations(ctx.conn.principal, ctx.conn.peer_host,
                                                 resource_type, name)


def topic_checker(ctx, operation: AclOperation):
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
