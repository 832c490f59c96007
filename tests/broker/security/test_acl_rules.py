"""Kafka's AclAuthorizer rules, the ACL filters and the ZooKeeper encoding."""
import json

import pytest

from samsa.broker.metadata import acl_layout as L
from samsa.broker.security.acl import (AccessControlEntry as Ace, AclAuthorizer, AclBinding,
                                 AclBindingFilter, AclOperation as Op,
                                 AclPermissionType as Perm, PatternType as PT,
                                 ResourcePattern as RP, ResourceType as RT, creation_error,
                                 parse_super_users)
from samsa.broker.security.principal import ANONYMOUS, user

ALICE, BOB = user("alice"), user("bob")
HOST = "10.0.0.1"


def allow(principal, op, host="*"):
    return Ace(principal, host, op, Perm.ALLOW)


def deny(principal, op, host="*"):
    return Ace(principal, host, op, Perm.DENY)


def authz(acls, **kw):
    return AclAuthorizer(acls=acls, **kw)


def can(a, principal, op, name="orders", rtype=RT.TOPIC, host=HOST):
    return a.authorize(principal, host, op, rtype, name)


def test_literal_allow_is_for_that_principal_operation_and_resource_only():
    a = authz({RP(RT.TOPIC, "orders"): {allow("User:alice", Op.READ)}})
    assert can(a, ALICE, Op.READ)
    assert not can(a, BOB, Op.READ)
    assert not can(a, ALICE, Op.WRITE)
    assert not can(a, ALICE, Op.READ, name="payments")       # no ACL there: default deny
    assert not can(a, ALICE, Op.READ, rtype=RT.GROUP)


def test_deny_overrides_allow_even_from_a_wildcard_or_prefix():
    a = authz({RP(RT.TOPIC, "orders"): {allow("User:alice", Op.ALL)},
               RP(RT.TOPIC, "ord", PT.PREFIXED): {deny("User:alice", Op.WRITE)}})
    assert can(a, ALICE, Op.READ)
    assert not can(a, ALICE, Op.WRITE)
    a = authz({RP(RT.TOPIC, "orders"): {allow("User:alice", Op.READ)},
               RP(RT.TOPIC, "*"): {deny("User:*", Op.ALL)}})
    assert not can(a, ALICE, Op.READ)


def test_prefixed_pattern_covers_names_starting_with_it():
    a = authz({RP(RT.TOPIC, "team-a.", PT.PREFIXED): {allow("User:alice", Op.WRITE)}})
    assert can(a, ALICE, Op.WRITE, name="team-a.orders")
    assert can(a, ALICE, Op.WRITE, name="team-a.")
    assert not can(a, ALICE, Op.WRITE, name="team-b.orders")
    assert not can(a, ALICE, Op.WRITE, name="team-a")


def test_wildcard_resource_and_wildcard_principal():
    a = authz({RP(RT.GROUP, "*"): {allow("User:*", Op.READ)}})
    assert can(a, BOB, Op.READ, name="any-group", rtype=RT.GROUP)
    assert can(a, ANONYMOUS, Op.READ, name="g", rtype=RT.GROUP)
    # a literal "*" is a wildcard only as a literal pattern name, not a prefix
    a = authz({RP(RT.TOPIC, "*", PT.PREFIXED): {allow("User:*", Op.READ)}})
    assert not can(a, BOB, Op.READ)


def test_implied_operations():
    for granted in (Op.READ, Op.WRITE, Op.DELETE, Op.ALTER):
        a = authz({RP(RT.TOPIC, "orders"): {allow("User:alice", granted)}})
        assert can(a, ALICE, Op.DESCRIBE), granted
    a = authz({RP(RT.TOPIC, "orders"): {allow("User:alice", Op.ALTER_CONFIGS)}})
    assert can(a, ALICE, Op.DESCRIBE_CONFIGS)
    assert not can(a, ALICE, Op.DESCRIBE)
    # nothing implies Read or Write, and a deny is never implied
    a = authz({RP(RT.TOPIC, "orders"): {allow("User:alice", Op.DESCRIBE)}})
    assert not can(a, ALICE, Op.READ)
    a = authz({RP(RT.TOPIC, "orders"): {allow("User:alice", Op.DESCRIBE),
                                        deny("User:alice", Op.READ)}})
    assert can(a, ALICE, Op.DESCRIBE)


def test_host_matching():
    a = authz({RP(RT.TOPIC, "orders"): {allow("User:alice", Op.READ, host="10.0.0.1")}})
    assert can(a, ALICE, Op.READ, host="10.0.0.1")
    assert not can(a, ALICE, Op.READ, host="10.0.0.2")
    a = authz({RP(RT.TOPIC, "orders"): {allow("User:alice", Op.READ),
                                        deny("User:alice", Op.READ, host="10.0.0.2")}})
    assert can(a, ALICE, Op.READ, host="10.0.0.1")
    assert not can(a, ALICE, Op.READ, host="10.0.0.2")


