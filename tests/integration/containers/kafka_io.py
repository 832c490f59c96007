"""Producing and consuming with a real client (librdkafka through
confluent-kafka) for the container tests: every wait has a deadline."""
from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer


def produce(bootstrap: str, topic: str, values: list[bytes], timeout: float = 60.0) -> None:
    """All of ``values`` acknowledged by every in-sync replica, or AssertionError."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                  "message.timeout.ms": int(timeout * 1000)})
    for v in values:
        p.produce(topic, v, on_delivery=lambda err, msg: err and errors.append(err))
    left = p.flush(timeout)
    assert left == 0 and not errors, f"{left} unsent, errors: {errors[:3]}"


def consume(bootstrap: str, topic: str, count: int, group: str, timeout: float = 90.0,
            commit: bool = False) -> list[bytes]:
    """The first ``count`` values a new consumer group reads from the start;
    with ``commit``, the group commits what it read before it leaves."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(got) < count:
            assert time.monotonic() < deadline, \
                f"read {len(got)} of {count} records from {topic} via {bootstrap} in {timeout:g} s"
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        if commit:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return got
