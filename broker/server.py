"""The broker process: wire config, metadata, storage, handlers and network together."""
from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import errno
import functools
import logging
import os
import signal
import time
import uuid
from collections.abc import Awaitable, Iterable
from functools import partial
from typing import Callable, TypeVar

from samsa.config import BrokerConfig
from samsa.config.broker import Listener
from samsa.config.topic import TopicConfig
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import API_BY_KEY, ApiSpec
from samsa.protocol.records import walker as records_walker
from samsa.storage import Log, LogManager
from samsa.storage.dir_lock import LogDirLocks
from samsa.storage.errors import StorageError

from samsa.protocol.messages import ControlledShutdownRequest
from samsa.protocol.model import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, ApiKey

from samsa.client.aio import ConnectionClosedError, KafkaConnection
from .append_notifier import AppendNotifier
from .gc_tuning import keep_for_good, settle_for_serving
from .coordinator_errors import CoordinatorWriteError
from .dispatcher import Dispatcher
from .faults import FaultInjector
from .fetch_sessions import FetchSessionCache
from .network.connection import Handler
from .faults.actions import fault_actions
from .faults.endpoint import FaultEndpoint
from .dynamic_config import DynamicBrokerConfig
from . import features
from .groups import ConsumerOffsetsLog, CoordinatorBridge, GroupCoordinator, GroupCoordinatorConfig
from .group_configs import GroupConfigs
from .groups.metrics import consumer_group_states, group_counts
from .groups.share.metrics import share_group_states
from .groups.consumer import ConsumerGroupConfig
from .groups.log_adapter import offsets_log_functions, partition_reader
from .handlers import HANDLERS
from .cluster.controller import Controller, RebalancePolicy
from .cluster.controller_events import ShutdownRefused
from .handlers.controlled_shutdown import REFUSED_AS
from .cluster.single_broker import SingleBrokerController
from .cluster.local_replicas import LocalReplicaSync, ReplicaChanges
from .cluster.stopping import Next, ShutdownAnswers
from .cluster.stopping import describe as describe_shutdown_answer
from .groups.locator import CoordinatorLocator
from .groups.share.config import ShareDefaults
from .groups.share.service import ShareService
from .groups.share.persistence import SharePersistence
from .groups.share.persister import SharePersister
from .groups.share.partition_ends import PartitionEnds
from .groups.share.share_coordinator import (ShareCoordinator, ShareCoordinatorBridge,
                                             run_off_loop)
from .groups.share.state_log import SHARE_STATE_TOPIC, coordinator_key
from .groups.zk_registry import ConsumerRegistry
from .metadata import (BrokerEndpoint, EmbeddedMetadataStore, ListenerEndpoint, MetadataStore,
                       PartitionMeta)
from .metadata.acl_store import open_acl_store
from .metadata.zookeeper import ZooKeeperMetadataStore
from .security.acl.service import AclService
from . import consumer_lag
from .metrics import BrokerMetrics
from .network import NetworkServer
from .network.memory import RequestMemoryPool
from .network.server import ConnectionCounts
from .security.tls_config import check_tls_config, inter_broker_tls
from .partitions import LeaderLookup, PartitionLayer
from .quotas import ClientQuotas, QuotaConfigs
from .quotas.manager import client_window
from .quotas.rate import now_ms
from .quotas.connection_rate import ConnectionRateQuotas, ListenerRates
from .quotas.ip_configs import IpConnectionRateConfigs
from .replication.fetcher import ReplicaFetcher
from .loop_lag import LoopLags
from .replication.manager import ReplicaManager, RolesNotTakenUp
from samsa.storage import AppendOrigin
from .topics import TopicError, TopicService
from .handlers.context import off_loop
from .handlers.fetch import throttled as fetch_throttled
from .handlers.share import share_bounds
from .handlers.share_coordination import coordination_error
from .groups.clock import wall_ms
from .security.inter_broker import InterBrokerSecurity
from .security.sasl.credential_cache import ScramCredentialCache
from .security.sasl.settings import SaslSettings
from .transactions import TransactionCoordinator, TxnCoordinatorConfig
from .transactions.bridge import TransactionsBridge, VerifierBridge
from .transactions.log_adapter import PartitionTxnLog
from .transactions.markers import MarkerSender
from .transactions.state import TV_2
from .transactions.verification import TxnVerifier

log = logging.getLogger("broker")

_Part = TypeVar("_Part")


def _made(part: _Part | None, what: str) -> _Part:
    """A part of the broker that start() makes before anything can use it: a
    None here is a call out of order, said as such rather than as an
    AttributeError."""
    if part is None:
        raise RuntimeError(f"{what} is used before the broker has made it")
    return part


@dataclasses.dataclass
class BrokerServices:
    """Everything a handler may use; one instance per broker, shared by all threads."""
    config: BrokerConfig
    store: MetadataStore
    logs: LogManager
    topics: TopicService
    partitions: PartitionLayer
    coordinators: CoordinatorLocator
    notifier: AppendNotifier
    node: BrokerEndpoint
    advertised_apis: list[ApiSpec]
    metrics: BrokerMetrics
    dynamic_config: DynamicBrokerConfig
    scram_credentials: ScramCredentialCache  # every user's SCRAM credentials, kept current
    quotas: ClientQuotas  # client quotas; every request goes through them (dispatcher)
    txn_coordinators: CoordinatorLocator | None = None  # who coordinates a transactional id
    groups: CoordinatorBridge | None = None  # set once the coordinator has loaded
    share_groups: ShareService | None = None  # KIP-932 share groups, once loaded
    # the share coordinator of the __share_group_state partitions led here, once started
    share_coordinator: ShareCoordinatorBridge | None = None
    share_coordinators: CoordinatorLocator | None = None  # who coordinates a share-partition
    transactions: TransactionsBridge | None = None  # the transaction coordinator, once started
    txn_verifier: VerifierBridge | None = None  # KIP-890 produce verification, once started
    zk_registry: ConsumerRegistry | None = None  # ZooKeeper mode: /consumers/<group>/...
    # ZooKeeper mode: this broker's controller; embedded: the one-broker one
    controller: Controller | SingleBrokerController | None = None
    # Called on the processor loop after a transaction marker is replicated in a
    # __consumer_offsets partition this broker leads, with (partition, producer
    # id, committed): where the group coordinator makes the producer's pending
    # transactional offset commits visible or drops them (Kafka's
    # onTransactionCompleted). None: nobody listens.
    txn_marker_hook: Callable[[int, int, bool], None] | None = None
    sasl: SaslSettings = dataclasses.field(  # SASL_* listeners' mechanisms and PLAIN users
        default_factory=lambda: SaslSettings({}))
    # ACLs (authorizer.class.name set); None: every request is allowed.
    acls: AclService | None = None
    # ApiVersions' FinalizedFeaturesEpoch: when these services were made, at
    # broker start (broker/features.py)
    features_epoch: int = dataclasses.field(default_factory=features.new_epoch)
    # KIP-227: the incremental fetch sessions every network thread serves from
    fetch_sessions: FetchSessionCache = dataclasses.field(default_factory=FetchSessionCache)


def advertised_apis() -> list[ApiSpec]:
    """Every API that has a handler, at every version the codecs serve, on
    every listener: Kafka scopes APIs by listener type (a broker's vs a KRaft
    controller's), so a broker advertises its inter-broker ones
    (WriteTxnMarkers, the share coordinator's 83-87) to clients too."""
    return [API_BY_KEY[key] for key in sorted(HANDLERS) if key in API_BY_KEY]


