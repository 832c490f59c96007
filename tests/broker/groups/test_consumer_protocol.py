"""Reading a consumer-protocol assignment (what kafka-consumer-groups shows
as a member's partitions), and refusing bytes that are not one."""
from __future__ import annotations

import struct

import pytest
from aiokafka.coordinator.protocol import ConsumerProtocolMemberAssignment

from samsa.broker.groups.consumer_protocol import assignment_partitions
from samsa.protocol.errors import ProtocolError


def test_an_assignment_written_by_kafka_python_reads_back():
    data = ConsumerProtocolMemberAssignment(0, [("a", [0, 2]), ("b", [1])], b"").encode()
    assert assignment_partitions(data) == {"a": [0, 2], "b": [1]}


def test_no_assignment_is_no_partitions():
    assert assignment_partitions(b"") == {}


@pytest.mark.parametrize("data", [b"\x00", struct.pack(">hi", 0, 1) + b"\x00",
                                  struct.pack(">hi", -1, 0),
                                  struct.pack(">hih", 0, 1, 1) + b"t" + struct.pack(">i", 9)])
def test_bytes_that_are_not_an_assignment_are_refused(data):
    with pytest.raises(ProtocolError):
        assignment_partitions(data)
