"""A confluent-kafka (librdkafka 2.16) share consumer that takes records and
never acknowledges them: the member a test kills with SIGKILL while it holds
acquired records (ShareConsume.java's ``--hold`` for the Java client).

``python -m tests.support.confluent_share_holder BOOTSTRAP GROUP TOPIC``
prints one line per record of its first non-empty poll ("value<TAB>offset<TAB>
delivery count"), then "holding", then waits for its end; its heartbeats go on
from librdkafka's threads, so it stays a member until it is killed.
"""
from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from confluent_kafka import ShareConsumer

from tests.support.process_lines import ProcessLines

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def start(bootstrap: str, group: str, topic: str) -> ProcessLines:
    """The holder in a process of its own, its lines collected as they come
    (``ProcessLines.stop`` kills it with SIGKILL)."""
    return ProcessLines(subprocess.Popen(
        [sys.executable, "-m", "tests.support.confluent_share_holder", bootstrap, group, topic],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))


def main(argv: list[str]) -> int:
    bootstrap, group, topic = argv
    consumer = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit",
                              "max.poll.records": 5})
    consumer.subscribe([topic])
    while True:
        records = [m for m in consumer.poll(0.2) if m.error() is None]
        if records:
            break
    for m in records:
        print(f"{m.value().decode()}\t{m.offset()}\t{m.delivery_count()}", flush=True)
    print("holding", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
