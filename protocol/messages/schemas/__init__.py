"""Kafka message schemas kafka-python does not ship, written from the field lists of
Kafka 4.x's common/message schemas: ZooKeeper-era APIs Kafka 4 dropped, the KIP-848
consumer-group APIs (ConsumerGroupHeartbeat, ConsumerGroupDescribe), and KIP-932
share groups (ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch, ShareAcknowledge
at v1, the stable version Kafka 4.1+ clients use; DescribeShareGroupOffsets v0-1;
AlterShareGroupOffsets and DeleteShareGroupOffsets v0; the share coordinator's
Initialize/Read/Write/DeleteShareGroupState and ReadShareGroupStateSummary v0,
asked broker to broker)."""
