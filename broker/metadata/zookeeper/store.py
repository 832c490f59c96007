"""The ZooKeeper metadata store: Kafka's own znode layout, through kazoo.

Several brokers share one ZooKeeper ensemble, and so does any tool written
against Kafka's ZooKeeper layout (see zk_layout.py for the znodes and JSON).
This store is the broker's view of that shared state, composed of parts:

- ``session.py``: at start it connects (``zookeeper.connect`` with an
  optional chroot, which is created when missing), creates Kafka's
  persistent paths, reads or creates ``/cluster/id`` and registers the
  broker under the ephemeral ``/brokers/ids/<id>``; an id already registered
  by a live broker refuses to start, naming the id; a session that expires
  registers again; until the broker registers, ZooKeeper is waited out;
- ``cache.py``: an immutable snapshot of the brokers, topics and partition
  states, replaced from ZooKeeper watches;
- ``change_notices.py``: the config change notices every broker follows;
- ``admin.py``: topic and config writes, and leaders' ISR changes;
- ``producer_ids.py``: producer-id blocks;
- ``writes.py``: the znode reads and writes of the controller and the
  consumer registry (``znodes``), and the controller's epoch-fenced
  transactions, behind typed interfaces.

Partition state and leader election are the controller's
(broker/cluster/controller.py). DeleteTopics through a broker writes Kafka's
marker and waits for the controller to remove the topic's znodes; a marker
written by a ZooKeeper-era tool is carried out by the controller the same way.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Sequence

from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError

from .. import zk_layout as z
from ..store import (BrokerEndpoint, IsrChange, IsrUpdate, MetadataStore, MetadataUnavailableError,
                     PartitionMeta, TopicMeta)
from .admin import AdminWrites
from .cache import WatchCache
from .change_notices import ConfigChangeNotices
from .producer_ids import ProducerIdBlocks
from .session import ZooKeeperSession, ZooKeeperStoreError
from .writes import ZooKeeperWrites


class ZooKeeperMetadataStore(MetadataStore):
    replicates = True

    def __init__(self, connect: str, broker_id: int, endpoint: BrokerEndpoint, *,
                 session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None,
                 clock: Callable[[], float] = time.time, register: bool = True) -> None:
        """register=False: connect and follow the cluster, but register the broker
        only when register() is called (a broker does once it can serve: Kafka
        registers after its logs are loaded, or the controller would send clients
        to a broker still recovering)."""
        self.broker_id = broker_id
        self._session = ZooKeeperSession(connect, broker_id, endpoint,
                                         session_timeout_ms=session_timeout_ms,
                                         connection_timeout_ms=connection_timeout_ms,
                                         clock=clock)
        self.zk = self._session.zk
        writing = threading.Lock()  # serializes this store's own writes
        self._cache = WatchCache(self._session, endpoint)
        # What the controller and the consumer registry use, over this session;
        # the partition states the controller writes go to this broker's
        # snapshot as they are committed, and its watch does not read them back.
        self.znodes = ZooKeeperWrites(self.zk, written=self._cache.states_written,
                                      writing=self._cache.states_writing)
        self._admin = AdminWrites(self._session, self._cache, writing)
        self._notices = ConfigChangeNotices(self._session, self._cache,
                                            self._admin.entity_configs)
        self._producer_ids = ProducerIdBlocks(self.zk, broker_id, writing)
        try:
            self.cluster_id = self._session.prepare()
            if register:
                self._session.register_at_start()
                self.zk.patient = False
            self._session.follow()
            self._cache.start()
            self._notices.start()
        except (KazooException, KazooTimeoutError) as e:
            self.close()
            raise ZooKeeperStoreError(f"ZooKeeper at {connect} failed while this broker was "
                                      f"starting ({type(e).__name__}); is it overloaded or "
                                      f"is zookeeper.session.timeout.ms too short?") from None
        except BaseException:
            self.close()
            raise

    def register(self) -> None:
        """Announce this broker in /brokers/ids (see __init__'s register); from
        here on a ZooKeeper error fails the call that met it instead of
        waiting."""
        self._session.register()

    @property
    def broker_epoch(self) -> int:
        return self._session.broker_epoch

    def close(self) -> None:
        self._session.close()

    # ------------------------------------------------------------ reads (the snapshot)

    @property
    def controller_id(self) -> int:
        return self._cache.controller_id

    def brokers(self) -> list[BrokerEndpoint]:
        return self._cache.brokers()

    def topics(self) -> dict[str, TopicMeta]:
        return self._cache.topics()

    def snapshot_token(self) -> tuple[object, ...]:
        return self._cache.snapshot_token()

    def topic_token(self, topic: str) -> tuple[object, ...]:
        return self._cache.topic_token(topic)

    def partitions(self, topic: str) -> dict[int, PartitionMeta]:
        return self._cache.partitions(topic)

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        return self._cache.partition(topic, partition)

    def partition_version(self, topic: str, partition: int) -> int:
        return self._cache.partition_version(topic, partition)

    def partition_states(self) -> dict[tuple[str, int], z.PartitionState]:
        """Every partition's leader, leader epoch and ISR as last written."""
        return self._cache.partition_states()

    def on_partition_state(self, listener: Callable[[str, int, z.PartitionState | None],
                                                    None]) -> None:
        """``listener(topic, partition, state)`` on every change (None: gone),
        called on ZooKeeper's event thread: keep it short."""
        self._cache.on_partition_state(listener)

    def on_session_fence(self, fence: Callable[[], None], resume: Callable[[], None]) -> None:
        """``fence()`` once this broker's session is presumed expired (cut off from
        ZooKeeper past the session timeout): stop acting as leader; ``resume()``
        when connected again (session_fence.py)."""
        self._session.on_fence(fence, resume)

    def on_topic_change(self, listener: Callable[[str], None]) -> None:
        """``listener(topic)`` after a topic's assignment or config changed, or
        it was deleted; called on ZooKeeper's event thread: keep it short."""
        self._cache.on_topic_change(listener)

    # ------------------------------------------------------------ writes

    def create_topic(self, name, num_partitions, configs, is_internal=False,
                     assignment=None, replication_factor=1) -> TopicMeta:
        return self._admin.create_topic(name, num_partitions, configs, is_internal,
                                        assignment, replication_factor)

    def delete_topic(self, name, timeout: float = 30.0) -> TopicMeta:
        return self._admin.delete_topic(name, timeout)

    def set_partition_count(self, name, count, assignment=None) -> TopicMeta:
        return self._admin.set_partition_count(name, count, assignment)

    def update_isr(self, topic: str, partition: int, leader_epoch: int,
                   isr: tuple[int, ...], version: int) -> IsrUpdate:
        return self._admin.update_isr(topic, partition, leader_epoch, isr, version)

    def update_isrs(self, changes: Sequence[IsrChange]
                    ) -> list[IsrUpdate | MetadataUnavailableError]:
        return self._admin.update_isrs(changes)

    def allocate_producer_id(self) -> int:
        return self._producer_ids.allocate_producer_id()

    # ------------------------------------------------------------ dynamic configs

    def set_topic_configs(self, name, configs) -> TopicMeta:
        return self._admin.set_topic_configs(name, configs)

    def broker_configs(self, broker: int | None) -> dict[str, str]:
        return self._admin.broker_configs(broker)

    def set_broker_configs(self, broker: int | None, configs: dict[str, str]) -> None:
        self._admin.set_broker_configs(broker, configs)

    def entity_configs(self, entity_path: str) -> dict[str, str]:
        return self._admin.entity_configs(entity_path)

    def set_entity_configs(self, entity_path: str, configs: dict[str, str]) -> None:
        self._admin.set_entity_configs(entity_path, configs)

    def entity_config_paths(self, entity_type: str) -> list[str]:
        return self._admin.entity_config_paths(entity_type)

    def on_entity_config_change(self, listener: Callable[[str, dict[str, str]], None]) -> None:
        self._notices.on_entity_config_change(listener)

    def on_broker_config_change(self, listener: Callable[[], None]) -> None:
        """``listener()`` when a broker's or the cluster's dynamic configs were
        changed (a change notice under /config/changes, as Kafka's brokers follow)."""
        self._notices.on_broker_config_change(listener)
