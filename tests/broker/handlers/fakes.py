"""Typed fakes of the services handlers use (broker/handlers/services.py).

Each fake implements its Protocol in full, so mypy checks it against the Protocol (this
package is in [tool.mypy] files): a Protocol that changes breaks the fakes at check
time, not in a confusing test failure. A fake keeps what a test sets up in plain
attributes and records what the handler asked; a method no handler test needs says so.
"""
from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import NoReturn

from samsa.broker import features
from samsa.broker.fetch_sessions import FetchSessionCache
from samsa.broker.network.turns import Turns
from samsa.broker.cluster.controller_events import ShutdownRefused
from samsa.broker.cluster.reassignment import Reassignment
from samsa.broker.groups.share.service import ShareService
from samsa.broker.groups.results import (GroupDescription, JoinResult, LeaveResult, ListedGroup,
                                   OffsetDeleteResult, OffsetFetchResult, PartitionError,
                                   SyncResult)
from samsa.broker.handlers.context import RequestContext
from samsa.broker.handlers.services import (Acls, AppendWaits, ClusterControl, Commit,
                                      ConsumerRegistry, CoordinatorAnswerLike,
                                      CoordinatorLocation, DynamicConfigs,
                                      GroupCoordination, LogDirs, MetadataView, Metrics,
                                      MutationQuotas, Partitions, Sasl, ScramCredentials,
                                      Services, ShareStateCoordination, StoredLog, Topics,
                                      TransactionCoordination,
                                      TxnVerification)
from samsa.broker.metadata import BrokerEndpoint, ListenerEndpoint, PartitionMeta, TopicMeta
from samsa.broker.partitions import LeaderLookup
from samsa.broker.replication.leader import LeaderReplica
from samsa.broker.quotas.mutation import UNBOUNDED, MutationQuota
from samsa.broker.security.acl import AclBinding, AclBindingFilter
from samsa.broker.security.acl.authorizer import AclAuthorizer
from samsa.broker.security.principal import ANONYMOUS, KafkaPrincipal
from samsa.client.scram_credential import ScramCredential
from samsa.broker.security.sasl.settings import ListenerSasl, SaslSettings
from samsa.broker.server import advertised_apis
from samsa.broker.topics import TopicError
from samsa.broker.transactions.coordinator import DescribedTxn, EndResult, InitResult
from samsa.broker.transactions.state import TxnMetadata
from samsa.config import BrokerConfig
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ApiSpec, RequestHeader
from samsa.protocol.model import TopicPartition
from samsa.protocol.messages.wire import Buf
from samsa.storage import AppendOrigin, AppendResult

NODE = BrokerEndpoint(1, "broker1", 9092, None,
                      (ListenerEndpoint("PLAINTEXT", "broker1", 9092, "PLAINTEXT"),))


def unused(what: str) -> NoReturn:
    raise AssertionError(f"{what}: not used by the handler under test")


