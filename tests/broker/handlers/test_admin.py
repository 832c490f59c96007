"""CreateTopics / DeleteTopics: the per-topic errors a client sees."""
from __future__ import annotations

from samsa.broker.handlers.admin import handle_create_topics, handle_delete_topics
from samsa.broker.security.acl import AclOperation, ResourceType
from samsa.broker.security.principal import user
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import CreateTopicsRequest, DeleteTopicsRequest
from samsa.protocol.model import ApiKey

from .acl_setup import allow
from .fakes import FakeAcls, FakeServices, context

T = CreateTopicsRequest.CreatableTopic


async def test_create_answers_each_topic_duplicates_and_existing_ones_included():
    services = FakeServices()
    services.topics.add("old")
    resp = await handle_create_topics(context(services, ApiKey.CREATE_TOPICS, 5), CreateTopicsRequest(
        timeout_ms=1000, topics=[T(name="new", num_partitions=3, replication_factor=1),
                                 T(name="old", num_partitions=1, replication_factor=1),
                                 T(name="twice", num_partitions=1, replication_factor=1),
                                 T(name="twice", num_partitions=1, replication_factor=1),
                                 T(name="wide", num_partitions=1, replication_factor=3)]))
    assert [(r.name, r.error_code) for r in resp.topics] == [
        ("new", 0), ("old", ErrorCode.TOPIC_ALREADY_EXISTS), ("twice", 0),
        ("twice", ErrorCode.INVALID_REQUEST), ("wide", ErrorCode.INVALID_REPLICATION_FACTOR)]
    assert services.topics.created == [("new", 3, 1), ("twice", 1, 1)]


async def test_create_with_both_a_count_and_an_assignment_is_invalid():
    services = FakeServices()
    resp = await handle_create_topics(context(services, ApiKey.CREATE_TOPICS, 5), CreateTopicsRequest(
        topics=[T(name="t", num_partitions=2, replication_factor=-1, assignments=[
            CreateTopicsRequest.CreatableReplicaAssignment(partition_index=0, broker_ids=[1])])]))
    assert resp.topics[0].error_code == ErrorCode.INVALID_REQUEST
    assert services.topics.created == []


async def test_delete_needs_delete_on_the_topic_and_answers_unknown_ones():
    services = FakeServices(acls=FakeAcls())
    services.topics.add("mine")
    services.topics.add("theirs")
    assert services.acls is not None
    allow(services.acls, "User:dave", AclOperation.DELETE, ResourceType.TOPIC, "mine")
    allow(services.acls, "User:dave", AclOperation.DELETE, ResourceType.TOPIC, "gone")
    resp = await handle_delete_topics(context(services, ApiKey.DELETE_TOPICS, 5, user("dave")),
                                      DeleteTopicsRequest(topic_names=["mine", "theirs", "gone"]))
    assert [(r.name, r.error_code) for r in resp.responses] == [
        ("mine", 0), ("theirs", ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        ("gone", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert services.topics.deleted == ["mine"]
