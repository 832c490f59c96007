"""Metadata, DescribeCluster and DescribeTopicPartitions: who leads what.

Every partition's replicas, leader, leader epoch and ISR come from the
metadata store (``MetadataStore.partitions``): on the embedded store one
broker leads everything at epoch 0; on ZooKeeper they are what the
controller decided. A partition without a leader answers
LEADER_NOT_AVAILABLE, as Kafka's does.
"""
from __future__ import annotations

import functools
import uuid
import weakref
from typing import Callable, Sequence

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages.api import preencode, preencoder
from samsa.protocol.messages.schema import ZERO_UUID
from samsa.protocol.messages import (DescribeClusterRequest, DescribeClusterResponse,
                               DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse,
                               MetadataRequest, MetadataResponse)

from ..metadata import PartitionMeta, TopicMeta, brokers_on_listener
from ..topics import TopicError, name_error
from ..security.acl import CLUSTER_NAME, ResourceType
from . import authz
from .authz import NOT_REQUESTED as _NOT_REQUESTED, Op
from .context import RequestContext, off_loop
from .services import MetadataView


class _Reachable:
    """Which live brokers a client of the request's listener can reach."""

    def __init__(self, store: MetadataView, listener: str | None, version: int) -> None:
        live = store.brokers()
        self.brokers = brokers_on_listener(live, listener)
        self.ids = frozenset(b.node_id for b in self.brokers)
        self.live_ids = frozenset(b.node_id for b in live)
        # what a partition's entry depends on of the brokers (compared by value:
        # the store replaces its list on every registration read, mostly unchanged)
        self.key = (self.live_ids, self.ids)
        # Kafka: a live leader without the client's listener is LISTENER_NOT_FOUND
        # from Metadata v6 on, LEADER_NOT_AVAILABLE before; no leader either way.
        self.unlisted = (ErrorCode.LISTENER_NOT_FOUND if version >= 6
                         else ErrorCode.LEADER_NOT_AVAILABLE)
        # Kafka answers Metadata v0 with only the replicas a client can reach
        # (live, with its listener) and REPLICA_NOT_AVAILABLE when some are
        # missing: the ZooKeeper-era health checks read a broker down from it.
        self.only_reachable_replicas = version == 0

    def leader(self, p: PartitionMeta) -> tuple[ErrorCode, int]:
        # Kafka names no leader while the recorded one is not a live broker (its
        # session expired and the controller has not yet moved the partition):
        # a client that got the dead broker's id would keep sending to it.
        if p.leader < 0 or p.leader not in self.live_ids:
            return ErrorCode.LEADER_NOT_AVAILABLE, -1
        if p.leader in self.live_ids and p.leader not in self.ids:
            return self.unlisted, -1
        return ErrorCode.NONE, p.leader

    def partition(self, p: PartitionMeta) -> tuple[ErrorCode, int, list[int], list[int]]:
        """(error, leader, replicas, isr) of a partition as this request's
        version shows them."""
        error, leader = self.leader(p)
        replicas, isr = list(p.replicas), list(p.isr)
        if self.only_reachable_replicas:
            shown = [r for r in replicas if r in self.ids]
            shown_isr = [r for r in isr if r in self.ids]
            if error == ErrorCode.NONE and (len(shown) < len(replicas)
                                            or len(shown_isr) < len(isr)):
                error = ErrorCode.REPLICA_NOT_AVAILABLE
            replicas, isr = shown, shown_isr
        return error, leader, replicas, isr


def _build_partition(index: int, p: PartitionMeta, reachable: _Reachable
                     ) -> MetadataResponse.MetadataResponsePartition:
    error, leader, replicas, isr = reachable.partition(p)
    return MetadataResponse.MetadataResponsePartition(
        error_code=error, partition_index=index, leader_id=leader, leader_epoch=p.leader_epoch,
        replica_nodes=replicas, isr_nodes=isr, offline_replicas=list(p.offline_replicas))


@functools.cache
def _partition_encoder(version: int) -> Callable[
        [Sequence[MetadataResponse.MetadataResponsePartition]],
        list[MetadataResponse.MetadataResponsePartition]]:
    return preencoder(MetadataResponse, MetadataResponse.MetadataResponsePartition, version)


