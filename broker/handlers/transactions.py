"""Transaction APIs on the coordinator side: AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, DescribeTransactions, ListTransactions (InitProducerId
with a transactional id is in producer_ids.py, TxnOffsetCommit in groups.py).

Each handler translates between the wire message of the version spoken and
the transaction coordinator (broker.transactions, reached through
``ctx.broker.transactions``, a LoopBridge to the main loop).
"""
from __future__ import annotations

import logging
import re

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse,
                               AddPartitionsToTxnRequest, AddPartitionsToTxnResponse,
                               DescribeTransactionsRequest, DescribeTransactionsResponse,
                               EndTxnRequest, EndTxnResponse, ListTransactionsRequest,
                               ListTransactionsResponse)
from samsa.protocol.model import OFFSETS_TOPIC

from . import authz
from .authz import Op
from .context import RequestContext
from .services import TransactionCoordination

log = logging.getLogger("broker.handlers.transactions")
# EndTxn v5 / AddPartitionsToTxn v5 are the transactions v2 (KIP-890 part 2) forms
END_TXN_V2 = 5
ADD_PARTITIONS_V2 = 5
TV_2 = 2


def for_version(code: int, version: int, fenced_since: int) -> int:
    """PRODUCER_FENCED (KIP-588) only to request versions that know it
    (``fenced_since`` on); older ones hear INVALID_PRODUCER_EPOCH, as Kafka
    answers them."""
    if code == ErrorCode.PRODUCER_FENCED and version < fenced_since:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


def _coordinator_or_error(ctx: RequestContext) -> tuple[TransactionCoordination | None, ErrorCode]:
    txns = ctx.broker.transactions
    if txns is None:
        return None, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    return txns, ErrorCode.NONE


_Topics = list[tuple[str, list[int]]]  # (topic, partitions) as a request names them


def _unknown_partitions(ctx: RequestContext, topics: _Topics) -> set[tuple[str, int]]:
    known = ctx.broker.partitions
    return {(t, p) for t, ps in topics for p in ps if known.partition(t, p) is None}


# ------------------------------------------------------------------ AddPartitionsToTxn

def _topic_results(errors: dict[tuple[str, int], int]
                   ) -> list[AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult]:
    R = AddPartitionsToTxnResponse
    by_topic: dict[str, list[AddPartitionsToTxnResponse.AddPartitionsToTxnPartitionResult]] = {}
    for (topic, p), code in errors.items():
        by_topic.setdefault(topic, []).append(R.AddPartitionsToTxnPartitionResult(
            partition_index=p, partition_error_code=code))
    return [R.AddPartitionsToTxnTopicResult(name=t, results_by_partition=rs)
            for t, rs in by_topic.items()]


async def _add_for_producer(ctx: RequestContext, txns: TransactionCoordination | None, tid: str,
                            pid: int, epoch: int, topics: _Topics,
                            verify_only: bool, client_version: int = 0
                            ) -> dict[tuple[str, int], int]:
    wanted = [(t, p) for t, ps in topics for p in ps]
    from_broker = ctx.version >= 4  # authorized as a broker (ClusterAction) already
    if not verify_only and not from_broker:
        # Kafka: Write on the transactional id, then on every topic; the
        # partitions of topics allowed are then OPERATION_NOT_ATTEMPTED
        if not authz.transactional_id(ctx, Op.WRITE, tid):
            return {tp: ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED for tp in wanted}
        may_write = authz.topic_checker(ctx, Op.WRITE)
        if not all(may_write(t) for t, _ in wanted):
            return {tp: ErrorCode.OPERATION_NOT_ATTEMPTED if may_write(tp[0])
                    else ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in wanted}
    if txns is None:
        return {tp: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS for tp in wanted}
    if verify_only:
        return dict(await txns.verify_partitions(tid, pid, epoch, wanted))
    unknown = _unknown_partitions(ctx, topics)
    if unknown:
        # Kafka refuses the whole request: the unknown partitions get their
        # error, the others OPERATION_NOT_ATTEMPTED.
        return {tp: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown
                     else ErrorCode.OPERATION_NOT_ATTEMPTED) for tp in wanted}
    code = await txns.add_partitions(tid, pid, epoch, wanted, client_version)
    return {tp: code for tp in wanted}


async def handle_add_partitions_to_txn(ctx: RequestContext, req: AddPartitionsToTxnRequest
                                       ) -> AddPartitionsToTxnResponse:
    R = AddPartitionsToTxnResponse
    txns, _ = _coordinator_or_error(ctx)
    if ctx.version <= 3:
        topics = [(t.name, list(t.partitions)) for t in req.v3_and_below_topics]
        errors = await _add_for_producer(ctx, txns, req.v3_and_below_transactional_id,
                                         req.v3_and_below_producer_id,
                                         req.v3_and_below_producer_epoch, topics, False)
        errors = {tp: for_version(code, ctx.version, 2) for tp, code in errors.items()}
        return R(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(errors))
    if not authz.cluster(ctx, Op.CLUSTER_ACTION):  # v4+ is brokers' batched form
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                 results_by_transaction=[])
    results = []
    for txn in req.transactions:
        topics = [(t.name, list(t.partitions)) for t in txn.topics]
        # v5 from a partition leader adds the partition of a v2 producer's
        # first transactional write (the producer itself no longer asks)
        errors = await _add_for_producer(
            ctx, txns, txn.transactional_id, txn.producer_id, txn.producer_epoch, topics,
            txn.verify_only, TV_2 if ctx.version >= ADD_PARTITIONS_V2 else 0)
        results.append(R.AddPartitionsToTxnResult(transactional_id=txn.transactional_id,
                                                  topic_results=_topic_results(errors)))
    return R(throttle_time_ms=0, error_code=0, results_by_transaction=results)


