"""An injected error on some partitions of a request, the others answered as usual.

Kafka answers Produce, Fetch, ListOffsets, OffsetCommit and OffsetFetch partition
by partition: a broker that lost the leadership of t-0 fails t-0 alone and
appends t-1's records. A rule scoped to a topic (and partition) does the same:

- requests that write (Produce, OffsetCommit) lose the hit partitions before
  they are handled, so nothing is appended or committed there;
- requests that read (Fetch, ListOffsets, OffsetFetch) are handled whole (a Fetch
  keeps its fetch session whole this way);

and the response then carries the error, with no data, on every hit partition.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable

from samsa.protocol.messages import (FetchResponse, ListOffsetsResponse, OffsetCommitResponse,
                                     OffsetFetchResponse, ProduceResponse)
from samsa.protocol.model import ApiKey

# (topic name, topic id, partition) as the request names it
Hit = tuple[str | None, Any, int]

_WRITES = frozenset({ApiKey.PRODUCE, ApiKey.OFFSET_COMMIT})
PARTITIONED = frozenset({ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.LIST_OFFSETS,
                         ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH})


def _offset_fetch_topics(request: Any) -> list[Any]:
    if request.groups:  # v8+: one request for several groups
        return [t for g in request.groups for t in g.topics or []]
    return list(request.topics or [])


def touched(api: int, request: Any) -> list[Hit]:
    """Every partition a request names, for the APIs answered per partition."""
    if api == ApiKey.PRODUCE:
        return [(t.name, t.topic_id, p.index) for t in request.topic_data for p in t.partition_data]
    if api == ApiKey.FETCH:
        return [(t.topic, t.topic_id, p.partition) for t in request.topics for p in t.partitions]
    if api in (ApiKey.LIST_OFFSETS, ApiKey.OFFSET_COMMIT):
        return [(t.name, getattr(t, "topic_id", None), p.partition_index)
                for t in request.topics for p in t.partitions]
    if api == ApiKey.OFFSET_FETCH:
        return [(t.name, getattr(t, "topic_id", None), p)
                for t in _offset_fetch_topics(request) for p in t.partition_indexes or []]
    return []


def strip(api: int, request: Any, hits: list[Hit]) -> None:
    """Take the hit partitions out of a request that writes (in place)."""
    if api not in _WRITES:
        return
    gone = {(name, topic_id, p) for name, topic_id, p in hits}
    if api == ApiKey.PRODUCE:
        for t in request.topic_data:
            t.partition_data = [p for p in t.partition_data if (t.name, t.topic_id, p.index) not in gone]
        request.topic_data = [t for t in request.topic_data if t.partition_data]
    else:
        for t in request.topics:
            t.partitions = [p for p in t.partitions
                            if (t.name, getattr(t, "topic_id", None), p.partition_index) not in gone]
        request.topics = [t for t in request.topics if t.partitions]


def _same_topic(entry_name: str | None, entry_id: Any, name: str | None, topic_id: Any) -> bool:
    if topic_id is not None and topic_id != uuid.UUID(int=0) and entry_id == topic_id:
        return True
    return bool(name) and entry_name == name


def _entry(entries: list[Any], index_of: Callable[[Any], int], p: int, make: Callable[[], Any]) -> Any:
    for e in entries:
        if index_of(e) == p:
            return e
    e = make()
    entries.append(e)
    return e


def _topic(topics: list[Any], name_of: Callable[[Any], Any], hit: Hit, make: Callable[[], Any]) -> Any:
    name, topic_id, _ = hit
    for t in topics:
        if _same_topic(name_of(t), getattr(t, "topic_id", None), name, topic_id):
            return t
    t = make()
    topics.append(t)
    return t


def mark(api: int, response: Any, hits: list[Hit], code: int) -> Any:
    """The response with ``code`` and no data on every hit partition (added
    where the handler left one out: a stripped write, an incremental fetch)."""
    for hit in hits:
        _mark_one(api, response, hit, code)
    return response


def _mark_one(api: int, response: Any, hit: Hit, code: int) -> None:
    name, topic_id, p = hit
    if api == ApiKey.PRODUCE:
        R: Any = ProduceResponse
        t = _topic(response.responses, lambda t: t.name, hit, lambda: R.TopicProduceResponse(
            name=name or "", topic_id=topic_id, partition_responses=[]))
        e = _entry(t.partition_responses, lambda e: e.index, p,
                   lambda: R.PartitionProduceResponse(index=p, error_code=0))
        e.error_code, e.base_offset, e.log_append_time_ms, e.log_start_offset = code, -1, -1, -1
    elif api == ApiKey.FETCH:
        R = FetchResponse
        t = _topic(response.responses, lambda t: t.topic, hit, lambda: R.FetchableTopicResponse(
            topic=name or "", topic_id=topic_id, partitions=[]))
        e = _entry(t.partitions, lambda e: e.partition_index, p,
                   lambda: R.PartitionData(partition_index=p, error_code=0))
        e.error_code, e.high_watermark, e.records = code, -1, None
    elif api == ApiKey.LIST_OFFSETS:
        R = ListOffsetsResponse
        t = _topic(response.topics, lambda t: t.name, hit, lambda: R.ListOffsetsTopicResponse(
            name=name or "", partitions=[]))
        e = _entry(t.partitions, lambda e: e.partition_index, p,
                   lambda: R.ListOffsetsPartitionResponse(partition_index=p, error_code=0))
        e.error_code, e.timestamp, e.offset = code, -1, -1
    elif api == ApiKey.OFFSET_COMMIT:
        R = OffsetCommitResponse
        t = _topic(response.topics, lambda t: t.name, hit, lambda: R.OffsetCommitResponseTopic(
            name=name or "", topic_id=topic_id, partitions=[]))
        e = _entry(t.partitions, lambda e: e.partition_index, p,
                   lambda: R.OffsetCommitResponsePartition(partition_index=p, error_code=0))
        e.error_code = code
    elif api == ApiKey.OFFSET_FETCH:
        _mark_offset_fetch(response, hit, code)


def _mark_offset_fetch(response: Any, hit: Hit, code: int) -> None:
    R: Any = OffsetFetchResponse
    name, topic_id, p = hit
    if response.groups:
        # v8+: the partition in every group that asked for it (reads are answered whole)
        for g in response.groups:
            for t in g.topics or []:
                if _same_topic(t.name, getattr(t, "topic_id", None), name, topic_id):
                    for e in t.partitions:
                        if e.partition_index == p:
                            e.error_code, e.committed_offset = code, -1
        return
    t = _topic(response.topics, lambda t: t.name, hit, lambda: R.OffsetFetchResponseTopic(
        name=name or "", partitions=[]))
    e = _entry(t.partitions, lambda e: e.partition_index, p,
               lambda: R.OffsetFetchResponsePartition(partition_index=p))
    e.error_code, e.committed_offset = code, -1
