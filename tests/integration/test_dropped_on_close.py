"""A request still waiting for its turn (request_order.py) when its client
goes is dropped, as Kafka, reading one request of a connection at a time,
never read it: a Produce pipelined behind a slow CreateTopics appends
nothing once the client closed its socket (its FIN, as a producer that timed
out closes it), so a producer without idempotence that retries
it on a new connection does not have it twice."""
from __future__ import annotations

import socket
import uuid

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import (CreateTopicsRequest, ListOffsetsRequest, ProduceRequest,
                                     RequestHeader, encode_request)
from samsa.protocol.model import ApiKey
from samsa.protocol.records.records import build_batch
from samsa.testing.waiting import wait_until
from tests.support.kafka_wire import free_port
from tests.support.metrics import sample, scrape

SLOW_PARTITIONS = 2000  # a CreateTopics that takes the broker a while


def _frame(api_key: int, version: int, correlation_id: int, request) -> bytes:
    return encode_request(RequestHeader(api_key=api_key, api_version=version,
                                        correlation_id=correlation_id, client_id="leaving"),
                          request)


def _create(name: str, partitions: int) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1, assignments=[],
        configs=[])], timeout_ms=60000, validate_only=False)


def test_a_produce_waiting_its_turn_is_dropped_when_the_client_goes(broker_factory):
    metrics_port = free_port()
    broker = broker_factory({"metrics.port": str(metrics_port), "metrics.host": "127.0.0.1"})
    topic = f"left-{uuid.uuid4().hex[:8]}"
    with SimpleClient(broker.bootstrap, timeout=60) as client:
        created = client.call(ApiKey.CREATE_TOPICS, _create(topic, 1))
        assert created.topics[0].error_code == 0
        wait_until(lambda: _end_offset_or_none(client, topic) == 0, 30, "the topic led")

        produce = ProduceRequest(transactional_id=None, acks=1, timeout_ms=30000, topic_data=[
            ProduceRequest.TopicProduceData(name=topic, partition_data=[
                ProduceRequest.PartitionProduceData(
                    index=0, records=build_batch([(None, b"once", None, None)]))])])
        sock = socket.create_connection(("127.0.0.1", broker.port))
        # Stopped, the broker reads the two requests and the client's FIN in
        # one go once resumed: the CreateTopics (on a worker thread) is still
        # going on when it sees the FIN, the Produce waiting behind it.
        broker.pause()
        try:
            sock.sendall(_frame(ApiKey.CREATE_TOPICS, 5, 1,
                                _create(f"{topic}-slow", SLOW_PARTITIONS))
                         + _frame(ApiKey.PRODUCE, 9, 2, produce))
            sock.shutdown(socket.SHUT_WR)  # as a client that timed out closes its socket
        finally:
            broker.resume()
        # The broker is done with the Produce (appended, or dropped), as it
        # counts it in its request times.
        wait_until(lambda: sample(scrape(metrics_port),
                                  "kafka_network_requestmetrics_totaltimems_count",
                                  '{request="Produce"}') == 1, 60, "the Produce handled")
        sock.close()
        assert _end_offset_or_none(client, topic) == 0
        # the CreateTopics before it went on
        wait_until(lambda: _end_offset_or_none(client, f"{topic}-slow") == 0, 60,
                   "the slow topic created")


def _end_offset_or_none(client: SimpleClient, topic: str) -> int | None:
    L = ListOffsetsRequest
    r = client.call(ApiKey.LIST_OFFSETS, L(replica_id=-1, isolation_level=0, topics=[
        L.ListOffsetsTopic(name=topic, partitions=[L.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1)])]))
    part = r.topics[0].partitions[0]
    return part.offset if part.error_code == 0 else None
