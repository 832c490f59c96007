"""20 tests, each with a broker of its own."""
import pytest
from confluent_kafka import Consumer, Producer

from record import record


@pytest.mark.parametrize("n", range(20))
def test_each_test_has_its_own_empty_broker(samsa_broker, n):
    record(samsa_broker)
    samsa_broker.create_topic("events")
    p = Producer({"bootstrap.servers": samsa_broker.bootstrap_servers})
    p.produce("events", value=f"record {n}".encode())
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": samsa_broker.bootstrap_servers, "group.id": "g",
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe(["events"])
        msg = None
        for _ in range(100):
            msg = c.poll(0.3)
            if msg is not None and not msg.error():
                break
        # one record only: the broker is this test's alone
        assert msg is not None and msg.value() == f"record {n}".encode() and msg.offset() == 0
    finally:
        c.close()
