"""`samsa acls`: kafka-acls, with its flags and its output.

    samsa acls --bootstrap-server H:P --add --allow-principal User:alice \\
        --operation Read --operation Describe --topic orders
    samsa acls --bootstrap-server H:P --add --allow-principal User:bob --producer \\
        --topic out- --resource-pattern-type prefixed
    samsa acls --bootstrap-server H:P --list [--topic orders] [--principal User:alice]
    samsa acls --bootstrap-server H:P --remove --force --topic orders
    samsa acls --bootstrap-server H:P --command-config admin.properties --list  (SSL, SASL)
    samsa acls --authorizer-properties zookeeper.connect=H:P --add ...   (ZooKeeper directly)

Over the wire it uses CreateAcls, DescribeAcls and DeleteAcls; with
--authorizer-properties zookeeper.connect=... it writes Kafka's ACL znodes
itself (as kafka-acls could in ZooKeeper mode), which needs no principal
with Alter on the cluster: how the first ACLs of a cluster are set.
"""
from __future__ import annotations

import abc
import argparse
import dataclasses
import itertools
import sys
from typing import Iterable

from samsa.protocol.messages import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from samsa.protocol.model import ApiKey

from samsa.client.blocking import SimpleClient, error_text, run_tool
from samsa.client.properties import ClientConfigFlags, key_value_properties
from samsa.broker.security.acl import (CLUSTER_NAME, WILDCARD_HOST, AccessControlEntry, AclBinding,
                           AclBindingFilter, AclOperation, AclPermissionType, PatternType,
                           ResourcePattern, ResourceType)
from samsa.broker.security.acl.model import OPERATIONS_BY_RESOURCE

PROG = "samsa acls"
_CLIENT_CONFIG = ClientConfigFlags(files=("--command-config",))


class AclToolError(Exception):
    """A refusal to print as one line."""


# ------------------------------------------------------------------ backends

class AclBackend(abc.ABC):
    @abc.abstractmethod
    def add(self, bindings: list[AclBinding]) -> None: ...

    @abc.abstractmethod
    def remove(self, flt: AclBindingFilter) -> None: ...

    @abc.abstractmethod
    def list(self, flt: AclBindingFilter) -> list[AclBinding]: ...


class WireBackend(AclBackend):
    def __init__(self, client: SimpleClient) -> None:
        self.client = client

    def add(self, bindings):
        R = CreateAclsRequest
        resp = self.client.call(ApiKey.CREATE_ACLS, R(creations=[R.AclCreation(
            resource_type=b.pattern.resource_type, resource_name=b.pattern.name,
            resource_pattern_type=b.pattern.pattern_type, principal=b.entry.principal,
            host=b.entry.host, operation=b.entry.operation,
            permission_type=b.entry.permission) for b in bindings]))
        for r in resp.results:
            if r.error_code:
                raise AclToolError(f"Error while adding ACLs: "
                                   f"{error_text(r.error_code, r.error_message)}")

    @staticmethod
    def _filter_fields(flt: AclBindingFilter) -> dict:
        return dict(resource_type_filter=flt.resource_type, resource_name_filter=flt.name,
                    pattern_type_filter=flt.pattern_type, principal_filter=flt.principal,
                    host_filter=flt.host, operation=flt.operation,
                    permission_type=flt.permission)

    def remove(self, flt):
        R = DeleteAclsRequest
        resp = self.client.call(ApiKey.DELETE_ACLS, R(filters=[R.DeleteAclsFilter(**self._filter_fields(flt))]))
        for r in resp.filter_results:
            if r.error_code:
                raise AclToolError(f"Error while removing ACLs: "
                                   f"{error_text(r.error_code, r.error_message)}")

    def list(self, flt):
        resp = self.client.call(ApiKey.DESCRIBE_ACLS, DescribeAclsRequest(**self._filter_fields(flt)))
        if resp.error_code:
            raise AclToolError(f"Error while listing ACLs: "
                               f"{error_text(resp.error_code, resp.error_message)}")
        return sorted(
            AclBinding(ResourcePattern(ResourceType.of(r.resource_type), r.resource_name,
                                       PatternType.of(r.pattern_type)),
                       AccessControlEntry(a.principal, a.host, AclOperation.of(a.operation),
                                          AclPermissionType.of(a.permission_type)))
            for r in resp.resources for a in r.acls)


