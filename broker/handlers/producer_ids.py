"""InitProducerId: producer ids for idempotent and transactional producers.

Without a transactional id the broker hands out an id itself (never reused
across restarts; an idempotent producer asking to bump its epoch, v3+, gets
the same id with the next epoch, or a fresh id once the epoch would overflow).
With one, the transaction coordinator decides (broker/transactions), and a
broker that does not coordinate the id answers NOT_COORDINATOR, as Kafka does.
"""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import InitProducerIdRequest, InitProducerIdResponse

from . import authz
from .authz import Op
from ..security.acl import ResourceType
from .context import off_loop
from .transactions import for_version
from .context import RequestContext

_MAX_EPOCH = 32767
NO_PRODUCER_ID = -1


async def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest
                                  ) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        if not authz.transactional_id(ctx, Op.WRITE, req.transactional_id):
            return _refused(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        return await _transactional(ctx, req.transactional_id, req)
    # KIP-679: IdempotentWrite on the cluster, or Write on some topic
    if not (authz.cluster(ctx, Op.IDEMPOTENT_WRITE)
            or authz.any_of_type(ctx, Op.WRITE, ResourceType.TOPIC)):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    store = ctx.broker.store
    pid, epoch = req.producer_id, req.producer_epoch
    if pid >= 0 and 0 <= epoch < _MAX_EPOCH - 1:
        return InitProducerIdResponse(throttle_time_ms=0, error_code=0, producer_id=pid,
                                      producer_epoch=epoch + 1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0,
                                  producer_id=await off_loop(store.allocate_producer_id),
                                  producer_epoch=0)


def _refused(code: ErrorCode) -> InitProducerIdResponse:
    return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=-1,
                                  producer_epoch=-1)


async def _transactional(ctx: RequestContext, transactional_id: str, req: InitProducerIdRequest
                         ) -> InitProducerIdResponse:
    txns = ctx.broker.transactions
    if txns is None:
        return InitProducerIdResponse(throttle_time_ms=0,
                                      error_code=ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                      producer_id=-1, producer_epoch=-1)
    expected = None
    if ctx.version >= 3 and (req.producer_id != NO_PRODUCER_ID or req.producer_epoch != -1):
        if req.producer_id == NO_PRODUCER_ID or req.producer_epoch == -1:
            # one without the other: Kafka refuses it
            return InitProducerIdResponse(throttle_time_ms=0,
                                          error_code=ErrorCode.INVALID_REQUEST,
                                          producer_id=-1, producer_epoch=-1)
        expected = (req.producer_id, req.producer_epoch)
    result = await txns.init_producer_id(transactional_id, req.transaction_timeout_ms,
                                         expected)
    return InitProducerIdResponse(throttle_time_ms=0,
                                  error_code=for_version(result.error, ctx.version, 4),
                                  producer_id=result.producer_id,
                                  producer_epoch=result.producer_epoch)
