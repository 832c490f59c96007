"""Produce throughput from the Apache Kafka Java client (bench/java/PerfProducer.java):
1 KiB values, acks=1, linger.ms=5, one producer, one partition."""

from __future__ import annotations

from ..brokers import create_topic
from ..java_perf import java_produce
from .common import Ctx, Row, on_both, with_cpu
from .produce import row


def run(ctx: Ctx) -> list[Row]:
    secs = ctx.seconds(4.0, 1.5)
    name = "produce 1KiB acks=1 producers=1 (Java client)"
    ctx.log(f"- {name}")

    def fn(b):
        create_topic(b.bootstrap, "java", 1)
        return with_cpu(b, lambda: java_produce(b.bootstrap, "java", 1024, "1", secs))
    return [row(name, on_both(ctx, name, fn))]
