"""Topics: the one place where cluster metadata and partition logs change together.

Creating a topic writes it to the metadata store and then opens its logs;
deleting does the reverse. Handlers on every processor thread call in here, so
changes are serialized by one lock; reads go to the store's immutable snapshot.

A change a client asked for may be charged to its controller mutation quota:
``charge`` (when given) is called with the partitions the change creates,
deletes or adds once the change has passed validation and just before it is
written, and what it raises stops the change (Kafka records the mutations at
that point too, so refused or invalid requests cost nothing).
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
import weakref
import uuid
from collections.abc import Collection, Iterable, Iterator, Mapping
from typing import Any, Callable

from samsa.config import BrokerConfig, ConfigError
from samsa.config.topic import TopicConfig
from samsa.config.topic_keys import drop_removed_keys
from samsa.protocol.errors import ErrorCode
from samsa.protocol.model import INTERNAL_TOPICS
from samsa.protocol.topic_name import collision_key, topic_name_error
from samsa.storage import Log, LogManager
from samsa.storage.checkpoints import durable_batch
from samsa.storage.gc_pause import gc_paused

from .cluster.assignment import AssignmentError, check_assignment
from .gc_tuning import FREEZE_AFTER_LOGS, keep_for_good
from .metadata import (MetadataStore, MetadataUnavailableError, TopicExistsError, TopicMeta,
                       UnknownTopicError)

log = logging.getLogger("broker.topics")

Charge = Callable[[int], None]  # see the module docstring

# Each partition is a directory with open files: a request for millions of them is
# a mistake or an attack, answered with INVALID_PARTITIONS rather than obeyed.
MAX_PARTITIONS_PER_TOPIC = 10000


class TopicError(Exception):
    """A refused topic operation, carrying the Kafka error code to answer with."""

    def __init__(self, code: ErrorCode, message: str):
        self.code = code
        self.message = message
        super().__init__(message)


def name_error(name: str | None) -> str | None:
    """Kafka's topic-name rules; None when the name is legal."""
    return topic_name_error(name)


@contextlib.contextmanager
def _metadata_write() -> Iterator[None]:
    """A metadata store that cannot be written now (ZooKeeper unreachable)
    answers with a retriable error; a placement the store cannot make is an
    invalid replication factor, as Kafka says."""
    try:
        yield
    except MetadataUnavailableError as e:
        raise TopicError(ErrorCode.REQUEST_TIMED_OUT, str(e)) from None
    except AssignmentError as e:
        raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, str(e)) from None


