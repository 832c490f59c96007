"""InitProducerId: ids for idempotent producers, never reused across restarts.

Transactions are not offered (no transaction coordinator), so a transactional
id is refused; an idempotent producer asking to bump its epoch (v3+) gets the
same id with the next epoch, or a fresh id once the epoch would overflow.
"""
from __future__ import annotations

from protocol.errors import ErrorCode
from protocol.messages import InitProducerIdResponse

_MAX_EPOCH = 32767


async def handle_init_producer_id(ctx, req):
    store = ctx.broker.store
    if req.transactional_id is not None:
        return InitProducerIdResponse(throttle_time_ms=0,
                                      error_code=ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                      producer_id=-1, producer_epoch=-1)
    pid, epoch = req.producer_id, req.producer_epoch
    if pid >= 0 and 0 <= epoch < _MAX_EPOCH - 1:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid,
                                      producer_epoch=epoch + 1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0,
                                  producer_id=store.allocate_producer_id(), producer_epoch=0)
