"""A deterministic activity-event generator: the same seed gives the same events, byte for byte.

Events are ``interval_ms`` apart on average from ``start_ms`` (each with a jitter inside its
slot, so neighbours can arrive slightly out of order, as real events do), keyed by user, with the
record timestamp set to the event time. ``events()`` is pure, so tests compute what the pipeline
must produce from the same arguments; ``produce_events()`` sends them, optionally at a steady rate.
"""
from __future__ import annotations

import datetime as dt
import json
import random
import time
from dataclasses import dataclass

PAGES = ["/", "/pricing", "/docs", "/blog", "/signup", "/checkout"]
# (action, weight): most activity is looking, little of it is buying.
ACTIONS = [("view", 70), ("click", 20), ("add_to_cart", 7), ("purchase", 3)]


@dataclass(frozen=True)
class Event:
    user: str
    page: str
    action: str
    timestamp_ms: int

    def iso_time(self) -> str:
        t = dt.datetime.fromtimestamp(self.timestamp_ms / 1000, dt.timezone.utc)
        return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.timestamp_ms % 1000:03d}Z"

    def to_json(self) -> bytes:
        return json.dumps({"user": self.user, "page": self.page, "action": self.action,
                           "timestamp": self.iso_time()}, separators=(",", ":")).encode()


def events(count: int, seed: int, start_ms: int, interval_ms: int = 1000, users: int = 50) -> list[Event]:
    rng = random.Random(seed)
    actions = [a for a, _ in ACTIONS]
    weights = [w for _, w in ACTIONS]
    out = []
    for i in range(count):
        out.append(Event(user=f"user-{rng.randrange(users):04d}",
                         page=rng.choice(PAGES),
                         action=rng.choices(actions, weights)[0],
                         timestamp_ms=start_ms + i * interval_ms + rng.randrange(max(interval_ms, 1))))
    return out


def ensure_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Create ``topic`` unless it exists (replication factor: the brokers' default), so the jobs
    do not depend on the brokers' auto.create.topics.enable."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    if topic in admin.list_topics(timeout=30).topics:
        return
    for fut in admin.create_topics([NewTopic(topic, partitions)]).values():
        try:
            fut.result(timeout=30)
        except Exception as e:          # created meanwhile by someone else: fine
            if "TOPIC_ALREADY_EXISTS" not in str(e):
                raise


def produce_events(bootstrap: str, topic: str, evs: list[Event], *, rate: float | None = None,
                   partitions: int = 3, on_sent=None) -> int:
    """Send ``evs`` (creating ``topic`` with ``partitions`` if it does not exist); ``rate``: events
    per second, steady, instead of as fast as possible. Returns the count, all acknowledged."""
    from confluent_kafka import Producer

    ensure_topic(bootstrap, topic, partitions)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                         "linger.ms": 5, "partitioner": "murmur2_random"})
    failures: list = []

    def delivered(err, msg):
        if err is not None:
            failures.append(err)

    began = time.monotonic()
    for i, e in enumerate(evs):
        if rate:
            due = began + i / rate
            while (now := time.monotonic()) < due:
                producer.poll(min(due - now, 0.05))
        while True:
            try:
                producer.produce(topic, key=e.user.encode(), value=e.to_json(), timestamp=e.timestamp_ms,
                                 on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        if on_sent is not None:
            on_sent(e)
        producer.poll(0)
    if producer.flush(60) or failures:
        raise RuntimeError(f"producing events to '{topic}' at {bootstrap} failed: "
                           f"{failures[0] if failures else 'records left unacknowledged after 60 s'}")
    return len(evs)
