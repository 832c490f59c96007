"""Integration tests in the shape of aiokafka's (tests/test_producer.py, test_consumer.py)."""
import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from ._testutil import KafkaIntegrationTestCase, run_until_complete


class TestProduceConsume(KafkaIntegrationTestCase):
    @run_until_complete
    async def test_send_and_read_back(self):
        producer = AIOKafkaProducer(bootstrap_servers=self.hosts)
        await producer.start()
        try:
            sent = [await producer.send_and_wait(self.topic, f"m{i}".encode(), partition=i % 2)
                    for i in range(4)]
        finally:
            await producer.stop()
        # the topic was created on first use with the image's two partitions
        assert sorted({m.partition for m in sent}) == [0, 1]
        consumer = AIOKafkaConsumer(self.topic, bootstrap_servers=self.hosts,
                                    auto_offset_reset="earliest", group_id=None)
        await consumer.start()
        try:
            got = []
            while len(got) < 4:
                batch = await consumer.getmany(timeout_ms=1000)
                got += [m.value for msgs in batch.values() for m in msgs]
        finally:
            await consumer.stop()
        assert sorted(got) == [b"m0", b"m1", b"m2", b"m3"]

    @run_until_complete
    async def test_two_members_of_a_group_share_the_partitions(self):
        producer = AIOKafkaProducer(bootstrap_servers=self.hosts)
        await producer.start()
        await producer.send_and_wait(self.topic, b"x", partition=0)
        await producer.stop()
        members = [AIOKafkaConsumer(self.topic, bootstrap_servers=self.hosts, group_id=self.topic,
                                    session_timeout_ms=6000, heartbeat_interval_ms=300)
                   for _ in range(2)]
        for m in members:
            await m.start()
        try:
            while sorted(tp.partition for m in members for tp in m.assignment()) != [0, 1] or \
                    not all(m.assignment() for m in members):
                await asyncio.gather(*(m.getmany(timeout_ms=200) for m in members))
        finally:
            for m in members:
                await m.stop()

    @run_until_complete
    async def test_offsets_committed_are_read_back(self):
        consumer = AIOKafkaConsumer(bootstrap_servers=self.hosts, group_id=self.topic,
                                    enable_auto_commit=False)
        await consumer.start()
        try:
            producer = AIOKafkaProducer(bootstrap_servers=self.hosts)
            await producer.start()
            await producer.send_and_wait(self.topic, b"x", partition=1)
            await producer.stop()
            tp = TopicPartition(self.topic, 1)
            consumer.assign([tp])
            await consumer.commit({tp: 1})
            assert await consumer.committed(tp) == 1
        finally:
            await consumer.stop()

    def test_the_suite_reads_a_kafka_version_it_knows(self):
        assert self.kafka_version == "4.0.0"


class TestNeedsTheImage(KafkaIntegrationTestCase):
    """What the recipe cannot give: the image's ACL tool."""

    def test_acls_through_the_container(self):
        self.acl_manager.add_acl(topic=self.topic, allow_principal="alice", operation="WRITE")
