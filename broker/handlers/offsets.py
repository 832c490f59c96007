"""ListOffsets, OffsetForLeaderEpoch and DeleteRecords: questions about a log's offsets."""
from __future__ import annotations

from typing import Callable

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (DeleteRecordsRequest, DeleteRecordsResponse, ListOffsetsRequest,
                               ListOffsetsResponse, OffsetForLeaderEpochRequest,
                               OffsetForLeaderEpochResponse)

from ..partition_log import PartitionLog
from ..partitions import LeaderLookup, fetch_upper_bound
from . import authz
from .authz import Op
from .errors import error_code_for
from .context import RequestContext

_REFUSED = LeaderLookup(ErrorCode.TOPIC_AUTHORIZATION_FAILED)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -1, -2, -3, -4, -5


def _list_offset(log: PartitionLog, timestamp: int, replica: bool, isolation: int = 0
                 ) -> tuple[int, int]:
    """(offset, timestamp) for one ListOffsets query; -1 offset when nothing matches.
    The latest offset is the high watermark for clients (the last stable
    offset for read_committed ones, v2+), the log end for a follower (a broker:
    its fetch offset is past the leader's log end)."""
    bound = fetch_upper_bound(log, isolation)
    if timestamp == LATEST:
        return (log.log_end_offset if replica else bound), -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return log.log_start_offset, -1
    if timestamp == LATEST_TIERED:
        return log.log_start_offset - 1, -1
    if timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp_and_offset()
    else:
        found = log.offset_for_timestamp(timestamp)
    # A client is not told of offsets it could not fetch yet (Kafka caps the
    # lookup at the high watermark, or the LSO for read_committed, so a seek
    # there survives a failover).
    if found is None or (not replica and found[0] >= bound):
        return -1, -1
    return found  # (offset, timestamp)


async def handle_list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    broker = ctx.broker
    version = ctx.version
    R = ListOffsetsResponse
    topics = []
    may_describe = authz.topic_checker(ctx, Op.DESCRIBE)
    for t in req.topics:
        parts = []
        for p in t.partitions:
            found = broker.partitions.leader_log(t.name, p.partition_index,
                                                 p.current_leader_epoch) \
                if may_describe(t.name) else _REFUSED
            if not found.ok:
                parts.append(R.ListOffsetsPartitionResponse(
                    partition_index=p.partition_index, error_code=found.error,
                    old_style_offsets=[], timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            try:
                offset, ts = _list_offset(found.found_log, p.timestamp, req.replica_id >= 0,
                                          req.isolation_level if version >= 2 else 0)
                code = ErrorCode.NONE
            except Exception as e:
                offset, ts, code = -1, -1, error_code_for(e)
            old_style = []
            if version == 0 and code == 0:
                # v0 answers a list of segment offsets; the one offset asked for is enough.
                old_style = [offset] if offset >= 0 else []
            parts.append(R.ListOffsetsPartitionResponse(
                partition_index=p.partition_index, error_code=code, old_style_offsets=old_style,
                timestamp=ts, offset=offset, leader_epoch=found.leader_epoch if offset >= 0 else -1))
        topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


async def handle_offset_for_leader_epoch(ctx: RequestContext, req: OffsetForLeaderEpochRequest
                                         ) -> OffsetForLeaderEpochResponse:
    broker = ctx.broker
    R = OffsetForLeaderEpochResponse
    topics = []
    # As Kafka, whatever replica_id says: ClusterAction (a broker) covers
    # every topic, otherwise each needs Describe.
    may_describe: Callable[[str], bool] = (
        (lambda _topic: True) if authz.cluster(ctx, Op.CLUSTER_ACTION)
        else authz.topic_checker(ctx, Op.DESCRIBE))
    for t in req.topics:
        parts = []
        for p in t.partitions:
            found = broker.partitions.leader_log(t.topic, p.partition, p.current_leader_epoch) \
                if may_describe(t.topic) else _REFUSED
            if not found.ok:
                parts.append(R.EpochEndOffset(error_code=found.error, partition=p.partition,
                                              leader_epoch=-1, end_offset=-1))
                continue
            log = found.found_log
            if p.leader_epoch == found.leader_epoch:
                # The current epoch has not ended: it ends at the log end offset,
                # as in Kafka, even while the log is empty.
                epoch, end = found.leader_epoch, log.log_end_offset
            else:
                epoch, end = log.end_offset_for_epoch(p.leader_epoch)
            parts.append(R.EpochEndOffset(error_code=0, partition=p.partition,
                                          leader_epoch=epoch, end_offset=end))
        topics.append(R.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


async def handle_delete_records(ctx: RequestContext, req: DeleteRecordsRequest
                                ) -> DeleteRecordsResponse:
    broker = ctx.broker
    R = DeleteRecordsResponse
    topics = []
    may_delete = authz.topic_checker(ctx, Op.DELETE)
    for t in req.topics:
        parts = []
        for p in t.partitions:
            found = broker.partitions.leader_log(t.name, p.partition_index) \
                if may_delete(t.name) else _REFUSED
            if not found.ok:
                parts.append(R.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=-1,
                    error_code=found.error))
                continue
            log = found.found_log
            offset = log.high_watermark if p.offset == -1 else p.offset
            if offset < 0 or offset > log.high_watermark:
                parts.append(R.DeleteRecordsPartitionResult(
                    partition_index=p.partition_index, low_watermark=-1,
                    error_code=ErrorCode.OFFSET_OUT_OF_RANGE))
                continue
            try:
                low = log.delete_records_before(offset)
                code = ErrorCode.NONE
            except Exception as e:
                low, code = -1, error_code_for(e)
            parts.append(R.DeleteRecordsPartitionResult(partition_index=p.partition_index,
                                                        low_watermark=low, error_code=code))
        topics.append(R.DeleteRecordsTopicResult(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)
