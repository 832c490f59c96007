"""The share coordinator's inter-broker APIs (KIP-932), asked by
share-partition leaders (broker/groups/share/persister.py):
InitializeShareGroupState (83), ReadShareGroupState (84),
WriteShareGroupState (85), DeleteShareGroupState (86) and
ReadShareGroupStateSummary (87), answered per partition from the share
coordinator of the ``__share_group_state`` partitions this broker leads
(NOT_COORDINATOR elsewhere, COORDINATOR_LOAD_IN_PROGRESS while loading).

As in Kafka, only brokers (CLUSTER_ACTION on the cluster) may call them.
"""
from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (DeleteShareGroupStateRequest,
                                     DeleteShareGroupStateResponse,
                                     InitializeShareGroupStateRequest,
                                     InitializeShareGroupStateResponse,
                                     ReadShareGroupStateRequest, ReadShareGroupStateResponse,
                                     ReadShareGroupStateSummaryRequest,
                                     ReadShareGroupStateSummaryResponse,
                                     WriteShareGroupStateRequest,
                                     WriteShareGroupStateResponse)

from ..groups.share.partition import StateBatch
from . import authz
from .authz import Op
from .context import RequestContext
from .services import ShareStateCoordination

_P = TypeVar("_P")
_R = TypeVar("_R")


def _refused(ctx: RequestContext) -> ErrorCode | None:
    """Why the request is not served here at all (None: it is)."""
    if not authz.cluster(ctx, Op.CLUSTER_ACTION):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    if ctx.broker.share_coordinator is None:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return None


async def _each(topics: Sequence[Any], parts: Callable[[Any], Sequence[_P]],
                answer: Callable[[uuid.UUID, _P], Awaitable[_R]],
                ) -> list[tuple[uuid.UUID, list[_R]]]:
    out = []
    for t in topics:
        out.append((t.topic_id, [await answer(t.topic_id, p) for p in parts(t)]))
    return out


def _coordinator(ctx: RequestContext) -> ShareStateCoordination:
    found = ctx.broker.share_coordinator
    assert found is not None  # _refused said so
    return found


async def handle_read_share_group_state(ctx: RequestContext, req: ReadShareGroupStateRequest
                                        ) -> ReadShareGroupStateResponse:
    R = ReadShareGroupStateResponse
    refused = _refused(ctx)

    async def one(topic_id: uuid.UUID, p: ReadShareGroupStateRequest.PartitionData
                  ) -> ReadShareGroupStateResponse.PartitionResult:
        code, state = ((refused, None) if refused else
                       await _coordinator(ctx).read((req.group_id, topic_id, p.partition),
                                                    p.leader_epoch))
        if code or state is None:
            return R.PartitionResult(partition=p.partition, error_code=code or 0,
                                     error_message=None, state_epoch=0, start_offset=-1,
                                     state_batches=[])
        return R.PartitionResult(
            partition=p.partition, error_code=0, error_message=None,
            state_epoch=state.state_epoch, start_offset=state.start_offset,
            state_batches=[R.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                        delivery_state=b.state, delivery_count=b.delivery_count)
                           for b in state.batches])
    results = await _each(req.topics, lambda t: t.partitions, one)
    return R(results=[R.ReadStateResult(topic_id=t, partitions=ps) for t, ps in results])


async def handle_read_share_group_state_summary(
        ctx: RequestContext, req: ReadShareGroupStateSummaryRequest
        ) -> ReadShareGroupStateSummaryResponse:
    R = ReadShareGroupStateSummaryResponse
    refused = _refused(ctx)

    async def one(topic_id: uuid.UUID, p: ReadShareGroupStateSummaryRequest.PartitionData
                  ) -> ReadShareGroupStateSummaryResponse.PartitionResult:
        code, state = ((refused, None) if refused else
                       await _coordinator(ctx).summary((req.group_id, topic_id, p.partition)))
        if code or state is None:
            return R.PartitionResult(partition=p.partition, error_code=code or 0,
                                     error_message=None, state_epoch=0, leader_epoch=-1,
                                     start_offset=-1)
        return R.PartitionResult(partition=p.partition, error_code=0, error_message=None,
                                 state_epoch=state.state_epoch, leader_epoch=state.leader_epoch,
                                 start_offset=state.start_offset)
    results = await _each(req.topics, lambda t: t.partitions, one)
    return R(results=[R.ReadStateSummaryResult(topic_id=t, partitions=ps) for t, ps in results])


async def handle_write_share_group_state(ctx: RequestContext, req: WriteShareGroupStateRequest
                                         ) -> WriteShareGroupStateResponse:
    R = WriteShareGroupStateResponse
    refused = _refused(ctx)

    async def one(topic_id: uuid.UUID, p: WriteShareGroupStateRequest.PartitionData
                  ) -> WriteShareGroupStateResponse.PartitionResult:
        code = refused or await _coordinator(ctx).write(
            (req.group_id, topic_id, p.partition), p.state_epoch, p.leader_epoch,
            p.start_offset, [StateBatch(b.first_offset, b.last_offset, b.delivery_state,
                                        b.delivery_count) for b in p.state_batches])
        return R.PartitionResult(partition=p.partition, error_code=code, error_message=None)
    results = await _each(req.topics, lambda t: t.partitions, one)
    return R(results=[R.WriteStateResult(topic_id=t, partitions=ps) for t, ps in results])


async def handle_initialize_share_group_state(
        ctx: RequestContext, req: InitializeShareGroupStateRequest
        ) -> InitializeShareGroupStateResponse:
    R = InitializeShareGroupStateResponse
    refused = _refused(ctx)

    async def one(topic_id: uuid.UUID, p: InitializeShareGroupStateRequest.PartitionData
                  ) -> InitializeShareGroupStateResponse.PartitionResult:
        code = refused or await _coordinator(ctx).initialize(
            (req.group_id, topic_id, p.partition), p.state_epoch, p.start_offset)
        return R.PartitionResult(partition=p.partition, error_code=code, error_message=None)
    results = await _each(req.topics, lambda t: t.partitions, one)
    return R(results=[R.InitializeStateResult(topic_id=t, partitions=ps) for t, ps in results])


async def handle_delete_share_group_state(ctx: RequestContext, req: DeleteShareGroupStateRequest
                                          ) -> DeleteShareGroupStateResponse:
    R = DeleteShareGroupStateResponse
    refused = _refused(ctx)

    async def one(topic_id: uuid.UUID, p: DeleteShareGroupStateRequest.PartitionData
                  ) -> DeleteShareGroupStateResponse.PartitionResult:
        code = refused or await _coordinator(ctx).delete((req.group_id, topic_id, p.partition))
        return R.PartitionResult(partition=p.partition, error_code=code, error_message=None)
    results = await _each(req.topics, lambda t: t.partitions, one)
    return R(results=[R.DeleteStateResult(topic_id=t, partitions=ps) for t, ps in results])
