"""DescribeProducers (API 61, KIP-664): the producers a partition's leader
remembers - id, epoch, last sequence and timestamp, coordinator epoch, and
where its open transaction starts (-1: none) - to find what holds a
read_committed consumer's last stable offset back."""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import DescribeProducersRequest, DescribeProducersResponse

from ..partitions import LeaderLookup
from . import authz
from .authz import Op
from .context import RequestContext

R = DescribeProducersResponse


async def handle_describe_producers(ctx: RequestContext, req: DescribeProducersRequest
                                    ) -> DescribeProducersResponse:
    broker = ctx.broker
    topics = []
    may_read = authz.topic_checker(ctx, Op.READ)
    for t in req.topics:
        parts = []
        for index in t.partition_indexes:
            found = broker.partitions.leader_log(t.name, index) if may_read(t.name) \
                else LeaderLookup(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
            if not found.ok:
                parts.append(R.PartitionResponse(partition_index=index, error_code=found.error,
                                                 error_message=None, active_producers=[]))
                continue
            parts.append(R.PartitionResponse(
                partition_index=index, error_code=0, error_message=None,
                active_producers=[R.ProducerState(
                    producer_id=p.producer_id, producer_epoch=p.epoch, last_sequence=p.last_seq,
                    last_timestamp=p.last_timestamp, coordinator_epoch=p.coordinator_epoch,
                    current_txn_start_offset=p.current_txn_first_offset)
                    for p in found.found_log.active_producers()]))
        topics.append(R.TopicResponse(name=t.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)