class _Cache:
    """What a Metadata answer says of a topic, built and encoded once per change
    instead of once per request (a client's Metadata for 100,000 partitions is
    100,000 objects to build and encode).

    Three layers, each exact (what it keeps is what a build would give now):

    - a partition's entry, encoded (api.preencode) per exact version and
      listener, kept with the PartitionMeta and the brokers (live ids, ids with
      the listener: ``_Reachable.key``) it was built from, and reused while
      both are equal: while followers rejoin the ISRs after a restart or the
      controller moves leaders, thousands of partitions change a second, every
      topic among them, and building every partition of a changed topic again
      (30-50 us each) made an all-topics answer at 30,000 partitions take a
      second or more, for every request;
    - a topic's whole entry encoded per exact version, listener and
      authorized-operations value, kept under the store's ``topic_token`` (the
      topic's assignment and states, the live brokers) and the topic's id and
      internal flag (checked on every use): unchanged topics cost nothing;
    - where every caller is answered alike (no authorizer, no operations
      asked), the whole all-topics list per listener and version, under the
      store's snapshot token.

    The operations the caller is shown are a key, not a cached decision;
    authorisation decides per request which topics are answered, outside of
    this.

    A token is read before what it vouches for is read from the store, so an
    entry built from a newer state is kept under a token already stale (rebuilt,
    never wrong). A store that promises nothing (an empty token) is read anew
    for every request."""

    def __init__(self) -> None:
        # (topic, listener, version) -> (the brokers' key, {index: (meta, encoded entry)})
        self._partitions: dict[tuple[str, str | None, int],
                               tuple[object, dict[int, tuple[
                                   PartitionMeta, MetadataResponse.MetadataResponsePartition]]]] = {}
        self._encoded: dict[tuple[str, str | None, int, int],
                            tuple[tuple[object, ...], object, uuid.UUID, bool,
                                  MetadataResponse.MetadataResponseTopic]] = {}
        self._every: dict[tuple[str | None, int],
                          tuple[dict[str, TopicMeta], tuple[object, ...],
                                list[MetadataResponse.MetadataResponseTopic]]] = {}

    def partitions(self, store: MetadataView, topic: str, listener: str | None, version: int,
                   reachable: _Reachable) -> list[MetadataResponse.MetadataResponsePartition]:
        """The topic's partitions as the store has them now, each encoded for
        ``version``: the ones whose metadata is equal to what their kept entry
        was built from (and the brokers too) reuse it."""
        key = (topic, listener, version)
        hit = self._partitions.get(key)
        before = hit[1] if hit is not None and hit[0] == reachable.key else {}
        now = {}
        out: list[MetadataResponse.MetadataResponsePartition] = []
        changed: list[tuple[int, int, PartitionMeta]] = []   # (place in ``out``, index, meta)
        for index, p in sorted(store.partitions(topic).items()):
            kept = before.get(index)
            if kept is not None and (kept[0] is p or kept[0] == p):
                now[index] = kept
                out.append(kept[1])
            else:
                changed.append((len(out), index, p))
                out.append(_build_partition(index, p, reachable))
        # encoded together (one list of parts, the checks made once)
        encoded = _partition_encoder(version)([out[at] for at, _, _ in changed])
        for (at, index, p), entry in zip(changed, encoded):
            out[at] = entry
            now[index] = (p, entry)
        # replaced whole (other loops' threads read it meanwhile); a racing
        # build stores an equal one
        self._partitions[key] = (reachable.key, now)
        return out

    def every_topic(self, known: dict[str, TopicMeta], token: tuple[object, ...],
                    listener: str | None, version: int
                    ) -> list[MetadataResponse.MetadataResponseTopic] | None:
        """The all-topics answer kept by keep_every_topic for this listener and
        version, if the store's topics are still the object ``known`` (replaced,
        never mutated, on a change: Topics.topics) and its snapshot the same."""
        hit = self._every.get((listener, version)) if token else None
        if hit is None or hit[0] is not known or not _same(hit[1], token):
            return None
        return list(hit[2])   # the list is the caller's

    def keep_every_topic(self, known: dict[str, TopicMeta], token: tuple[object, ...],
                         listener: str | None, version: int,
                         topics: list[MetadataResponse.MetadataResponseTopic]) -> None:
        """Keep an all-topics answer built from ``known`` and the snapshot of
        ``token`` that is the same for every caller (no authorizer, no
        operations asked): with 100,000 topics, even looking each one's entry
        up is most of a request. The entries of topics gone are dropped."""
        if not token:
            return
        self._every[(listener, version)] = (known, token, list(topics))
        # (list(): a copy taken at once, as other loops' threads may add entries)
        for entry in [k for k in list(self._partitions) if k[0] not in known]:
            self._partitions.pop(entry, None)
        for encoded in [k for k in list(self._encoded) if k[0] not in known]:
            self._encoded.pop(encoded, None)

    def topic(self, store: MetadataView, meta: TopicMeta, listener: str | None, version: int,
              reachable: _Reachable, ops: int) -> MetadataResponse.MetadataResponseTopic:
        """A described topic's entry, encoded for ``version`` once per change."""
        token = store.topic_token(meta.name)   # first: see the class doc
        key = (meta.name, listener, version, ops)
        if token:
            hit = self._encoded.get(key)
            if (hit is not None and _same(hit[0], token) and hit[1] == reachable.key
                    and hit[2] == meta.topic_id and hit[3] == meta.is_internal):
                return hit[4]
            partitions = self.partitions(store, meta.name, listener, version, reachable)
        else:   # a store that cannot say what changed: built for this answer alone
            partitions = [_build_partition(index, p, reachable)
                          for index, p in sorted(store.partitions(meta.name).items())]
        entry = MetadataResponse.MetadataResponseTopic(
            error_code=0, name=meta.name, topic_id=meta.topic_id, is_internal=meta.is_internal,
            partitions=partitions, topic_authorized_operations=ops)
        if not token:
            return entry
        encoded = preencode(MetadataResponse, entry, version)
        self._encoded[key] = (token, reachable.key, meta.topic_id, meta.is_internal, encoded)
        return encoded


