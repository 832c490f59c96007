"""The embedded metadata store: one broker, one JSON file in the first log dir.

Every change is written to a temporary file, fsynced and renamed over the old
one, so a crash leaves either the old or the new state, never a torn file.
Producer ids are handed out from blocks whose end is persisted before the first
id of the block is used: after a crash the next block starts past anything that
may have been handed out, so ids are never reused.
"""
from __future__ import annotations

import json
import os
import threading
import uuid
from typing import Callable

from .store import (BrokerEndpoint, MetadataStore, PartitionMeta, TopicExistsError,
                    TopicMeta, UnknownTopicError, new_cluster_id)
from .zk_layout import entity_config_path

FILE_NAME = "samsa-metadata.json"
DEFAULT_BROKER_ENTITY = "<default>"  # the cluster-wide defaults, named as in ZooKeeper


def _entity(broker: int | None) -> str:
    return DEFAULT_BROKER_ENTITY if broker is None else str(broker)
PRODUCER_ID_BLOCK = 1000


class EmbeddedMetadataStore(MetadataStore):
    def __init__(self, log_dir: str, broker_id: int, endpoint: BrokerEndpoint):
        self.path = os.path.join(log_dir, FILE_NAME)
        self.broker_id = broker_id
        self._endpoint = endpoint
        self._brokers = [endpoint]
        me = (broker_id,)
        self._self_led = PartitionMeta(me, broker_id, 0, me)
        self._lock = threading.Lock()
        os.makedirs(log_dir, exist_ok=True)
        state = self._read()
        self.cluster_id = state.get("cluster_id") or new_cluster_id()
        self._topics = {
            name: TopicMeta(name, uuid.UUID(t["topic_id"]), int(t["partitions"]),
                            dict(t.get("configs", {})), bool(t.get("internal", False)))
            for name, t in state.get("topics", {}).items()
        }
        # Resume past the persisted block end: ids below it may have been used.
        self._broker_configs: dict[str, dict[str, str]] = {
            k: dict(v) for k, v in state.get("broker_configs", {}).items()}
        # Users', clients' and ips' configs by entity path, as in ZooKeeper.
        self._entity_configs: dict[str, dict[str, str]] = {
            k: dict(v) for k, v in state.get("entity_configs", {}).items()}
        self._entity_config_listeners: list[Callable[[str, dict[str, str]], None]] = []
        # ACLs by their ZooKeeper path, each Kafka's ACL JSON (acl_store.py).
        self._acls: dict[str, str] = dict(state.get("acls", {}))
        self._next_producer_id = int(state.get("producer_id_block_end", 0))
        self._producer_id_block_end = self._next_producer_id
        self._write()

    def _read(self) -> dict:
        try:
            with open(self.path, encoding="utf-8") as f:
                return json.load(f)
        except FileNotFoundError:
            return {}

    def _write(self) -> None:
        state = {
            "version": 1,
            "cluster_id": self.cluster_id,
            "topics": {
                m.name: {"topic_id": str(m.topic_id), "partitions": m.num_partitions,
                         "configs": m.configs, "internal": m.is_internal}
                for m in self._topics.values()
            },
            "producer_id_block_end": self._producer_id_block_end,
            "broker_configs": self._broker_configs,
            "entity_configs": self._entity_configs,
            "acls": self._acls,
        }
        tmp = self.path + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(state, f, indent=1, sort_keys=True)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except OSError as e:  # a full disk: say which file (write() errors name none)
            raise OSError(e.errno, e.strerror, self.path) from None
        dir_fd = os.open(os.path.dirname(self.path) or ".", os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    @property
    def controller_id(self) -> int:
        return self.broker_id

    def brokers(self) -> list[BrokerEndpoint]:
        return self._brokers  # (one list: Metadata keeps answers built from it)

    def topics(self) -> dict[str, TopicMeta]:
        return self._topics  # replaced, never mutated in place: safe to read unlocked

    def snapshot_token(self) -> tuple[object, ...]:
        # one broker (fixed), leading every partition at epoch 0: the topics'
        # partition counts are all that changes, and _topics is replaced on a change
        return (self._topics,)

    def topic_token(self, topic: str) -> tuple[object, ...]:
        return (self._topics.get(topic),)  # (TopicMeta: replaced on a change)

    def partitions(self, topic: str) -> dict[int, PartitionMeta]:
        """One broker leads every partition it has, at epoch 0."""
        meta = self._topics.get(topic)
        if meta is None:
            return {}
        return dict.fromkeys(range(meta.num_partitions), self._self_led)

    def partition(self, topic: str, partition: int) -> PartitionMeta | None:
        meta = self._topics.get(topic)
        if meta is None or not 0 <= partition < meta.num_partitions:
            return None
        return self._self_led

    def create_topic(self, name, num_partitions, configs, is_internal=False,
                     assignment=None, replication_factor=1) -> TopicMeta:
        # one broker: an explicit assignment can only name it, and the replication
        # factor can only be 1 (both checked by the caller)
        with self._lock:
            if name in self._topics:
                raise TopicExistsError(name)
            meta = TopicMeta(name, uuid.uuid4(), num_partitions, dict(configs), is_internal)
            self._topics = {**self._topics, name: meta}
            self._write()
            return meta

    def delete_topic(self, name) -> TopicMeta:
        with self._lock:
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicError(name)
            self._topics = {k: v for k, v in self._topics.items() if k != name}
            self._write()
            return meta

    def _update(self, name, **changes) -> TopicMeta:
        with self._lock:
            meta = self._topics.get(name)
            if meta is None:
                raise UnknownTopicError(name)
            meta = TopicMeta(**{**meta.__dict__, **changes})
            self._topics = {**self._topics, name: meta}
            self._write()
            return meta

    def set_partition_count(self, name, count, assignment=None) -> TopicMeta:
        return self._update(name, num_partitions=count)

    def set_topic_configs(self, name, configs) -> TopicMeta:
        return self._update(name, configs=dict(configs))

    def broker_configs(self, broker: int | None) -> dict[str, str]:
        return dict(self._broker_configs.get(_entity(broker), {}))

    def set_broker_configs(self, broker: int | None, configs: dict[str, str]) -> None:
        with self._lock:
            self._broker_configs = {**self._broker_configs, _entity(broker): dict(configs)}
            self._write()

    def entity_configs(self, entity_path: str) -> dict[str, str]:
        entity_config_path(entity_path)  # the same paths as in ZooKeeper, or ValueError
        return dict(self._entity_configs.get(entity_path, {}))

    def set_entity_configs(self, entity_path: str, configs: dict[str, str]) -> None:
        entity_config_path(entity_path)
        with self._lock:
            entities = dict(self._entity_configs)
            if configs:
                entities[entity_path] = dict(configs)
            else:
                entities.pop(entity_path, None)
            self._entity_configs = entities
            self._write()
        for listener in list(self._entity_config_listeners):
            listener(entity_path, dict(configs))

    def entity_config_paths(self, entity_type: str) -> list[str]:
        return sorted(p for p, c in self._entity_configs.items()
                      if p.split("/", 1)[0] == entity_type and c)

    def on_entity_config_change(self, listener: Callable[[str, dict[str, str]], None]) -> None:
        self._entity_config_listeners.append(listener)

    def stored_acls(self) -> dict[str, str]:
        """Every resource's ACL JSON by its ZooKeeper path (acl_store.py)."""
        return dict(self._acls)

    def set_stored_acls(self, path: str, acl_json: str | None) -> None:
        """Replace one resource's ACLs (None removes them), durably."""
        with self._lock:
            acls = dict(self._acls)
            if acl_json is None:
                acls.pop(path, None)
            else:
                acls[path] = acl_json
            self._acls = acls
            self._write()

    def allocate_producer_id(self) -> int:
        with self._lock:
            if self._next_producer_id >= self._producer_id_block_end:
                self._producer_id_block_end = self._next_producer_id + PRODUCER_ID_BLOCK
                self._write()
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid
