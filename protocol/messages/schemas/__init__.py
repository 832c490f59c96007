"""Kafka message schemas that kafka-python no longer ships (ZooKeeper-era APIs)."""
