"""Independent check: kafka-python's record reader walks every segment samsa writes."""
from __future__ import annotations

import os
import random

from kafka.record import MemoryRecords
from kafka.record.default_records import DefaultRecordBatch

from samsa.config.topic import TopicConfig
from samsa.protocol.records import build_batch as proto_build_batch
from tests.storage.helpers import build_batch


def test_segments_readable_by_kafka_python(make_log):
    rnd = random.Random(7)
    lg = make_log(TopicConfig(segment_bytes=20_000, index_interval_bytes=500))
    sent = []   # (first offset, values)
    seq42 = 0   # idempotent producer 42's next sequence
    for i in range(120):
        n = rnd.randint(1, 6)
        values = [os.urandom(rnd.randint(0, 300)) for _ in range(n)]
        if i % 4 == 0:
            codec = rnd.choice([1, 2, 3, 4])
            payload = proto_build_batch([(b"key", v, [("h", b"1")], 1_700_000_000_000 + i)
                                         for v in values], codec=codec)
        else:
            payload = build_batch(values, key=b"k%d" % i, timestamp=1_700_000_000_000 + i,
                                  producer_id=42 if i % 3 == 0 else -1,
                                  producer_epoch=0 if i % 3 == 0 else -1,
                                  base_sequence=seq42 if i % 3 == 0 else -1)
            if i % 3 == 0:
                seq42 += n
        r = lg.append(payload, leader_epoch=2)
        sent.append((r.first_offset, values))
    assert len(lg.segments) > 2
    expected = {off + j: v for off, vals in sent for j, v in enumerate(vals)}
    seen = {}
    for seg in lg.segments:
        with open(seg.log_path, "rb") as f:
            data = f.read()
        records = MemoryRecords(data)
        walked = 0
        while True:
            batch = records.next_batch()
            if batch is None:
                break
            assert isinstance(batch, DefaultRecordBatch)
            assert batch.validate_crc(), f"CRC mismatch at offset {batch.base_offset}"
            assert batch.leader_epoch == 2
            walked += batch.size_in_bytes
            for rec in batch:
                assert rec.offset not in seen
                seen[rec.offset] = rec.value
        assert walked == len(data)
    assert seen == expected
