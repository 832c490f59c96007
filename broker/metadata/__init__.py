from .store import (INTERNAL_TOPICS, BrokerEndpoint, ListenerEndpoint, brokers_on_listener, IsrChange, IsrUpdate, MetadataStore, MetadataUnavailableError,
                    PartitionMeta, TopicExistsError, TopicMeta, UnknownTopicError, kafka_id,
                    new_cluster_id)
from .embedded import EmbeddedMetadataStore

__all__ = ["INTERNAL_TOPICS", "BrokerEndpoint", "ListenerEndpoint", "brokers_on_listener", "IsrChange", "IsrUpdate", "MetadataStore", "MetadataUnavailableError",
           "PartitionMeta", "TopicExistsError", "TopicMeta", "UnknownTopicError", "kafka_id",
           "new_cluster_id", "EmbeddedMetadataStore"]
