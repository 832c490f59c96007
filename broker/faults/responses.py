"""An API's response carrying one error code, built from the request it answers.

As Kafka's AbstractRequest.getErrorResponse: every topic-partition the request
names gets the error (and no data), and where the response has a top-level error
code, that carries it. The request is not handled: an injected
NOT_LEADER_OR_FOLLOWER on Produce appends nothing, as on a broker that is not
the leader.
"""
from __future__ import annotations

from typing import Any, Callable

from samsa.protocol.messages import (API_BY_KEY, FetchResponse, FindCoordinatorResponse,
                                     ListOffsetsResponse, OffsetCommitResponse, OffsetFetchResponse,
                                     ProduceResponse)
from samsa.protocol.model import ApiKey


def _produce(request: Any, code: int) -> Any:
    R = ProduceResponse
    return R(responses=[R.TopicProduceResponse(name=t.name, topic_id=t.topic_id, partition_responses=[
        R.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1,
                                   log_append_time_ms=-1, log_start_offset=-1)
        for p in t.partition_data]) for t in request.topic_data])


def _fetch(request: Any, code: int) -> Any:
    R = FetchResponse
    return R(error_code=0, session_id=0, responses=[
        R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[
            R.PartitionData(partition_index=p.partition, error_code=code, high_watermark=-1)
            for p in t.partitions]) for t in request.topics])


def _list_offsets(request: Any, code: int) -> Any:
    R = ListOffsetsResponse
    return R(topics=[R.ListOffsetsTopicResponse(name=t.name, partitions=[
        R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=code,
                                       timestamp=-1, offset=-1)
        for p in t.partitions]) for t in request.topics])


def _offset_commit(request: Any, code: int) -> Any:
    R = OffsetCommitResponse
    return R(topics=[R.OffsetCommitResponseTopic(name=t.name, topic_id=t.topic_id, partitions=[
        R.OffsetCommitResponsePartition(partition_index=p.partition_index, error_code=code)
        for p in t.partitions]) for t in request.topics])


def _offset_fetch(request: Any, code: int) -> Any:
    # v0-1 carry errors per partition, v2-7 at the top as well, v8+ per group
    R = OffsetFetchResponse
    return R(error_code=code, topics=[R.OffsetFetchResponseTopic(name=t.name, partitions=[
        R.OffsetFetchResponsePartition(partition_index=p, committed_offset=-1, error_code=code)
        for p in t.partition_indexes or []]) for t in request.topics or []],
        groups=[R.OffsetFetchResponseGroup(group_id=g.group_id, error_code=code)
                for g in request.groups or []])


def _find_coordinator(request: Any, code: int) -> Any:
    R = FindCoordinatorResponse
    return R(error_code=code, node_id=-1, host="", port=-1, coordinators=[
        R.Coordinator(key=k, node_id=-1, host="", port=-1, error_code=code)
        for k in request.coordinator_keys or []])


_BUILDERS: dict[int, Callable[[Any, int], Any]] = {
    ApiKey.PRODUCE: _produce,
    ApiKey.FETCH: _fetch,
    ApiKey.LIST_OFFSETS: _list_offsets,
    ApiKey.OFFSET_COMMIT: _offset_commit,
    ApiKey.OFFSET_FETCH: _offset_fetch,
    ApiKey.FIND_COORDINATOR: _find_coordinator,
}


# Metadata's top-level error code is new (v13): older versions would read an
# answer with no brokers and no topics, not an error.
_NOT_ANSWERABLE = frozenset({ApiKey.METADATA})


def can_answer(api: int) -> bool:
    """Whether an error can be injected into this API's responses."""
    if api in _NOT_ANSWERABLE:
        return False
    return api in _BUILDERS or "error_code" in API_BY_KEY[api].response_cls._attrs


def error_response(api: int, request: Any, code: int) -> Any:
    build = _BUILDERS.get(api)
    if build is not None:
        return build(request, code)
    response_cls: Any = API_BY_KEY[api].response_cls  # a compiled message class (checker: Message)
    return response_cls(error_code=code)