class ZooKeeperBackend(AclBackend):
    """Kafka's ACL znodes, written directly (kafka-acls --authorizer-properties)."""

    def __init__(self, connect: str) -> None:
        from kazoo.client import KazooClient
        from kazoo.handlers.threading import KazooTimeoutError

        from samsa.config import ConfigError
        from samsa.config.zk_connect import parse_connect

        from samsa.broker.metadata.acl_store import ZooKeeperAclStore
        from samsa.broker.metadata.zookeeper.session import retry_about_every_second
        try:
            hosts, chroot = parse_connect(connect)  # kazoo's own parse raises a bare ValueError
        except ConfigError as e:
            raise AclToolError(str(e)) from None
        self.zk = KazooClient(hosts=hosts + (chroot or ""), timeout=15,
                              connection_retry=retry_about_every_second())
        try:
            self.zk.start(timeout=15)
        except KazooTimeoutError:
            self.zk.close()
            raise AclToolError(f"cannot reach ZooKeeper at {connect}") from None
        self.store = ZooKeeperAclStore(self.zk)

    def close(self) -> None:
        self.store.close()
        self.zk.stop()
        self.zk.close()

    def add(self, bindings):
        by_pattern: dict[ResourcePattern, set] = {}
        for b in bindings:
            by_pattern.setdefault(b.pattern, set()).add(b.entry)
        for pattern, entries in by_pattern.items():
            self.store.update(pattern, lambda old, e=entries: old | e)

    def remove(self, flt):
        for pattern in self.store.load_all():
            if flt.matches_pattern(pattern):
                self.store.update(pattern, lambda old, p=pattern: frozenset(
                    e for e in old if not flt.matches(AclBinding(p, e))))

    def list(self, flt):
        return sorted(AclBinding(p, e) for p, entries in self.store.load_all().items()
                      if flt.matches_pattern(p) for e in entries if flt.matches_entry(e))


# ------------------------------------------------------------------ what the flags ask

def _operation(text: str) -> AclOperation:
    try:
        op = AclOperation.parse(text)
    except ValueError:
        op = AclOperation.UNKNOWN
    if op in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise AclToolError(f"Invalid operation: {text}")
    return op


def _pattern_type(text: str, adding: bool) -> PatternType:
    try:
        pt = PatternType.parse(text)
    except ValueError:
        pt = PatternType.UNKNOWN
    if pt == PatternType.UNKNOWN or (adding and not pt.is_specific):
        allowed = "LITERAL, PREFIXED" if adding else "ANY, MATCH, LITERAL, PREFIXED"
        raise AclToolError(f"--resource-pattern-type {text}: expected one of {allowed}"
                           + (" when adding ACLs" if adding else ""))
    return pt


def _resources(args, pattern_type: PatternType) -> list[tuple[ResourceType, str]]:
    out = [(ResourceType.TOPIC, t) for t in args.topic or ()]
    out += [(ResourceType.GROUP, g) for g in args.group or ()]
    out += [(ResourceType.TRANSACTIONAL_ID, t) for t in args.transactional_id or ()]
    if args.cluster:
        out.append((ResourceType.CLUSTER, CLUSTER_NAME))
    return out


def _entries(principals: Iterable[str], hosts: list[str], ops: Iterable[AclOperation],
             permission: AclPermissionType) -> set[AccessControlEntry]:
    for p in principals:
        kind, sep, _ = p.partition(":")
        if not sep or not kind:
            raise AclToolError(f"Invalid principal {p!r}: expected <type>:<name>, "
                               f"e.g. User:alice")
    return {AccessControlEntry(p, h, op, permission)
            for p, h, op in itertools.product(principals, hosts or [WILDCARD_HOST], ops)}


