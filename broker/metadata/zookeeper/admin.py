"""The ZooKeeper store's writes: topics (create, delete, grow), dynamic
configs (topics, brokers, users/clients/IPs) and a leader's ISR changes.

They go straight to ZooKeeper in the order Kafka's admin client writes them
(topic config before the topic, then a change notice), with conditional
updates on znode versions where two writers could race (partition counts,
ISRs). A caller reads its own write at once: the topic is read back into the
snapshot (WatchCache.reload_topic) rather than waiting for the watch.

DeleteTopics writes Kafka's marker and waits for the controller to remove
the topic's znodes (broker/cluster/controller.py), so it answers once the
topic is gone.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid

from typing import Sequence

from kazoo.exceptions import (BadVersionError, KazooException, NodeExistsError, NoNodeError,
                              RolledBackError, RuntimeInconsistency)
from kazoo.handlers.threading import KazooTimeoutError

from ...cluster.assignment import assign_replicas
from .. import zk_layout as z
from ..store import (IsrChange, IsrUpdate, MetadataUnavailableError, TopicExistsError, TopicMeta,
                     UnknownTopicError, kafka_id)
from .cache import WatchCache
from .change_notices import write_change_notice
from .multi_read import read_many
from .session import ZooKeeperSession, retriable_on_zookeeper_errors

log = logging.getLogger("broker.metadata.zookeeper")

# Partitions named in one ISR change notification (about 50 bytes each: well
# under ZooKeeper's 1 MB znode limit).
ISR_CHANGES_PER_NOTIFICATION = 1000
# A leader's ISR writes go in multis of this many conditional writes: 20,000
# single writes in flight took ZooKeeper 6.25 s on a busy 3-broker cluster,
# as multis of 100 0.60 s (followers rejoining after a restart at 30,000
# partitions are that many ISR changes).
ISR_WRITES_PER_MULTI = 100


class AdminWrites:
    def __init__(self, session: ZooKeeperSession, cache: WatchCache,
                 lock: threading.Lock) -> None:
        self.broker_id = session.broker_id
        self.zk = session.zk
        self._cache = cache
        self._lock = lock  # serializes our own writes
        # topic znodes decoded for ISR joins, by path: (the mzxid read, the assignment);
        # decoded again only once the znode has changed (a 1,000-partition topic's
        # znode costs ~6 ms to decode, and followers rejoining after a restart make
        # batches of joins touching every topic)
        self._assignments_read: dict[str, tuple[int, z.TopicAssignment]] = {}

    # ------------------------------------------------------------ topics

    def _assign(self, first_partition: int, count: int,
                replication_factor: int) -> dict[int, list[int]]:
        """Kafka's placement over the live brokers (rack-aware when they all have
        a rack)."""
        brokers = self._cache.brokers()
        ids = [b.node_id for b in brokers] or [self.broker_id]
        return assign_replicas(ids, count, replication_factor,
                               racks={b.node_id: b.rack for b in brokers},
                               first_partition=first_partition)

    @retriable_on_zookeeper_errors
    def create_topic(self, name, num_partitions, configs, is_internal=False,
                     assignment=None, replication_factor=1) -> TopicMeta:
        with self._lock:
            if self.zk.exists(z.topic_path(name)):
                raise TopicExistsError(name)
            topic_id = uuid.uuid4()
            # Config first, then the topic: whoever sees the topic sees its config.
            self.zk.ensure_path(z.CONFIG_TOPICS)
            try:
                self.zk.create(z.topic_config_path(name), z.encode_config(configs))
            except NodeExistsError:
                self.zk.set(z.topic_config_path(name), z.encode_config(configs))
            placed = z.TopicAssignment(assignment or self._assign(0, num_partitions,
                                                                  replication_factor),
                                       kafka_id(topic_id))
            try:
                self.zk.create(z.topic_path(name), z.encode_topic(placed))
            except NodeExistsError:
                raise TopicExistsError(name) from None
            return self._cache.reload_topic(name) or TopicMeta(
                name, topic_id, num_partitions, dict(configs), is_internal)

    @retriable_on_zookeeper_errors
    def delete_topic(self, name, timeout: float = 30.0) -> TopicMeta:
        """Kafka's deletion: mark the topic under /admin/delete_topics and let the
        controller delete it (it alone writes partition states, so nothing
        re-creates what it deletes); answered once the marker is gone, which
        the controller removes last, after the topic's and its config's znodes
        (answered when the topic's znode went, a topic re-created at once could
        have its new config deleted by the rest of the old deletion, and the
        marker was still there)."""
        with self._lock:
            meta = self._cache.reload_topic(name)
            if meta is None:
                raise UnknownTopicError(name)
            try:
                self.zk.create(z.delete_topic_path(name), makepath=True)
            except NodeExistsError:
                pass  # already marked: wait for the same deletion
        deadline = time.monotonic() + timeout
        while True:
            gone = threading.Event()
            if not self.zk.exists(z.delete_topic_path(name), watch=lambda _event: gone.set()):
                break
            if not gone.wait(max(0.0, deadline - time.monotonic())):
                raise MetadataUnavailableError(
                    f"topic {name} is marked for deletion, but no controller deleted it "
                    f"within {timeout:g} s")
        self._cache.drop(name)
        return meta

    @retriable_on_zookeeper_errors
    def set_partition_count(self, name, count, assignment=None) -> TopicMeta:
        with self._lock:
            while True:
                try:
                    data, stat = self.zk.get(z.topic_path(name))
                except NoNodeError:
                    raise UnknownTopicError(name) from None
                current = z.decode_topic(name, data)
                have = len(current.partitions)
                partitions = dict(current.partitions)
                # new partitions get as many replicas as the first one has
                rf = len(current.partitions.get(0, ())) or 1
                partitions.update(assignment or self._assign(have, count - have, rf))
                updated = z.TopicAssignment(partitions, current.topic_id,
                                            current.adding_replicas, current.removing_replicas)
                try:
                    self.zk.set(z.topic_path(name), z.encode_topic(updated), version=stat.version)
                    break
                except BadVersionError:
                    continue  # someone else changed it: decide again on what is there now
            return self._reloaded(name)

    def update_isr(self, topic: str, partition: int, leader_epoch: int,
                   isr: tuple[int, ...], version: int) -> IsrUpdate:
        """A leader's ISR change: ``update_isrs`` for one partition."""
        result = self.update_isrs([IsrChange(topic, partition, leader_epoch, isr, version)])[0]
        if isinstance(result, MetadataUnavailableError):
            raise result
        return result

    def update_isrs(self, changes: Sequence[IsrChange]
                    ) -> list[IsrUpdate | MetadataUnavailableError]:
        """``update_isr`` for many partitions in a few requests: the states read
        together (a multiRead), the conditional writes pipelined, and one
        change notification naming every partition written (Kafka's leaders
        batch theirs too). Followers rejoining after a broker's restart at
        30,000 partitions made as many ISR changes, each three round trips
        one after another and a notification of its own for the controller."""
        out: list[IsrUpdate | MetadataUnavailableError | None] = [None] * len(changes)
        try:
            paths = [z.partition_state_path(c.topic, c.partition) for c in changes]
            writes: list[tuple[int, z.PartitionState, object]] = []
            joining: list[tuple[int, z.PartitionState, int]] = []
            for i, (c, found) in enumerate(zip(changes, read_many(self.zk, paths))):
                if found is None:
                    out[i] = MetadataUnavailableError(f"{paths[i]} does not exist")
                    continue
                try:
                    current = z.decode_partition_state(c.topic, c.partition, found[0])
                except z.ZNodeFormatError as e:   # this partition's alone, not the batch's
                    out[i] = MetadataUnavailableError(str(e))
                    continue
                if (found[1].version != c.version or current.leader != self.broker_id
                        or current.leader_epoch != c.leader_epoch):
                    out[i] = IsrUpdate(False, current.leader, current.leader_epoch, current.isr,
                                       found[1].version)
                    continue
                if set(c.isr) - set(current.isr):
                    joining.append((i, current, found[1].version))
                    continue
                new = z.PartitionState(current.leader, c.leader_epoch, tuple(c.isr),
                                       current.controller_epoch)
                writes.append((i, new, z.encode_partition_state(new)))
            for i, current, version in self._joining_replicas(changes, joining, out):
                c = changes[i]
                new = z.PartitionState(current.leader, c.leader_epoch, tuple(c.isr),
                                       current.controller_epoch)
                writes.append((i, new, z.encode_partition_state(new)))
            conflicts: list[int] = []
            written: list[tuple[str, int]] = []

            def took(i: int, new: z.PartitionState, result: object) -> bool:
                """One write's outcome noted; False: rolled back with its multi."""
                # (a refused multi answers RolledBackError for the writes
                # before the refused one, RuntimeInconsistency after it)
                if isinstance(result, (RolledBackError, RuntimeInconsistency)):
                    return False
                if isinstance(result, BadVersionError):
                    conflicts.append(i)
                elif isinstance(result, NoNodeError):  # the topic deleted meanwhile
                    out[i] = MetadataUnavailableError(f"{paths[i]} does not exist")
                elif isinstance(result, Exception):
                    raise result
                else:
                    out[i] = IsrUpdate(True, new.leader, new.leader_epoch, new.isr,
                                       result.version)  # type: ignore[attr-defined]
                    written.append((changes[i].topic, changes[i].partition))
                return True

            # A multi is all or nothing: one write refused (a conflict, a topic
            # deleted) rolls back the others, which then go again one by one.
            multis = []
            for at in range(0, len(writes), ISR_WRITES_PER_MULTI):
                chunk = writes[at:at + ISR_WRITES_PER_MULTI]
                txn = self.zk.transaction()
                for i, _, data in chunk:
                    txn.set_data(paths[i], data, version=changes[i].version)
                multis.append((chunk, txn.commit_async()))
            again = []
            for chunk, pending in multis:
                for (i, new, data), result in zip(chunk, pending.get()):
                    if not took(i, new, result):
                        again.append((i, new, self.zk.set_async(paths[i], data,
                                                                version=changes[i].version)))
            for i, new, single in again:
                try:
                    outcome: object = single.get()
                except (BadVersionError, NoNodeError) as e:
                    outcome = e
                took(i, new, outcome)
            for i, found in zip(conflicts, read_many(self.zk, [paths[i] for i in conflicts])):
                if found is None:
                    out[i] = MetadataUnavailableError(f"{paths[i]} does not exist")
                    continue
                try:
                    current = z.decode_partition_state(changes[i].topic, changes[i].partition,
                                                       found[0])
                except z.ZNodeFormatError as e:
                    out[i] = MetadataUnavailableError(str(e))
                    continue
                out[i] = IsrUpdate(False, current.leader, current.leader_epoch, current.isr,
                                   found[1].version)
            for at in range(0, len(written), ISR_CHANGES_PER_NOTIFICATION):
                self.zk.create(z.ISR_CHANGE_PREFIX, z.encode_isr_change(
                    written[at:at + ISR_CHANGES_PER_NOTIFICATION]), sequence=True, makepath=True)
        except (KazooException, KazooTimeoutError) as e:
            # Outcomes not known yet stay unknown: written again, a landed one
            # then reads as the state at our epoch (ReplicaManager._isr_outcome).
            unknown = MetadataUnavailableError(
                f"ZooKeeper is not reachable ({type(e).__name__}); try again")
            out = [unknown if o is None or (isinstance(o, IsrUpdate) and o.written) else o
                   for o in out]
        return [o if o is not None else MetadataUnavailableError("not written")
                for o in out]

    def _joining_replicas(self, changes: Sequence[IsrChange],
                          joining: list[tuple[int, z.PartitionState, int]],
                          out: list[IsrUpdate | MetadataUnavailableError | None]
                          ) -> list[tuple[int, z.PartitionState, int]]:
        """The ISR expansions whose new members are replicas of the partition
        now; the others are refused with the state as it is (``out``).

        The leader knows its replica list from the topic znode, read apart from
        the state znode: at a reassignment's end (both written in one multi) it
        may read the new leader epoch before the shorter replica list, and let a
        removed replica, still fetching, back into the ISR after the controller
        had taken it out (Kafka's leaders learn both from one LeaderAndIsr).
        Reading the topic znodes after the states holds: a replica list newer
        than the state read is refused here, and a state newer than our read
        fails the conditional write."""
        if not joining:
            return []
        topics = sorted({changes[i].topic for i, _, _ in joining})
        replicas: dict[str, z.TopicAssignment | MetadataUnavailableError] = {}
        for topic, found in zip(topics, read_many(self.zk, [z.topic_path(t) for t in topics])):
            path = z.topic_path(topic)
            if found is None:
                self._assignments_read.pop(path, None)
                replicas[topic] = MetadataUnavailableError(f"{path} does not exist")
                continue
            kept = self._assignments_read.get(path)
            if kept is not None and kept[0] == found[1].mzxid:
                replicas[topic] = kept[1]
                continue
            try:
                decoded = z.decode_topic(topic, found[0])
            except z.ZNodeFormatError as e:
                replicas[topic] = MetadataUnavailableError(str(e))
                continue
            self._assignments_read[path] = (found[1].mzxid, decoded)
            replicas[topic] = decoded
        allowed = []
        for i, current, version in joining:
            c = changes[i]
            assignment = replicas[c.topic]
            if isinstance(assignment, MetadataUnavailableError):
                out[i] = assignment
            elif set(c.isr) <= set(assignment.partitions.get(c.partition, ())):
                allowed.append((i, current, version))
            else:
                assigned = assignment.partitions.get(c.partition, ())
                out[i] = IsrUpdate(False, current.leader, current.leader_epoch, current.isr,
                                   version, tuple(r for r in c.isr if r not in assigned))
        return allowed

    # ------------------------------------------------------------ dynamic configs

    @retriable_on_zookeeper_errors
    def set_topic_configs(self, name, configs) -> TopicMeta:
        with self._lock:
            if not self.zk.exists(z.topic_path(name)):
                raise UnknownTopicError(name)
            try:
                self.zk.set(z.topic_config_path(name), z.encode_config(configs))
            except NoNodeError:
                self.zk.create(z.topic_config_path(name), z.encode_config(configs))
            write_change_notice(self.zk, f"topics/{name}")
            return self._reloaded(name)

    def _reloaded(self, name: str) -> TopicMeta:
        """The topic as just written, read back into the cache; a topic deleted since
        (the cache has None) is unknown, as it is to the write's first read."""
        meta = self._cache.reload_topic(name)
        if meta is None:
            raise UnknownTopicError(name)
        return meta

    def broker_configs(self, broker: int | None) -> dict[str, str]:
        return self._read_config(z.broker_config_path(broker))

    @retriable_on_zookeeper_errors
    def set_broker_configs(self, broker: int | None, configs: dict[str, str]) -> None:
        entity = z.DEFAULT_BROKER_CONFIG if broker is None else str(broker)
        self._write_config(z.broker_config_path(broker), configs, f"brokers/{entity}")

    def entity_configs(self, entity_path: str) -> dict[str, str]:
        return self._read_config(z.entity_config_path(entity_path))

    @retriable_on_zookeeper_errors
    def set_entity_configs(self, entity_path: str, configs: dict[str, str]) -> None:
        # Kafka keeps the znode with an empty config (a user's node may
        # have a child per client id), so do we.
        self._write_config(z.entity_config_path(entity_path), configs, entity_path)

    def _read_config(self, path: str) -> dict[str, str]:
        try:
            return z.decode_config(path, self.zk.get(path)[0])
        except NoNodeError:
            return {}

    def _write_config(self, path: str, configs: dict[str, str], entity: str) -> None:
        """A broker's or an entity's configs, then the change notice naming it."""
        with self._lock:
            try:
                self.zk.set(path, z.encode_config(configs))
            except NoNodeError:
                self.zk.create(path, z.encode_config(configs), makepath=True)
            write_change_notice(self.zk, entity)

    @retriable_on_zookeeper_errors
    def entity_config_paths(self, entity_type: str) -> list[str]:
        out = []

        def if_configured(entity: str) -> None:
            try:
                if self.entity_configs(entity):
                    out.append(entity)
            except z.ZNodeFormatError as e:
                log.warning("%s", e)
        base = f"/config/{entity_type}"
        try:
            names = sorted(self.zk.get_children(base))
        except NoNodeError:
            return []
        for name in names:
            entity = f"{entity_type}/{name}"
            if_configured(entity)
            if entity_type != "users":
                continue
            try:
                clients = sorted(self.zk.get_children(f"{base}/{name}/clients"))
            except NoNodeError:
                continue
            for client in clients:
                if_configured(f"{entity}/clients/{client}")
        return out