class TopicService:
    def __init__(self, store: MetadataStore, log_manager: LogManager, broker_config: BrokerConfig,
                 on_log_opened: Callable[[Log], None] | None = None,
                 on_topic_deleted: Callable[[list[tuple[str, int]]], None] | None = None
                 ) -> None:
        self.store = store
        self.logs = log_manager
        self.config = broker_config
        self._lock = threading.RLock()
        # Called once per Log object (e.g. to hook fetch wake-ups onto its appends).
        self._on_log_opened = on_log_opened
        # Called with the partitions of a topic deleted through this broker, once
        # their logs are retired (their roles end: nothing else tells the replica
        # manager on the embedded store, and a role kept held the deleted log).
        self._on_topic_deleted = on_topic_deleted
        self._seen_logs: weakref.WeakSet[Any] = weakref.WeakSet()
        self._opened_since_freeze = 0  # logs opened since their objects were last frozen
        # sync_local_replicas: the topics seen last time (a topic that leaves this
        # set was deleted), and the unknown local topics already warned about.
        self._known_before: set[str] = set(store.topics())
        self._deleted_seen: set[str] = set()
        self._warned_unknown: set[str] = set()

    # -- reading ---------------------------------------------------------
    def topics(self) -> dict[str, TopicMeta]:
        return self.store.topics()

    def get(self, name: str) -> TopicMeta | None:
        return self.store.topic(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicMeta | None:
        return self.store.topic_by_id(topic_id)

    def topic_config(self, meta: TopicMeta) -> TopicConfig:
        return self.config.topic_config(meta.configs)

    # -- start-up --------------------------------------------------------
    def open_all(self) -> None:
        """Make sure every partition of which this broker holds a replica has an open log."""
        for meta in self.store.topics().values():
            self._open_logs(meta, range(meta.num_partitions))

    def _local(self, meta: TopicMeta, partitions: Iterable[int]) -> list[int]:
        """The partitions of ``meta`` whose replica list names this broker (all of
        them on the embedded store; in a cluster, the ones placed here)."""
        me = self.store.broker_id
        placed = self.store.partitions(meta.name)
        return [p for p in partitions if p in placed and me in placed[p].replicas]

    def sync_local_replicas(self, topics: Collection[str] | None = None) -> None:
        """Bring the logs on this broker in line with the cluster's metadata:
        open a log for every partition placed here (a topic created, or grown,
        through another broker), and delete the logs of a topic that was deleted
        or re-created under the same name (its topic id changed). Every topic,
        or only ``topics`` (the ones whose metadata changed).

        A local topic the metadata does not know at all is kept, with a warning:
        it may be a topic deleted while this broker was down, or metadata that
        is incomplete; deleting data on a guess is not worth the risk."""
        with self._lock:
            known = self.store.topics()
            names = list(known) if topics is None else [t for t in topics if t in known]
            local: dict[str, list[Log]] = {}
            for (t, _), lg in self.logs.all_logs().items():
                if topics is None or t in topics:
                    local.setdefault(t, []).append(lg)
            local_topics = set(local)
            for name in names:
                meta = known[name]
                stale = [lg for lg in local.get(name, ())
                         if lg.topic_id is not None and lg.topic_id != meta.topic_id]
                if stale:
                    # Re-created under the same name while this broker was away, or
                    # an id rewritten by a tool: which one cannot be told from here,
                    # so the old data is kept aside, never deleted on a guess.
                    log.error("topic %s has topic id %s in the metadata but %s here: its "
                              "logs here are set aside as *-stray directories", name,
                              meta.topic_id, stale[0].topic_id)
                    self.logs.set_aside_topic(name)
                self._open_logs(meta, range(meta.num_partitions))
            # a config altered through another broker applies here too
            if names:
                self.logs.update_topic_configs({name: self.topic_config(known[name])
                                                for name in names})
            # Deletions first: a topic deleted since the last pass is not in the
            # metadata either, and must not be reported as an unknown one.
            looked_at = self._known_before if topics is None else self._known_before & set(topics)
            for name in looked_at - set(known):
                if name in local_topics:
                    log.info("topic %s was deleted: deleting its logs", name)
                    self.logs.delete_topic(name)
                self._deleted_seen.add(name)
            if topics is None:
                for name in local_topics - set(known) - self._warned_unknown - self._deleted_seen:
                    self._warned_unknown.add(name)
                    log.warning("topic %s has logs here but is not in the cluster's metadata: "
                                "keeping them", name)
                self._known_before = set(known)
            else:
                self._known_before = ((self._known_before - set(topics))
                                      | {t for t in topics if t in known})

    def drop_moved_replicas(self, partitions: Iterable[tuple[str, int]] | None = None
                            ) -> list[tuple[str, int]]:
        """Delete the logs of partitions moved off this broker (a reassignment
        took it out of their replica list), as Kafka's StopReplica with delete
        does. Only where the metadata is unambiguous: the topic is known under
        the same id, and this broker neither holds a replica, nor leads (a
        leader being moved off hands leadership over first), nor is named in
        the ISR (the partition's last in-sync copy is never deleted, whatever
        the replica list says). Run it after the roles are synced, so nothing
        follows or leads these logs any more. Every local log, or only those of
        ``partitions``."""
        dropped = []
        me = self.store.broker_id
        with self._lock:
            known = self.store.topics()
            if partitions is None:
                candidates = list(self.logs.all_logs().items())
            else:
                candidates = [(key, lg) for key in partitions
                              if (lg := self.logs.get_log(*key)) is not None]
            for (topic, p), lg in candidates:
                meta = known.get(topic)
                if meta is None or lg.topic_id != meta.topic_id:
                    continue
                placed = self.store.partition(topic, p)
                if (placed is None or me in placed.replicas or placed.leader == me
                        or me in placed.isr):
                    continue
                log.info("%s-%d was moved off this broker (replicas now %s): deleting its log",
                         topic, p, list(placed.replicas))
                if self.logs.delete_partition(topic, p):
                    dropped.append((topic, p))
        return dropped

    def _open_logs(self, meta: TopicMeta, partitions: Iterable[int]) -> None:
        cfg = self.topic_config(meta)
        # Each new log writes partition.metadata and (led here) a leader-epoch
        # checkpoint: made durable together before this returns (so before a
        # create is answered), not with several fsyncs per partition.
        # (and without the cyclic collector walking the new objects again and
        # again: storage/gc_pause.py)
        opened = 0
        with durable_batch(), gc_paused():
            for p in self._local(meta, partitions):
                log_ = self.logs.create_log(meta.name, p, config=cfg, topic_id=meta.topic_id)
                if log_ not in self._seen_logs:
                    self._seen_logs.add(log_)
                    opened += 1
                    if self._on_log_opened is not None:
                        self._on_log_opened(log_)
        # counted across calls: a cluster broker is handed a topic at a time
        self._opened_since_freeze += opened
        if self._opened_since_freeze >= FREEZE_AFTER_LOGS:
            self._opened_since_freeze = 0
            keep_for_good()

    # -- changing --------------------------------------------------------
    def validate_new(self, name: str, num_partitions: int, replication_factor: int,
                     configs: Mapping[str, str | None]) -> None:
        err = name_error(name)
        if err:
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION, err)
        if name in self.store.topics():
            raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        key = collision_key(name)
        for other in self.store.topics():
            if collision_key(other) == key:
                raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                                 f"Topic '{name}' collides with existing topic: {other}")
        if num_partitions < 1:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             "Number of partitions must be larger than 0.")
        if num_partitions > MAX_PARTITIONS_PER_TOPIC:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"Number of partitions {num_partitions} exceeds samsa's limit "
                             f"of {MAX_PARTITIONS_PER_TOPIC} per topic.")
        if replication_factor != 1:
            nodes = len(self.store.brokers())
            if replication_factor < 1 or replication_factor > nodes:
                raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                                 f"Replication factor: {replication_factor} larger than "
                                 f"available brokers: {nodes}." if replication_factor > nodes
                                 else "Replication factor must be larger than 0.")
        try:
            self.config.topic_config(configs)
        except ConfigError as e:
            raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from None

    def _check_assignment(self, assignment: dict[int, list[int]], first_partition: int) -> None:
        """An explicit replica assignment must name live brokers, consistently."""
        try:
            check_assignment(assignment, [b.node_id for b in self.store.brokers()],
                             first_partition)
        except AssignmentError as e:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(e)) from None

    def create(self, name: str, num_partitions: int = -1, replication_factor: int = -1,
               configs: dict[str, str] | None = None, validate_only: bool = False,
               assignment: dict[int, list[int]] | None = None,
               charge: Charge | None = None) -> TopicMeta | None:
        """``assignment`` (partition -> replica broker ids) replaces the
        partition count and replication factor when given."""
        kept = drop_removed_keys(configs or {})
        if assignment is not None:
            self._check_assignment(assignment, 0)
            num_partitions = len(assignment)
            replication_factor = len(assignment[0])
        if num_partitions == -1:
            num_partitions = self.config.num_partitions
        if replication_factor == -1:
            replication_factor = self.config.default_replication_factor
        with self._lock:
            self.validate_new(name, num_partitions, replication_factor, kept)
            if validate_only:
                return None
            if charge is not None:
                charge(num_partitions)
            try:
                with _metadata_write():
                    meta = self.store.create_topic(name, num_partitions, kept,
                                                   is_internal=name in INTERNAL_TOPICS,
                                                   assignment=assignment,
                                                   replication_factor=replication_factor)
            except TopicExistsError:
                raise TopicError(ErrorCode.TOPIC_ALREADY_EXISTS,
                                 f"Topic '{name}' already exists.") from None
            self._open_logs(meta, range(num_partitions))
            log.info("created topic %s with %d partition%s", name, num_partitions,
                     "" if num_partitions == 1 else "s")
            return meta

    def wait_for_leaders(self, name: str, deadline: float) -> bool:
        """Whether every partition of ``name`` has a leader by ``deadline``
        (time.monotonic()); at once on the embedded store."""
        while True:
            placed = self.store.partitions(name)
            if placed and all(p.leader >= 0 for p in placed.values()):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    def get_or_create(self, name: str, charge: Charge | None = None) -> TopicMeta | None:
        """Metadata's and Produce's auto-creation, when the broker allows it."""
        meta = self.store.topic(name)
        if meta is not None or not self.config.auto_create_topics_enable:
            return meta
        try:
            return self.create(name, charge=charge)
        except TopicError as e:
            if e.code == ErrorCode.TOPIC_ALREADY_EXISTS:
                return self.store.topic(name)
            raise

    def delete(self, name: str, charge: Charge | None = None) -> TopicMeta:
        if not self.config.delete_topic_enable:
            raise TopicError(ErrorCode.TOPIC_DELETION_DISABLED,
                             "Topic deletion is disabled.")
        if name in INTERNAL_TOPICS:
            # The group coordinator's commits live there: deleting it would lose them.
            raise TopicError(ErrorCode.INVALID_TOPIC_EXCEPTION,
                             f"Topic {name} is an internal topic and cannot be deleted.")
        with self._lock:
            if charge is not None:
                meta = self.store.topic(name)
                if meta is not None:  # an unknown one is answered below, uncharged
                    charge(meta.num_partitions)
            try:
                with _metadata_write():
                    meta = self.store.delete_topic(name)
            except UnknownTopicError:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 "This server does not host this topic-partition.") from None
            retired = [k for k in self.logs.all_logs() if k[0] == name]
            self.logs.delete_topic(name)
            if self._on_topic_deleted is not None:
                self._on_topic_deleted(retired)
            log.info("deleted topic %s", name)
            return meta

    def add_partitions(self, name: str, count: int, validate_only: bool = False,
                       assignment: list[list[int]] | None = None,
                       charge: Charge | None = None) -> None:
        """``assignment`` gives the replicas of the new partitions only."""
        with self._lock:
            meta = self.store.topic(name)
            if meta is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"The topic '{name}' does not exist.")
            if assignment is not None and count > meta.num_partitions:
                added = count - meta.num_partitions
                if len(assignment) != added:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     f"Increasing the number of partitions by {added} but "
                                     f"{len(assignment)} assignments provided.")
                self._check_assignment(dict(enumerate(assignment, meta.num_partitions)),
                                       meta.num_partitions)
                # New partitions keep the topic's replication factor, as Kafka's
                # AdminZkClient checks it against partition 0's replica list.
                first = self.store.partition(name, 0)
                expected = len(first.replicas) if first is not None else 1
                bad = {p: len(r) for p, r in enumerate(assignment, meta.num_partitions)
                       if len(r) != expected}
                if bad:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                                     "Inconsistent replication factor between partitions, "
                                     f"partition 0 has {expected} while partitions "
                                     f"[{', '.join(map(str, bad))}] have replication factors "
                                     f"[{', '.join(map(str, bad.values()))}], respectively.")
            if count <= meta.num_partitions:
                raise TopicError(ErrorCode.INVALID_PARTITIONS,
                                 f"Topic currently has {meta.num_partitions} partitions, "
                                 f"which is higher than the requested {count}."
                                 if count < meta.num_partitions else
                                 f"Topic already has {count} partitions.")
            if count > MAX_PARTITIONS_PER_TOPIC:
                raise TopicError(ErrorCode.INVALID_PARTITIONS,
                                 f"Number of partitions {count} exceeds samsa's limit "
                                 f"of {MAX_PARTITIONS_PER_TOPIC} per topic.")
            if validate_only:
                return
            old = meta.num_partitions
            if charge is not None:
                charge(count - old)
            with _metadata_write():
                meta = self.store.set_partition_count(
                    name, count,
                    dict(enumerate(assignment, old)) if assignment is not None else None)
            self._open_logs(meta, range(old, count))

    def set_configs(self, name: str, requested: Mapping[str, str | None],
                    validate_only: bool = False) -> None:
        configs = drop_removed_keys(requested)
        with self._lock:
            meta = self.store.topic(name)
            if meta is None:
                raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Topic {name} does not exist")
            try:
                cfg = self.config.topic_config(configs)
            except ConfigError as e:
                raise TopicError(ErrorCode.INVALID_CONFIG, str(e)) from None
            if validate_only:
                return
            with _metadata_write():
                self.store.set_topic_configs(name, configs)
            self.logs.update_topic_config(name, cfg)