def _bindings_to_add(args, pattern_type: PatternType) -> dict[ResourcePattern, set]:
    if not (args.allow_principal or args.deny_principal):
        raise AclToolError("You must specify one of: --allow-principal, --deny-principal "
                           "when trying to add ACLs.")
    out: dict[ResourcePattern, set] = {}

    def grant(rtype: ResourceType, name: str, ops: Iterable[AclOperation]) -> None:
        ops = list(ops)
        unsupported = [op for op in ops if op != AclOperation.ALL
                       and op not in OPERATIONS_BY_RESOURCE[rtype]]
        if unsupported:
            raise AclToolError(
                f"ResourceType {rtype.zk_name} only supports operations "
                f"{', '.join(o.zk_name for o in (AclOperation.ALL, *OPERATIONS_BY_RESOURCE[rtype]))}")
        entries = _entries(args.allow_principal or (), args.allow_host or [],
                           ops, AclPermissionType.ALLOW)
        entries |= _entries(args.deny_principal or (), args.deny_host or [],
                            ops, AclPermissionType.DENY)
        out.setdefault(ResourcePattern(rtype, name, pattern_type), set()).update(entries)

    if args.producer or args.consumer:
        if args.producer:
            if not args.topic:
                raise AclToolError("With --producer you must specify a --topic")
            for t in args.topic:
                grant(ResourceType.TOPIC, t, (AclOperation.WRITE, AclOperation.DESCRIBE,
                                              AclOperation.CREATE))
            for tid in args.transactional_id or ():
                grant(ResourceType.TRANSACTIONAL_ID, tid,
                      (AclOperation.WRITE, AclOperation.DESCRIBE))
            if args.idempotent:
                grant(ResourceType.CLUSTER, CLUSTER_NAME, (AclOperation.IDEMPOTENT_WRITE,))
        if args.consumer:
            if not args.topic or not args.group:
                raise AclToolError("With --consumer you must specify a --topic and a --group")
            for t in args.topic:
                grant(ResourceType.TOPIC, t, (AclOperation.READ, AclOperation.DESCRIBE))
            for g in args.group:
                grant(ResourceType.GROUP, g, (AclOperation.READ,))
        return out
    resources = _resources(args, pattern_type)
    if not resources:
        raise AclToolError("You must provide at least one resource: --topic <topic> or "
                           "--cluster or --group <group> or --transactional-id <id>")
    ops = [_operation(o) for o in (args.operation or ["All"])]
    for rtype, name in resources:
        grant(rtype, name, ops)
    return out


def _filters(args, pattern_type: PatternType) -> list[AclBindingFilter]:
    resources = _resources(args, pattern_type)
    if not resources:
        return [AclBindingFilter(pattern_type=pattern_type)] \
            if pattern_type != PatternType.LITERAL else [AclBindingFilter()]
    return [AclBindingFilter(rtype, name, pattern_type) for rtype, name in resources]


# ------------------------------------------------------------------ output as kafka-acls

def _filter_text(flt: AclBindingFilter) -> str:
    return (f"ResourcePattern(resourceType={flt.resource_type.name}, name={flt.name}, "
            f"patternType={flt.pattern_type.name})")


def _print_acls(heading: str, entries: Iterable) -> None:
    lines = "\n".join("\t" + str(e) for e in entries)
    print(f"{heading}: \n {lines} \n")


def _list(backend: AclBackend, filters: list[AclBindingFilter]) -> None:
    by_pattern: dict[ResourcePattern, list] = {}
    for flt in filters:
        for b in backend.list(flt):
            by_pattern.setdefault(b.pattern, [])
            if b.entry not in by_pattern[b.pattern]:
                by_pattern[b.pattern].append(b.entry)
    for pattern, entries in by_pattern.items():
        _print_acls(f"Current ACLs for resource `{pattern}`", entries)