class FakeConnection:
    def __init__(self, principal: KafkaPrincipal = ANONYMOUS) -> None:
        self.connection_id = "broker1:9092-client:5555-0"
        self.peer_host = "10.0.0.7"
        self.listener_name = "PLAINTEXT"
        self.security_protocol = "PLAINTEXT"
        self.loop = asyncio.get_event_loop_policy().get_event_loop()
        self.state: dict[str, object] = {}
        self.closed = False
        self.principal = principal
        self.authenticated = True
        self.turns = Turns()

    @property
    def peer_gone(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def close_after_responses(self) -> None:
        self.closed = True


# ------------------------------------------------------------------ metadata and topics

class FakeStore(MetadataView):
    def __init__(self) -> None:
        self.placements: dict[str, dict[int, PartitionMeta]] = {}
        self.live: list[BrokerEndpoint] = [NODE]
        self.entities: dict[str, dict[str, str]] = {}

    @property
    def cluster_id(self) -> str:
        return "test-cluster"

    @property
    def controller_id(self) -> int:
        return NODE.node_id

    def brokers(self) -> list[BrokerEndpoint]:
        return self.live

    def partitions(self, topic: str) -> dict[int, PartitionMeta]:
        return self.placements.get(topic, {})

    # () by default: tests change placements in place, so nothing may be reused
    token: tuple[object, ...] = ()

    def snapshot_token(self) -> tuple[object, ...]:
        return self.token

    def topic_token(self, topic: str) -> tuple[object, ...]:
        return self.token

    def entity_configs(self, entity_path: str) -> dict[str, str]:
        return dict(self.entities.get(entity_path, {}))

    def set_entity_configs(self, entity_path: str, configs: dict[str, str]) -> None:
        self.entities[entity_path] = dict(configs)

    def entity_config_paths(self, entity_type: str) -> list[str]:
        return []

    def allocate_producer_id(self) -> int:
        return 4000


class FakeTopics(Topics):
    """Topics by name, placed on broker 1 in ``store``; create/delete as Kafka answers."""

    def __init__(self, store: FakeStore) -> None:
        self.store = store
        self.by_name: dict[str, TopicMeta] = {}
        self.created: list[tuple[str, int, int]] = []
        self.deleted: list[str] = []

    def add(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None,
            internal: bool = False) -> TopicMeta:
        meta = TopicMeta(name, uuid.uuid4(), partitions, dict(configs or {}), internal)
        self.by_name = {**self.by_name, name: meta}   # replaced, as stores do
        self.store.placements[name] = {p: PartitionMeta((1,), 1, 0, (1,)) for p in range(partitions)}
        return meta

    def topics(self) -> dict[str, TopicMeta]:
        return self.by_name   # replaced, never mutated, on a change (as stores do)

    def get(self, name: str) -> TopicMeta | None:
        return self.by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicMeta | None:
        return next((m for m in self.by_name.values() if m.topic_id == topic_id), None)

    def get_or_create(self, name: str, charge: Callable[[int], None] | None = None
                      ) -> TopicMeta | None:
        return self.by_name.get(name)

    def create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
               configs: dict[str, str] | None = None, validate_only: bool = False,
               assignment: dict[int, list[int]] | None = None,
               charge: Callable[[int], None] | None = None) -> TopicMeta | None:
        if name in self.by_name:
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        if replication_factor > len(self.store.live):
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, "not enough brokers")
        if validate_only:
            return None
        self.created.append((name, num_partitions, replication_factor))
        return self.add(name, max(num_partitions, 1))

    def delete(self, name: str, charge: Callable[[int], None] | None = None) -> TopicMeta:
        meta = self.by_name.get(name)
        self.by_name = {n: m for n, m in self.by_name.items() if n != name}
        if meta is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "unknown topic")
        self.deleted.append(name)
        return meta

    def add_partitions(self, name: str, count: int, validate_only: bool = False,
                       assignment: list[list[int]] | None = None,
                       charge: Callable[[int], None] | None = None) -> None:
        unused("add_partitions")

    def set_configs(self, name: str, configs: dict[str, str | None],
                    validate_only: bool = False) -> None:
        unused("set_configs")

    def wait_for_leaders(self, name: str, deadline: float) -> bool:
        return True