def _ensure_internal_topic(topics: TopicService, name: str, partitions: int,
                           replication_factor: int, factor_key: str, waiting: str,
                           configs: dict[str, str]) -> None:
    """Create an internal topic unless it exists (an existing one keeps its
    partition count: which key lives in which partition depends on it). In a
    cluster it needs ``replication_factor`` live brokers, as Kafka requires;
    one broker holds one replica."""
    if topics.get(name) is not None:
        return
    replicas = replication_factor if topics.store.replicates else 1
    try:
        topics.create(name, partitions, replicas, configs)
    except TopicError as e:
        if e.code == ErrorCode.INVALID_REPLICATION_FACTOR:
            raise TopicError(e.code, (
                f"{len(topics.store.brokers())} live broker(s) cannot hold the {replicas} "
                f"replicas of {name} ({factor_key}); {waiting} wait for more brokers")) from None
        if e.code != ErrorCode.TOPIC_ALREADY_EXISTS:
            raise


def _log_failure(what: str) -> Callable[[concurrent.futures.Future[None]], None]:
    """A done-callback for work handed to another loop: its exception logged,
    not lost with the future nobody awaits."""
    def check(fut: concurrent.futures.Future[None]) -> None:
        if not fut.cancelled() and fut.exception() is not None:
            log.error("%s failed", what, exc_info=fut.exception())
    return check


def _fetch_session_gauges(metrics: BrokerMetrics, cache: FetchSessionCache) -> None:
    """Kafka's FetchSessionCache metrics, and how many Fetch requests each kind
    of session handling served (incremental ones are what sessions save)."""
    fsc = "kafka_server_fetchsessioncache_"
    metrics.add_kafka_gauge(fsc + "numincrementalfetchsessions", "Fetch sessions cached",
                            lambda: [({}, len(cache))])
    metrics.add_kafka_gauge(fsc + "numincrementalfetchpartitionscached",
                            "Partitions in all cached fetch sessions",
                            lambda: [({}, cache.cached_partitions())])
    metrics.add_kafka_gauge(fsc + "incrementalfetchsessionevictionspersec_count",
                            "Fetch sessions evicted to make room for others",
                            lambda: [({}, cache.evictions)])
    metrics.add_kafka_gauge(
        "samsa_fetch_session_requests", "Fetch requests (v7+) by how their session was handled",
        lambda: [({"kind": kind.value}, n) for kind, n in cache.requests.by_kind().items()])


def _leader_address(partitions: PartitionLayer, topic: str, partition: int) -> str | None:
    """host:port of the partition's leader, as the cluster advertises it."""
    meta = partitions.partition(topic, partition)
    node = partitions.endpoint(meta.leader) if meta is not None and meta.leader >= 0 else None
    return None if node is None else f"{node.host}:{node.port}"


def _partition_count(store: MetadataStore, topic: str) -> int | None:
    meta = store.topic(topic)
    return meta.num_partitions if meta is not None else None


def _stored_topic_config(cfg: BrokerConfig, store: MetadataStore, topic: str) -> TopicConfig | None:
    """A topic's config from its stored overrides, so that recovery at start-up
    already treats e.g. a compacted topic as compacted."""
    meta = store.topic(topic)
    return cfg.topic_config(meta.configs) if meta is not None else None


def _check_log_dirs(dirs: Iterable[str]) -> None:
    """Each of log.dirs must be (or become) a writable directory; the error
    names the key, since the path alone does not say where it came from."""
    for d in dirs:
        try:
            os.makedirs(d, exist_ok=True)
        except OSError as e:
            raise StorageError(f"log.dirs: cannot create {d}: {e.strerror}") from None
        if not os.path.isdir(d) or not os.access(d, os.W_OK | os.X_OK):
            raise StorageError(f"log.dirs: {d} is not a writable directory")


def _other_port_override(cfg: BrokerConfig, busy: str) -> str:
    """The --override that moves listener ``busy`` to another port: every
    listener must be given, and advertised.listeners too when it is set
    (clients would otherwise be sent to the busy port)."""
    def value(listeners: Iterable[Listener]) -> str:
        return ",".join(f"{lst.name}://{f'[{lst.host}]' if ':' in lst.host else lst.host}:"
                        f"{'PORT' if lst.name == busy else lst.port}" for lst in listeners)
    hint = f"--override listeners={value(cfg.listeners)}"
    if cfg.is_set("advertised.listeners"):
        hint += f" --override advertised.listeners={value(cfg.advertised_listeners)}"
    return hint


def _node(cfg: BrokerConfig) -> BrokerEndpoint:
    """This broker as others see it: every advertised listener, and as its
    address the inter-broker listener's (the first listener's when that one
    is not among them: a single broker without a cluster)."""
    listeners = tuple(ListenerEndpoint(lst.name, lst.host, lst.port, cfg.security_protocol(lst.name))
                      for lst in cfg.advertised_listeners)
    own = next((lst for lst in listeners if lst.name == cfg.inter_broker_listener), listeners[0])
    return BrokerEndpoint(cfg.broker_id, own.host, own.port, cfg.broker_rack, listeners)


def _open_store(cfg: BrokerConfig, node: BrokerEndpoint) -> MetadataStore:
    """The embedded store (one broker), or the cluster's ZooKeeper."""
    if not cfg.zookeeper_connect:
        return EmbeddedMetadataStore(cfg.log_dirs[0], cfg.broker_id, node)
    # Registered in /brokers/ids only once this broker serves (Broker.start).
    return ZooKeeperMetadataStore(
        cfg.zookeeper_connect, cfg.broker_id, node,
        session_timeout_ms=cfg.zookeeper_session_timeout_ms,
        connection_timeout_ms=cfg.zookeeper_connection_timeout_ms, register=False)


CONTROLLED_SHUTDOWN_WAIT_S = 30.0


