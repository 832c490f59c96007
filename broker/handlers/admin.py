"""CreateTopics, DeleteTopics and CreatePartitions: the topic lifecycle.

Each topic's change is charged to the client's controller mutation quota
(``ctx.mutation_quota``, see broker/quotas/mutation.py); a topic the strict
quota refuses is answered THROTTLING_QUOTA_EXCEEDED and the others go on."""
from __future__ import annotations

import time
import uuid

from samsa.config import describe_topic_config
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages.schema import ZERO_UUID
from samsa.protocol.messages import (CreatePartitionsRequest, CreatePartitionsResponse,
                               CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
                               DeleteTopicsResponse)

from ..quotas.mutation import ThrottlingQuotaExceeded
from ..topics import TopicError
from . import authz
from .authz import Op
from .context import RequestContext, off_loop



async def handle_create_topics(ctx: RequestContext, req: CreateTopicsRequest
                               ) -> CreateTopicsResponse:
    return await off_loop(_create_topics, ctx, req)


def _create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    topics = ctx.broker.topics
    R = CreateTopicsResponse
    results = []
    created = []  # results of topics created now (not validate_only)
    seen = set()
    # Create on the cluster covers every topic; otherwise Create on the topic
    may_create = authz.topic_checker(ctx, Op.CREATE) \
        if not authz.cluster(ctx, Op.CREATE) else (lambda _name: True)
    for t in req.topics:
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        result = R.CreatableTopicResult(name=t.name, error_code=0, error_message=None,
                                        num_partitions=-1, replication_factor=-1, configs=None)
        try:
            if t.name in seen:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 f"Create topics request contains duplicate topic {t.name}")
            seen.add(t.name)
            if not may_create(t.name):
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, authz.DENIED)
            assignment = None
            if t.assignments:
                if t.num_partitions != -1 or t.replication_factor != -1:
                    raise TopicError(ErrorCode.INVALID_REQUEST,
                                     "Both numPartitions or replicationFactor and "
                                     "replicasAssignments were set. Both cannot be used at "
                                     "the same time.")
                assignment = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            meta = topics.create(t.name, t.num_partitions, t.replication_factor, configs,
                                 validate_only=req.validate_only, assignment=assignment,
                                 charge=ctx.mutation_quota.charge)
            if assignment is not None:
                count, factor = len(assignment), len(next(iter(assignment.values())))
            else:
                count = (t.num_partitions if t.num_partitions != -1
                         else ctx.broker.config.num_partitions)
                factor = 1
            result.num_partitions = count
            result.replication_factor = factor
            if meta is not None:
                result.topic_id = meta.topic_id
                created.append(result)
            if authz.topic(ctx, Op.DESCRIBE_CONFIGS, t.name):
                result.configs = [
                    R.CreatableTopicConfigs(name=e.name, value=e.value, read_only=e.read_only,
                                            config_source=e.source, is_sensitive=e.is_sensitive)
                    for e in describe_topic_config(ctx.broker.config, configs)]
            else:  # created, but its configs are not this client's to see (as Kafka)
                result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        except TopicError as e:
            result.error_code, result.error_message = e.code, e.message
        except ThrottlingQuotaExceeded as e:
            result.error_code, result.error_message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, str(e)
        results.append(result)
    # As Kafka does, answer once the new topics have leaders (a client producing
    # right after CreateTopics should not meet LEADER_NOT_AVAILABLE), up to the
    # request's timeout; then REQUEST_TIMED_OUT (the topic stays created).
    if created and req.timeout_ms > 0:
        deadline = time.monotonic() + req.timeout_ms / 1000
        for r in created:
            if not topics.wait_for_leaders(r.name, deadline):
                r.error_code = ErrorCode.REQUEST_TIMED_OUT
                r.error_message = (f"Topic {r.name} was created, but not all its partitions "
                                   f"had a leader within {req.timeout_ms} ms.")
    return R(throttle_time_ms=0, topics=results)


async def handle_delete_topics(ctx: RequestContext, req: DeleteTopicsRequest
                               ) -> DeleteTopicsResponse:
    return await off_loop(_delete_topics, ctx, req)


def _delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    topics = ctx.broker.topics
    R = DeleteTopicsResponse
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if ctx.version >= 6:
        wanted = [(t.name, t.topic_id) for t in req.topics]
    else:
        wanted = [(name, None) for name in req.topic_names]
    results = []
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            meta = topics.by_id(topic_id)
            if meta is None:
                results.append(R.DeletableTopicResult(name=None, topic_id=topic_id,
                                                      error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                                      error_message=None))
                continue
            name = meta.name
            if not authz.topic(ctx, Op.DESCRIBE, name):
                # given only by id: a caller who may not see the topic learns
                # no name (as Kafka, which sets it null)
                results.append(R.DeletableTopicResult(
                    name=None, topic_id=topic_id,
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message=authz.DENIED))
                continue
        # the id as answered: a missing one is the zero id, as the encoder writes None
        answered_id = topic_id if topic_id is not None else ZERO_UUID
        if name is None:  # neither a name nor an id (v6+ decodes a missing id as zero)
            results.append(R.DeletableTopicResult(name=None, topic_id=answered_id,
                                                  error_code=ErrorCode.UNKNOWN_TOPIC_ID,
                                                  error_message=None))
            continue
        if not authz.topic(ctx, Op.DELETE, name):
            results.append(R.DeletableTopicResult(
                name=name, topic_id=answered_id, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                error_message=authz.DENIED))
            continue
        try:
            meta = topics.delete(name, charge=ctx.mutation_quota.charge)
            results.append(R.DeletableTopicResult(name=name, topic_id=meta.topic_id,
                                                  error_code=0, error_message=None))
        except TopicError as e:
            results.append(R.DeletableTopicResult(name=name, topic_id=answered_id,
                                                  error_code=e.code, error_message=e.message))
        except ThrottlingQuotaExceeded as e:
            results.append(R.DeletableTopicResult(
                name=name, topic_id=answered_id, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                error_message=str(e)))
    return R(throttle_time_ms=0, responses=results)


async def handle_create_partitions(ctx: RequestContext, req: CreatePartitionsRequest
                                   ) -> CreatePartitionsResponse:
    return await off_loop(_create_partitions, ctx, req)


def _create_partitions(ctx: RequestContext, req: CreatePartitionsRequest
                       ) -> CreatePartitionsResponse:
    topics = ctx.broker.topics
    R = CreatePartitionsResponse
    results = []
    for t in req.topics:
        try:
            if not authz.topic(ctx, Op.ALTER, t.name):
                raise TopicError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, authz.DENIED)
            assignment = ([list(a.broker_ids) for a in t.assignments]
                          if t.assignments is not None else None)
            topics.add_partitions(t.name, t.count, validate_only=req.validate_only,
                                  assignment=assignment, charge=ctx.mutation_quota.charge)
            results.append(R.CreatePartitionsTopicResult(name=t.name, error_code=0,
                                                         error_message=None))
        except TopicError as e:
            results.append(R.CreatePartitionsTopicResult(name=t.name, error_code=e.code,
                                                         error_message=e.message))
        except ThrottlingQuotaExceeded as e:
            results.append(R.CreatePartitionsTopicResult(
                name=t.name, error_code=ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                error_message=str(e)))
    return R(throttle_time_ms=0, results=results)
