"""Kafka's AclAuthorizer rules: who may do what on which resource.

The rules, as Kafka's ZooKeeper-mode AclAuthorizer applies them:
- a super user (``super.users``) may do anything;
- the ACLs that apply to a resource are those on its literal name, on the
  wildcard name "*" of its type, and on every prefix of its name (PREFIXED);
- when none applies, ``allow.everyone.if.no.acl.found`` decides;
- a DENY that matches the principal (or User:*), the host (or *) and the
  operation (or ALL) wins over any ALLOW;
- otherwise an ALLOW is needed, for the operation, ALL, or an operation that
  implies it: Read, Write, Delete and Alter imply Describe; AlterConfigs
  implies DescribeConfigs. A DENY is never implied.

The ACLs are held as an immutable snapshot replaced on every change, so
handlers on any thread read it without a lock.
"""
from __future__ import annotations

import logging
import threading
from typing import Iterable, Mapping

from samsa.config.broker import AUTHORIZER_CLASS_NAMES as _CLASS_NAMES

from ..principal import KafkaPrincipal
from .model import (OPERATIONS_BY_RESOURCE, WILDCARD_HOST, WILDCARD_PRINCIPAL, WILDCARD_RESOURCE,
                    AccessControlEntry, AclBinding, AclBindingFilter, AclOperation,
                    AclPermissionType, PatternType, ResourcePattern, ResourceType)

log = logging.getLogger("broker.security.acl")

# The class names that turn on ACL authorization (config/broker.py validates the key).
AUTHORIZER_CLASS_NAMES = frozenset(_CLASS_NAMES)

_IMPLIED_BY = {
    AclOperation.DESCRIBE: frozenset({AclOperation.DESCRIBE, AclOperation.READ,
                                      AclOperation.WRITE, AclOperation.DELETE,
                                      AclOperation.ALTER}),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS,
                                              AclOperation.ALTER_CONFIGS}),
}

Acls = Mapping[ResourcePattern, frozenset[AccessControlEntry]]
_MAX_DECISIONS = 100_000  # remembered answers, forgotten all at once beyond that


