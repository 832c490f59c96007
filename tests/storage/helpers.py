"""Batch builders for storage tests: kafka-python's own builder, so the bytes the
log receives come from an independent implementation of the v2 format."""
from __future__ import annotations

import os
import time

from kafka.record.default_records import DefaultRecordBatchBuilder

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def build_batch(values, *, key=None, timestamp=None, codec="none", producer_id=-1,
                producer_epoch=-1, base_sequence=-1, transactional=False, headers=()):
    b = DefaultRecordBatchBuilder(2, CODECS[codec], transactional, producer_id,
                                  producer_epoch, base_sequence, batch_size=1 << 30)
    ts = int(time.time() * 1000) if timestamp is None else timestamp
    for i, v in enumerate(values):
        b.append(i, ts if not callable(ts) else ts(i), key, v, list(headers))
    return bytes(b.build())


def batch_of(n, size=10, **kw):
    return build_batch([b"x" * size] * n, **kw)


def open_under(path) -> list[str]:
    """This process's descriptors on files below ``path``."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(path)):
            out.append(target)
    return out
