from .store import (BrokerEndpoint, MetadataStore, TopicExistsError, TopicMeta,
                    UnknownTopicError, kafka_id, new_cluster_id)
from .embedded import EmbeddedMetadataStore

__all__ = ["BrokerEndpoint", "MetadataStore", "TopicExistsError", "TopicMeta",
           "UnknownTopicError", "kafka_id", "new_cluster_id", "EmbeddedMetadataStore"]
