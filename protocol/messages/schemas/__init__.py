"""Kafka message schemas kafka-python does not ship: ZooKeeper-era APIs Kafka 4
dropped, and KIP-932 share groups (ShareGroupHeartbeat, ShareGroupDescribe,
ShareFetch, ShareAcknowledge at v1, the stable version Kafka 4.1+ clients use;
DescribeShareGroupOffsets v0-1), written from the field lists of Kafka 4.x
clients' common/message schemas."""
