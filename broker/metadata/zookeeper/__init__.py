"""The ZooKeeper metadata store, in parts (store.py says which does what)."""
from .cache import topic_uuid
from .session import BrokerIdInUseError, ZooKeeperStoreError, retriable_on_zookeeper_errors
from .store import ZooKeeperMetadataStore

__all__ = ["BrokerIdInUseError", "ZooKeeperMetadataStore", "ZooKeeperStoreError",
           "retriable_on_zookeeper_errors", "topic_uuid"]