def _confirm(args, question: str) -> bool:
    if args.force:
        return True
    print(question)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _run(backend: AclBackend, args) -> int:
    if args.add:
        pattern_type = _pattern_type(args.resource_pattern_type, adding=True)
        wanted = _bindings_to_add(args, pattern_type)
        for pattern, entries in wanted.items():
            _print_acls(f"Adding ACLs for resource `{pattern}`", sorted(entries))
        backend.add([AclBinding(p, e) for p, entries in wanted.items() for e in sorted(entries)])
        _list(backend, [AclBindingFilter(p.resource_type, p.name, p.pattern_type)
                        for p in wanted])
    elif args.remove:
        pattern_type = _pattern_type(args.resource_pattern_type, adding=False)
        resources = _resources(args, pattern_type)
        if not resources:
            raise AclToolError("You must provide at least one resource: --topic <topic> or "
                               "--cluster or --group <group> or --transactional-id <id>")
        narrowed = args.allow_principal or args.deny_principal or args.operation
        if narrowed:
            if not pattern_type.is_specific:
                raise AclToolError("--remove with principals or operations needs "
                                   "--resource-pattern-type LITERAL or PREFIXED")
            # The entries --add would grant, resource by resource, as Kafka's AclCommand
            # removes them: --producer/--consumer name their own resources (the cluster's
            # IdempotentWrite with --idempotent), whatever else was named beside them.
            for pattern, removing in _bindings_to_add(args, pattern_type).items():
                flt = AclBindingFilter(pattern.resource_type, pattern.name, pattern_type)
                question = ("Are you sure you want to remove ACLs: \n "
                            + "\n".join("\t" + str(e) for e in sorted(removing))
                            + f" \n from resource filter `{_filter_text(flt)}`? (y/n)")
                if _confirm(args, question):
                    for e in removing:
                        backend.remove(AclBindingFilter(
                            pattern.resource_type, pattern.name, pattern_type, e.principal,
                            e.host, e.operation, e.permission))
        else:
            # one filter per named resource (what _filters makes of them), so each has a name
            for rtype, name in resources:
                flt = AclBindingFilter(rtype, name, pattern_type)
                if _confirm(args, "Are you sure you want to delete all ACLs for resource "
                                  f"filter `{_filter_text(flt)}`? (y/n)"):
                    backend.remove(flt)
        _list(backend, _filters(args, pattern_type))
    else:
        pattern_type = _pattern_type(args.resource_pattern_type, adding=False)
        filters = _filters(args, pattern_type)
        if not args.principal:
            _list(backend, filters)
        for principal in args.principal or ():
            print(f"ACLs for principal `{principal}`")
            _list(backend, [dataclasses.replace(f, principal=principal) for f in filters])
    return 0


def main(argv) -> int:
    p = argparse.ArgumentParser(prog=PROG, description="Add, remove or list ACLs.")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--bootstrap-server", help="host:port of a broker (CreateAcls, ...)")
    target.add_argument("--authorizer-properties", nargs="+", metavar="KEY=VALUE",
                        help="zookeeper.connect=H:P[/chroot]: write Kafka's ACL znodes directly")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    action.add_argument("--list", action="store_true")
    p.add_argument("--allow-principal", action="append")
    p.add_argument("--deny-principal", action="append")
    p.add_argument("--allow-host", action="append")
    p.add_argument("--deny-host", action="append")
    p.add_argument("--operation", action="append")
    p.add_argument("--topic", action="append")
    p.add_argument("--group", action="append")
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--transactional-id", action="append")
    p.add_argument("--resource-pattern-type", default="LITERAL")
    p.add_argument("--producer", action="store_true")
    p.add_argument("--consumer", action="store_true")
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--force", action="store_true")
    p.add_argument("--principal", action="append", help="with --list: only this principal's")
    _CLIENT_CONFIG.add_to(p, "admin client (with --bootstrap-server)")
    args = p.parse_args(argv)
    if args.authorizer_properties and _CLIENT_CONFIG.given(args):
        p.error("--command-config goes with --bootstrap-server, not --authorizer-properties")
    if args.authorizer_properties:
        try:
            props = key_value_properties(args.authorizer_properties)
        except ValueError as e:  # KEY alone: Kafka refuses it too (acceptMissingValue=false)
            p.error(f"--authorizer-properties {e}")
        connect = props.get("zookeeper.connect")
        if not connect:
            print(f"{PROG}: --authorizer-properties needs zookeeper.connect=HOST:PORT",
                  file=sys.stderr)
            return 2
        try:
            backend = ZooKeeperBackend(connect)
        except AclToolError as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            return 1
        try:
            return _run(backend, args)
        except AclToolError as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            return 1
        except Exception as e:  # ZooKeeper failures: one line
            print(f"{PROG}: ZooKeeper: {type(e).__name__}: {e}", file=sys.stderr)
            return 1
        finally:
            backend.close()

    def over_wire(client: SimpleClient) -> int:
        try:
            return _run(WireBackend(client), args)
        except AclToolError as e:
            print(f"{PROG}: {e}", file=sys.stderr)
            return 1
    client = _CLIENT_CONFIG.load(p, args)
    return run_tool(PROG, args.bootstrap_server or "localhost:9092", over_wire,
                    sasl=client.sasl, tls=client.tls)
