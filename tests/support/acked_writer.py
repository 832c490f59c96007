"""The steady load a replication test runs its fault beside: an idempotent
acks=all librdkafka producer writing unique keyed values on a thread of its own
until stopped, recording where each acknowledged value went, so the test can
read every one of them back afterwards."""
from __future__ import annotations

import threading

from confluent_kafka import Producer


class AckedWriter:
    """Writes "<prefix>-0", "<prefix>-1", ... (each also its key) to ``topic``
    from construction until ``stop()``. ``acked``: {value: (partition, offset)};
    ``errors``: the delivery errors' names."""

    def __init__(self, bootstrap: str, topic: str, prefix: str = "record") -> None:
        self.acked: dict[str, tuple[int, int]] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                                   "enable.idempotence": True, "linger.ms": 5,
                                   "message.timeout.ms": 120000})
        self._topic = topic
        self._prefix = prefix
        self._thread = threading.Thread(target=self._run, name="acked-writer", daemon=True)
        self._thread.start()

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.acked[msg.value().decode()] = (msg.partition(), msg.offset())
        else:
            self.errors.append(err.name())

    def _run(self) -> None:
        i = 0
        while not self._stop.is_set():
            v = f"{self._prefix}-{i}".encode()
            try:
                self._producer.produce(self._topic, key=v, value=v, on_delivery=self._on_delivery)
                i += 1
            except BufferError:  # its queue is full: let deliveries drain it
                pass
            self._producer.poll(0)
            self._stop.wait(0.002)  # a steady stream, not a busy loop beside the brokers

    def stop(self) -> None:
        """Stop writing, and wait until every value written is acked or failed."""
        self._stop.set()
        self._thread.join()
        # (longer than message.timeout.ms: every record is acked or failed by then)
        assert self._producer.flush(150) == 0, "records still unacknowledged"
