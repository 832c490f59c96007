"""Produce: the per-partition errors a client sees before anything is appended."""
from __future__ import annotations

from samsa.broker.handlers.produce import handle_produce
from samsa.broker.security.acl import AclOperation, ResourceType
from samsa.broker.security.principal import user
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ProduceRequest, ProduceResponse
from samsa.protocol.model import ApiKey

from .acl_setup import allow
from .fakes import FakeAcls, FakeServices, context


def _request(*names: str, acks: int = 1, partition: int = 0) -> ProduceRequest:
    return ProduceRequest(acks=acks, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name=name, partition_data=[
            ProduceRequest.PartitionProduceData(index=partition, records=b"")])
        for name in names])


def _codes(resp: ProduceResponse | None) -> list[tuple[str, int, int]]:
    assert resp is not None
    return [(t.name, p.index, p.error_code) for t in resp.responses for p in t.partition_responses]


async def test_an_unknown_topic_or_partition_and_a_partition_led_elsewhere():
    services = FakeServices()
    services.topics.add("t", partitions=2)
    services.partitions.not_leader.add(("t", 1))
    ctx = context(services, ApiKey.PRODUCE, 9)
    assert _codes(await handle_produce(ctx, _request("nope"))) == [
        ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert _codes(await handle_produce(ctx, _request("t", partition=1))) == [
        ("t", 1, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    assert _codes(await handle_produce(ctx, _request("t", partition=5))) == [
        ("t", 5, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]


async def test_invalid_acks_and_the_internal_offsets_topic_are_refused():
    services = FakeServices()
    services.topics.add("t")
    services.topics.add("__consumer_offsets", internal=True)
    ctx = context(services, ApiKey.PRODUCE, 9)
    assert _codes(await handle_produce(ctx, _request("t", acks=2))) == [
        ("t", 0, ErrorCode.INVALID_REQUIRED_ACKS)]
    assert _codes(await handle_produce(ctx, _request("__consumer_offsets"))) == [
        ("__consumer_offsets", 0, ErrorCode.INVALID_TOPIC_EXCEPTION)]


async def test_acks_0_gets_no_response():
    services = FakeServices()
    ctx = context(services, ApiKey.PRODUCE, 9)
    assert await handle_produce(ctx, _request("nope", acks=0)) is None


async def test_with_acls_writing_needs_write_on_the_topic():
    services = FakeServices(acls=FakeAcls())
    services.topics.add("mine")
    services.topics.add("theirs")
    services.partitions.not_leader.update({("mine", 0), ("theirs", 0)})
    assert services.acls is not None
    allow(services.acls, "User:alice", AclOperation.WRITE, ResourceType.TOPIC, "mine")
    ctx = context(services, ApiKey.PRODUCE, 9, user("alice"))
    assert _codes(await handle_produce(ctx, _request("mine", "theirs"))) == [
        ("mine", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ("theirs", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]


async def test_a_produce_waiting_its_turn_appends_nothing_once_the_client_went():
    """A Produce pipelined behind a request still going on is dropped when its
    connection closes meanwhile: Kafka never read it, and a producer that
    retries it on a new connection (without idempotence) would otherwise have
    it twice in the log."""
    import asyncio
    services = FakeServices()
    services.topics.add("t")  # a lookup of its log fails the test: it must not get that far
    ctx = context(services, ApiKey.PRODUCE, 9)
    earlier = ctx.conn.turns.take()
    ctx.turn = ctx.conn.turns.take()
    produce = asyncio.create_task(handle_produce(ctx, _request("t")))
    for _ in range(3):
        await asyncio.sleep(0)
    assert not produce.done()  # behind the earlier request
    ctx.conn.closed = True  # the client went
    ctx.conn.turns.end(earlier)
    assert await asyncio.wait_for(produce, 30) is None  # no answer: the client is gone
