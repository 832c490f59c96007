"""DescribeLogDirs (issue 15, item 6): per log dir, each partition's size on
disk, and the disk's total and usable bytes, through kafka-python's admin
client and the wire."""
from __future__ import annotations

import os

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.admin import KafkaAdminClient

from broker.client import SimpleClient
from protocol.messages import DescribeLogDirsRequest


def _segment_bytes(broker, topic, partition):
    d = broker.data_dir / f"{topic}-{partition}"
    return sum(os.path.getsize(d / f) for f in os.listdir(d) if f.endswith(".log"))


def _fill(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for f in admin.create_topics([NewTopic("a", 2, 1), NewTopic("b", 1, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(300):
        producer.produce("a", b"v" * 100, partition=i % 2)
    producer.produce("b", b"w" * 5000, partition=0)
    producer.flush(30)


def test_sizes_match_the_files_and_the_disk(broker):
    _fill(broker)
    with SimpleClient(broker.bootstrap) as client:
        resp = client.call(35, DescribeLogDirsRequest(topics=None))
    assert resp.error_code == 0 and len(resp.results) == 1
    result = resp.results[0]
    assert result.error_code == 0 and result.log_dir == str(broker.data_dir)
    sizes = {(t.name, p.partition_index): p.partition_size
             for t in result.topics for p in t.partitions}
    for key in [("a", 0), ("a", 1), ("b", 0)]:
        assert sizes[key] == _segment_bytes(broker, *key) > 0
    assert all(p.offset_lag == 0 and not p.is_future_key
               for t in result.topics for p in t.partitions)
    st = os.statvfs(broker.data_dir)
    assert result.total_bytes == st.f_blocks * st.f_frsize
    assert 0 < result.usable_bytes <= result.total_bytes


def test_naming_topics_answers_only_those(broker):
    _fill(broker)
    with SimpleClient(broker.bootstrap) as client:
        resp = client.call(35, DescribeLogDirsRequest(topics=[
            DescribeLogDirsRequest.DescribableLogDirTopic(topic="a", partitions=[1])]))
    topics = resp.results[0].topics
    assert [(t.name, [p.partition_index for p in t.partitions]) for t in topics] == [("a", [1])]


def test_kafka_python_admin_describes_log_dirs(broker):
    _fill(broker)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        answer = admin.describe_log_dirs()
    finally:
        admin.close()
    (only,) = answer
    assert only["broker"] == 0
    (log_dir,) = only["log_dirs"]
    assert log_dir["error_code"] == 0 and log_dir["log_dir"] == str(broker.data_dir)
    sizes = {(t["name"], p["partition_index"]): p["partition_size"]
             for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes[("b", 0)] == _segment_bytes(broker, "b", 0) > 5000