def _same(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


# per store: its answers' parts (_Cache)
_caches: weakref.WeakKeyDictionary[MetadataView, _Cache] = weakref.WeakKeyDictionary()


def _cache(store: MetadataView) -> _Cache:
    cache = _caches.get(store)
    if cache is None:
        cache = _caches[store] = _Cache()
    return cache


async def handle_metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    broker = ctx.broker
    version = ctx.version
    allow_create = req.allow_auto_topic_creation if version >= 4 else True
    with_ops = getattr(req, "include_topic_authorized_operations", False)
    R = MetadataResponse
    topics_out: list[MetadataResponse.MetadataResponseTopic] = []
    cache = _cache(broker.store)
    token = broker.store.snapshot_token()   # first: see _Cache
    reachable = _Reachable(broker.store, ctx.listener, version)
    may_describe = authz.topic_checker(ctx, Op.DESCRIBE)

    def topic_ops(name: str | None) -> int:
        return authz.authorized_operations(ctx, ResourceType.TOPIC, name) \
            if with_ops and name else _NOT_REQUESTED

    every = req.topics is None or (version == 0 and not req.topics)
    known = broker.topics.topics()   # read once: a shared answer is kept under it
    # all topics, with no authorizer and no operations asked: every caller's answer
    shared = every and not with_ops and not authz.enabled(ctx)
    wanted: list[tuple[str | None, uuid.UUID | None]] = []
    cached = cache.every_topic(known, token, ctx.listener, version) if shared else None
    if cached is not None:
        topics_out = cached
    elif every:
        # every topic the client may describe; the others are left out silently
        wanted = [(name, None) for name in sorted(known) if may_describe(name)]
    else:
        wanted = [(t.name, t.topic_id) for t in req.topics or ()]

    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            meta = broker.topics.by_id(topic_id)
            if meta is not None and not may_describe(meta.name):
                # as Kafka: ids are not secret, so say it is refused
                topics_out.append(R.MetadataResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=None,
                    topic_id=topic_id, partitions=[], topic_authorized_operations=_NOT_REQUESTED))
                continue
        elif name is not None and not may_describe(name):
            topics_out.append(R.MetadataResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, partitions=[],
                topic_authorized_operations=_NOT_REQUESTED))
            continue
        if name is None:
            meta = broker.topics.by_id(topic_id) if topic_id is not None else None
            if meta is None:
                topics_out.append(R.MetadataResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_ID, name=None,
                    # neither name nor id: the zero id, as the encoder writes a missing one
                    topic_id=topic_id if topic_id is not None else ZERO_UUID,
                    partitions=[], topic_authorized_operations=_NOT_REQUESTED))
                continue
        else:
            if name_error(name):
                topics_out.append(R.MetadataResponseTopic(
                    error_code=ErrorCode.INVALID_TOPIC_EXCEPTION, name=name, partitions=[],
                    topic_authorized_operations=_NOT_REQUESTED))
                continue
            meta = broker.topics.get(name)
            if meta is None and every:
                # deleted since ``known`` was read: an all-topics request
                # leaves it out, and never creates it again (as Kafka)
                continue
            if (meta is None and allow_create and broker.config.auto_create_topics_enable
                    and not authz.cluster(ctx, Op.CREATE)
                    and not authz.topic(ctx, Op.CREATE, name)):
                # Kafka: a topic the client may not create is refused, not created
                topics_out.append(R.MetadataResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, partitions=[],
                    topic_authorized_operations=_NOT_REQUESTED))
                continue
            if meta is None and allow_create:
                try:
                    # off the processor loop: in a cluster, creating is ZooKeeper writes;
                    # charged to the client's mutation quota, never refused (Kafka)
                    quota = broker.quotas.mutation_quota(
                        ctx.conn.principal.name, ctx.header.client_id or "", strict=False)
                    meta = await off_loop(broker.topics.get_or_create, name, quota.charge)
                except TopicError as e:
                    topics_out.append(R.MetadataResponseTopic(
                        error_code=e.code, name=name, partitions=[],
                        topic_authorized_operations=_NOT_REQUESTED))
                    continue
            if meta is None:
                topics_out.append(R.MetadataResponseTopic(
                    error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[],
                    topic_authorized_operations=_NOT_REQUESTED))
                continue
        topics_out.append(cache.topic(broker.store, meta, ctx.listener, version, reachable,
                                      topic_ops(meta.name)))
    if shared and cached is None:
        cache.keep_every_topic(known, token, ctx.listener, version, topics_out)

    return R(
        throttle_time_ms=0,
        brokers=[R.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
                 for b in reachable.brokers],
        cluster_id=broker.store.cluster_id,
        controller_id=broker.store.controller_id,
        topics=topics_out,
        cluster_authorized_operations=authz.authorized_operations(
            ctx, ResourceType.CLUSTER, CLUSTER_NAME)
        if getattr(req, "include_cluster_authorized_operations", False) else _NOT_REQUESTED,
    )


