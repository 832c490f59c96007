"""Kafka's znode JSON, byte for byte where Kafka's bytes are known, and read
back leniently (znodes written by Kafka itself or by older tools)."""
from __future__ import annotations

import json

import pytest

from samsa.broker.metadata import zk_layout as z


def test_cluster_id_version_is_a_string():
    data = z.encode_cluster_id("ABCDEFGHIJKLMNOPQRSTUV")
    assert json.loads(data) == {"version": "1", "id": "ABCDEFGHIJKLMNOPQRSTUV"}
    assert z.decode_cluster_id(data) == "ABCDEFGHIJKLMNOPQRSTUV"


def test_broker_registration_as_kafka_writes_it():
    reg = z.BrokerRegistration(1, (("PLAINTEXT", "h1", 9092),), {"PLAINTEXT": "PLAINTEXT"},
                               rack="dc1", timestamp_ms=1700000000000)
    assert z.encode_broker(reg) == (
        b'{"version":5,"host":"h1","port":9092,"jmx_port":-1,"timestamp":"1700000000000",'
        b'"endpoints":["PLAINTEXT://h1:9092"],"listener_security_protocol_map":'
        b'{"PLAINTEXT":"PLAINTEXT"},"rack":"dc1","features":{}}')
    assert z.decode_broker(1, z.encode_broker(reg)) == reg


def test_broker_without_plaintext_listener_has_null_host():
    reg = z.BrokerRegistration(2, (("SSL", "::1", 9093),), {"SSL": "SSL"})
    value = json.loads(z.encode_broker(reg))
    assert value["host"] is None and value["port"] == -1 and "rack" not in value
    assert value["endpoints"] == ["SSL://[::1]:9093"]
    assert z.decode_broker(2, z.encode_broker(reg)).endpoints == (("SSL", "::1", 9093),)


def test_version_1_broker_registration_reads():
    reg = z.decode_broker(0, b'{"jmx_port":-1,"timestamp":"1","host":"old","version":1,"port":9092}')
    assert reg.endpoints == (("PLAINTEXT", "old", 9092),)


def test_topic_assignment():
    data = z.encode_topic(z.TopicAssignment({1: [1, 0], 0: [0, 1]}, "AAAAAAAAAAAAAAAAAAAAAA"))
    assert data == (b'{"version":3,"partitions":{"0":[0,1],"1":[1,0]},"adding_replicas":{},'
                    b'"removing_replicas":{},"topic_id":"AAAAAAAAAAAAAAAAAAAAAA"}')
    back = z.decode_topic("t", data)
    assert back.partitions == {0: [0, 1], 1: [1, 0]} and back.topic_id == "AAAAAAAAAAAAAAAAAAAAAA"
    # written by a 0.8-era tool: version 1, no topic id
    old = z.decode_topic("t", b'{"version":1,"partitions":{"0":[0]}}')
    assert old.partitions == {0: [0]} and old.topic_id is None


def test_partition_state():
    state = z.PartitionState(leader=0, leader_epoch=3, isr=(0, 1), controller_epoch=7)
    assert z.encode_partition_state(state) == (
        b'{"version":1,"leader":0,"leader_epoch":3,"controller_epoch":7,"isr":[0,1]}')
    assert z.decode_partition_state("t", 0, z.encode_partition_state(state)) == state
    # formatted directly (it is written per partition): what json writes
    for s in (z.PartitionState(-1, 0, (), 1), z.PartitionState(12, 2**31, (3,), 0)):
        assert z.encode_partition_state(s) == json.dumps(
            {"version": 1, "leader": s.leader, "leader_epoch": s.leader_epoch,
             "controller_epoch": s.controller_epoch, "isr": list(s.isr)},
            separators=(",", ":")).encode()


def test_a_malformed_partition_state_is_refused_with_its_reason():
    # (a well-formed state is decoded the short way; these take the checks)
    for data, reason in ((b"", "empty"), (b"[]", "not a JSON object"),
                         (b'{"isr":[true]}', "'leader'"), (b"\xff", "not JSON"),
                         (b'{"leader":1,"leader_epoch":1,"controller_epoch":1,"isr":["a"]}',
                          "list of broker ids")):
        with pytest.raises(z.ZNodeFormatError, match=reason):
            z.decode_partition_state("t", 0, data)


def test_controller_and_epoch():
    assert json.loads(z.encode_controller(2, 5)) == {
        "version": 2, "brokerid": 2, "timestamp": "5", "kraftControllerEpoch": -1}
    assert z.decode_controller(z.encode_controller(2, 5)) == 2
    assert z.encode_controller_epoch(12) == b"12"
    assert z.decode_controller_epoch(b"12") == 12


def test_configs_and_change_notices():
    assert z.encode_config({"retention.ms": "1000"}) == (
        b'{"version":1,"config":{"retention.ms":"1000"}}')
    assert z.decode_config("/config/topics/t", z.encode_config({"a": "b"})) == {"a": "b"}
    assert z.decode_config("/config/topics/t", b"") == {}
    assert z.encode_config_change("topics/t") == b'{"version":2,"entity_path":"topics/t"}'
    assert z.broker_config_path(None) == "/config/brokers/<default>"
    assert z.broker_config_path(3) == "/config/brokers/3"


def test_producer_id_blocks_are_strings_and_contiguous():
    first = z.next_producer_id_block(None, broker=1)
    assert json.loads(z.encode_producer_id_block(first)) == {
        "version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    second = z.next_producer_id_block(z.decode_producer_id_block(
        z.encode_producer_id_block(first)), broker=2)
    assert (second.start, second.end, second.broker) == (1000, 1999, 2)


def test_notices_and_reassignments():
    data = z.encode_isr_change([("t", 0), ("u", 3)])
    assert data == b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"u","partition":3}]}'
    assert z.decode_partition_list("/isr_change_notification/isr_change_0000000001", data) == [
        ("t", 0), ("u", 3)]
    assert z.decode_reassignment(
        b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}') == {
        ("t", 0): [1, 2, 3]}


@pytest.mark.parametrize("data", [b"", b"not json", b"[1]", b'{"version":1}'])
def test_bad_znodes_name_their_path(data):
    with pytest.raises(z.ZNodeFormatError, match="/brokers/topics/t/partitions/0/state"):
        z.decode_partition_state("t", 0, data)
