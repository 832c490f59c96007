"""What ACLs cost: one authorization decision, and produce/fetch throughput
with an authorizer against without one, same run.

Usage: python bench/bench_acls.py [--acls 1000] [--records 200000]

  decision: AclAuthorizer.authorize for a topic among --acls literal ACLs
            plus 50 prefixed ones (µs per call; allowed and denied, decided
            the first time and remembered until the ACLs change);
  produce/fetch: librdkafka produces --records 1 KiB records (acks=1) to a
            broker and reads them back, once with authorizer.class.name set
            (and the ACLs the client needs, among --acls others), once without.
Reported as records/s and the ratio with/without.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from samsa.broker.security.acl import (AccessControlEntry, AclAuthorizer, AclOperation,
                                 AclPermissionType, PatternType, ResourcePattern,
                                 ResourceType)
from samsa.broker.security.principal import user


def _acls(n: int) -> dict:
    acls = {ResourcePattern(ResourceType.TOPIC, f"topic-{i}"): frozenset({AccessControlEntry(
        f"User:u{i}", "*", AclOperation.READ, AclPermissionType.ALLOW)}) for i in range(n)}
    for i in range(50):
        acls[ResourcePattern(ResourceType.TOPIC, f"team-{i}.", PatternType.PREFIXED)] = frozenset(
            {AccessControlEntry(f"User:u{i}", "*", AclOperation.WRITE, AclPermissionType.ALLOW)})
    return acls


def bench_decision(n: int) -> None:
    a = AclAuthorizer(acls=_acls(n))
    for label, principal, name in (("allowed", user("u7"), "topic-7"),
                                   ("denied", user("nobody"), "topic-7")):
        for how, decide in (("first time", a._decide), ("remembered", a.authorize)):
            calls = 100_000
            start = time.perf_counter()
            for _ in range(calls):
                decide(principal, "127.0.0.1", AclOperation.READ, ResourceType.TOPIC, name)
            per = (time.perf_counter() - start) / calls * 1e6
            print(f"decision ({label}, {how}, {n} literal + 50 prefixed ACLs): {per:.2f} µs")


def _run_broker(work: Path, overrides: dict, records: int, acl_count: int) -> tuple[float, float]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import (AclBinding, AclOperation as O, AclPermissionType as P,
                                       AdminClient, NewTopic, ResourcePatternType,
                                       ResourceType as R)

    from tests.support.broker_process import BrokerProcess
    broker = BrokerProcess(work, overrides=overrides).start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        if overrides:
            bindings = [AclBinding(R.TOPIC, f"other-{i}", ResourcePatternType.LITERAL,
                                   f"User:u{i}", "*", O.READ, P.ALLOW) for i in range(acl_count)]
            bindings += [AclBinding(R.TOPIC, "bench", ResourcePatternType.LITERAL,
                                    "User:ANONYMOUS", "*", op, P.ALLOW)
                         for op in (O.WRITE, O.READ, O.CREATE)]
            # (librdkafka names the Cluster resource type BROKER: code 4)
            bindings.append(AclBinding(R.BROKER, "kafka-cluster", ResourcePatternType.LITERAL,
                                       "User:ANONYMOUS", "*", O.IDEMPOTENT_WRITE, P.ALLOW))
            for f in admin.create_acls(bindings).values():
                f.result(60)
        admin.create_topics([NewTopic("bench", 1, 1)])["bench"].result(30)
        value = b"x" * 1024
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": 1,
                             "linger.ms": 5, "batch.size": 1 << 20})
        start = time.perf_counter()
        for _ in range(records):
            while True:
                try:
                    producer.produce("bench", value)
                    break
                except BufferError:
                    producer.poll(0.01)
        producer.flush(120)
        produce_rate = records / (time.perf_counter() - start)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"})
        consumer.assign([TopicPartition("bench", 0, 0)])
        got = 0
        start = time.perf_counter()
        while got < records:
            got += sum(1 for m in consumer.consume(10000, 2.0) if not m.error())
        fetch_rate = records / (time.perf_counter() - start)
        consumer.close()
        return produce_rate, fetch_rate
    finally:
        broker.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--acls", type=int, default=1000)
    ap.add_argument("--records", type=int, default=200_000)
    args = ap.parse_args()
    bench_decision(args.acls)
    with tempfile.TemporaryDirectory() as tmp:
        off = _run_broker(Path(tmp) / "off", {}, args.records, args.acls)
        on = _run_broker(Path(tmp) / "on", {
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "allow.everyone.if.no.acl.found": "true"}, args.records, args.acls)
    for i, what in enumerate(("produce", "fetch")):
        print(f"{what}: {on[i]:,.0f} records/s with ACLs, {off[i]:,.0f} without: "
              f"ratio {on[i] / off[i]:.2f}")


if __name__ == "__main__":
    main()
