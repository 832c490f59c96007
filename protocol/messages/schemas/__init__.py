"""Kafka message schemas that kafka-python does not ship (ZooKeeper-era APIs, and
the KIP-848 consumer-group APIs), written from the facts of Kafka's schema files."""