def test_super_users_and_allow_everyone_if_no_acl_found():
    assert parse_super_users("User:admin; User:broker;") == {"User:admin", "User:broker"}
    a = authz({RP(RT.TOPIC, "orders"): {deny("User:*", Op.ALL)}},
              super_users=parse_super_users("User:admin"))
    assert can(a, user("admin"), Op.WRITE)          # even over a deny
    assert not can(a, ALICE, Op.WRITE)
    open_ = authz({RP(RT.TOPIC, "orders"): {allow("User:bob", Op.READ)}}, allow_if_no_acls=True)
    assert can(open_, ALICE, Op.WRITE, name="elsewhere")   # no ACL applies there
    assert not can(open_, ALICE, Op.READ)                 # an ACL applies: not for alice


def test_by_resource_type_and_authorized_operations():
    a = authz({RP(RT.TOPIC, "out-", PT.PREFIXED): {allow("User:alice", Op.WRITE)}})
    assert a.authorize_any_of_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert not a.authorize_any_of_type(BOB, HOST, Op.WRITE, RT.TOPIC)
    a.set_resource(RP(RT.TOPIC, "*"), {deny("User:alice", Op.WRITE)})
    assert not a.authorize_any_of_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    a.set_resource(RP(RT.TOPIC, "*"), ())
    bits = a.authorized_operations(ALICE, HOST, RT.TOPIC, "out-1")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE)


def test_by_resource_type_follows_allow_everyone_if_no_acl_found():
    """Kafka's authorizeByResourceType: with allow.everyone.if.no.acl.found an
    idempotent producer (IdempotentWrite via any topic's Write) is allowed
    though no ACL grants it, unless a DENY on "*" covers it."""
    open_ = authz({RP(RT.TOPIC, "orders"): {allow("User:bob", Op.READ)}}, allow_if_no_acls=True)
    assert open_.authorize_any_of_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert open_.authorize_any_of_type(ALICE, HOST, Op.WRITE, RT.GROUP)   # no ACL at all
    open_.set_resource(RP(RT.TOPIC, "*"), {deny("User:*", Op.ALL)})
    assert not open_.authorize_any_of_type(ALICE, HOST, Op.WRITE, RT.TOPIC)
    open_.set_resource(RP(RT.TOPIC, "*"), {deny("User:alice", Op.WRITE, host="10.9.9.9")})
    assert open_.authorize_any_of_type(ALICE, HOST, Op.WRITE, RT.TOPIC)   # another host
    closed = authz({}, allow_if_no_acls=False)
    assert not closed.authorize_any_of_type(ALICE, HOST, Op.WRITE, RT.TOPIC)


def test_names_that_cannot_be_one_acl_znode_are_refused():
    """"/" would store the ACLs a level deeper, where loading never looks (a
    DENY gone after a restart); "." and ".." are no ZooKeeper node names."""
    for name in ("team/a", "team/", "/x", ".", ".."):
        binding = AclBinding(RP(RT.GROUP, name), deny("User:alice", Op.READ))
        assert creation_error(binding), name
        with pytest.raises(ValueError):
            L.acl_path(RP(RT.GROUP, name))
    assert creation_error(AclBinding(RP(RT.GROUP, "team.a..b"), deny("User:alice", Op.READ))) \
        is None
    assert L.acl_path(RP(RT.GROUP, "..a", PT.PREFIXED)) == "/kafka-acl-extended/prefixed/Group/..a"


def test_filters_match_as_kafka_does():
    lit, star = RP(RT.TOPIC, "orders"), RP(RT.TOPIC, "*")
    pre = RP(RT.TOPIC, "ord", PT.PREFIXED)
    e = allow("User:alice", Op.READ)
    match = AclBindingFilter(RT.TOPIC, "orders", PT.MATCH)
    assert all(match.matches(AclBinding(p, e)) for p in (lit, star, pre))
    assert not match.matches(AclBinding(RP(RT.TOPIC, "other"), e))
    exact = AclBindingFilter(RT.ANY, "orders", PT.ANY)
    assert exact.matches(AclBinding(lit, e)) and not exact.matches(AclBinding(star, e))
    assert not AclBindingFilter(operation=Op.WRITE).matches(AclBinding(lit, e))
    assert AclBindingFilter(principal="User:alice").matches(AclBinding(lit, e))
    assert AclBindingFilter(pattern_type=PT.UNKNOWN).unknown_field() == "pattern type"