class Broker:
    def __init__(self, cfg: BrokerConfig) -> None:
        self.cfg = cfg
        self.node = _node(cfg)
        self.sasl = SaslSettings.from_config(cfg)  # ConfigError: refuse to start
        # Read now: a listener's unusable key or trust store refuses start-up.
        self.listener_tls = check_tls_config(cfg)
        self.inter_broker = InterBrokerSecurity(inter_broker_tls(cfg), self.sasl.inter_broker)
        self.services: BrokerServices | None = None
        self.networks: list[NetworkServer] = []  # one per listener, in listeners order
        # Connection creation rates, broker-wide, per listener and per
        # address, shared by the listeners (quota.window.* are static)
        self.connection_rates = ConnectionRateQuotas(client_window(cfg))
        self.coordinator: GroupCoordinator | None = None
        self.txn_coordinator: TransactionCoordinator | None = None
        self.share_coordinator: ShareCoordinator | None = None
        self._share_persister: SharePersister | None = None
        self._share_ends: PartitionEnds | None = None
        self._marker_sender: MarkerSender | None = None
        self._txn_verifier: TxnVerifier | None = None
        self._expiry_task: asyncio.Task[None] | None = None
        self._loop_lags: LoopLags | None = None
        self._share_expiry_task: asyncio.Task[None] | None = None
        # ZooKeeper mode only:
        self.controller: Controller | None = None
        self.replica_sync: LocalReplicaSync | None = None
        self.registry: ConsumerRegistry | None = None
        self.fetcher: ReplicaFetcher | None = None
        self.replicas: ReplicaManager | None = None
        self._serving = False  # registered and answering requests
        # samsa.testing.faults.enable: the fault rules and their endpoint (broker/faults/)
        self.faults: FaultInjector | None = None
        self._fault_endpoint: FaultEndpoint | None = None
        self._stopping = False
        self._dir_locks: LogDirLocks | None = None  # held from start to the end of stop

    def _open(self) -> BrokerServices:
        cfg = self.cfg
        store = _open_store(cfg, self.node)
        dynamic = DynamicBrokerConfig(cfg, store, on_change=self._apply_config)
        self.cfg = cfg = dynamic.current
        logs = LogManager(log_dirs=cfg.log_dirs, default_config=cfg.default_topic_config,
                          broker_id=cfg.broker_id, cluster_id=store.cluster_id,
                          retention_check_interval_ms=cfg.log_retention_check_interval_ms,
                          checkpoint_interval_ms=cfg.log_flush_offset_checkpoint_interval_ms,
                          start_offset_checkpoint_interval_ms=(
                              cfg.log_flush_start_offset_checkpoint_interval_ms),
                          high_watermark_checkpoint_interval_ms=(
                              cfg.replica_high_watermark_checkpoint_interval_ms),
                          log_cleaner_enable=cfg.log_cleaner_enable,
                          log_cleaner_backoff_ms=cfg.log_cleaner_backoff_ms,
                          producer_id_expiration_ms=lambda: self.cfg.producer_id_expiration_ms,
                          producer_id_expiration_check_interval_ms=(
                              cfg.producer_id_expiration_check_interval_ms),
                          open_segment_files_max=(
                              cfg.samsa_log_open_segment_files_max
                              if cfg.samsa_log_open_segment_files_max > 0 else None),
                          topic_config_provider=lambda topic: _stored_topic_config(
                              self.cfg, store, topic),
                          close_threads_per_dir=cfg.num_recovery_threads_per_data_dir)
        logs.move_bytes_per_second = cfg.replica_alter_log_dirs_io_max_bytes_per_second
        logs.startup()
        notifier = AppendNotifier()
        self.fetcher = fetcher = (ReplicaFetcher(lambda: self.cfg, store.broker, notifier.notify,
                                                 security=self.inter_broker)
                                  if store.replicates else None)
        self.replicas = replicas = ReplicaManager(
            store, logs, cfg.broker_id, notifier.notify,
            lag_time_max_ms=lambda: self.cfg.replica_lag_time_max_ms, follower=fetcher)
        # A log's role (leader, follower) is taken up as soon as it is opened,
        # or once it is loaded if its end is not known before (the replica
        # manager's rule: broker/replication/manager.py).
        topics = TopicService(store, logs, cfg, on_log_opened=replicas.log_opened,
                              on_topic_deleted=lambda gone: replicas.sync_roles(
                                  gone, topics_changed=False))
        topics.open_all()
        partitions = PartitionLayer(
            store, logs, cfg.broker_id, replicas,
            rack_aware=lambda: self.cfg.replica_selector_class is not None)
        coordinators = CoordinatorLocator(
            partitions, lambda: _partition_count(store, OFFSETS_TOPIC),
            lambda: self._ensure_offsets_topic(topics), cfg.offsets_topic_num_partitions)
        if isinstance(store, ZooKeeperMetadataStore):
            self._join_cluster(store, topics, replicas, fetcher)
        else:
            # One broker: nothing to wait for, and the coordinator loads it at start.
            self._ensure_offsets_topic(topics)
        metrics = BrokerMetrics()
        metrics.add_source("partitions", lambda: len(logs.all_logs()))
        self._kafka_gauges(metrics, store, logs, partitions, replicas)
        txn_coordinators = CoordinatorLocator(
            partitions, lambda: _partition_count(store, TRANSACTION_STATE_TOPIC),
            lambda: self._ensure_transaction_topic(topics),
            cfg.transaction_state_log_num_partitions, topic=TRANSACTION_STATE_TOPIC)
        share_coordinators = CoordinatorLocator(
            partitions, lambda: _partition_count(store, SHARE_STATE_TOPIC),
            lambda: self._ensure_share_state_topic(topics),
            cfg.share_coordinator_state_topic_num_partitions, topic=SHARE_STATE_TOPIC)
        acls = (AclService.from_config(cfg, open_acl_store(store))
                if cfg.authorizer_class_name else None)
        self._ip_connection_rates = IpConnectionRateConfigs(store, self.connection_rates)
        fetch_sessions = FetchSessionCache(cfg.max_incremental_fetch_session_cache_slots,
                                           cfg.min_incremental_fetch_session_eviction_ms)
        _fetch_session_gauges(metrics, fetch_sessions)
        quotas = ClientQuotas.for_broker(QuotaConfigs(store), cfg, metrics)
        quotas.fetch_emptied = functools.partial(fetch_throttled, fetch_sessions)
        return BrokerServices(cfg, store, logs, topics, partitions, coordinators, notifier,
                              self.node, advertised_apis(), metrics, dynamic,
                              scram_credentials=ScramCredentialCache(store),
                              txn_coordinators=txn_coordinators,
                              share_coordinators=share_coordinators,
                              zk_registry=self.registry,
                              # embedded: this broker is its one-broker cluster's controller
                              controller=(self.controller if self.controller is not None
                                          else SingleBrokerController(store)),
                              sasl=self.sasl,
                              quotas=quotas,
                              acls=acls, fetch_sessions=fetch_sessions)

    def _join_cluster(self, store: ZooKeeperMetadataStore, topics: TopicService,
                      replicas: ReplicaManager, fetcher: ReplicaFetcher | None) -> None:
        """Follow the metadata other brokers and the controller write (logs for
        partitions placed here, configs, deleted topics' logs removed). The
        broker registers and stands for controller later, once it serves."""
        if fetcher is None:
            raise RuntimeError("a ZooKeeper store replicates: the broker must have a replica fetcher")

        def reconcile(changes: ReplicaChanges) -> None:
            # A partition whose role fails is tried again on its own (RolesNotTakenUp),
            # after the rest of the pass: it holds back neither the others nor the drops.
            failed: list[tuple[str, int]] = []

            def sync_roles(partitions: Iterable[tuple[str, int]] | None = None,
                           topics_changed: bool = True) -> None:
                try:
                    replicas.sync_roles(partitions, topics_changed=topics_changed)
                except RolesNotTakenUp as e:
                    failed.extend(e.partitions)

            if changes.everything:
                topics.sync_local_replicas()
                sync_roles()
                if topics.drop_moved_replicas():
                    sync_roles()  # the fetcher forgets the dropped logs
            else:
                # Only what changed: the partitions whose state did, and every
                # local partition of a topic whose assignment or config did.
                topics.sync_local_replicas(changes.topics)
                partitions = set(changes.partitions)
                if changes.topics:
                    partitions.update(k for k in topics.logs.all_logs() if k[0] in changes.topics)
                sync_roles(partitions, topics_changed=bool(changes.topics))
                dropped = topics.drop_moved_replicas(partitions)
                if dropped:
                    sync_roles(dropped)  # the fetcher forgets the dropped logs
            if failed:
                raise RolesNotTakenUp(sorted(set(failed)))
        self.replica_sync = LocalReplicaSync(reconcile)
        store.on_topic_change(self.replica_sync.topic_changed)  # placements, configs, deletions
        store.on_partition_state(self.replica_sync.partition_changed)  # leaders, epochs, ISRs
        # Cut off from ZooKeeper past the session: no zombie leader (session_fence.py).
        store.on_session_fence(
            lambda: replicas.cut_off(silent_ms=self.cfg.zookeeper_session_timeout_ms),
            replicas.resume)
        store.on_broker_config_change(self._dynamic_configs_changed)
        fetcher.start()
        replicas.start()
        self.replica_sync.start()
        self.replica_sync.changed()  # what changed while this broker was down
        self.controller = Controller(
            store.znodes, self.cfg.broker_id,
            unclean_leader_election=lambda topic: self._unclean_election(store, topic),
            rebalance=lambda: RebalancePolicy(self.cfg.auto_leader_rebalance_enable,
                                              self.cfg.leader_imbalance_check_interval_seconds,
                                              self.cfg.leader_imbalance_per_broker_percentage))
        self.registry = ConsumerRegistry(
            store.znodes, mirror_offsets=self.cfg.zookeeper_consumer_offsets_mirror_enable)

    def _register_in_cluster(self, store: MetadataStore, controller: Controller) -> None:
        """Announce this broker (its logs and groups are loaded), then stand for
        controller."""
        assert isinstance(store, ZooKeeperMetadataStore)
        store.register()
        controller.start()

    def _kafka_gauges(self, metrics: BrokerMetrics, store: MetadataStore, logs: LogManager,
                      partitions: PartitionLayer, replicas: ReplicaManager) -> None:
        """What Kafka's dashboards read, computed when scraped."""
        me = self.cfg.broker_id

        def led() -> list[PartitionMeta]:
            out = []
            for topic, p in logs.all_logs():
                meta = partitions.partition(topic, p)
                if meta is not None and meta.leader == me:
                    out.append(meta)
            return out

        def offline() -> int:
            # Kafka reports it on the active controller only
            if self.controller is not None and not self.controller.active:
                return 0
            return sum(1 for t in store.topics() for m in store.partitions(t).values()
                       if m.leader < 0)

        def active_controller() -> int:
            return 1 if self.controller is None or self.controller.active else 0

        rm, ctl = "kafka_server_replicamanager_", "kafka_controller_kafkacontroller_"
        metrics.add_kafka_gauge(rm + "partitioncount", "Partitions with a replica here",
                                lambda: [({}, len(logs.all_logs()))])
        metrics.add_kafka_gauge(rm + "leadercount", "Partitions led here",
                                lambda: [({}, len(led()))])
        metrics.add_kafka_gauge(rm + "underreplicatedpartitions",
                                "Partitions led here with fewer in-sync replicas than replicas",
                                lambda: [({}, sum(1 for m in led()
                                                  if len(m.isr) < len(m.replicas)))])
        metrics.add_kafka_gauge(ctl + "activecontrollercount",
                                "1 on the broker that is the controller",
                                lambda: [({}, active_controller())])
        metrics.add_kafka_gauge(ctl + "offlinepartitionscount", "Partitions without a leader",
                                lambda: [({}, offline())])
        fetcher = self.fetcher
        metrics.add_kafka_gauge(rm + "isrshrinkspersec_count",
                                "ISR shrinks written by leaders here since start",
                                lambda: [({}, replicas.isr_shrinks)])
        metrics.add_kafka_gauge(rm + "isrexpandspersec_count",
                                "ISR expansions written by leaders here since start",
                                lambda: [({}, replicas.isr_expands)])
        if fetcher is not None:
            metrics.add_kafka_gauge(
                "kafka_server_replicafetchermanager_maxlag",
                "Largest lag in records of a partition followed here",
                lambda: [({"clientid": "Replica"}, max(fetcher.lag().values(), default=0))])
            metrics.add_kafka_gauge(
                "kafka_server_fetcherlagmetrics_consumerlag",
                "Records a followed partition's copy here is behind its leader",
                lambda: [({"topic": t, "partition": str(p)}, lag)
                         for (t, p), lag in fetcher.lag().items()])
            metrics.add_kafka_gauge(
                "samsa_replica_fetch_requests",
                "Fetch requests this broker's followers sent, full or incremental (KIP-227)",
                lambda: [({"kind": kind}, n) for kind, n in
                         zip(("full", "incremental"), fetcher.session_requests())])
        metrics.add_kafka_gauge("kafka_log_log_size", "Bytes of each partition's log here",
                                lambda: [({"topic": t, "partition": str(p)}, lg.size_in_bytes())
                                         for (t, p), lg in logs.all_logs().items()])

    def _dynamic_configs_changed(self) -> None:
        # On ZooKeeper's event thread: the reload reads two znodes, then applies.
        if self.services is not None and not self._stopping:
            self.services.dynamic_config.reload()

    def _unclean_election(self, store: MetadataStore, topic: str) -> bool:
        meta = store.topic(topic)
        cfg = self.cfg.topic_config(meta.configs if meta is not None else {})
        return bool(cfg.unclean_leader_election_enable)

    def _apply_config(self, cfg: BrokerConfig) -> None:
        """A dynamic broker config changed: every holder of the config switches
        (topic defaults of every log without its own override, connection limits).
        (Changes come through AlterConfigs and the change notices, both only
        once the services exist.)"""
        self.cfg = cfg
        services = _made(self.services, "the broker's services")
        services.config = cfg
        services.topics.config = cfg
        services.logs.default_config = cfg.default_topic_config
        services.logs.update_topic_configs({name: cfg.topic_config(meta.configs)
                                            for name, meta in services.topics.topics().items()})
        for network in self.networks:
            network.max_connections = cfg.max_connections
            network.max_connections_per_ip = cfg.max_connections_per_ip
        self._apply_connection_rates(cfg)

    def _apply_connection_rates(self, cfg: BrokerConfig) -> None:
        """max.connection.creation.rate, broker-wide and per listener."""
        key = "max.connection.creation.rate"
        self.connection_rates.set_rates(
            cfg.max_connection_creation_rate,
            {lst.name: cfg.listener_value(lst.name, key) for lst in cfg.listeners})

    def _connection_rate_gauges(self, metrics: BrokerMetrics) -> None:
        """Kafka's socket-server-metrics of KIP-612, under the JMX exporter's
        names: accept rates and the average throttle times handed out."""
        rates = self.connection_rates
        prefix = "kafka_server_socket_server_metrics_"

        def per_listener(pick: Callable[[ListenerRates], float]
                         ) -> Callable[[], list[tuple[dict[str, str], float]]]:
            return lambda: [({"listener": r.listener}, pick(r))
                            for r in rates.listener_rates(now_ms())]
        metrics.add_kafka_gauge(prefix + "broker_connection_accept_rate",
                                "New connections per second the broker-wide rate bounds",
                                lambda: [({}, rates.broker_accept_rate(now_ms()))])
        metrics.add_kafka_gauge(prefix + "connection_accept_rate",
                                "New connections per second per listener, and per address "
                                "with a connection_creation_rate",
                                lambda: per_listener(lambda r: r.accept_rate)() + [
                                    ({"ip": ip}, rate)
                                    for ip, rate in rates.ip_accept_rates(now_ms())])
        metrics.add_kafka_gauge(prefix + "connection_accept_throttle_time",
                                "Average delay (ms) of accepts over the broker's or the "
                                "listener's max.connection.creation.rate",
                                per_listener(lambda r: r.throttle_time))
        metrics.add_kafka_gauge(prefix + "ip_connection_accept_throttle_time",
                                "Average throttle (ms) of connections over their address's "
                                "connection_creation_rate, closed unserved",
                                per_listener(lambda r: r.ip_throttle_time))
        # Kafka's AcceptorBlockedPercent meter: its count is the nanoseconds
        # the listener's acceptor waited (samsa's acceptor waits only on rates)
        metrics.add_kafka_gauge("kafka_network_acceptor_acceptorblockedpercent_count",
                                "Nanoseconds the listener's acceptor waited on connection rates",
                                lambda: [({"listener": n.listener_name}, n.accept_blocked_ns)
                                         for n in self.networks])

    def _ensure_offsets_topic(self, topics: TopicService) -> None:
        """Create __consumer_offsets (compacted: only the last commit per key matters)
        on first start."""
        cfg = self.cfg
        _ensure_internal_topic(
            topics, OFFSETS_TOPIC, cfg.offsets_topic_num_partitions,
            cfg.offsets_topic_replication_factor, "offsets.topic.replication.factor",
            "consumer groups", {"cleanup.policy": "compact",
                                "segment.bytes": str(cfg.offsets_topic_segment_bytes)})

    def _ensure_transaction_topic(self, topics: TopicService) -> None:
        """Create __transaction_state (compacted, uncompressed, its own min ISR)
        when the first transactional producer looks for its coordinator, as
        Kafka does."""
        cfg = self.cfg
        replicas = cfg.transaction_state_log_replication_factor if topics.store.replicates else 1
        _ensure_internal_topic(
            topics, TRANSACTION_STATE_TOPIC, cfg.transaction_state_log_num_partitions,
            cfg.transaction_state_log_replication_factor,
            "transaction.state.log.replication.factor", "transactions",
            {"cleanup.policy": "compact", "compression.type": "uncompressed",
             "segment.bytes": str(cfg.transaction_state_log_segment_bytes),
             "unclean.leader.election.enable": "false",
             "min.insync.replicas": str(min(cfg.transaction_state_log_min_isr, replicas))})

    async def _start_transactions(self, services: BrokerServices) -> None:
        """The transaction coordinator: it loads the partitions of
        __transaction_state this broker leads, and follows that leadership."""
        store = services.store
        txn_coordinators = _made(services.txn_coordinators, "the transaction coordinator locator")
        self._marker_sender = marker_sender = MarkerSender(
            store, self.cfg.request_timeout_ms / 1000, security=self.inter_broker)
        txn_log = PartitionTxnLog(
            services.partitions, lambda p: services.logs.get_log(TRANSACTION_STATE_TOPIC, p),
            lambda: self.cfg.request_timeout_ms)
        self.txn_coordinator = coordinator = TransactionCoordinator(
            txn_log, marker_sender, lambda: off_loop(store.allocate_producer_id),
            TxnCoordinatorConfig.from_broker_config(self.cfg),
            num_partitions=txn_coordinators.partition_count)
        await coordinator.start()
        for p in range(txn_coordinators.partition_count()):
            if services.partitions.leader_log(TRANSACTION_STATE_TOPIC, p).ok:
                await coordinator.load_partition(p)
        loop = asyncio.get_running_loop()
        services.transactions = TransactionsBridge(coordinator, loop)
        self._txn_verifier = TxnVerifier(self.cfg.broker_id, txn_coordinators,
                                         coordinator.verify_partitions,
                                         self.cfg.request_timeout_ms / 1000,
                                         security=self.inter_broker,
                                         local_add=functools.partial(
                                             coordinator.add_partitions,
                                             client_version=TV_2))
        services.txn_verifier = VerifierBridge(self._txn_verifier, loop)

    async def _start_groups(self, services: BrokerServices) -> None:
        """Load committed offsets and groups before any client can ask for them."""
        num = services.coordinators.partition_count()
        logs = services.logs
        partitions = services.partitions

        append_batch = self._acks_all_append(partitions, OFFSETS_TOPIC)

        def get_log(p: int) -> Log | None:
            return logs.get_log(OFFSETS_TOPIC, p)
        append, read_all = offsets_log_functions(get_log, num, append_batch=append_batch)
        self.coordinator = coordinator = GroupCoordinator(
            ConsumerOffsetsLog(append, read_all, num, partition_reader(get_log)),
            GroupCoordinatorConfig.from_broker_config(self.cfg),
            owns=services.coordinators.owns,
            on_membership=(self.registry.membership_changed if self.registry else None),
            consumer_config=ConsumerGroupConfig.from_broker_config(self.cfg),
            group_configs=GroupConfigs(services.store).get,
            topics=lambda: {name: (meta.topic_id, meta.num_partitions)
                            for name, meta in services.topics.topics().items()
                            if not meta.is_internal})
        await coordinator.start()
        # From here on the coordinator follows leadership of the offsets
        # partitions; what it loaded of the others (copies this broker follows)
        # is not its to serve.
        main_loop = asyncio.get_running_loop()
        _made(self.replicas, "the replica manager").on_leadership = (
            lambda topic, p, leading: self._internal_leadership(main_loop, topic, p, leading))
        for p in range(num):
            if not partitions.leader_log(OFFSETS_TOPIC, p).ok:
                coordinator.unload_partition(p)
        services.groups = CoordinatorBridge(coordinator)
        # A transaction's marker in an offsets partition: the producer's
        # transactional offset commits there take effect (or go), on the
        # coordinator's loop.
        def settle_txn_offsets(p: int, producer_id: int, committed: bool) -> None:
            done = asyncio.run_coroutine_threadsafe(
                coordinator.complete_txn_offsets(p, producer_id, committed), main_loop)
            done.add_done_callback(_log_failure("settling transactional offsets"))
        services.txn_marker_hook = settle_txn_offsets
        services.metrics.add_source("consumer_groups", lambda: len(coordinator.groups))
        services.metrics.add_kafka_gauge(
            "kafka_coordinator_group_groupmetadatamanager_numgroups",
            "Consumer groups this broker coordinates",
            lambda: [({}, len(coordinator.groups))])
        services.metrics.add_kafka_gauge(
            "kafka_server_group_coordinator_metrics_group_count",
            "Groups this broker coordinates, by protocol (classic, consumer, share)",
            lambda: group_counts(coordinator.groups.values(), share_groups=(
                len(services.share_groups.group_states(_coordinated_here(services)))
                if services.share_groups is not None else 0)))
        services.metrics.add_kafka_gauge(
            "kafka_server_group_coordinator_metrics_consumer_group_count",
            "Consumer-protocol (KIP-848) groups this broker coordinates, by state",
            lambda: consumer_group_states(coordinator.groups.values()))
        consumer_lag.register(services.metrics, coordinator.committed_offsets, logs.get_log,
                              consumer_lag.RemoteWatermarks(partial(_leader_address, partitions)))
        self._expiry_task = asyncio.get_running_loop().create_task(
            self._expire_offsets_loop(coordinator))

    def _ensure_share_state_topic(self, topics: TopicService) -> None:
        """Create __share_group_state (compacted: the last snapshot per
        share-partition is its state) on first start."""
        cfg = self.cfg
        _ensure_internal_topic(
            topics, SHARE_STATE_TOPIC, cfg.share_coordinator_state_topic_num_partitions,
            cfg.share_coordinator_state_topic_replication_factor,
            "share.coordinator.state.topic.replication.factor", "share groups",
            {"cleanup.policy": "compact",
             "segment.bytes": str(cfg.share_coordinator_state_topic_segment_bytes)})

    async def _start_share_groups(self, services: BrokerServices) -> None:
        """KIP-932 share groups: the share service (share-partitions served
        here as their leader), the share coordinator of the
        __share_group_state partitions led here (loaded now, then as their
        leadership comes and goes), and the persister between the two: a
        share-partition's state is read from its coordinator before it is
        first served here, and every change written back before it is
        answered (broker/groups/share/persistence.py)."""
        partitions, logs, store = services.partitions, services.logs, services.store
        main_loop = asyncio.get_running_loop()
        locator = _made(services.share_coordinators, "the share coordinator locator")

        append_batch = self._acks_all_append(partitions, SHARE_STATE_TOPIC)

        def get_log(p: int) -> Log | None:
            return logs.get_log(SHARE_STATE_TOPIC, p)
        append, _read_all = offsets_log_functions(get_log, 0, append_batch=append_batch)
        self.share_coordinator = coordinator = ShareCoordinator(
            lambda key: locator.partition_of(coordinator_key(key)),
            lambda p, records: append(p, records),  # type: ignore[arg-type,return-value]
            partition_reader(get_log), run_off_loop)
        for p in range(_partition_count(store, SHARE_STATE_TOPIC) or 0):
            if partitions.leader_log(SHARE_STATE_TOPIC, p).ok:
                await coordinator.load_partition(p)
        services.share_coordinator = ShareCoordinatorBridge(coordinator, main_loop)

        def leader_epoch(topic_id: uuid.UUID, partition: int) -> int | None:
            meta = services.topics.by_id(topic_id)
            found = partitions.leader_log(meta.name, partition) if meta is not None else None
            return found.leader_epoch if found is not None and found.ok else None
        self._share_persister = persister = SharePersister(
            self.cfg.broker_id, locator, lambda: self.share_coordinator,
            # retried within half a request's time, so the fetch or acknowledgement
            # waiting on it still answers before its client gives up
            self.cfg.request_timeout_ms / 2000, security=self.inter_broker)
        groups = _made(self.coordinator, "the group coordinator")
        service = ShareService(ShareDefaults.from_broker_config(self.cfg), wall_ms,
                               share_bounds(services), durable=True,
                               group_configs=GroupConfigs(store).get,  # share.* GROUP configs
                               loading=groups.group_loading)
        # a share group's own records live in __consumer_offsets beside the
        # other groups': written through the group coordinator's store, read
        # by its loads (which hand them over from now on)
        def local_end(topic: str, partition: int) -> int | None:
            found = partitions.leader_log(topic, partition)
            return found.found_log.high_watermark if found.ok else None
        self._share_ends = ends = PartitionEnds(
            self.cfg.broker_id, store, local_end, self.cfg.request_timeout_ms / 2000,
            security=self.inter_broker)  # lag of share-partitions led elsewhere
        service.persistence = SharePersistence(service, persister, leader_epoch, main_loop,
                                               group_store=groups.store.store_records,
                                               ends=ends)
        groups.attach_share_groups(service)
        services.share_groups = service
        self._share_expiry_task = main_loop.create_task(self._share_expiry_loop(service))
        _share_gauges(services.metrics, service, _coordinated_here(services))

    def _share_leadership(self, loop: asyncio.AbstractEventLoop, topic: str, partition: int,
                          leading: bool) -> None:
        """The share side of a leadership change: a __share_group_state
        partition is loaded or dropped by the share coordinator; a data
        partition no longer led here has its share-partitions forgotten (its
        next leader reads their state from the coordinator)."""
        if topic == SHARE_STATE_TOPIC:
            coordinator = self.share_coordinator
            if coordinator is None:
                return
            if leading:
                loop.call_soon_threadsafe(coordinator.machine.loading, partition)
                asyncio.run_coroutine_threadsafe(coordinator.load_partition(partition), loop)
            else:
                loop.call_soon_threadsafe(coordinator.unload_partition, partition)
            return
        services = self.services
        if leading or services is None or services.share_groups is None:
            return
        meta = services.store.topic(topic)
        if meta is not None:
            services.share_groups.forget_partition(meta.topic_id, partition)

    def _acks_all_append(self, partitions: PartitionLayer, topic: str
                         ) -> Callable[[int, bytes], Awaitable[None] | None]:
        """A coordinator's write, as Kafka's (groups into __consumer_offsets, share
        state into __share_group_state): acks=all into the partition of ``topic``
        it leads; an awaitable while the ISR has not got it."""
        def append_batch(p: int, batch: bytes) -> Awaitable[None] | None:
            found = partitions.leader_log(topic, p)
            if not found.ok:
                raise CoordinatorWriteError(f"{topic}-{p}: {found.error.name}", found.error)
            end = partitions.append(found, batch, AppendOrigin.COORDINATOR,
                                    acks=-1).last_offset + 1
            min_isr = found.found_log.config.min_insync_replicas
            if found.found_replica.replicated(end, min_isr) == ErrorCode.NONE:
                return None
            return self._offsets_replicated(partitions, found, p, end, min_isr, topic=topic)
        return append_batch

    async def _offsets_replicated(self, partitions: PartitionLayer, found: LeaderLookup,
                                  partition: int, end: int, min_isr: int,
                                  topic: str = OFFSETS_TOPIC) -> None:
        code, = await partitions.wait_replicated(
            [(found, end, min_isr)], self.cfg.offsets_commit_timeout_ms)
        if code:
            raise CoordinatorWriteError(f"{topic}-{partition}: {code.name}", code)
    def _internal_leadership(self, loop: asyncio.AbstractEventLoop, topic: str, partition: int,
                             leading: bool) -> None:
        """On the replica manager's thread: this broker took up or gave up
        leadership of a partition of an internal topic; its coordinator loads
        or drops the groups (transactional ids) kept there, on its own loop."""
        self._share_leadership(loop, topic, partition, leading)
        if topic == TRANSACTION_STATE_TOPIC:
            coordinator = self.txn_coordinator
            if coordinator is None:
                return
            if leading:
                asyncio.run_coroutine_threadsafe(coordinator.load_partition(partition), loop)
            else:
                loop.call_soon_threadsafe(coordinator.unload_partition, partition)
            return
        if topic != OFFSETS_TOPIC or self.coordinator is None:
            return
        if leading:
            self.coordinator.loading(partition)  # before the leadership is served
            asyncio.run_coroutine_threadsafe(self.coordinator.load_partition(partition), loop)
        else:
            loop.call_soon_threadsafe(self.coordinator.unload_partition, partition)

    async def _share_expiry_loop(self, service: ShareService) -> None:
        """A share member whose session ran out leaves its group now, not at
        the group's next heartbeat: its records are tombstoned when its
        session ends, as Kafka's session timer does (else a restart would
        bring it back for another session)."""
        while True:
            await asyncio.sleep(1.0)
            try:
                persistence = service.persistence
                for group_id in service.expire_members():
                    if persistence is None:
                        continue
                    if service.loading(group_id) or not await persistence.flush_group(group_id):
                        service.expiry_unwritten(group_id)
            except Exception:  # keep expiring on the next round
                log.exception("expiring share-group members failed")

    async def _expire_offsets_loop(self, coordinator: GroupCoordinator) -> None:
        interval = self.cfg.offsets_retention_check_interval_ms / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                removed = await coordinator.expire_offsets()
                if removed:
                    log.info("expired %d committed offset(s)", removed)
            except Exception:  # keep expiring on the next round
                log.exception("expiring committed offsets failed")

    @property
    def network(self) -> NetworkServer | None:
        """The first listener's network server."""
        return self.networks[0] if self.networks else None

    def _listener_servers(self) -> list[NetworkServer]:
        """One network server per listener (as Kafka, each with its own
        num.network.threads processors), sharing the request memory pool and
        the connection counts."""
        cfg = self.cfg
        pool = RequestMemoryPool(cfg.queued_max_request_bytes if cfg.queued_max_request_bytes > 0
                                 else 2 * cfg.socket_request_max_bytes + 64 * 1024 * 1024)
        counts = ConnectionCounts()  # max.connections(.per.ip) count over all listeners
        return [NetworkServer(
            lst.host or "0.0.0.0", lst.port, cfg.num_network_threads, None,
            max_frame_bytes=cfg.socket_request_max_bytes,
            max_unauthenticated_frame_bytes=cfg.sasl_server_max_receive_size,
            max_connections=cfg.max_connections,
            max_connections_per_ip=cfg.max_connections_per_ip,
            idle_timeout_ms=cfg.connections_max_idle_ms,
            receive_timeout_ms=cfg.request_receive_timeout_ms,
            send_buffer_bytes=cfg.socket_send_buffer_bytes,
            recv_buffer_bytes=cfg.socket_receive_buffer_bytes,
            listener_name=lst.name,
            security_protocol=cfg.security_protocol(lst.name),
            tls=self.listener_tls.get(lst.name),
            memory_pool=pool,
            connection_counts=counts,
            connection_rates=self.connection_rates,
            # Kafka protects the inter-broker listener only when there are others
            inter_broker=lst.name == cfg.inter_broker_listener and len(cfg.listeners) > 1,
        ) for lst in cfg.listeners]

    async def start(self) -> None:
        cfg = self.cfg
        if records_walker.SLOWER:   # (tools stay quiet about it: walker.py)
            log.warning("%s", records_walker.SLOWER)
        self.networks = self._listener_servers()
        # The ports first: a broker that cannot listen fails before it touches
        # (or creates) its log dirs.
        for network in self.networks:
            try:
                await network.bind()
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise
                raise OSError(e.errno, f"{e.strerror}; to run this broker on another port: "
                                       f"{_other_port_override(cfg, network.listener_name)}"
                              ) from None
        _check_log_dirs(cfg.log_dirs)
        # Before anything in them is read or written (the embedded metadata
        # store's files included): another broker on these dirs refuses this one.
        self._dir_locks = LogDirLocks(cfg.log_dirs)
        try:
            self.services = services = await asyncio.get_running_loop().run_in_executor(
                None, self._open)
        except BaseException:
            self._release_log_dirs()
            raise
        cfg = self.cfg  # now with the stored dynamic configs
        await self._start_groups(services)
        await self._start_share_groups(services)
        await self._start_transactions(services)
        dispatcher = Dispatcher(services)
        # Fault injection wraps the dispatcher: without it, nothing on the request path
        handler: Handler = (dispatcher if not cfg.samsa_testing_faults_enable
                            else await self._start_faults(services, dispatcher))
        for network in self.networks:
            network.max_connections = cfg.max_connections
            network.max_connections_per_ip = cfg.max_connections_per_ip
            network.faults = self.faults
            network.set_handler(handler)
        self._apply_connection_rates(cfg)
        controller = self.controller
        if controller is not None:
            # As Kafka does: register once the logs and groups are loaded, then
            # process requests (connections wait in the listen backlog meanwhile).
            try:
                await asyncio.get_running_loop().run_in_executor(
                    None, self._register_in_cluster, services.store, controller)
            except BaseException:
                await self.stop()  # a duplicate broker.id: leave the logs cleanly shut
                raise
        for network in self.networks:
            await network.start()
        self._serving = True
        # the logs nobody has used since the start: loaded from now on (storage/lazy_log.py);
        # the roles left for their load are taken up as each is
        replicas = _made(self.replicas, "the replica manager")
        # (frozen a chunk at a time: one collection of every log the pass loaded,
        # 30,000 of them, stopped every thread for a second or more)
        services.logs.start_background_load(on_loaded=replicas.log_loaded,
                                            after_chunk=keep_for_good)
        m = services.metrics
        networks = self.networks
        self._watch_loops(m)
        m.add_source("connections_open", lambda: sum(n.connections_open for n in networks))
        m.add_source("connections_accepted", lambda: sum(n.connections_accepted for n in networks))
        m.add_source("connections_throttled", lambda: sum(n.connections_throttled for n in networks))
        m.add_source("bytes_in", lambda: sum(n.bytes_in for n in networks))
        m.add_source("bytes_out", lambda: sum(n.bytes_out for n in networks))
        self._connection_rate_gauges(m)
        # one pool, shared by every listener: the first one's answers for all
        pool_holder = _made(self.network, "the first listener")
        m.add_source("request_memory_used", lambda: pool_holder.request_memory_used)
        m.add_source("request_memory_waiting", lambda: pool_holder.request_memory_waiting)
        if getattr(cfg, "metrics_port", 0):
            # By default where the listener is: a broker on localhost does not
            # publish its metrics to the whole network.
            m.serve(cfg.metrics_port, cfg.metrics_host or cfg.listeners[0].host or "0.0.0.0")
        log.info("samsa broker %d started: listening on %s, advertised as %s, "
                 "cluster id %s, data in %s", cfg.broker_id,
                 ", ".join(f"{n.listener_name}://{n.host}:{n.port}" for n in self.networks),
                 ", ".join(f"{lst.name}://{lst.host}:{lst.port}" for lst in self.node.listeners),
                 services.store.cluster_id, ",".join(cfg.log_dirs))

    def _watch_loops(self, metrics: BrokerMetrics) -> None:
        """Every event loop of the broker under a lateness watch (loop_lag.py)."""
        self._loop_lags = lags = LoopLags()
        lags.watch("main", asyncio.get_running_loop())
        for network in self.networks:
            for p in network.processors:
                lags.watch(f"{network.listener_name}-network-{p.index}", p.loop)
        if self.fetcher is not None:
            lags.watch("replica-fetcher", self.fetcher.loop)
        lags.add_metrics(metrics)

    async def _start_faults(self, services: BrokerServices, dispatcher: Dispatcher) -> Handler:
        """The fault injector and its endpoint (a test broker: loopback listeners only,
        which the config checked); returns the handler the network calls."""
        store = services.store

        def topic_name(topic_id: uuid.UUID) -> str | None:
            meta = store.topic_by_id(topic_id)
            return None if meta is None else meta.name
        self.faults = FaultInjector(topic_name)
        self._fault_endpoint = FaultEndpoint(self.faults, fault_actions(self))
        await self._fault_endpoint.start(self.cfg.samsa_testing_faults_port)
        return self.faults.wrap(dispatcher)

    async def _controlled_shutdown(self, store: MetadataStore, controller: Controller) -> None:
        """Kafka's controlled shutdown: while this broker still serves, the
        controller moves leadership of its partitions to other in-sync replicas,
        so clients fail over at once instead of after the ZooKeeper session ends."""
        cfg = self.cfg
        if self.replicas is not None:
            self.replicas.leaving()
        answers = ShutdownAnswers()
        for attempt in range(1, cfg.controlled_shutdown_max_retries + 1):
            # read each time: a new session registers anew, under a newer epoch
            epoch = store.broker_epoch
            answer = await self._ask_controller_to_move_leaders(store, controller, epoch)
            step = answers.next(answer, epoch, store.broker_epoch)
            if step is Next.MOVED:
                log.info("controlled shutdown: leadership moved off broker %d", cfg.broker_id)
                if self.fetcher is not None:
                    # as Kafka's StopReplica: following on would bring this broker
                    # back into the ISRs it was just taken out of
                    self.fetcher.stop()
                return
            if step is Next.STOP_WITHOUT:
                log.warning("controlled shutdown: the controller refused broker epoch %d as "
                            "stale (broker %d is registered anew); stopping without it",
                            epoch, cfg.broker_id)
                return
            log.info("controlled shutdown attempt %d: %s", attempt, describe_shutdown_answer(answer))
            if attempt < cfg.controlled_shutdown_max_retries:
                await asyncio.sleep(cfg.controlled_shutdown_retry_backoff_ms / 1000)
        log.warning("controlled shutdown did not move every leader off broker %d; "
                    "stopping anyway", cfg.broker_id)

    async def _ask_controller_to_move_leaders(self, store: MetadataStore, controller: Controller,
                                              epoch: int) -> list[tuple[str, int]] | int | None:
        """The partitions this broker still leads, the controller's error code
        (refused), or None (no controller answered)."""
        me = self.cfg.broker_id
        # A controller may be changing hands (the previous one just stopped):
        # wait for the next one rather than give up on this attempt.
        deadline = time.monotonic() + self.cfg.controlled_shutdown_retry_backoff_ms / 1000
        while store.broker(store.controller_id) is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        controller_id = store.controller_id
        if controller_id == me and controller.active:
            answer = await asyncio.get_running_loop().run_in_executor(
                None, controller.controlled_shutdown, me, epoch, CONTROLLED_SHUTDOWN_WAIT_S)
            return REFUSED_AS[answer] if isinstance(answer, ShutdownRefused) else answer
        ep = store.broker(controller_id)
        if ep is None:
            return None
        try:
            conn = await KafkaConnection.connect(ep.host, ep.port, client_id=f"samsa-broker-{me}",
                                                 timeout=CONTROLLED_SHUTDOWN_WAIT_S,
                                                 tls=self.inter_broker.tls,
                                                 sasl=self.inter_broker.sasl)
            try:
                resp = await asyncio.wait_for(conn.call(
                    ControlledShutdownRequest(broker_id=me, broker_epoch=epoch),
                    api_key=ApiKey.CONTROLLED_SHUTDOWN, version=3), CONTROLLED_SHUTDOWN_WAIT_S + 5)
            finally:
                await conn.close()
        except (ConnectionClosedError, OSError, asyncio.TimeoutError) as e:
            log.info("controlled shutdown: controller %d not reachable (%s)", controller_id, e)
            return None
        if resp.error_code:
            return int(resp.error_code)
        return [(r.topic_name, r.partition_index) for r in resp.remaining_partitions]

    async def stop(self) -> bool:
        """Stop everything; False when writes failed on the way (the log says which)."""
        failures: list[str] = []
        if (self.controller is not None and self.services is not None and not self._stopping
                and self.cfg.controlled_shutdown_enable and self._serving):
            await self._controlled_shutdown(self.services.store, self.controller)
        self._stopping = True
        if self._loop_lags is not None:
            self._loop_lags.stop()  # a stop may hold a loop (closing the logs): no stall to tell
        if self._expiry_task is not None:
            self._expiry_task.cancel()
        if self._share_expiry_task is not None:
            self._share_expiry_task.cancel()
        if self.coordinator is not None:
            # answers every waiting JoinGroup/SyncGroup (NOT_COORDINATOR) while the
            # network can still deliver it, and lets pending group writes finish
            await self.coordinator.shutdown()
        if self.faults is not None:
            self.faults.rules.clear()  # held requests go on, so the network can stop
        if self._fault_endpoint is not None:
            await self._fault_endpoint.stop()
        for network in self.networks:
            await network.stop()
        if self.txn_coordinator is not None:
            # markers still to send are resumed by the next coordinator from the log
            await self.txn_coordinator.shutdown()
        # (made one after the other as the coordinator starts: each closed if it was made)
        if self._marker_sender is not None:
            await self._marker_sender.close()
        if self._txn_verifier is not None:
            await self._txn_verifier.close()
        if self._share_persister is not None:
            await self._share_persister.close()
        if self._share_ends is not None:
            await self._share_ends.close()
        if self.controller is not None:
            self.controller.stop()  # resigns: another broker takes over at once
        if self.replica_sync is not None:
            self.replica_sync.stop()
        if self.fetcher is not None:
            self.fetcher.stop()
        roles_ended = self.replicas.stop() if self.replicas is not None else True
        if self.registry is not None:
            self.registry.close()  # the last mirrored commits reach ZooKeeper
        if self.services is not None:
            failures = await asyncio.get_running_loop().run_in_executor(
                None, partial(self.services.logs.shutdown, withhold_marker=not roles_ended))
            self.services.store.close()
        self._release_log_dirs()
        if failures:
            log.error("samsa broker stopped, but %d write(s) failed (the next start "
                      "recovers from what was flushed): %s", len(failures), "; ".join(failures))
            return False
        if not roles_ended:
            log.error("samsa broker stopped without the clean-shutdown marker: a replica role "
                      "change outlived the stop's wait (the next start recovers the logs)")
            return False
        log.info("samsa broker stopped cleanly")
        return True

    def _release_log_dirs(self) -> None:
        if self._dir_locks is not None:
            self._dir_locks.release()
            self._dir_locks = None

    async def run_until_signalled(self) -> bool:
        await self.start()
        settle_for_serving()  # (this process is the broker: see gc_tuning.py)
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        log.info("shutting down")
        return await self.stop()


