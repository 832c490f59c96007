"""The fault rules (broker/faults/rules.py) and the error answers (responses.py), without a broker."""
from __future__ import annotations

import pytest

from samsa.broker.faults.partitions import mark, strip, touched
from samsa.broker.faults.responses import can_answer, error_response
from samsa.broker.faults.rules import DisconnectRule, ErrorRule, FaultRules, RuleError, api_key, error_code
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import FetchResponse, OffsetFetchRequest, ProduceRequest, ProduceResponse
from samsa.protocol.model import ApiKey


def test_apis_and_errors_go_by_kafkas_names_or_numbers():
    assert api_key("Produce") == api_key("produce") == api_key(0) == api_key("0") == ApiKey.PRODUCE
    assert api_key("ListOffsets") == api_key("LIST_OFFSETS") == ApiKey.LIST_OFFSETS
    assert error_code("NOT_LEADER_OR_FOLLOWER") == error_code(6) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    with pytest.raises(RuleError, match="unknown API"):
        api_key("Produced")
    with pytest.raises(RuleError, match="unknown error"):
        error_code("NOT_A_LEADER")


def test_an_error_rule_is_used_up_request_by_request_and_matches_its_scope():
    rules = FaultRules()
    rules.errors.append(ErrorRule(ApiKey.PRODUCE, ErrorCode.REQUEST_TIMED_OUT, 2, topic="t", partition=1,
                                  client_id="app"))
    on = lambda topic, partition: (topic, partition) == ("t", 1)
    off = lambda topic, partition: False
    assert rules.take_error(ApiKey.FETCH, "app", on) is None
    assert rules.take_error(ApiKey.PRODUCE, "other", on) is None
    assert rules.take_error(ApiKey.PRODUCE, "app", off) is None
    assert rules.take_error(ApiKey.PRODUCE, "app", on) is not None
    assert rules.take_error(ApiKey.PRODUCE, "app", on) is not None
    assert rules.take_error(ApiKey.PRODUCE, "app", on) is None and not rules.any_request_rule()


def test_a_disconnect_rule_lets_its_skip_count_through_between_disconnects():
    rules = FaultRules()
    rules.disconnects.append(DisconnectRule(ApiKey.PRODUCE, skip=1, after=1, times=2))
    seen = [rules.take_disconnect(ApiKey.PRODUCE) for _ in range(5)]
    assert seen == [False, True, False, True, False]
    assert rules.take_disconnect(ApiKey.FETCH) is False


def test_an_injected_produce_error_answers_every_partition_of_the_request():
    request = ProduceRequest(acks=-1, timeout_ms=1000, topic_data=[
        ProduceRequest.TopicProduceData(name="t", partition_data=[
            ProduceRequest.PartitionProduceData(index=0), ProduceRequest.PartitionProduceData(index=2)])])
    response = error_response(ApiKey.PRODUCE, request, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert [(t.name, p.index, p.error_code) for t in response.responses for p in t.partition_responses] == \
        [("t", 0, 6), ("t", 2, 6)]
    assert [(n, p) for n, _, p in touched(ApiKey.PRODUCE, request)] == [("t", 0), ("t", 2)]


def test_only_apis_whose_answers_carry_an_error_code_can_be_faulted():
    assert can_answer(ApiKey.PRODUCE) and can_answer(ApiKey.HEARTBEAT) and can_answer(ApiKey.JOIN_GROUP)
    assert not can_answer(ApiKey.METADATA)


def _produce_request():
    P = ProduceRequest
    return P(acks=-1, timeout_ms=1000, topic_data=[P.TopicProduceData(name="t", partition_data=[
        P.PartitionProduceData(index=0, records=b"r0"), P.PartitionProduceData(index=1, records=b"r1")])])


def test_a_partition_scoped_produce_error_keeps_the_hit_partition_out_and_answers_it_alone():
    request = _produce_request()
    hits = [h for h in touched(ApiKey.PRODUCE, request) if h[2] == 0]
    strip(ApiKey.PRODUCE, request, hits)
    assert [(t.name, p.index) for t in request.topic_data for p in t.partition_data] == [("t", 1)]
    handled = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[
        ProduceResponse.PartitionProduceResponse(index=1, error_code=0, base_offset=7)])])
    response = mark(ApiKey.PRODUCE, handled, hits, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert sorted((t.name, p.index, p.error_code, p.base_offset)
                  for t in response.responses for p in t.partition_responses) == \
        [("t", 0, 6, -1), ("t", 1, 0, 7)]


def test_a_partition_scoped_fetch_error_drops_that_partitions_records_only():
    F = FetchResponse
    handled = F(responses=[F.FetchableTopicResponse(topic="t", partitions=[
        F.PartitionData(partition_index=0, high_watermark=5, records=b"a"),
        F.PartitionData(partition_index=1, high_watermark=9, records=b"b")])])
    response = mark(ApiKey.FETCH, handled, [("t", None, 1)], ErrorCode.REQUEST_TIMED_OUT)
    assert [(p.partition_index, p.error_code, p.records) for p in response.responses[0].partitions] == \
        [(0, 0, b"a"), (1, 7, None)]


def test_an_offset_fetch_error_reaches_clients_of_every_version():
    # v8+ has no top-level error code: the error goes on each group, or a client would read "no offsets"
    O = OffsetFetchRequest
    request = O(groups=[O.OffsetFetchRequestGroup(group_id="g", topics=None)])
    response = error_response(ApiKey.OFFSET_FETCH, request, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert [(g.group_id, g.error_code) for g in response.groups] == [("g", 14)]
    old = O(group_id="g", topics=[O.OffsetFetchRequestTopic(name="t", partition_indexes=[0])])
    response = error_response(ApiKey.OFFSET_FETCH, old, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    assert response.error_code == 14 and response.topics[0].partitions[0].error_code == 14