# ------------------------------------------------------------------ AddOffsetsToTxn

async def handle_add_offsets_to_txn(ctx: RequestContext, req: AddOffsetsToTxnRequest
                                    ) -> AddOffsetsToTxnResponse:
    txns, code = _coordinator_or_error(ctx)
    if not authz.transactional_id(ctx, Op.WRITE, req.transactional_id):
        txns, code = None, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not authz.group(ctx, Op.READ, req.group_id):
        txns, code = None, ErrorCode.GROUP_AUTHORIZATION_FAILED
    if txns is not None:
        if ctx.broker.coordinators.partition_count() <= 0:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            # The group's offsets partition joins the transaction: the marker
            # that ends it makes the transactional offset commits visible.
            offsets_partition = ctx.broker.coordinators.partition_of(req.group_id)
            code = await txns.add_partitions(req.transactional_id, req.producer_id,
                                             req.producer_epoch,
                                             [(OFFSETS_TOPIC, offsets_partition)])
    return AddOffsetsToTxnResponse(throttle_time_ms=0,
                                   error_code=for_version(code, ctx.version, 2))


# ------------------------------------------------------------------ EndTxn

async def handle_end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    txns, code = _coordinator_or_error(ctx)
    if not authz.transactional_id(ctx, Op.WRITE, req.transactional_id):
        txns, code = None, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    pid = epoch = -1
    v2 = ctx.version >= END_TXN_V2
    if txns is not None:
        ended = await txns.end_transaction(req.transactional_id, req.producer_id,
                                           req.producer_epoch, req.committed,
                                           TV_2 if v2 else 0)
        code, pid, epoch = ended.error, ended.producer_id, ended.producer_epoch
    if v2:
        log.debug("EndTxn v%d (transactions v2) %s for %s producer %d epoch %d: %s, "
                  "continuing as producer %d epoch %d", ctx.version,
                  "commit" if req.committed else "abort", req.transactional_id,
                  req.producer_id, req.producer_epoch, ErrorCode(code).name, pid, epoch)
    return EndTxnResponse(throttle_time_ms=0, error_code=for_version(code, ctx.version, 2),
                          producer_id=pid, producer_epoch=epoch)


# ------------------------------------------------------------------ admin

async def handle_describe_transactions(ctx: RequestContext, req: DescribeTransactionsRequest
                                       ) -> DescribeTransactionsResponse:
    R = DescribeTransactionsResponse
    txns, code = _coordinator_or_error(ctx)
    states = []
    may = [t for t in req.transactional_ids if authz.transactional_id(ctx, Op.DESCRIBE, t)]
    described = dict(zip(may, await txns.describe(may))) if txns is not None and may else {}
    may_describe = authz.topic_checker(ctx, Op.DESCRIBE)
    for tid in req.transactional_ids:
        d = described.get(tid)
        if d is None or d.metadata is None:
            error = (d.error if d is not None else code if tid in may
                     else ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            states.append(R.TransactionState(
                error_code=error, transactional_id=tid,
                transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=-1,
                producer_id=-1, producer_epoch=-1, topics=[]))
            continue
        m = d.metadata
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(m.partitions):
            # as Kafka: the topics the caller may not Describe are left out
            if may_describe(topic):
                by_topic.setdefault(topic, []).append(p)
        states.append(R.TransactionState(
            error_code=0, transactional_id=tid, transaction_state=m.state.display_name,
            transaction_timeout_ms=m.timeout_ms, transaction_start_time_ms=m.start_ms,
            producer_id=m.producer_id, producer_epoch=m.producer_epoch,
            topics=[R.TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return R(throttle_time_ms=0, transaction_states=states)


async def handle_list_transactions(ctx: RequestContext, req: ListTransactionsRequest
                                   ) -> ListTransactionsResponse:
    R = ListTransactionsResponse
    txns, code = _coordinator_or_error(ctx)
    if txns is None:
        return R(throttle_time_ms=0, error_code=code, unknown_state_filters=[],
                 transaction_states=[])
    duration = req.duration_filter if ctx.version >= 1 else -1
    pattern = req.transactional_id_pattern if ctx.version >= 2 else None
    try:
        unknown, listed = await txns.list_transactions(
            list(req.state_filters), list(req.producer_id_filters), duration, pattern or None)
    except re.error:
        return R(throttle_time_ms=0, error_code=ErrorCode.INVALID_REGULAR_EXPRESSION,
                 unknown_state_filters=[], transaction_states=[])
    return R(throttle_time_ms=0, error_code=0, unknown_state_filters=unknown,
             transaction_states=[R.TransactionState(
                 transactional_id=m.transactional_id, producer_id=m.producer_id,
                 transaction_state=m.state.display_name) for m in listed
                 if authz.transactional_id(ctx, Op.DESCRIBE, m.transactional_id)])