def _coordinated_here(services: BrokerServices) -> Callable[[str], bool]:
    """Whether this broker coordinates a group (the share-group gauges count
    only those, as ListGroups lists only those)."""
    return lambda group_id: not coordination_error(
        services.coordinators, services.config.broker_id, group_id)


def _share_gauges(metrics: BrokerMetrics, share: ShareService,
                  coordinated: Callable[[str], bool]) -> None:
    """Share groups' gauges under Kafka's names (broker/groups/share/metrics.py)."""
    gc = "kafka_server_group_coordinator_metrics_"
    metrics.add_kafka_gauge(gc + "share_group_count",
                            "Share groups this broker coordinates, by state",
                            lambda: share_group_states(share.group_states(coordinated)))
    sg = "kafka_server_share_group_metrics_"
    m = share.metrics
    metrics.add_kafka_gauge(sg + "share_acknowledgement_count",
                            "Offsets acknowledged by share consumers",
                            lambda: [({}, float(m.acknowledgements.count))])
    metrics.add_kafka_gauge(sg + "share_acknowledgement_rate",
                            "Offsets acknowledged by share consumers per second",
                            lambda: [({}, m.acknowledgements.rate())])
    metrics.add_kafka_gauge(sg + "record_acknowledgement_count",
                            "Records acknowledged, by acknowledgement type",
                            lambda: m.record_samples(rate=False))
    metrics.add_kafka_gauge(sg + "record_acknowledgement_rate",
                            "Records acknowledged per second, by acknowledgement type",
                            lambda: m.record_samples(rate=True))
    metrics.add_kafka_gauge("samsa_share_records_acquired_count",
                            "Records acquired by share fetches (Kafka has no such meter)",
                            lambda: [({}, float(m.acquired.count))])
    metrics.add_kafka_gauge("samsa_share_records_acquired_rate",
                            "Records acquired by share fetches per second",
                            lambda: [({}, m.acquired.rate())])
