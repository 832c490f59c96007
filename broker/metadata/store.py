"""Cluster metadata behind one interface.

Two stores implement it: the embedded store (a single broker, files under the
first log dir; the default) and, later, a ZooKeeper store in Kafka's own znode
layout. Handlers and the topic service only ever see `MetadataStore`.
"""
from __future__ import annotations

import abc
import base64
import dataclasses
import uuid
from typing import Callable, Mapping, NamedTuple, Sequence

# Topics whose records are a coordinator's state: never written by clients, never
# deleted (re-exported: the metadata layer's handlers and controller read them here)
from samsa.protocol.model import INTERNAL_TOPICS as INTERNAL_TOPICS

class ListenerEndpoint(NamedTuple):
    """One advertised listener of a broker."""
    name: str
    host: str
    port: int
    security_protocol: str


@dataclasses.dataclass(frozen=True)
class BrokerEndpoint:
    """A broker and where to reach it. ``host``/``port`` are the address of the
    inter-broker listener (what brokers use between them); ``listeners`` are all
    its advertised listeners (empty: only that one is known)."""
    node_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[ListenerEndpoint, ...] = ()

    def for_listener(self, name: str | None) -> "BrokerEndpoint | None":
        """This broker as a client of listener ``name`` sees it (Kafka answers
        with the endpoints of the listener a request came in on); None when the
        broker has no such listener. ``name`` None: the inter-broker address."""
        if name is None or not self.listeners:
            return self
        for lst in self.listeners:
            if lst.name == name:
                if lst.host == self.host and lst.port == self.port:
                    return self
                return BrokerEndpoint(self.node_id, lst.host, lst.port, self.rack, self.listeners)
        return None


def brokers_on_listener(brokers: "list[BrokerEndpoint]", name: str | None) -> list[BrokerEndpoint]:
    """The brokers reachable on listener ``name``, with that listener's address."""
    out = []
    for b in brokers:
        seen = b.for_listener(name)
        if seen is not None:
            out.append(seen)
    return out


@dataclasses.dataclass(frozen=True)
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    num_partitions: int
    # topic-level overrides, Kafka key names -> string values (None: set to null by a client)
    configs: dict[str, str | None]
    is_internal: bool = False


