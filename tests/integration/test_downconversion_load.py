"""Old fetchers cannot make the broker work for everyone (issue 24 item 14).

An ~80-byte Fetch v0-v3 of a highly compressible batch (a 61 KB gzip batch
of 60 MiB of zeros) makes the broker decompress, convert and recompress
60 MiB. Thirty old clients fetching such batches over and over must not hold
up the other clients of the broker: a confluent-kafka producer's requests
are all answered within its request timeout meanwhile, the broker's memory
stays bounded, and an old client (kafka-python speaking Fetch v2, message
format v1) still reads every record right.
"""
from __future__ import annotations

import socket
import struct
import threading

from confluent_kafka import Producer
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from samsa.protocol.messages import FetchRequest, RequestHeader, decode_response, encode_request
from tests.support.kafka_wire import recv_exactly
from tests.support.waiting import wait_until

FETCH = 1
BOMB = 60 * 2**20  # zeros: about 61 KB gzip-compressed
BOMBS = 3
OLD_FETCHERS = 30
# Old fetches answered while the probe producer writes: two rounds of the
# broker's converter threads at least.
ANSWERED_WHILE_PROBING = 6
# The converter threads' conversions (each: the batch decompressed, decoded
# and re-encoded) and the rest of the broker. Converting the 30 fetches at
# once took 710 MB.
RSS_LIMIT = 600 * 2**20


def _old_fetcher(sock: socket.socket, stop: threading.Event, fetched: list) -> None:
    """Fetch v2 (what a 0.10 client sends) of the bombs' partition from offset
    0, again and again: each answer costs the broker a down-conversion."""
    request = FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1, topics=[
                               FetchRequest.FetchTopic(topic="bombs", partitions=[
                                   FetchRequest.FetchPartition(
                                       partition=0, fetch_offset=0,
                                       partition_max_bytes=1 << 20)])],
                           forgotten_topics_data=[], rack_id="")
    correlation_id = 0
    try:
        while not stop.is_set():
            correlation_id += 1
            sock.sendall(encode_request(RequestHeader(FETCH, 2, correlation_id, "old"), request))
            (size,) = struct.unpack(">i", recv_exactly(sock, 4))
            _, response = decode_response(recv_exactly(sock, size), FETCH, 2)
            fetched.append(len(response.responses[0].partitions[0].records))
    except OSError:
        pass  # the test is over: its socket was shut down


def test_old_fetches_of_compression_bombs_do_not_hold_up_other_clients(broker_factory):
    broker = broker_factory()
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic("bombs", 1, 1), NewTopic("probe", 1, 1)])
    finally:
        admin.close()
    old_producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="gzip",
                                 max_request_size=2 * BOMB)
    try:
        for i in range(BOMBS):
            old_producer.send("bombs", key=b"bomb-%d" % i, value=bytes(BOMB)).get(timeout=60)
    finally:
        old_producer.close()
    probe = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1, "linger.ms": 0,
                      "request.timeout.ms": 10000, "message.timeout.ms": 10000,
                      "retries": 0})
    probe.produce("probe", b"warm-up")
    assert probe.flush(30) == 0

    stop = threading.Event()
    fetched: list[int] = []
    socks = [socket.create_connection((broker.host, broker.port)) for _ in range(OLD_FETCHERS)]
    fetchers = [threading.Thread(target=_old_fetcher, args=(s, stop, fetched), daemon=True)
                for s in socks]
    results: list = []
    rss_peak = 0
    try:
        for t in fetchers:
            t.start()
        wait_until(lambda: fetched, timeout=120, what="an old fetch to be answered")
        answered = len(fetched)
        # Probe writes, one at a time, until the converters have answered
        # a few more old fetches.
        while len(fetched) < answered + ANSWERED_WHILE_PROBING:
            probe.produce("probe", b"probe-%d" % len(results),
                          on_delivery=lambda err, msg: results.append(err))
            probe.flush(30)
            rss_peak = max(rss_peak, broker.rss())
            assert len(results) < 10_000, "the old fetches are not being answered"
            stop.wait(0.05)
        failed = [e for e in results if e is not None]
        print(f"\n{len(fetched)} old fetches answered; {len(failed)} of {len(results)} probe "
              f"writes failed meanwhile; broker RSS peak {rss_peak / 2**20:.0f} MiB")
        assert not failed, failed
        assert rss_peak < RSS_LIMIT
        assert broker.is_running()
    finally:
        stop.set()
        for s in socks:
            # Reset, not a polite close: the broker drops what it was still
            # to convert for them instead of answering a peer that is gone.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            s.shutdown(socket.SHUT_RD)  # wakes the fetcher thread
        for t in fetchers:
            t.join(timeout=30)
        for s in socks:
            s.close()

    # The old client reads every record: a budget per fetch, one bomb at a time.
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, api_version=(0, 10, 0),
                             enable_auto_commit=False, consumer_timeout_ms=60000,
                             auto_offset_reset="earliest", fetch_max_wait_ms=100)
    try:
        consumer.assign([TopicPartition("bombs", 0)])
        got = []
        for msg in consumer:
            got.append((msg.offset, msg.key, len(msg.value), msg.value.count(0)))
            if len(got) == BOMBS:
                break
    finally:
        consumer.close()
    assert got == [(i, b"bomb-%d" % i, BOMB, BOMB) for i in range(BOMBS)]
