"""The ACL model, with Kafka's codes and names.

Resource types, pattern types, operations and permission types carry the
numeric codes Kafka puts on the wire (CreateAcls, DescribeAcls, DeleteAcls),
and the names Kafka writes in ZooKeeper ("Topic", "Read", "Allow") and prints
in kafka-acls ("TOPIC", "READ", "ALLOW").
"""
from __future__ import annotations

import dataclasses
import enum
from typing import Self

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"  # the one name a Cluster resource has


def _camel(name: str) -> str:
    """TRANSACTIONAL_ID -> TransactionalId (how Kafka names them in ZooKeeper)."""
    return "".join(part.capitalize() for part in name.split("_"))


class _Coded(enum.IntEnum):
    @property
    def zk_name(self) -> str:
        return _camel(self.name)

    @classmethod
    def parse(cls, text: str) -> Self:
        """Kafka's fromString: any case, with or without underscores."""
        key = text.replace("_", "").replace("-", "").upper()
        for member in cls:
            if member.name.replace("_", "") == key:
                return member
        raise ValueError(f"unknown {cls.__name__} {text!r}")

    @classmethod
    def of(cls, code: int) -> Self:
        """The member for a wire code; UNKNOWN for a code Kafka does not define."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)


class ResourceType(_Coded):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_Coded):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4

    @property
    def is_specific(self) -> bool:
        return self in (PatternType.LITERAL, PatternType.PREFIXED)


class AclOperation(_Coded):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Coded):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


SPECIFIC_RESOURCE_TYPES = tuple(t for t in ResourceType if t > ResourceType.ANY)
SPECIFIC_OPERATIONS = tuple(o for o in AclOperation if o > AclOperation.ANY)

# The operations an ACL can grant on each resource type (Kafka's
# ResourceType -> supported operations, as kafka-acls and the authorized
# operations fields of Metadata/DescribeGroups/DescribeCluster use them).
OPERATIONS_BY_RESOURCE = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE,
                         AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION,
                           AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
                           AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}


@dataclasses.dataclass(frozen=True, order=True)
class ResourcePattern:
    """What an ACL is about: a resource name (LITERAL, "*" being every
    resource of the type) or a name prefix (PREFIXED)."""
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return (f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
                f"patternType={self.pattern_type.name})")


@dataclasses.dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str          # "User:alice", or "User:*" for everyone
    host: str               # an address, or "*" for every host
    operation: AclOperation
    permission: AclPermissionType

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, "
                f"operation={self.operation.name}, permissionType={self.permission.name})")


@dataclasses.dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclasses.dataclass(frozen=True)
class AclBindingFilter:
    """Which bindings DescribeAcls lists and DeleteAcls removes: None and the
    ANY codes match everything; pattern type MATCH matches the patterns that
    would apply to the named resource (literal, wildcard and prefixes)."""
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: AclPermissionType = AclPermissionType.ANY

    def unknown_field(self) -> str | None:
        """The field naming a code Kafka does not define (INVALID_REQUEST), if any."""
        for field, value in (("resource type", self.resource_type),
                             ("pattern type", self.pattern_type),
                             ("operation", self.operation),
                             ("permission type", self.permission)):
            if value == 0:
                return field
        return None

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        # MATCH: the patterns that apply to the resource named by the filter
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return ((self.principal is None or self.principal == entry.principal)
                and (self.host is None or self.host == entry.host)
                and self.operation in (AclOperation.ANY, entry.operation)
                and self.permission in (AclPermissionType.ANY, entry.permission))

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


def stored_name_error(name: str) -> str | None:
    """Why a resource name cannot name an ACL znode, or None: "/" would make
    it a deeper node that loading never reads (Kafka's AclAuthorizer refuses
    it), "." and ".." are not valid ZooKeeper node names."""
    if "/" in name:
        return f"ACL binding contains invalid resource name: {name}"
    if name in (".", ".."):
        return f"Invalid resource name {name!r}: not a valid ZooKeeper node name"
    return None


def creation_error(binding: AclBinding) -> str | None:
    """Why Kafka refuses to create ``binding`` (INVALID_REQUEST), or None."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return "Invalid resource type"
    if not pattern.pattern_type.is_specific:
        return f"Invalid pattern type {pattern.pattern_type.name}: LITERAL or PREFIXED"
    if not pattern.name:
        return "Invalid empty resource name"
    why = stored_name_error(pattern.name)
    if why:
        return why
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return "Invalid operation"
    if entry.permission in (AclPermissionType.UNKNOWN, AclPermissionType.ANY):
        return "Invalid permission type"
    principal_type, sep, _ = entry.principal.partition(":")
    if not sep or not principal_type:
        return f"Invalid principal {entry.principal!r}: expected <type>:<name>, e.g. User:alice"
    if not entry.host:
        return "Invalid empty host"
    return None
