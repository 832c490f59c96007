"""DescribeLogDirs: what each log dir holds and how full its disk is (the
API behind kafka-log-dirs and the disk views of cluster UIs)."""
from __future__ import annotations

import os

from protocol.errors import ErrorCode
from protocol.messages import DescribeLogDirsResponse

from . import authz
from .authz import Op


def _disk(path: str) -> tuple[int, int] | None:
    """(total, usable) bytes of the filesystem holding ``path``; None if unreadable."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle_describe_log_dirs(ctx, req):
    R = DescribeLogDirsResponse
    if not authz.cluster(ctx, Op.DESCRIBE):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                 results=[])
    wanted = None
    if req.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in req.topics}
    results = []
    for log_dir, logs in ctx.broker.logs.logs_by_dir().items():
        disk = _disk(log_dir)
        if disk is None or not os.access(log_dir, os.R_OK | os.X_OK):
            results.append(R.DescribeLogDirsResult(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=log_dir, topics=[],
                total_bytes=-1, usable_bytes=-1))
            continue
        by_topic: dict[str, list] = {}
        for lg in sorted(logs, key=lambda lg: (lg.topic, lg.partition)):
            if wanted is not None and lg.partition not in wanted.get(lg.topic, ()):
                continue
            by_topic.setdefault(lg.topic, []).append(R.DescribeLogDirsPartition(
                partition_index=lg.partition, partition_size=lg.size_in_bytes(),
                # A leader's log is never behind its own high watermark; a
                # future (moving) replica would report its lag here.
                offset_lag=0, is_future_key=False))
        results.append(R.DescribeLogDirsResult(
            error_code=ErrorCode.NONE, log_dir=log_dir,
            topics=[R.DescribeLogDirsTopic(name=name, partitions=parts)
                    for name, parts in by_topic.items()],
            total_bytes=disk[0], usable_bytes=disk[1]))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)
