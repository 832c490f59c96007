"""ACLs for handler tests: allow a principal an operation on a resource."""
from __future__ import annotations

from samsa.broker.security.acl import (AccessControlEntry, AclBinding, AclOperation,
                                 AclPermissionType, PatternType, ResourceType)
from samsa.broker.security.acl.model import ResourcePattern

from .fakes import FakeAcls


def allow(acls: FakeAcls, principal: str, operation: AclOperation, resource_type: ResourceType,
          name: str) -> None:
    acls.add([AclBinding(ResourcePattern(resource_type, name, PatternType.LITERAL),
                         AccessControlEntry(principal, "*", operation, AclPermissionType.ALLOW))])
