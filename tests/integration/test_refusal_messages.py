"""A refused admin request says why, as Kafka's does: every refusal that
carries an error message in Kafka carries one here (clients print it, and
librdkafka has crashed on a null one). The client here is not authorized
for anything (an authorizer, no ACLs, not a super user)."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AlterClientQuotasRequest, AlterPartitionReassignmentsRequest,
                               AlterUserScramCredentialsRequest, DescribeAclsRequest,
                               DescribeClientQuotasRequest, DescribeConfigsRequest,
                               DescribeUserScramCredentialsRequest,
                               ListPartitionReassignmentsRequest)

CLUSTER_DENIED = "Cluster authorization failed."


@pytest.fixture
def locked(broker_factory):
    return broker_factory({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                           "allow.everyone.if.no.acl.found": "false"})


def _run_client(script: str, bootstrap: str) -> str:
    """A confluent-kafka script in its own process: a client that aborts fails
    the test instead of ending the test run."""
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(script), bootstrap],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    return done.stdout


def test_describing_an_unknown_users_credentials_names_the_user(broker):
    out = _run_client("""
        import sys
        from confluent_kafka.admin import AdminClient
        admin = AdminClient({"bootstrap.servers": sys.argv[1]})
        for user, f in admin.describe_user_scram_credentials(["nobody"]).items():
            try:
                f.result(30)
            except Exception as e:
                print(e.args[0].name(), e.args[0].str())
    """, broker.bootstrap)
    # (librdkafka 2.16 reads the message one byte past its end: the next field's)
    assert out.startswith("RESOURCE_NOT_FOUND Attempt to describe a user credential that "
                          "does not exist: nobody")


def test_a_refused_credential_change_says_why(locked):
    out = _run_client("""
        import sys
        from confluent_kafka.admin import (AdminClient, ScramMechanism,
                                           UserScramCredentialDeletion)
        admin = AdminClient({"bootstrap.servers": sys.argv[1]})
        for user, f in admin.alter_user_scram_credentials([UserScramCredentialDeletion(
                "bob", ScramMechanism.SCRAM_SHA_256)]).items():
            try:
                f.result(30)
            except Exception as e:
                print(e.args[0].name(), e.args[0].str())
    """, locked.bootstrap)
    assert out.startswith(f"CLUSTER_AUTHORIZATION_FAILED {CLUSTER_DENIED}")


def test_every_refusal_on_the_wire_carries_kafkas_message(locked):
    with SimpleClient(locked.bootstrap) as c:
        d = c.call(50, DescribeUserScramCredentialsRequest(users=[
            DescribeUserScramCredentialsRequest.UserName(name="bob")]))
        assert (d.error_code, d.error_message) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                   CLUSTER_DENIED)
        assert [(r.user, r.error_code, r.error_message) for r in d.results] == [
            ("bob", ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)]

        A = AlterUserScramCredentialsRequest
        a = c.call(51, A(upsertions=[], deletions=[
            A.ScramCredentialDeletion(name="bob", mechanism=1),
            A.ScramCredentialDeletion(name="amy", mechanism=1)]))
        assert [(r.user, r.error_message) for r in a.results] == [
            ("amy", CLUSTER_DENIED), ("bob", CLUSTER_DENIED)]

        D = DescribeConfigsRequest
        dc = c.call(32, D(include_synonyms=False, include_documentation=False, resources=[
            D.DescribeConfigsResource(resource_type=2, resource_name="t",
                                      configuration_keys=None),
            D.DescribeConfigsResource(resource_type=4, resource_name="0",
                                      configuration_keys=None)]))
        assert [(r.error_code, r.error_message) for r in dc.results] == [
            (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."),
            (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)]

        R = AlterPartitionReassignmentsRequest
        r = c.call(45, R(timeout_ms=10000, allow_replication_factor_change=True, topics=[
            R.ReassignableTopic(name="t", partitions=[
                R.ReassignablePartition(partition_index=0, replicas=[0])])]))
        assert (r.error_code, r.error_message) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                   CLUSTER_DENIED)
        lr = c.call(46, ListPartitionReassignmentsRequest(timeout_ms=10000, topics=None))
        assert (lr.error_code, lr.error_message) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                     CLUSTER_DENIED)

        acls = c.call(29, DescribeAclsRequest(
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
            principal_filter=None, host_filter=None, operation=1, permission_type=1))
        assert (acls.error_code, acls.error_message) == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)

        q = c.call(48, DescribeClientQuotasRequest(components=[], strict=False))
        assert (q.error_code, q.error_message) == (ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                                                   CLUSTER_DENIED)
        Q = AlterClientQuotasRequest
        aq = c.call(49, Q(validate_only=False, entries=[Q.EntryData(
            entity=[Q.EntityData(entity_type="user", entity_name="bob")],
            ops=[Q.OpData(key="producer_byte_rate", value=1024.0, remove=False)])]))
        assert [(e.error_code, e.error_message) for e in aq.entries] == [
            (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, CLUSTER_DENIED)]
