"""CreateAcls / DescribeAcls / DeleteAcls through the ACL service, and their refusals."""
from __future__ import annotations

from samsa.broker.handlers.acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from samsa.broker.security.acl import AclOperation, AclPermissionType, PatternType, ResourceType
from samsa.broker.security.principal import user
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from samsa.protocol.model import ApiKey

from .fakes import FakeAcls, FakeServices, context

ADMIN = "User:admin"


def _creation(name: str, principal: str = "User:alice") -> CreateAclsRequest.AclCreation:
    return CreateAclsRequest.AclCreation(
        resource_type=ResourceType.TOPIC, resource_name=name,
        resource_pattern_type=PatternType.LITERAL, principal=principal, host="*",
        operation=AclOperation.READ, permission_type=AclPermissionType.ALLOW)


def _every_topic_filter() -> DescribeAclsRequest:
    return DescribeAclsRequest(resource_type_filter=ResourceType.TOPIC, resource_name_filter=None,
                               pattern_type_filter=PatternType.ANY, principal_filter=None,
                               host_filter=None, operation=AclOperation.ANY,
                               permission_type=AclPermissionType.ANY)


async def test_without_an_authorizer_every_acl_request_says_security_disabled():
    services = FakeServices()
    created = await handle_create_acls(context(services, ApiKey.CREATE_ACLS, 2),
                                       CreateAclsRequest(creations=[_creation("t")]))
    assert [r.error_code for r in created.results] == [ErrorCode.SECURITY_DISABLED]
    described = await handle_describe_acls(context(services, ApiKey.DESCRIBE_ACLS, 2),
                                           _every_topic_filter())
    assert described.error_code == ErrorCode.SECURITY_DISABLED


async def test_created_acls_are_described_and_deleted():
    services = FakeServices(acls=FakeAcls(super_users=[ADMIN]))
    admin = user("admin")
    created = await handle_create_acls(context(services, ApiKey.CREATE_ACLS, 2, admin),
                                       CreateAclsRequest(creations=[_creation("t"), _creation("u")]))
    assert [r.error_code for r in created.results] == [0, 0]
    described = await handle_describe_acls(context(services, ApiKey.DESCRIBE_ACLS, 2, admin),
                                           _every_topic_filter())
    assert described.error_code == 0
    assert sorted((r.resource_name, a.principal, a.operation) for r in described.resources
                  for a in r.acls) == [("t", "User:alice", AclOperation.READ),
                                       ("u", "User:alice", AclOperation.READ)]
    f = _every_topic_filter()
    deleted = await handle_delete_acls(context(services, ApiKey.DELETE_ACLS, 2, admin),
                                       DeleteAclsRequest(filters=[DeleteAclsRequest.DeleteAclsFilter(
                                           resource_type_filter=f.resource_type_filter,
                                           resource_name_filter="t",
                                           pattern_type_filter=PatternType.LITERAL,
                                           principal_filter=None, host_filter=None,
                                           operation=AclOperation.ANY,
                                           permission_type=AclPermissionType.ANY)]))
    [result] = deleted.filter_results
    assert result.error_code == 0
    assert [m.resource_name for m in result.matching_acls] == ["t"]
    assert services.acls is not None
    assert [b.pattern.name for b in services.acls.authorizer.bindings()] == ["u"]


async def test_a_client_without_alter_on_the_cluster_may_not_create_acls():
    services = FakeServices(acls=FakeAcls())
    created = await handle_create_acls(context(services, ApiKey.CREATE_ACLS, 2, user("mallory")),
                                       CreateAclsRequest(creations=[_creation("t", "User:mallory")]))
    assert [r.error_code for r in created.results] == [ErrorCode.CLUSTER_AUTHORIZATION_FAILED]
    assert services.acls is not None and services.acls.authorizer.bindings() == []
