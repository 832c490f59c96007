"""Kafka's ZooKeeper layout of ACLs (AclAuthorizer, ZooKeeper mode), pure.

- /kafka-acl/<ResourceType>/<name>: the LITERAL ACLs of one resource;
- /kafka-acl-extended/prefixed/<ResourceType>/<name>: the PREFIXED ones;
  each {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",
  "operation":"Read","host":"*"}, ...]};
- /kafka-acl-changes/acl_changes_<seq>: a literal resource changed, the data
  being "<RESOURCE_TYPE>:<name>" (Kafka's legacy string form);
- /kafka-acl-extended-changes/acl_changes_<seq>: a prefixed one changed,
  {"version":1,"resourceType":"TOPIC","name":"...","patternType":"PREFIXED"}.
"""
from __future__ import annotations

import json

from ..security.acl.model import (AccessControlEntry, AclOperation, AclPermissionType,
                                  PatternType, ResourcePattern, ResourceType,
                                  stored_name_error)

LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"


class AclZNodeError(ValueError):
    pass


def acl_root(pattern_type: PatternType) -> str:
    if pattern_type == PatternType.LITERAL:
        return LITERAL_ACLS
    if pattern_type == PatternType.PREFIXED:
        return f"{EXTENDED_ACLS}/{pattern_type.name.lower()}"
    raise ValueError(f"no ACLs are stored for pattern type {pattern_type.name}")


def type_path(pattern_type: PatternType, resource_type: ResourceType) -> str:
    """The parent of every ACL znode of the type (Kafka creates them at start)."""
    return f"{acl_root(pattern_type)}/{resource_type.zk_name}"


def acl_path(pattern: ResourcePattern) -> str:
    """ValueError for a name that cannot be one znode (stored_name_error)."""
    why = stored_name_error(pattern.name)
    if why:
        raise ValueError(why)
    return f"{type_path(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"


def change_root(pattern_type: PatternType) -> str:
    return LITERAL_CHANGES if pattern_type == PatternType.LITERAL else EXTENDED_CHANGES


def resource_type_from_zk(name: str) -> ResourceType:
    rt = ResourceType.parse(name)
    if rt in (ResourceType.UNKNOWN, ResourceType.ANY):
        raise ValueError(name)
    return rt


def encode_acls(entries) -> bytes:
    acls = [{"principal": e.principal, "permissionType": e.permission.zk_name,
             "operation": e.operation.zk_name, "host": e.host} for e in sorted(entries)]
    return json.dumps({"version": 1, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(path: str, data: bytes | None) -> frozenset[AccessControlEntry]:
    if not data:
        return frozenset()
    try:
        doc = json.loads(data)
        return frozenset(
            AccessControlEntry(str(a["principal"]), str(a["host"]),
                               AclOperation.parse(a["operation"]),
                               AclPermissionType.parse(a["permissionType"]))
            for a in doc.get("acls", []))
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise AclZNodeError(f"{path}: not Kafka's ACL JSON ({e})") from None


def encode_change(pattern: ResourcePattern) -> bytes:
    if pattern.pattern_type == PatternType.LITERAL:
        return f"{pattern.resource_type.name}:{pattern.name}".encode()
    return json.dumps({"version": 1, "resourceType": pattern.resource_type.name,
                       "name": pattern.name, "patternType": pattern.pattern_type.name},
                      separators=(",", ":")).encode()


def decode_change(root: str, data: bytes) -> ResourcePattern:
    """The resource a change notice names; ValueError when it is not Kafka's form."""
    text = data.decode("utf-8")
    if root == LITERAL_CHANGES:
        rtype, sep, name = text.partition(":")
        if not sep:
            raise ValueError(f"expected ResourceType:name, not {text!r}")
        return ResourcePattern(resource_type_from_zk(rtype), name, PatternType.LITERAL)
    doc = json.loads(text)
    pattern_type = PatternType.parse(doc["patternType"])
    if not pattern_type.is_specific:
        raise ValueError(f"pattern type {pattern_type.name}")
    return ResourcePattern(resource_type_from_zk(doc["resourceType"]), str(doc["name"]),
                           pattern_type)
