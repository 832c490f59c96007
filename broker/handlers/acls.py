"""CreateAcls, DescribeAcls and DeleteAcls, as Kafka's brokers answer them.

Without an authorizer every answer is SECURITY_DISABLED. Describing needs
Describe on the cluster, creating and deleting Alter on it
(CLUSTER_AUTHORIZATION_FAILED otherwise). A binding Kafka would refuse
(unknown codes, a pattern that is not LITERAL or PREFIXED, a Cluster resource
not named kafka-cluster, a principal without a type) is INVALID_REQUEST.
"""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest,
                               DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse)

from ..metadata import MetadataUnavailableError
from ..security.acl import (AccessControlEntry, AclBinding, AclBindingFilter, AclOperation,
                            AclPermissionType, PatternType, ResourcePattern, ResourceType,
                            creation_error)
from . import authz
from .context import RequestContext, off_loop
from .services import Acls

_NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _filter(f: DescribeAclsRequest | DeleteAclsRequest.DeleteAclsFilter, version: int
            ) -> AclBindingFilter:
    return AclBindingFilter(
        ResourceType.of(f.resource_type_filter), f.resource_name_filter,
        PatternType.of(f.pattern_type_filter) if version >= 1 else PatternType.LITERAL,
        f.principal_filter, f.host_filter, AclOperation.of(f.operation),
        AclPermissionType.of(f.permission_type))


def _acls_or_refusal(ctx: RequestContext, operation: AclOperation) -> Acls | tuple[ErrorCode, str]:
    """The ACL service, or why the request is refused (no authorizer, or not allowed)."""
    acls = ctx.broker.acls
    if acls is None:
        return ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER
    if not authz.cluster(ctx, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authz.CLUSTER_DENIED
    return acls


async def handle_describe_acls(ctx: RequestContext, req: DescribeAclsRequest
                               ) -> DescribeAclsResponse:
    R = DescribeAclsResponse
    acls = _acls_or_refusal(ctx, AclOperation.DESCRIBE)
    if isinstance(acls, tuple):
        refused = acls
        return R(throttle_time_ms=0, error_code=refused[0], error_message=refused[1],
                 resources=[])
    flt = _filter(req, ctx.version)
    unknown = flt.unknown_field()
    if unknown:
        return R(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST,
                 error_message=f"unknown {unknown} in the filter", resources=[])
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in acls.authorizer.bindings(flt):
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    return R(throttle_time_ms=0, error_code=0, error_message=None, resources=[
        R.DescribeAclsResource(
            resource_type=p.resource_type, resource_name=p.name, pattern_type=p.pattern_type,
            acls=[R.AclDescription(principal=e.principal, host=e.host, operation=e.operation,
                                   permission_type=e.permission) for e in entries])
        for p, entries in by_pattern.items()])


async def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    R = CreateAclsResponse
    acls = _acls_or_refusal(ctx, AclOperation.ALTER)
    if isinstance(acls, tuple):
        refused = acls
        return R(throttle_time_ms=0, results=[
            R.AclCreationResult(error_code=refused[0], error_message=refused[1])
            for _ in req.creations])
    results, valid = [], []
    for c in req.creations:
        pattern_type = PatternType.of(c.resource_pattern_type) if ctx.version >= 1 \
            else PatternType.LITERAL
        binding = AclBinding(
            ResourcePattern(ResourceType.of(c.resource_type), c.resource_name, pattern_type),
            AccessControlEntry(c.principal, c.host, AclOperation.of(c.operation),
                               AclPermissionType.of(c.permission_type)))
        why = creation_error(binding)
        result = R.AclCreationResult(error_code=ErrorCode.INVALID_REQUEST if why else 0,
                                     error_message=why)
        results.append(result)
        if not why:
            valid.append((binding, result))
    if valid:
        try:
            await off_loop(acls.add, [b for b, _ in valid])
        except MetadataUnavailableError as e:
            for _, result in valid:
                result.error_code, result.error_message = ErrorCode.UNKNOWN_SERVER_ERROR, str(e)
    return R(throttle_time_ms=0, results=results)


async def handle_delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    R = DeleteAclsResponse
    acls = _acls_or_refusal(ctx, AclOperation.ALTER)
    if isinstance(acls, tuple):
        refused = acls
        return R(throttle_time_ms=0, filter_results=[
            R.DeleteAclsFilterResult(error_code=refused[0], error_message=refused[1],
                                     matching_acls=[]) for _ in req.filters])
    filters = [_filter(f, ctx.version) for f in req.filters]
    results: list[DeleteAclsResponse.DeleteAclsFilterResult | None] = [None] * len(filters)
    usable = []
    for i, flt in enumerate(filters):
        unknown = flt.unknown_field()
        if unknown:
            results[i] = R.DeleteAclsFilterResult(
                error_code=ErrorCode.INVALID_REQUEST,
                error_message=f"unknown {unknown} in the filter", matching_acls=[])
        else:
            usable.append(i)
    try:
        deleted = await off_loop(acls.remove, [filters[i] for i in usable])
        error, message = 0, None
    except MetadataUnavailableError as e:
        deleted, error, message = [[] for _ in usable], ErrorCode.UNKNOWN_SERVER_ERROR, str(e)
    for i, found in zip(usable, deleted):
        results[i] = R.DeleteAclsFilterResult(error_code=error, error_message=message,
                                              matching_acls=[
            R.DeleteAclsMatchingAcl(
                error_code=0, error_message=None, resource_type=b.pattern.resource_type,
                resource_name=b.pattern.name, pattern_type=b.pattern.pattern_type,
                principal=b.entry.principal, host=b.entry.host, operation=b.entry.operation,
                permission_type=b.entry.permission) for b in found])
    return R(throttle_time_ms=0, filter_results=[r for r in results if r is not None])
