"""WriteTxnMarkers (API 27): a transaction coordinator ends a transaction in
the partitions it touched (the data-plane half of KIP-98).

For each marker and partition this broker leads, a control batch (COMMIT or
ABORT, with the coordinator's epoch) is appended with AppendOrigin.COORDINATOR
through the partition layer; the partition's producer state closes the
producer's transaction (and indexes it if aborted) and may refuse the marker
(INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED). As Kafka appends
markers with requiredAcks=-1, each partition's answer waits until the marker
is replicated to the ISR (or request.timeout.ms passes: REQUEST_TIMED_OUT).
A partition not in the metadata is UNKNOWN_TOPIC_OR_PARTITION, one led
elsewhere NOT_LEADER_OR_FOLLOWER: the coordinator retries those at the leader.

Once a marker is replicated in a ``__consumer_offsets`` partition, the
services' ``txn_marker_hook`` (if set) is told (partition, producer id,
committed), so the group coordinator can apply or drop that producer's
transactional offset commits (Kafka's onTransactionCompleted).
"""
from __future__ import annotations

import logging
import time
from typing import Callable

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import WriteTxnMarkersRequest, WriteTxnMarkersResponse
from samsa.protocol.model import OFFSETS_TOPIC
from samsa.protocol.records import CONTROL_ABORT, CONTROL_COMMIT, build_control_batch
from samsa.storage import AppendOrigin

from . import authz
from .authz import Op
from ..partitions import LeaderLookup
from .context import RequestContext
from .errors import error_code_for
from .services import Partitions

R = WriteTxnMarkersResponse
log = logging.getLogger(__name__)


def _append_marker(partitions: Partitions, topic: str, index: int, batch: bytes, txn_version: int
                   ) -> tuple[int, LeaderLookup | None, int]:
    """(error code, the partition lookup and the offset after the marker when appended)."""
    found = partitions.leader_log(topic, index)
    if not found.ok:
        return found.error, None, -1
    try:
        res = partitions.append(found, batch, AppendOrigin.COORDINATOR, acks=-1,
                                txn_version=txn_version)
    except Exception as e:  # every failure is an error code
        return error_code_for(e), None, -1
    return ErrorCode.NONE, found, res.last_offset + 1


# An appended marker: (its partition, the offset after it, the partition's answer, topic,
# producer id, committed)
_Appended = tuple[LeaderLookup, int, "WriteTxnMarkersResponse.WritableTxnMarkerPartitionResult",
                  str, int, bool]


def _tell_hook(hook: Callable[[int, int, bool], None], appended: list[_Appended]) -> None:
    for _, _, result, topic, pid, committed in appended:
        if topic == OFFSETS_TOPIC and result.error_code == ErrorCode.NONE:
            try:
                hook(result.partition_index, pid, committed)
            except Exception:  # the markers are written: their answer stands
                log.exception("txn_marker_hook failed for %s-%d producer %d",
                              topic, result.partition_index, pid)


async def handle_write_txn_markers(ctx: RequestContext, req: WriteTxnMarkersRequest
                                   ) -> WriteTxnMarkersResponse:
    broker = ctx.broker
    version = ctx.version
    now_ms = int(time.time() * 1000)
    markers_out = []
    # acks=all: (lookup, end offset, the partition's result, topic, producer id, committed)
    appended: list[_Appended] = []
    allowed = authz.cluster(ctx, Op.CLUSTER_ACTION)  # only brokers write markers
    for m in req.markers:
        committed = bool(m.transaction_result)
        batch = build_control_batch(CONTROL_COMMIT if committed else CONTROL_ABORT,
                                    m.producer_id, m.producer_epoch, m.coordinator_epoch,
                                    timestamp=now_ms)
        txn_version = m.transaction_version if version >= 2 else 0
        topics_out = []
        for t in m.topics:
            parts = []
            for index in t.partition_indexes:
                code, found, end = _append_marker(broker.partitions, t.name, index, batch,
                                                  txn_version) if allowed else (
                    ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None, -1)
                result = R.WritableTxnMarkerPartitionResult(partition_index=index,
                                                            error_code=code)
                if found is not None:
                    appended.append((found, end, result, t.name, m.producer_id, committed))
                parts.append(result)
            topics_out.append(R.WritableTxnMarkerTopicResult(name=t.name, partitions=parts))
        markers_out.append(R.WritableTxnMarkerResult(producer_id=m.producer_id,
                                                     topics=topics_out))
    if appended:
        codes = await broker.partitions.wait_replicated(
            [(found, end, found.found_log.config.min_insync_replicas)
             for found, end, *_ in appended], broker.config.request_timeout_ms)
        for (_, _, result, *_), code in zip(appended, codes):
            result.error_code = code
        hook = broker.txn_marker_hook
        if hook is not None:
            _tell_hook(hook, appended)
    return R(markers=markers_out)