class FakePartitions(Partitions):
    """Every partition answers ``error`` (the unknown-topic / not-leader cases)."""

    def __init__(self, topics: FakeTopics) -> None:
        self.topics = topics
        self.not_leader: set[TopicPartition] = set()
        self.appended: list[TopicPartition] = []

    def _lookup(self, topic: str, partition: int) -> LeaderLookup:
        meta = self.topics.get(topic)
        if meta is None or not 0 <= partition < meta.num_partitions:
            return LeaderLookup(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if (topic, partition) in self.not_leader:
            return LeaderLookup(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        unused(f"a log of {topic}-{partition}")

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        return self.topics.store.partitions(topic).get(partition)

    def leader_log(self, topic: str, partition: int,
                   current_leader_epoch: int = -1) -> LeaderLookup:
        return self._lookup(topic, partition)

    def replica_log(self, topic: str, partition: int, current_leader_epoch: int,
                    replica_id: int) -> LeaderLookup:
        return self._lookup(topic, partition)

    def consumer_log(self, topic: str, partition: int, current_leader_epoch: int = -1,
                     may_read_follower: bool = False) -> LeaderLookup:
        return self._lookup(topic, partition)

    def preferred_read_replica(self, found: LeaderLookup, fetch_offset: int,
                               client_rack: str) -> int:
        return -1

    def transaction_open(self, found: LeaderLookup, producer_id: int, epoch: int) -> bool:
        return False

    def follower_fetched(self, found: LeaderLookup, replica_id: int, fetch_offset: int,
                         log_start_offset: int = -1) -> None:
        unused("follower_fetched")

    def still_leads(self, replica: LeaderReplica) -> bool:
        unused("still_leads")

    def append(self, found: LeaderLookup, payload: Buf,
               origin: AppendOrigin = AppendOrigin.CLIENT, acks: int = 1,
               txn_version: int = 0) -> AppendResult:
        unused("append")

    async def wait_replicated(self, pending: list[tuple[LeaderLookup, int, int]],
                              timeout_ms: int) -> list[ErrorCode]:
        return [ErrorCode.NONE for _ in pending]


# ------------------------------------------------------------------ coordinators

@dataclasses.dataclass
class FakeLocator(CoordinatorLocation):
    count: int = 50

    def partition_count(self) -> int:
        return self.count

    def partition_of(self, key: str) -> int:
        return abs(hash(key)) % self.count

    def locate(self, key: str) -> CoordinatorAnswerLike:
        from samsa.broker.groups.locator import CoordinatorAnswer
        return CoordinatorAnswer(ErrorCode.NONE, NODE)


class FakeGroups(GroupCoordination):
    """Records each call (name, args); answers a fixed member, or the code a test sets."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        self.heartbeat_code = int(ErrorCode.NONE)
        self.commit_code = int(ErrorCode.NONE)

    async def join_group(self, group_id: str, member_id: str, group_instance_id: str | None,
                         client_id: str, client_host: str, session_timeout_ms: int,
                         rebalance_timeout_ms: int, protocol_type: str,
                         protocols: Sequence[tuple[str, bytes]],
                         require_known_member_id: bool = True,
                         reason: str | None = None) -> JoinResult:
        self.calls.append(("join_group", (group_id, member_id, client_id, client_host,
                                          session_timeout_ms, rebalance_timeout_ms,
                                          require_known_member_id)))
        return JoinResult(ErrorCode.NONE, generation_id=1, protocol_type="consumer",
                          protocol_name="range", leader="m-1", member_id="m-1",
                          members=[("m-1", None, b"meta")])

    async def sync_group(self, group_id: str, generation_id: int, member_id: str,
                         group_instance_id: str | None, protocol_type: str | None,
                         protocol_name: str | None,
                         assignments: Sequence[tuple[str, bytes]]) -> SyncResult:
        self.calls.append(("sync_group", (group_id, generation_id, member_id, list(assignments))))
        return SyncResult(ErrorCode.NONE, "consumer", "range", b"assignment")

    async def heartbeat(self, group_id: str, generation_id: int, member_id: str,
                        group_instance_id: str | None = None) -> int:
        self.calls.append(("heartbeat", (group_id, generation_id, member_id, group_instance_id)))
        return self.heartbeat_code

    async def leave_group(self, group_id: str,
                          members: Iterable[tuple[str, str | None, str | None]]) -> LeaveResult:
        unused("leave_group")

    async def describe_groups(self, group_ids: Iterable[str],
                              unknown_is_error: bool = True) -> list[GroupDescription]:
        unused("describe_groups")

    async def list_groups(self, states_filter: Iterable[str] | None = None,
                          types_filter: Iterable[str] | None = None
                          ) -> tuple[int, list[ListedGroup]]:
        unused("list_groups")

    async def delete_groups(self, group_ids: Iterable[str]) -> list[tuple[str, int]]:
        unused("delete_groups")

    async def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None, offsets: Sequence[Commit],
                             retention_ms: int | None = None) -> list[PartitionError]:
        self.calls.append(("commit_offsets", (group_id, generation_id, member_id, list(offsets))))
        return [PartitionError(t, p, self.commit_code) for t, p, *_ in offsets]

    async def commit_txn_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 generation_id: int, member_id: str,
                                 group_instance_id: str | None,
                                 offsets: Sequence[Commit]) -> list[PartitionError]:
        unused("commit_txn_offsets")

    async def fetch_offsets(self, group_id: str, partitions: Iterable[TopicPartition] | None,
                            require_stable: bool = False, member_id: str | None = None,
                            member_epoch: int = -1) -> OffsetFetchResult:
        unused("fetch_offsets")

    async def delete_offsets(self, group_id: str,
                             partitions: Iterable[TopicPartition]) -> OffsetDeleteResult:
        unused("delete_offsets")


class FakeTransactions(TransactionCoordination):
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[object, ...]]] = []
        self.end_code = ErrorCode.NONE
        self.list_error: Exception | None = None
        self.add_versions: list[int] = []  # client transaction version of each add

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None) -> InitResult:
        self.calls.append(("init_producer_id", (transactional_id, timeout_ms, expected)))
        return InitResult(ErrorCode.NONE, 7000, 3)

    async def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                             partitions: Iterable[TopicPartition],
                             client_version: int = 0) -> ErrorCode:
        self.calls.append(("add_partitions", (transactional_id, producer_id, producer_epoch,
                                              sorted(partitions))))
        self.add_versions.append(client_version)
        return ErrorCode.NONE

    async def verify_partitions(self, transactional_id: str, producer_id: int,
                                producer_epoch: int, partitions: Iterable[TopicPartition]
                                ) -> dict[TopicPartition, ErrorCode]:
        unused("verify_partitions")

    async def end_transaction(self, transactional_id: str, producer_id: int,
                              producer_epoch: int, commit: bool,
                              client_version: int = 0) -> EndResult:
        self.calls.append(("end_transaction", (transactional_id, producer_id, producer_epoch,
                                               commit)))
        if client_version >= 2 and not self.end_code:  # v2: the epoch bumped per transaction
            return EndResult(self.end_code, producer_id, producer_epoch + 1)
        return EndResult(self.end_code)

    async def describe(self, transactional_ids: Iterable[str]) -> list[DescribedTxn]:
        unused("describe")

    async def list_transactions(self, states: Iterable[str], producer_ids: Iterable[int],
                                min_duration_ms: int = -1, id_pattern: str | None = None
                                ) -> tuple[list[str], list[TxnMetadata]]:
        if self.list_error is not None:
            raise self.list_error
        return [], []


class FakeVerifier(TxnVerification):
    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[TopicPartition], add: bool = False
                     ) -> dict[TopicPartition, ErrorCode]:
        unused("verify")


# ------------------------------------------------------------------ the rest

class FakeAcls(Acls):
    """A real authorizer (pure) over ACLs kept here; add/remove as the service does."""

    def __init__(self, super_users: Iterable[str] = ()) -> None:
        self._authorizer = AclAuthorizer(super_users)

    @property
    def authorizer(self) -> AclAuthorizer:
        return self._authorizer

    def add(self, bindings: Iterable[AclBinding]) -> None:
        for b in bindings:
            entries = {x.entry for x in self._authorizer.bindings() if x.pattern == b.pattern}
            self._authorizer.set_resource(b.pattern, entries | {b.entry})

    def remove(self, filters: list[AclBindingFilter]) -> list[list[AclBinding]]:
        matched = [self._authorizer.bindings(f) for f in filters]
        for found in matched:
            for b in found:
                left = {x.entry for x in self._authorizer.bindings()
                        if x.pattern == b.pattern and x.entry != b.entry}
                self._authorizer.set_resource(b.pattern, left)
        return matched


class FakeMetrics(Metrics):
    def __init__(self) -> None:
        self.produced_records: dict[str, int] = {}

    def produced(self, topic: str, records: int, size: int) -> None:
        self.produced_records[topic] = self.produced_records.get(topic, 0) + records

    def fetched(self, topic: str, size: int) -> None:
        pass

    def replicated_out(self, size: int) -> None:
        pass


class NoQuotas(MutationQuotas):
    def mutation_quota(self, user: str, client_id: str, *, strict: bool) -> MutationQuota:
        return UNBOUNDED


class FakeSasl(Sasl):
    @property
    def failed_authentication_delay_ms(self) -> int:
        return 0

    def for_listener(self, name: str) -> ListenerSasl:
        return SaslSettings({}).for_listener(name)


class NoScram(ScramCredentials):
    def credential(self, username: str, mechanism: str) -> ScramCredential | None:
        return None

    def reload(self, entity_path: str, configs: dict[str, str] | None = None) -> None:
        unused("reload")


class NoDynamicConfigs(DynamicConfigs):
    def owns(self, resource_name: str) -> int | None | bool:
        return int(resource_name) == NODE.node_id if resource_name else None

    def entity_configs(self, entity: int | None) -> dict[str, str]:
        return {}

    def alter(self, entity: int | None, requested: Mapping[str, str | None],
              validate_only: bool) -> None:
        unused("alter")


class NoLogDirs(LogDirs):
    def logs_by_dir(self) -> Mapping[str, Sequence[StoredLog]]:
        return {}

    def future_logs_by_dir(self) -> Mapping[str, Sequence[StoredLog]]:
        return {}

    def log_dir_online(self, d: str) -> bool:
        return True

    def get_log(self, topic: str, partition: int) -> StoredLog | None:
        return None

    def alter_log_dir(self, topic: str, partition: int, destination: str) -> bool:
        unused("alter_log_dir")


class NoWaits(AppendWaits):
    def wait_any(self, keys: Iterable[TopicPartition], loop: asyncio.AbstractEventLoop,
                 events: int = 3) -> asyncio.Future[object]:
        unused("wait_any")


class NoController(ClusterControl):
    @property
    def active(self) -> bool:
        return False

    def controlled_shutdown(self, broker_id: int, broker_epoch: int, timeout: float
                            ) -> list[TopicPartition] | ShutdownRefused | None:
        unused("controlled_shutdown")

    def elect_leaders(self, partitions: list[TopicPartition] | None, unclean: bool,
                      timeout: float) -> dict[TopicPartition, ErrorCode] | None:
        unused("elect_leaders")

    def reassign(self, requests: dict[TopicPartition, list[int] | None], timeout: float,
                 allow_replication_factor_change: bool = True
                 ) -> dict[TopicPartition, tuple[ErrorCode, str | None]] | None:
        unused("reassign")

    def reassignments(self) -> dict[TopicPartition, Reassignment] | None:
        return None


class NoRegistry(ConsumerRegistry):
    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        unused("commit")

    def fetch(self, group: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        unused("fetch")

    def mirror(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        unused("mirror")


@dataclasses.dataclass
class FakeServices:
    """A broker of fakes: one broker (id 1), no ACLs unless ``acls`` is set."""
    config: BrokerConfig = dataclasses.field(default_factory=lambda: BrokerConfig.from_dict(
        {"broker.id": 1, "log.dirs": "/nonexistent"}))
    store: FakeStore = dataclasses.field(default_factory=FakeStore)
    logs: LogDirs = dataclasses.field(default_factory=NoLogDirs)
    topics: FakeTopics = dataclasses.field(init=False)
    partitions: FakePartitions = dataclasses.field(init=False)
    coordinators: FakeLocator = dataclasses.field(default_factory=FakeLocator)
    txn_coordinators: FakeLocator | None = dataclasses.field(default_factory=FakeLocator)
    notifier: AppendWaits = dataclasses.field(default_factory=NoWaits)
    advertised_apis: list[ApiSpec] = dataclasses.field(default_factory=advertised_apis)
    features_epoch: int = dataclasses.field(default_factory=features.new_epoch)
    metrics: FakeMetrics = dataclasses.field(default_factory=FakeMetrics)
    dynamic_config: DynamicConfigs = dataclasses.field(default_factory=NoDynamicConfigs)
    scram_credentials: ScramCredentials = dataclasses.field(default_factory=NoScram)
    quotas: MutationQuotas = dataclasses.field(default_factory=NoQuotas)
    groups: FakeGroups | None = dataclasses.field(default_factory=FakeGroups)
    share_groups: ShareService | None = None
    share_coordinator: ShareStateCoordination | None = None
    share_coordinators: CoordinatorLocation | None = None
    transactions: FakeTransactions | None = dataclasses.field(default_factory=FakeTransactions)
    txn_verifier: TxnVerification | None = None
    zk_registry: ConsumerRegistry | None = None
    controller: ClusterControl | None = dataclasses.field(default_factory=NoController)
    txn_marker_hook: Callable[[int, int, bool], None] | None = None
    sasl: Sasl = dataclasses.field(default_factory=FakeSasl)
    acls: FakeAcls | None = None
    fetch_sessions: FetchSessionCache = dataclasses.field(default_factory=FetchSessionCache)

    def __post_init__(self) -> None:
        self.topics = FakeTopics(self.store)
        self.partitions = FakePartitions(self.topics)


def context(services: FakeServices, api_key: int, version: int,
            principal: KafkaPrincipal = ANONYMOUS) -> RequestContext:
    """A request's context as the dispatcher makes it (the fakes checked as Services)."""
    checked: Services = services
    return RequestContext(RequestHeader(api_key, version, 1, "test-client"),
                          FakeConnection(principal), checked)
