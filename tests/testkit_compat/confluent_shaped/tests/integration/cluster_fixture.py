"""Cluster fixtures in the shape of confluent-kafka-python's: one started by trivup,
or one already running that ``bootstrap.servers`` names (bring your own)."""
import uuid

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic


class ClusterFixture:
    def client_conf(self, conf=None):
        raise NotImplementedError

    def cimpl_producer(self, conf=None):
        return Producer(self.client_conf(conf))

    def cimpl_consumer(self, conf=None):
        full = self.client_conf({"group.id": str(uuid.uuid1()), "auto.offset.reset": "earliest"})
        full.update(conf or {})
        return Consumer(full)

    def create_topic(self, prefix, conf=None):
        name = prefix + str(uuid.uuid1())
        topic = {"num_partitions": 1, "replication_factor": -1, **(conf or {})}  # the broker's default
        admin = AdminClient(self.client_conf())  # kept until the answer: its futures die with it
        admin.create_topics([NewTopic(name, **topic)])[name].result()
        return name


class TrivupFixture(ClusterFixture):
    def __init__(self, conf):
        # the suite imports trivup at load; here only when a cluster is to be started
        from trivup.clusters.KafkaCluster import KafkaCluster
        self._cluster = KafkaCluster(**conf)

    def stop(self):
        self._cluster.stop(cleanup=True)


class ByoFixture(ClusterFixture):
    def __init__(self, conf):
        if not conf.get("bootstrap.servers"):
            raise ValueError("'bootstrap.servers' must be set")
        self._conf = dict(conf)

    def client_conf(self, conf=None):
        return {**self._conf, **(conf or {})}

    def stop(self):
        pass