async def handle_describe_cluster(ctx: RequestContext, req: DescribeClusterRequest
                                  ) -> DescribeClusterResponse:
    store = ctx.broker.store
    R = DescribeClusterResponse
    return R(
        throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=1,
        cluster_id=store.cluster_id, controller_id=store.controller_id,
        brokers=[R.DescribeClusterBroker(broker_id=b.node_id, host=b.host, port=b.port,
                                         rack=b.rack, is_fenced=False)
                 for b in brokers_on_listener(store.brokers(), ctx.listener)],
        cluster_authorized_operations=authz.authorized_operations(
            ctx, ResourceType.CLUSTER, CLUSTER_NAME)
        if req.include_cluster_authorized_operations else _NOT_REQUESTED,
    )


async def handle_describe_topic_partitions(ctx: RequestContext, req: DescribeTopicPartitionsRequest
                                           ) -> DescribeTopicPartitionsResponse:
    """Topics in name order, at most `response_partition_limit` partitions per
    answer, continued from `cursor` and pointing on with `next_cursor`."""
    broker = ctx.broker
    R = DescribeTopicPartitionsResponse
    all_topics = broker.topics.topics()
    may_describe = authz.topic_checker(ctx, Op.DESCRIBE)
    if req.topics:
        names = sorted({t.name for t in req.topics})
    else:
        names = sorted(n for n in all_topics if may_describe(n))
    start_topic, start_partition = None, 0
    if req.cursor is not None:
        start_topic, start_partition = req.cursor.topic_name, req.cursor.partition_index
    limit = max(1, req.response_partition_limit)
    out, next_cursor = [], None
    reachable = _Reachable(broker.store, ctx.listener, version=6)  # a v6+ era API
    for name in names:
        if start_topic is not None and name < start_topic:
            continue
        meta = all_topics.get(name)
        if not may_describe(name):
            out.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, partitions=[]))
            continue
        if meta is None:
            out.append(R.DescribeTopicPartitionsResponseTopic(
                error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name, partitions=[]))
            continue
        first = start_partition if name == start_topic else 0
        parts = []
        known = broker.store.partitions(name)
        for p in range(first, meta.num_partitions):
            if limit == 0:
                next_cursor = R.Cursor(topic_name=name, partition_index=p)
                break
            pm = known.get(p)
            if pm is None:
                continue
            error, leader = reachable.leader(pm)
            parts.append(R.DescribeTopicPartitionsResponsePartition(
                error_code=error, partition_index=p, leader_id=leader,
                leader_epoch=pm.leader_epoch, replica_nodes=list(pm.replicas),
                isr_nodes=list(pm.isr), eligible_leader_replicas=[], last_known_elr=[],
                offline_replicas=list(pm.offline_replicas)))
            limit -= 1
        out.append(R.DescribeTopicPartitionsResponseTopic(
            error_code=0, name=name, topic_id=meta.topic_id, is_internal=meta.is_internal,
            partitions=parts,
            topic_authorized_operations=authz.authorized_operations(ctx, ResourceType.TOPIC, name)))
        if next_cursor is not None:
            break
    return R(throttle_time_ms=0, topics=out, next_cursor=next_cursor)
