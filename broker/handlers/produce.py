"""Produce: validate each partition's batches and append them to its log.

Batches are never decoded record by record here: the log validates headers,
CRCs and the framing of every record (protocol/records/walker.py, without
copying a key or value) and patches offsets in place. Produce v0-2 carry legacy message sets
(magic 0/1), which are up-converted to v2 batches first, so the log only ever
holds v2 data written by samsa.
"""
from __future__ import annotations

from collections.abc import Iterable

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ProduceRequest, ProduceResponse
from samsa.protocol.messages.wire import Buf, Records
from samsa.protocol.records import Codec, iter_batch_headers, upconvert_message_set

from samsa.storage.errors import RecordError

from ..metadata import BrokerEndpoint, TopicMeta, brokers_on_listener
from ..partitions import LeaderLookup
from ..topics import name_error
from . import authz
from .authz import Op
from .errors import error_code_for
from .txn_verification import opens_transaction, verification_on, verify_opening
from .context import RequestContext
from .services import Metrics, Partitions, Services

_MAGIC_OFFSET = 16  # baseOffset i64, length i32, leaderEpoch i32, then magic
_FIRST_ZSTD_VERSION = 7  # KIP-110: zstd batches need Produce v7+
_ADMIN_CLIENT_ID = "__admin_client"  # the one client Kafka lets write internal topics
PRODUCE_TXN_V2 = 12  # Produce v12+: a transactions v2 producer (partitions join implicitly)


_PartitionAnswer = ProduceResponse.PartitionProduceResponse
# A topic of the request, its metadata (None: not served) and the error for a missing one
_Topic = tuple[ProduceRequest.TopicProduceData, "TopicMeta | None", int]
# acks=all: (partition, end offset, its answer, timeout ms)
_Waiting = tuple[LeaderLookup, int, _PartitionAnswer, int]


def _received(records: Records) -> Buf | None:
    """A request's records as decoded: bytes-like or null (a file region is only sent)."""
    return records if isinstance(records, (bytes, bytearray, memoryview)) else None


def _partition_result(index: int, code: int, base_offset: int = -1, log_append_time: int = -1,
                      log_start_offset: int = -1, message: str | None = None,
                      record_errors: Iterable[RecordError] = (),
                      current_leader: ProduceResponse.LeaderIdAndEpoch | None = None
                      ) -> _PartitionAnswer:
    R = ProduceResponse
    return R.PartitionProduceResponse(
        index=index, error_code=code, base_offset=base_offset,
        log_append_time_ms=log_append_time, log_start_offset=log_start_offset,
        record_errors=[R.BatchIndexAndErrorMessage(
            batch_index=e.batch_index, batch_index_error_message=e.message)
            for e in record_errors], error_message=message,
        current_leader=current_leader or R.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1))


def _append(partitions: Partitions, found: LeaderLookup, records: Buf | None, version: int,
            acks: int, metrics: Metrics) -> tuple[_PartitionAnswer, int]:
    """(the partition's answer, the offset after its records; -1 when refused)."""
    if records is None or len(records) == 0:
        return _partition_result(-1, ErrorCode.INVALID_RECORD, message="empty record set"), -1
    if version <= 2:
        records = upconvert_message_set(records)
    elif len(records) > _MAGIC_OFFSET and records[_MAGIC_OFFSET] != 2:
        return _partition_result(-1, ErrorCode.INVALID_RECORD,
                                 message="Produce v3+ requires record batches of magic 2"), -1
    elif version < _FIRST_ZSTD_VERSION and any(
            h.codec == Codec.ZSTD for _, h in iter_batch_headers(records)):
        return _partition_result(-1, ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                                 message=f"zstd needs Produce v{_FIRST_ZSTD_VERSION} or later"), -1
    res = partitions.append(found, records, acks=acks)
    if not res.duplicate:
        metrics.produced(found.found_log.topic, res.last_offset - res.first_offset + 1, len(records))
    # a retried duplicate waits for its original's replication, as in Kafka
    return _partition_result(-1, ErrorCode.NONE, res.first_offset, res.log_append_time,
                             res.log_start_offset), res.last_offset + 1