@pytest.mark.parametrize("pattern,entry,why", [
    (RP(RT.CLUSTER, "c"), allow("User:a", Op.ALTER), "kafka-cluster"),
    (RP(RT.TOPIC, "t", PT.MATCH), allow("User:a", Op.READ), "pattern type"),
    (RP(RT.TOPIC, ""), allow("User:a", Op.READ), "empty resource name"),
    (RP(RT.TOPIC, "t"), allow("alice", Op.READ), "principal"),
    (RP(RT.TOPIC, "t"), Ace("User:a", "*", Op.ANY, Perm.ALLOW), "operation"),
])
def test_bindings_kafka_refuses_to_create(pattern, entry, why):
    assert why in creation_error(AclBinding(pattern, entry))


def test_zookeeper_encoding_is_kafkas():
    entries = {allow("User:alice", Op.DESCRIBE_CONFIGS), deny("User:*", Op.IDEMPOTENT_WRITE)}
    doc = json.loads(L.encode_acls(entries))
    assert doc["version"] == 1
    assert {"principal": "User:alice", "permissionType": "Allow",
            "operation": "DescribeConfigs", "host": "*"} in doc["acls"]
    assert {"principal": "User:*", "permissionType": "Deny",
            "operation": "IdempotentWrite", "host": "*"} in doc["acls"]
    assert L.decode_acls("/x", L.encode_acls(entries)) == entries
    assert L.acl_path(RP(RT.TRANSACTIONAL_ID, "tx")) == "/kafka-acl/TransactionalId/tx"
    assert L.acl_path(RP(RT.TOPIC, "a.", PT.PREFIXED)) == "/kafka-acl-extended/prefixed/Topic/a."
    lit, pre = RP(RT.GROUP, "g:1"), RP(RT.TOPIC, "a.", PT.PREFIXED)
    assert L.encode_change(lit) == b"GROUP:g:1"
    assert json.loads(L.encode_change(pre)) == {"version": 1, "resourceType": "TOPIC",
                                                "name": "a.", "patternType": "PREFIXED"}
    assert L.decode_change(L.LITERAL_CHANGES, b"Topic:orders") == RP(RT.TOPIC, "orders")
    assert L.decode_change(L.EXTENDED_CHANGES, L.encode_change(pre)) == pre


def test_a_remembered_decision_follows_a_change():
    a = authz({})
    assert not can(a, ALICE, Op.READ)
    a.set_resource(RP(RT.TOPIC, "orders"), {allow("User:alice", Op.READ)})
    assert can(a, ALICE, Op.READ)
    a.set_resource(RP(RT.TOPIC, "ord", PT.PREFIXED), {deny("User:*", Op.READ)})
    assert not can(a, ALICE, Op.READ)
    a.replace_all({})
    assert not can(a, ALICE, Op.READ) and not can(a, ALICE, Op.WRITE)


def test_many_prefixed_acls_are_looked_up_by_prefix():
    acls = {RP(RT.TOPIC, f"p{i}-", PT.PREFIXED): {allow("User:alice", Op.READ)}
            for i in range(100)}
    acls[RP(RT.TOPIC, "p7", PT.PREFIXED)] = {deny("User:alice", Op.READ)}
    a = authz(acls)
    assert can(a, ALICE, Op.READ, name="p8-x")
    assert not can(a, ALICE, Op.READ, name="p7-x")   # both p7 and p7- apply: deny wins
    assert not can(a, ALICE, Op.READ, name="q1-x")


def test_a_local_write_never_installs_a_set_older_than_a_notice_did():
    """AclService.add used to install what its own store.update returned; a
    change notice processed meanwhile (another broker's newer write) was then
    overwritten by the older set until the next change."""
    from samsa.broker.metadata.acl_store import AclStore
    from samsa.broker.security.acl.service import AclService

    pattern = RP(RT.TOPIC, "orders")
    mine, theirs = allow("User:alice", Op.READ), deny("User:alice", Op.READ)

    class RacingStore(AclStore):
        def __init__(self):
            self.acls: dict = {}
            self.listeners: list = []

        def load_all(self):
            return dict(self.acls)

        def load(self, p):
            return self.acls.get(p, frozenset())

        def update(self, p, change):
            new = self.acls[p] = frozenset(change(self.load(p)))
            # before the caller goes on: another broker adds a DENY, and
            # this broker's notice thread processes it
            self.acls[p] = new | {theirs}
            for listener in self.listeners:
                listener(p)
            return new

        def on_change(self, listener):
            self.listeners.append(listener)

    service = AclService(RacingStore(), AclAuthorizer())
    service.add([AclBinding(pattern, mine)])
    assert {b.entry for b in service.authorizer.bindings()} == {mine, theirs}
    assert not can(service.authorizer, ALICE, Op.READ)
