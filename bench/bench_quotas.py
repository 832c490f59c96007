"""Client quota accuracy: measured rate / configured rate, produce and fetch.

Usage: python bench/bench_quotas.py [--seconds 20] [--rates 100000,400000,1600000]
       [--window-num 11]

One samsa broker (default quota windows: quota.window.num 11 of 1 s, or as
given). For each rate, a librdkafka producer with a producer_byte_rate quota
on its client id sends as fast as it can for --seconds; then a librdkafka
consumer with a consumer_byte_rate quota reads a topic filled beforehand by an
unlimited client, once with librdkafka's default fetch sizes and once with
64 KiB fetches. Reported per run: bytes acknowledged (produce) or received
(fetch) per second over the whole run and over its second half, each divided
by the quota.

What Kafka's arithmetic (reproduced here, same numbers in a pure simulation of
it) predicts: a client starts with a burst worth window.num - 1 windows, so
the whole-run ratio is above 1 for short runs; a consumer catching up on a
backlog gets fetches as large as the quota allows in the window
(rate * (window.num - 1) s), and as a throttled fetch is answered empty and
not counted, such a fetch only passes once the previous one has left the
window: about half the quota. Small fetches track the quota closely.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from confluent_kafka import Consumer, Producer

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import AlterClientQuotasRequest as Q
from samsa.protocol.model import ApiKey
from tests.support.broker_process import BrokerProcess

VALUE = b"b" * 1000


def _quota(bootstrap: str, client_id: str, key: str, rate: float) -> None:
    with SimpleClient(bootstrap) as c:
        r = c.call(ApiKey.ALTER_CLIENT_QUOTAS, Q(validate_only=False, entries=[Q.EntryData(
            entity=[Q.EntityData(entity_type="client-id", entity_name=client_id)],
            ops=[Q.OpData(key=key, value=float(rate), remove=False)])]))
    assert r.entries[0].error_code == 0, r


def _ratios(events: list[tuple[float, int]], started: float, seconds: float,
            rate: float) -> dict:
    total = sum(n for t, n in events if t - started <= seconds)
    half = started + seconds / 2
    second_half = sum(n for t, n in events if half < t <= started + seconds)
    return {"quota": rate, "whole_run": round(total / seconds / rate, 3),
            "second_half": round(second_half / (seconds / 2) / rate, 3)}


def produce_run(bootstrap: str, rate: float, seconds: float) -> dict:
    client_id = f"bench-produce-{int(rate)}"
    _quota(bootstrap, client_id, "producer_byte_rate", rate)
    events: list[tuple[float, int]] = []

    def acked(err, msg):
        if err is None:
            events.append((time.monotonic(), len(msg.value())))
    p = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
                  "batch.size": 65536, "queue.buffering.max.kbytes": 4096})
    topic = f"bench-quota-p-{int(rate)}"
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            p.produce(topic, VALUE, on_delivery=acked)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.flush(120)
    return _ratios(events, started, seconds, rate)


def fetch_run(bootstrap: str, rate: float, seconds: float, fetch_bytes: int | None) -> dict:
    topic = f"bench-quota-f-{int(rate)}-{fetch_bytes or 0}"
    fill = Producer({"bootstrap.servers": bootstrap, "client.id": "bench-fill",
                     "batch.size": 16384, "linger.ms": 5})
    for _ in range(int(rate * seconds * 1.5 / len(VALUE)) + 1):
        while True:
            try:
                fill.produce(topic, VALUE)
                break
            except BufferError:
                fill.poll(0.05)
    fill.flush(300)
    client_id = f"bench-fetch-{int(rate)}-{fetch_bytes or 0}"
    _quota(bootstrap, client_id, "consumer_byte_rate", rate)
    c = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id,
                  "group.id": client_id, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False,
                  **({"fetch.max.bytes": fetch_bytes, "max.partition.fetch.bytes": fetch_bytes,
                      "message.max.bytes": fetch_bytes} if fetch_bytes else {})})
    c.subscribe([topic])
    events: list[tuple[float, int]] = []
    started = None
    deadline = time.monotonic() + seconds + 60
    while time.monotonic() < deadline:
        for m in c.consume(500, 0.2):
            if m.error() is None:
                now = time.monotonic()
                started = started or now
                events.append((now, len(m.value())))
        if started and time.monotonic() - started > seconds:
            break
    c.close()
    return _ratios(events, started or time.monotonic(), seconds, rate)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--rates", default="100000,400000,1600000")
    ap.add_argument("--window-num", type=int, default=11)
    ap.add_argument("--kinds", default="produce,fetch,fetch_64k",
                    help="which runs, of produce, fetch, fetch_64k")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-quotas-"))
    broker = BrokerProcess(work, overrides={"quota.window.num": str(args.window_num)}).start()
    results = {"window_num": args.window_num, "seconds": args.seconds, "produce": [], "fetch": [],
               "fetch_64k": []}
    try:
        for rate in (float(r) for r in args.rates.split(",")):
            kinds = args.kinds.split(",")
            if "produce" in kinds:
                results["produce"].append(produce_run(broker.bootstrap, rate, args.seconds))
                print(f"produce   quota {rate:>10.0f} B/s: measured/quota "
                      f"{results['produce'][-1]['whole_run']:.3f} whole run, "
                      f"{results['produce'][-1]['second_half']:.3f} second half", flush=True)
            for kind, size in (("fetch", None), ("fetch_64k", 65536)):
                if kind not in kinds:
                    continue
                results[kind].append(fetch_run(broker.bootstrap, rate, args.seconds, size))
                print(f"{kind:9} quota {rate:>10.0f} B/s: measured/quota "
                      f"{results[kind][-1]['whole_run']:.3f} whole run, "
                      f"{results[kind][-1]['second_half']:.3f} second half", flush=True)
    finally:
        broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