@dataclasses.dataclass(frozen=True)
class PartitionMeta:
    """Who holds a partition: its replicas (the first is the preferred
    leader), the current leader (-1: none, the partition is offline), the
    leader epoch, the in-sync replicas, and the replicas on brokers that are
    not alive."""
    replicas: tuple[int, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


class IsrUpdate(NamedTuple):
    """The outcome of a leader's ISR change: written, or refused because the
    partition state changed since ``version`` was read (then the state now)."""
    written: bool
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    version: int
    # refused because these members are not replicas of the partition now
    # (the leader's replica list is older than its epoch: admin.py)
    not_replicas: tuple[int, ...] = ()


class IsrChange(NamedTuple):
    """A leader's proposed ISR, to write only if the partition's state is still
    at ``version`` and names this broker leader at ``leader_epoch``."""
    topic: str
    partition: int
    leader_epoch: int
    isr: tuple[int, ...]
    version: int


class TopicExistsError(Exception):
    pass


class MetadataUnavailableError(Exception):
    """The store cannot be written now (ZooKeeper unreachable): a retriable
    condition, not a refusal."""


class UnknownTopicError(Exception):
    pass


def kafka_id(value: uuid.UUID) -> str:
    """How Kafka prints cluster and topic ids: 22-char unpadded base64url."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def new_cluster_id() -> str:
    return kafka_id(uuid.uuid4())


class MetadataStore(abc.ABC):
    """What the broker needs to know about the cluster. Thread-safe: handlers run
    on several processor threads at once."""

    cluster_id: str
    broker_id: int
    # Whether partitions may have more than one replica (a cluster does; the
    # embedded store is one broker).
    replicates: bool = False

    @property
    @abc.abstractmethod
    def controller_id(self) -> int: ...

    @property
    def broker_epoch(self) -> int:
        """This broker's epoch, which its ControlledShutdown carries: in
        ZooKeeper mode the czxid of its registration znode (Kafka's), newer
        each time it registers; -1 (unknown) where there is none."""
        return -1

    @abc.abstractmethod
    def brokers(self) -> list[BrokerEndpoint]: ...

    def broker(self, broker_id: int) -> BrokerEndpoint | None:
        """A registered broker's endpoint (None: not registered now)."""
        for b in self.brokers():
            if b.node_id == broker_id:
                return b
        return None

    @abc.abstractmethod
    def topics(self) -> dict[str, TopicMeta]:
        """Every topic by name: a dict replaced, never mutated, on a change (Metadata
        keeps an all-topics answer while it is the same object)."""

    def topic(self, name: str) -> TopicMeta | None:
        return self.topics().get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicMeta | None:
        for meta in self.topics().values():
            if meta.topic_id == topic_id:
                return meta
        return None

    @abc.abstractmethod
    def partitions(self, topic: str) -> dict[int, PartitionMeta]:
        """Replicas, leader, epoch and ISR of each partition of ``topic``
        ({} for an unknown topic)."""

    def snapshot_token(self) -> tuple[object, ...]:
        """The objects ``brokers()`` and ``partitions()`` answer from, each
        replaced (never mutated) on a change: while every one of them is the
        same object (``is``), those answers are unchanged, so a Metadata
        response's partitions built from them may be reused. () makes no such
        promise (nothing is reused)."""
        return ()

    def topic_token(self, topic: str) -> tuple[object, ...]:
        """As ``snapshot_token``, for ``partitions(topic)`` and ``brokers()``
        alone: it stays the same while other topics change (a failover's
        state writes come in chunks, and Metadata keeps the unchanged topics'
        answers through them). By default the whole snapshot's."""
        return self.snapshot_token()

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        """One partition's replicas, leader, epoch and ISR (None: no such
        partition). Stores override it: it is on every request's path."""
        return self.partitions(topic).get(partition)

    def partition_version(self, topic: str, partition: int) -> int:
        """The version of the partition's state as last read (ZooKeeper: the state
        znode's), for a leader's conditional ISR change."""
        return 0

    def update_isr(self, topic: str, partition: int, leader_epoch: int,
                   isr: tuple[int, ...], version: int) -> IsrUpdate:
        """A leader's ISR change, written only if the state is still at ``version``
        and ``leader_epoch`` (Kafka's conditional partition state update)."""
        raise NotImplementedError("one broker: every partition's ISR is that broker")

    def update_isrs(self, changes: Sequence[IsrChange]
                    ) -> list[IsrUpdate | MetadataUnavailableError]:
        """``update_isr`` for each of ``changes``: per change its outcome, or
        MetadataUnavailableError when the store could not tell (write again).
        A store that can do better than one write at a time does."""
        out: list[IsrUpdate | MetadataUnavailableError] = []
        for c in changes:
            try:
                out.append(self.update_isr(c.topic, c.partition, c.leader_epoch, c.isr,
                                           c.version))
            except MetadataUnavailableError as e:
                out.append(e)
        return out

    @abc.abstractmethod
    def create_topic(self, name: str, num_partitions: int, configs: Mapping[str, str | None],
                     is_internal: bool = False,
                     assignment: dict[int, list[int]] | None = None,
                     replication_factor: int = 1) -> TopicMeta:
        """``assignment`` (partition -> replica broker ids, already checked)
        places the partitions; without it the store places them, with
        ``replication_factor`` replicas each."""

    @abc.abstractmethod
    def delete_topic(self, name: str) -> TopicMeta: ...

    @abc.abstractmethod
    def set_partition_count(self, name: str, count: int,
                            assignment: dict[int, list[int]] | None = None) -> TopicMeta:
        """``assignment`` places the new partitions only."""

    @abc.abstractmethod
    def set_topic_configs(self, name: str, configs: Mapping[str, str | None]) -> TopicMeta: ...

    @abc.abstractmethod
    def broker_configs(self, broker: int | None) -> dict[str, str]:
        """Dynamic broker configs of ``broker``; None: the cluster-wide defaults."""

    @abc.abstractmethod
    def set_broker_configs(self, broker: int | None, configs: dict[str, str]) -> None:
        """Replace the dynamic configs of ``broker`` (None: the cluster defaults)."""

    # ------------------------------------------ users, clients, ips (Kafka's
    # "entity configs": quotas and SCRAM credentials live there). An entity
    # path is what Kafka writes in a change notice, with each name sanitized
    # (zk_layout.sanitize_entity_name): "users/alice", "clients/app",
    # "users/alice/clients/app", "users/<default>", "ips/10.0.0.1".

    @abc.abstractmethod
    def entity_configs(self, entity_path: str) -> dict[str, str]:
        """The configs of one entity ({} when it has none)."""

    @abc.abstractmethod
    def set_entity_configs(self, entity_path: str, configs: dict[str, str]) -> None:
        """Replace an entity's configs (an empty dict removes them) and tell
        every broker, ``on_entity_config_change`` listeners included."""

    @abc.abstractmethod
    def entity_config_paths(self, entity_type: str) -> list[str]:
        """Every entity path under ``entity_type`` ("users", "clients", "ips")
        that has configs, user/client pairs under "users" included."""

    @abc.abstractmethod
    def on_entity_config_change(self, listener: Callable[[str, dict[str, str]], None]) -> None:
        """``listener(entity_path, configs)`` after an entity's configs changed,
        here or on another broker, with the configs as they are now (read once
        for every listener: ZooKeeper: on its event thread; keep it short)."""

    @abc.abstractmethod
    def allocate_producer_id(self) -> int:
        """A producer id never handed out before, also across restarts."""

    def close(self) -> None:
        pass
