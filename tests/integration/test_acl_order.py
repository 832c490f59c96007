"""An admin client's pipelined ACL requests take effect in the order it sent
them, as Kafka, reading one request of a connection at a time, takes them: a
DescribeAcls right behind a CreateAcls lists what was created. samsa wrote
each ACL change to ZooKeeper on a worker thread of its own, and answered the
Describe at once, from what the authorizer had before."""
from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from pathlib import Path

import pytest

from samsa.client.aio import KafkaConnection
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import CreateAclsRequest, DescribeAclsRequest
from samsa.protocol.model import ApiKey
from tests.support.broker_process import BrokerProcess

TOPIC, LITERAL, READ, ALLOW = 2, 3, 3, 3  # Kafka's resource, pattern, operation, permission codes
ANY = 1
CREATIONS = 5


@pytest.fixture
def acl_broker(zookeeper):
    work = Path(tempfile.mkdtemp(prefix="samsa-aclorder-"))
    broker = BrokerProcess(work / "b0", broker_id=0, overrides={
        "zookeeper.connect": zookeeper.connect + "/samsa",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        # the test's anonymous client may change ACLs while there are none on the cluster
        "allow.everyone.if.no.acl.found": "true",
        "offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1"})
    try:
        yield broker.start()
    finally:
        try:
            broker.stop()
        finally:
            print(f"\n--- broker log tail ({broker.log_path}) ---\n{broker.log_tail(40)}")
            shutil.rmtree(work, ignore_errors=True)


async def _pipeline(port: int, topic: str) -> tuple:
    conn = await KafkaConnection.connect("127.0.0.1", port, client_id="pipelined-admin")
    try:
        C = CreateAclsRequest
        creations = [conn.call(C(creations=[C.AclCreation(
            resource_type=TOPIC, resource_name=topic, resource_pattern_type=LITERAL,
            principal=f"User:reader-{i}", host="*", operation=READ, permission_type=ALLOW)]),
            api_key=ApiKey.CREATE_ACLS) for i in range(CREATIONS)]
        describe = conn.call(DescribeAclsRequest(
            resource_type_filter=TOPIC, resource_name_filter=topic, pattern_type_filter=LITERAL,
            principal_filter=None, host_filter=None, operation=ANY, permission_type=ANY),
            api_key=ApiKey.DESCRIBE_ACLS)
        # gather starts each call in this order: the frames go out back to back
        *created, described = await asyncio.gather(*creations, describe)
        return created, described
    finally:
        await conn.close()


def test_a_describe_pipelined_behind_acl_creations_lists_them(acl_broker):
    topic = f"acl-order-{uuid.uuid4().hex[:8]}"
    created, described = asyncio.run(_pipeline(acl_broker.port, topic))
    assert [r.error_code for c in created for r in c.results] == [ErrorCode.NONE] * CREATIONS
    assert described.error_code == ErrorCode.NONE, described
    assert sorted(a.principal for r in described.resources for a in r.acls) == \
        sorted(f"User:reader-{i}" for i in range(CREATIONS))
