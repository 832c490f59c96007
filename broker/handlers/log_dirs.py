"""DescribeLogDirs: what each log dir holds and how full its disk is (the
API behind kafka-log-dirs and the disk views of cluster UIs); AlterReplicaLogDirs:
move a partition to another of the broker's log dirs (JBOD), which
DescribeLogDirs shows as a "future" replica in the destination until done."""
from __future__ import annotations

import os

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse,
                               DescribeLogDirsRequest, DescribeLogDirsResponse)
from samsa.storage.errors import StorageError

from . import authz
from .authz import Op
from .context import RequestContext, off_loop
from .services import LogDirs, Services


def _disk(path: str) -> tuple[int, int] | None:
    """(total, usable) bytes of the filesystem holding ``path``; None if unreadable."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


async def handle_describe_log_dirs(ctx: RequestContext, req: DescribeLogDirsRequest
                                   ) -> DescribeLogDirsResponse:
    R = DescribeLogDirsResponse
    if not authz.cluster(ctx, Op.DESCRIBE):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                 results=[])
    wanted = None
    if req.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in req.topics}
    # the log manager's lock, which a move between log dirs holds through
    # its renames and fsyncs, is taken off the event loop
    results = await off_loop(_describe_log_dirs, ctx.broker.logs, wanted)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)


def _describe_log_dirs(manager: LogDirs, wanted: dict[str, set[int]] | None
                       ) -> list[DescribeLogDirsResponse.DescribeLogDirsResult]:
    R = DescribeLogDirsResponse
    results = []
    futures = manager.future_logs_by_dir()
    for log_dir, logs in manager.logs_by_dir().items():
        disk = _disk(log_dir)
        if disk is None or not manager.log_dir_online(log_dir):
            results.append(R.DescribeLogDirsResult(
                error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=log_dir, topics=[],
                total_bytes=-1, usable_bytes=-1))
            continue
        by_topic: dict[str, list[DescribeLogDirsResponse.DescribeLogDirsPartition]] = {}
        listed = [(lg, False) for lg in logs] + [(lg, True) for lg in futures.get(log_dir, ())]
        for lg, future in sorted(listed, key=lambda x: (x[0].topic, x[0].partition)):
            if wanted is not None and lg.partition not in wanted.get(lg.topic, ()):
                continue
            if future:
                # Kafka's offset lag of a future replica: how far its copy is
                # behind the log it is copied from
                current = manager.get_log(lg.topic, lg.partition)
                lag = max(0, current.log_end_offset - lg.log_end_offset) if current else -1
            else:
                lag = 0   # a log is never behind its own high watermark
            by_topic.setdefault(lg.topic, []).append(R.DescribeLogDirsPartition(
                partition_index=lg.partition, partition_size=lg.size_in_bytes(),
                offset_lag=lag, is_future_key=future))
        results.append(R.DescribeLogDirsResult(
            error_code=ErrorCode.NONE, log_dir=log_dir,
            topics=[R.DescribeLogDirsTopic(name=name, partitions=parts)
                    for name, parts in by_topic.items()],
            total_bytes=disk[0], usable_bytes=disk[1]))
    return results


async def handle_alter_replica_log_dirs(ctx: RequestContext, req: AlterReplicaLogDirsRequest
                                        ) -> AlterReplicaLogDirsResponse:
    """Kafka's ReplicaManager.alterReplicaLogDirs, per partition: the
    destination must be one of log.dirs, as an absolute path
    (LOG_DIR_NOT_FOUND), and online (KAFKA_STORAGE_ERROR); a partition this
    broker holds no replica of is REPLICA_NOT_AVAILABLE (the destination is
    remembered for when it comes), one the cluster does not have
    UNKNOWN_TOPIC_OR_PARTITION. The move itself goes on in the background."""
    R = AlterReplicaLogDirsResponse
    wanted: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                wanted[(t.name, p)] = d.path
    if not authz.cluster(ctx, Op.ALTER):
        codes: dict[tuple[str, int], int] = {
            key: ErrorCode.CLUSTER_AUTHORIZATION_FAILED for key in wanted}
    else:
        codes = await off_loop(_alter_log_dirs, ctx.broker, wanted)
    by_topic: dict[str, list[AlterReplicaLogDirsResponse.AlterReplicaLogDirPartitionResult]] = {}
    for (topic, partition), code in codes.items():
        by_topic.setdefault(topic, []).append(
            R.AlterReplicaLogDirPartitionResult(partition_index=partition, error_code=code))
    return R(throttle_time_ms=0, results=[
        R.AlterReplicaLogDirTopicResult(topic_name=topic, partitions=parts)
        for topic, parts in by_topic.items()])


def _alter_log_dirs(broker: Services, wanted: dict[tuple[str, int], str]
                    ) -> dict[tuple[str, int], int]:
    codes: dict[tuple[str, int], int] = {}
    for (topic, partition), path in wanted.items():
        try:
            if broker.logs.alter_log_dir(topic, partition, path):
                codes[(topic, partition)] = ErrorCode.NONE
                continue
        except StorageError as exc:
            codes[(topic, partition)] = exc.error_code
            continue
        meta = broker.topics.get(topic)
        known = meta is not None and 0 <= partition < meta.num_partitions
        codes[(topic, partition)] = (ErrorCode.REPLICA_NOT_AVAILABLE if known
                                     else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return codes