def parse_super_users(value: str | None) -> frozenset[str]:
    """``super.users``: principals separated by semicolons ("User:admin;User:broker")."""
    if not value:
        return frozenset()
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class AclAuthorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_if_no_acls: bool = False,
                 acls: Acls | None = None) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acls = allow_if_no_acls
        self._lock = threading.Lock()  # one replacement of the snapshot at a time
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._prefixed: dict[ResourceType, frozenset[str]] = {}  # prefixed names by type
        # (principal, host, operation, resource type, name) -> the decision
        self._decisions: dict[tuple[KafkaPrincipal, str, AclOperation, ResourceType, str], bool] = {}
        self.replace_all(acls or {})

    # ------------------------------------------------------------ the cache

    def replace_all(self, acls: Acls) -> None:
        with self._lock:
            self._install({p: frozenset(e) for p, e in acls.items() if e})

    def set_resource(self, pattern: ResourcePattern,
                     entries: Iterable[AccessControlEntry]) -> None:
        """The ACLs of one resource pattern as the store now has them."""
        entries = frozenset(entries)
        with self._lock:
            acls = dict(self._acls)
            if entries:
                acls[pattern] = entries
            else:
                acls.pop(pattern, None)
            self._install(acls)

    def _install(self, acls: dict[ResourcePattern, frozenset[AccessControlEntry]]) -> None:
        prefixed: dict[ResourceType, set[str]] = {}
        for pattern in acls:
            if pattern.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(pattern.resource_type, set()).add(pattern.name)
        # readers take both attributes without the lock; the prefix index may
        # lag the ACLs by one assignment, which at worst misses a change that
        # is being made at the same moment
        self._acls = acls
        self._prefixed = {t: frozenset(ps) for t, ps in prefixed.items()}
        self._decisions = {}  # every decision made under the old ACLs is void

    def bindings(self, flt: AclBindingFilter | None = None) -> list[AclBinding]:
        flt = flt or AclBindingFilter()
        return sorted(AclBinding(p, e) for p, entries in self._acls.items()
                      if flt.matches_pattern(p) for e in entries if flt.matches_entry(e))

    # ------------------------------------------------------------ decisions

    def _matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        acls = self._acls
        found: list[AccessControlEntry] = []
        for pattern in (ResourcePattern(resource_type, name),
                        ResourcePattern(resource_type, WILDCARD_RESOURCE)):
            found.extend(acls.get(pattern, ()))
        prefixed = self._prefixed.get(resource_type)
        if prefixed:
            if len(prefixed) <= len(name):
                candidates = [p for p in prefixed if name.startswith(p)]
            else:  # many prefixed ACLs: look up each prefix of the name instead
                candidates = [name[:i] for i in range(1, len(name) + 1) if name[:i] in prefixed]
            for prefix in candidates:
                found.extend(acls.get(ResourcePattern(resource_type, prefix, PatternType.PREFIXED),
                                      ()))
        return found

    def is_super_user(self, principal: KafkaPrincipal) -> bool:
        return str(principal) in self.super_users

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str) -> bool:
        # Every Produce and Fetch asks the same few questions: remember the
        # answers until the ACLs change (_install starts a new dict; a reader
        # holding the old one may store one stale answer there, never read again).
        key = (principal, host, operation, resource_type, name)
        decisions = self._decisions
        verdict = decisions.get(key)
        if verdict is None:
            if len(decisions) >= _MAX_DECISIONS:
                decisions.clear()
            verdict = decisions[key] = self._decide(principal, host, operation,
                                                    resource_type, name)
        return verdict

    def _decide(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str) -> bool:
        if self.is_super_user(principal):
            return True
        entries = self._matching(resource_type, name)
        if not entries:
            return self.allow_if_no_acls
        who = (str(principal), WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        applicable = [e for e in entries if e.principal in who and e.host in hosts]
        for e in applicable:
            if (e.permission == AclPermissionType.DENY
                    and e.operation in (operation, AclOperation.ALL)):
                return False
        granting = _IMPLIED_BY.get(operation, frozenset({operation}))
        return any(e.permission == AclPermissionType.ALLOW
                   and (e.operation == AclOperation.ALL or e.operation in granting)
                   for e in applicable)

    def authorize_any_of_type(self, principal: KafkaPrincipal, host: str,
                              operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: may the principal do ``operation``
        on at least one resource of the type? False when a DENY on every name
        ("*") applies; True when allow.everyone.if.no.acl.found is on (some
        name is then free of ACLs, or allowed); otherwise True when an ALLOW
        exists on some pattern that no DENY for the principal covers (a literal
        deny on the same name, a deny on "*", or a prefixed deny on a prefix of
        it)."""
        if self.is_super_user(principal):
            return True
        who = (str(principal), WILDCARD_PRINCIPAL)
        hosts = (host, WILDCARD_HOST)
        granting = _IMPLIED_BY.get(operation, frozenset({operation}))
        allows, denies = [], []
        if any(_denies_every_name(p) and any(
                e.principal in who and e.host in hosts
                and e.permission == AclPermissionType.DENY
                and e.operation in (operation, AclOperation.ALL) for e in entries)
               for p, entries in self._acls.items() if p.resource_type == resource_type):
            return False
        if self.allow_if_no_acls:   # as Kafka: no deny covers every name, so some has none
            return True
        for pattern, entries in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            for e in entries:
                if e.principal not in who or e.host not in hosts:
                    continue
                if (e.permission == AclPermissionType.DENY
                        and e.operation in (operation, AclOperation.ALL)):
                    denies.append(pattern)
                elif (e.permission == AclPermissionType.ALLOW
                      and (e.operation == AclOperation.ALL or e.operation in granting)):
                    allows.append(pattern)
        if not allows:
            return False

        def covered(allow: ResourcePattern) -> bool:
            for deny in denies:
                if deny.pattern_type == PatternType.LITERAL:
                    if deny.name == WILDCARD_RESOURCE or (
                            deny.name == allow.name
                            and allow.pattern_type == PatternType.LITERAL):
                        return True
                elif allow.name.startswith(deny.name):
                    return True
            return False
        return any(not covered(a) for a in allows)

    def authorized_operations(self, principal: KafkaPrincipal, host: str,
                              resource_type: ResourceType, name: str) -> int:
        """The bit field of Metadata's and DescribeGroups' authorized
        operations fields: bit n set when operation code n is allowed."""
        bits = 0
        for op in OPERATIONS_BY_RESOURCE[resource_type]:
            if self.authorize(principal, host, op, resource_type, name):
                bits |= 1 << op
        return bits


def _denies_every_name(pattern: ResourcePattern) -> bool:
    """A pattern every name of its type falls under: literal "*" (or prefix "")."""
    return ((pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE)
            or (pattern.pattern_type == PatternType.PREFIXED and pattern.name == ""))