def _not_leader(index: int, found: LeaderLookup, leaders: dict[int, BrokerEndpoint]
                ) -> _PartitionAnswer:
    """An error for a partition this broker does not lead (or cannot write),
    with the current leader when another broker has it (KIP-951)."""
    current = None
    if found.leader is not None:
        leaders[found.leader.node_id] = found.leader
        current = ProduceResponse.LeaderIdAndEpoch(leader_id=found.leader.node_id,
                                                   leader_epoch=found.leader_epoch)
    return _partition_result(index, found.error, current_leader=current)


async def _await_replication(partitions: Partitions, waiting: list[_Waiting]) -> None:
    """acks=all: each appended partition's answer waits until its in-sync
    replicas have the records (or the request's timeout passes)."""
    codes = await partitions.wait_replicated(
        [(found, end, found.found_log.config.min_insync_replicas) for found, end, _, _ in waiting],
        min(t for _, _, _, t in waiting))
    for (_, _, result, _), code in zip(waiting, codes):
        if code:
            result.error_code = code
            result.base_offset = -1
            result.log_append_time_ms = -1
            result.log_start_offset = -1


def _topic_meta(broker: Services, version: int, topic: ProduceRequest.TopicProduceData
                ) -> tuple[TopicMeta | None, int]:
    """(the topic's metadata or None, the error for a missing one): by id from v13."""
    if version >= 13:
        return broker.topics.by_id(topic.topic_id), ErrorCode.UNKNOWN_TOPIC_ID
    meta = broker.topics.get(topic.name)
    if meta is not None:  # (the name's rules are checked only for an answer about its absence)
        return meta, ErrorCode.NONE
    return None, (ErrorCode.INVALID_TOPIC_EXCEPTION if name_error(topic.name)
                  else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def _first_transactional_write(broker: Services, found: LeaderLookup, records: Buf | None
                               ) -> tuple[int, int] | None:
    """(producer id, epoch) when ``records`` would open a transaction in the
    partition (a transactional batch of a producer without one open there):
    the write KIP-890 has the coordinator verify first. None otherwise."""
    if not records or len(records) <= _MAGIC_OFFSET or records[_MAGIC_OFFSET] != 2:
        return None
    for _, header in iter_batch_headers(records):
        if (not header.is_transactional or header.producer_id < 0
                or not opens_transaction(broker, found, header.producer_id,
                                         header.producer_epoch)):
            return None
        return header.producer_id, header.producer_epoch
    return None


def _holds_transactional_batches(req: ProduceRequest) -> bool:
    """Does any partition's data hold a transactional batch (Kafka's
    RequestUtils.hasTransactionalRecords)? Legacy message sets never do."""
    for topic in req.topic_data:
        for part in topic.partition_data:
            records = _received(part.records)
            if not records or len(records) <= _MAGIC_OFFSET or records[_MAGIC_OFFSET] != 2:
                continue
            if any(h.is_transactional for _, h in iter_batch_headers(records)):
                return True
    return False


async def _verify_transactional(ctx: RequestContext, transactional_id: str, topics: list[_Topic]
                                ) -> dict[tuple[str, int], ErrorCode]:
    """KIP-890 part 1: the coordinator's word on every partition this request
    would open a transaction in (empty when there are none, or the check is
    off). ``topics``: (request topic, its metadata or None, error if missing)."""
    broker = ctx.broker
    v2 = ctx.version >= PRODUCE_TXN_V2
    if not verification_on(broker, v2):
        return {}
    opening: dict[tuple[int, int], list[tuple[str, int]]] = {}
    for topic, meta, _ in topics:
        if meta is None or meta.is_internal:
            continue
        for part in topic.partition_data:
            found = broker.partitions.leader_log(meta.name, part.index)
            if not found.ok:
                continue
            producer = _first_transactional_write(broker, found, _received(part.records))
            if producer is not None:
                opening.setdefault(producer, []).append((meta.name, part.index))
    return await verify_opening(broker, transactional_id, opening, add=v2)


async def handle_produce(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | None:
    broker = ctx.broker
    version = ctx.version
    topics_out = []
    acks_ok = req.acks in (-1, 0, 1)
    waiting: list[_Waiting] = []
    leaders: dict[int, BrokerEndpoint] = {}  # where clients should go instead (v10+)
    topics: list[_Topic] = [(t, *_topic_meta(broker, version, t)) for t in req.topic_data]
    # Kafka refuses a whole request holding transactional batches unless it
    # names a transactional id it may Write (even without an authorizer: a
    # batch of no known transaction would hang read_committed readers), and
    # each topic without Write on it (before saying it does not exist).
    tid = req.transactional_id
    refused = (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
               if (tid is None and _holds_transactional_batches(req))
               or (tid is not None and not authz.transactional_id(ctx, Op.WRITE, tid))
               else None)
    may_write = authz.topic_checker(ctx, Op.WRITE)
    if refused is None:
        # by name (before v13), even a missing topic is checked: its absence is no answer
        topics = [(t, meta, missing) if (meta is None and version >= 13) or may_write(
                      meta.name if meta is not None else t.name)
                  else (t, None, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                  for t, meta, missing in topics]
    # The turn comes before the coordinator is asked: Kafka asks it for a
    # request only once the earlier ones were answered, so a pipelined request
    # opening another partition of the transaction (KIP-890 part 2) finds the
    # first one's partition added, not its write in flight
    # (CONCURRENT_TRANSACTIONS), and the partitions it opens go in that order.
    if not ctx.may_append() and not await ctx.wait_to_append():
        return None  # the client went: a producer retrying must not see this land too
    verdicts: dict[tuple[str, int], ErrorCode] = {}
    if tid is not None and acks_ok and refused is None:
        # Leadership is looked up again below: the verification waited on the
        # coordinator, and appends go where the partition is led now.
        verdicts = await _verify_transactional(ctx, tid, topics)
    for topic, meta, missing_code in topics:
        parts_out = []
        for part in topic.partition_data:
            if refused is not None:
                result = _partition_result(part.index, refused)
            elif not acks_ok:
                result = _partition_result(part.index, ErrorCode.INVALID_REQUIRED_ACKS)
            elif meta is None:
                result = _partition_result(part.index, missing_code)
            elif meta.is_internal and ctx.header.client_id != _ADMIN_CLIENT_ID:
                # __consumer_offsets belongs to the group coordinator: a client record
                # there would surface as commits only after a restart (Kafka refuses too)
                result = _partition_result(part.index, ErrorCode.INVALID_TOPIC_EXCEPTION,
                                           message=f"Cannot append to internal topic {meta.name}")
            else:
                found = broker.partitions.leader_log(meta.name, part.index)
                verdict = verdicts.get((meta.name, part.index)) if verdicts else None
                if not found.ok:
                    result = _not_leader(part.index, found, leaders)
                elif verdict:
                    result = _partition_result(part.index, verdict, message=(
                        "the transaction coordinator did not verify this partition as "
                        f"part of transaction {req.transactional_id!r}: {verdict.name}"))
                else:
                    try:
                        result, end = _append(broker.partitions, found, _received(part.records), version,
                                              req.acks, broker.metrics)
                        if req.acks == -1 and end >= 0:
                            waiting.append((found, end, result, req.timeout_ms))
                    except Exception as e:  # noqa: BLE001 - every failure is an error code
                        # KIP-467: the records at fault, so clients fail only those
                        result = _partition_result(part.index, error_code_for(e),
                                                   message=str(e)[:1000],
                                                   record_errors=getattr(e, "record_errors", ()))
                    result.index = part.index
            parts_out.append(result)
        topics_out.append(ProduceResponse.TopicProduceResponse(
            name=topic.name, topic_id=topic.topic_id, partition_responses=parts_out))
    ctx.appended()
    if waiting:
        await _await_replication(broker.partitions, waiting)
    if req.acks == 0:
        return None
    return ProduceResponse(responses=topics_out, throttle_time_ms=0, node_endpoints=[
        ProduceResponse.NodeEndpoint(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
        for b in brokers_on_listener(list(leaders.values()), ctx.listener)] if leaders else [])
