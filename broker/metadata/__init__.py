from .store import (BrokerEndpoint, MetadataStore, MetadataUnavailableError, PartitionMeta,
                    TopicExistsError, TopicMeta, UnknownTopicError, kafka_id, new_cluster_id)
from .embedded import EmbeddedMetadataStore

__all__ = ["BrokerEndpoint", "MetadataStore", "MetadataUnavailableError", "PartitionMeta", "TopicExistsError", "TopicMeta",
           "UnknownTopicError", "kafka_id", "new_cluster_id", "EmbeddedMetadataStore"]
