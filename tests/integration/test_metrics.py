"""Prometheus metrics: served on metrics.port, counting what the broker did."""
from __future__ import annotations

from kafka import KafkaProducer

from tests.support.kafka_wire import free_port
from tests.support.metrics import sample, scrape


def test_metrics_count_requests_and_partitions(broker_factory):
    port = free_port()
    broker = broker_factory({"metrics.port": str(port), "metrics.host": "127.0.0.1"})
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    try:
        producer.send("metered", b"x").get(timeout=30)
        producer.send("metered", b"y").get(timeout=30)
    finally:
        producer.close()
    text = scrape(port)
    assert sample(text, "samsa_requests_total", '{api_key="0"}') >= 1  # Produce
    assert sample(text, "samsa_requests_total", '{api_key="3"}') >= 1  # Metadata
    assert sample(text, "samsa_partitions") >= 1
    assert sample(text, "samsa_connections_accepted") >= 1


def test_metrics_under_kafkas_names(broker_factory):
    """The names Kafka's JMX exporter publishes, so Kafka dashboards work: requests and
    request times per API, messages and bytes in and out per topic and in total, the
    replica manager's and controller's gauges, consumer groups, log size per partition."""
    from confluent_kafka import Consumer, Producer

    port = free_port()
    broker = broker_factory({"metrics.port": str(port), "metrics.host": "127.0.0.1"})
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(5):
        p.produce("kafka-named", b"v%d" % i, partition=0)
        p.flush(30)  # one record per batch: five appends
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "metered",
                  "auto.offset.reset": "earliest"})
    c.subscribe(["kafka-named"])
    got = 0
    for _ in range(100):
        m = c.poll(0.2)
        if m is not None and not m.error():
            got += 1
        if got == 5:
            break
    c.close()
    assert got == 5
    text = scrape(port)
    t = '{topic="kafka-named"}'
    assert sample(text, "kafka_server_brokertopicmetrics_messagesin_total", t) == 5
    assert sample(text, "kafka_server_brokertopicmetrics_messagesin_total", '{topic=""}') >= 5
    bytes_in = sample(text, "kafka_server_brokertopicmetrics_bytesin_total", t)
    bytes_out = sample(text, "kafka_server_brokertopicmetrics_bytesout_total", t)
    assert bytes_in > 5 * 2 and bytes_out >= bytes_in  # batches, whole, both ways
    assert sample(text, "kafka_network_requestmetrics_requests_total", '{request="Produce"}') >= 5
    assert sample(text, "kafka_network_requestmetrics_requests_total", '{request="Fetch"}') >= 1
    assert sample(text, "kafka_network_requestmetrics_totaltimems_count",
                  '{request="Produce"}') >= 5
    assert sample(text, "kafka_server_replicamanager_partitioncount") >= 2  # + __consumer_offsets
    assert sample(text, "kafka_server_replicamanager_leadercount") == \
        sample(text, "kafka_server_replicamanager_partitioncount")
    assert sample(text, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    assert sample(text, "kafka_controller_kafkacontroller_activecontrollercount") == 1
    assert sample(text, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
    assert sample(text, "kafka_coordinator_group_groupmetadatamanager_numgroups") >= 1
    assert sample(text, "kafka_log_log_size", '{partition="0",topic="kafka-named"}') >= bytes_in


def test_consumer_lag_per_group_under_kafka_exporters_names(broker_factory):
    """kafka_consumergroup_lag{consumergroup,topic,partition} is the high watermark
    minus the group's commit, on the group's coordinator, for a real consumer
    group (librdkafka); it drops to 0 once the group commits what it read."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    port = free_port()
    broker = broker_factory({"metrics.port": str(port), "metrics.host": "127.0.0.1"})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("lagged", 2, 1)])["lagged"].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(7):
        p.produce("lagged", b"a%d" % i, partition=0)
    for i in range(4):
        p.produce("lagged", b"b%d" % i, partition=1)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lag-group",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        c.subscribe(["lagged"])
        got = []
        for _ in range(150):
            m = c.poll(0.2)
            if m is not None and not m.error():
                got.append(m)
            if len(got) == 11:
                break
        assert len(got) == 11
        # Part of what was read: 3 of 7 on partition 0, 1 of 4 on partition 1.
        c.commit(offsets=[TopicPartition("lagged", 0, 3), TopicPartition("lagged", 1, 1)],
                 asynchronous=False)
        text = scrape(port)

        def lag(partition):
            return sample(text, "kafka_consumergroup_lag",
                          f'{{consumergroup="lag-group",partition="{partition}",topic="lagged"}}')
        assert (lag(0), lag(1)) == (7 - 3, 4 - 1)
        assert sample(text, "kafka_consumergroup_lag_sum",
                      '{consumergroup="lag-group",topic="lagged"}') == 4 + 3
        assert sample(text, "kafka_consumergroup_current_offset",
                      '{consumergroup="lag-group",partition="0",topic="lagged"}') == 3
        # Everything read is committed: no lag.
        c.commit(asynchronous=False)
        text = scrape(port)
        assert (lag(0), lag(1)) == (0, 0)
        assert sample(text, "kafka_consumergroup_lag_sum",
                      '{consumergroup="lag-group",topic="lagged"}') == 0
        # New records raise it again, before the group reads them.
        p.produce("lagged", b"late", partition=1)
        assert p.flush(30) == 0
        text = scrape(port)
        assert (lag(0), lag(1)) == (0, 1)
    finally:
        c.close()


def test_a_broker_stopped_for_a_while_tells_each_of_its_loops_was_held(broker_factory):
    """Every event loop of the broker is watched: one held (here: the whole
    process stopped by SIGSTOP) says so in one log line per loop and in the
    samsa_event_loop_* gauges, by loop."""
    import time

    from samsa.testing.waiting import wait_until

    port = free_port()
    broker = broker_factory({"metrics.port": str(port), "metrics.host": "127.0.0.1",
                             "num.network.threads": "2"})
    loops = ("main", "PLAINTEXT-network-0", "PLAINTEXT-network-1")

    def stalls() -> dict[str, float | None]:
        text = scrape(port)
        return {loop: sample(text, "samsa_event_loop_stalls", f'{{loop="{loop}"}}')
                for loop in loops}
    before = stalls()
    assert None not in before.values(), before
    broker.pause()
    stopped = time.monotonic()
    try:
        wait_until(lambda: time.monotonic() - stopped > 2.0, 10, "two seconds stopped")
    finally:
        broker.resume()
    wait_until(lambda: all(after > before[loop] for loop, after in stalls().items()), 30,
               "a stall counted on every loop")
    text = scrape(port)
    for loop in loops:
        assert sample(text, "samsa_event_loop_longest_stall_seconds", f'{{loop="{loop}"}}') >= 1.0
    wait_until(lambda: "event loop PLAINTEXT-network-1 was held" in broker.log_path.read_text(),
               30, "the stall in the broker's log")
