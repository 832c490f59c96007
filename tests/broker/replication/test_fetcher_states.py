"""What a follower's Fetch names (broker/replication/fetcher.py): the fetcher
keeps each partition's fetch state between rounds and reads the log again only
for partitions an answer named, so each request must still ask from where the
last answer left the log. The leader here answers from a real log through a
fetch session of one partition; the follower appends to a real log."""
from __future__ import annotations

import types

from samsa.broker.replication.fetcher import ReplicaFetcher, _Followed
from samsa.config.topic import TopicConfig
from samsa.protocol.messages import FetchResponse
from samsa.storage.log import AppendOrigin, Log
from tests.storage.helpers import batch_of

R = FetchResponse
_CONFIG = types.SimpleNamespace(
    broker_id=1, replica_fetch_max_bytes=1 << 20, replica_fetch_response_max_bytes=1 << 20,
    replica_fetch_wait_max_ms=500, replica_fetch_min_bytes=1, replica_fetch_backoff_ms=1000,
    replica_socket_timeout_ms=30_000)


class _Leader:
    """Answers Fetch for ("t", 0) from ``log``, one batch at a time, at the
    offset the session holds: the one the last request naming it gave."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.offset: int | None = None
        self.named: list[int] = []  # the fetch offset of each request naming the partition

    async def call(self, request, *, api_key: int, version: int):
        for topic in request.topics:
            for p in topic.partitions:
                self.offset = p.fetch_offset
                self.named.append(p.fetch_offset)
        assert self.offset is not None
        read = self.log.read(self.offset, 1) if self.offset < self.log.log_end_offset else None
        records = read.regions[0].read_bytes() if read is not None and read.regions else b""
        hw = self.log.log_end_offset
        return R(throttle_time_ms=0, error_code=0, session_id=7, responses=[
            R.FetchableTopicResponse(topic="t", partitions=[R.PartitionData(
                partition_index=0, error_code=0, high_watermark=hw, last_stable_offset=hw,
                log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
                records=records)])])


async def test_each_fetch_asks_from_where_the_last_answer_left_the_log(tmp_path):
    leader_log = Log.open(str(tmp_path / "leader" / "t-0"), TopicConfig())
    follower_log = Log.open(str(tmp_path / "follower" / "t-0"), TopicConfig())
    try:
        for _ in range(4):
            leader_log.append(batch_of(3), 0, origin=AppendOrigin.CLIENT)
        fetcher = ReplicaFetcher(lambda: _CONFIG, endpoint=lambda broker: None)
        followed = _Followed(follower_log, leader=2, leader_epoch=0)
        followed.truncated = True
        leader = _Leader(leader_log)
        for _ in range(4):  # each answer carries one batch of three records
            await fetcher._fetch(leader, [followed], _CONFIG)  # type: ignore[arg-type]
        assert follower_log.log_end_offset == 12
        # every request named the partition at the follower's new log end: none
        # asked again from an offset already appended (which the follower's log
        # would refuse, sending it back to truncation)
        assert leader.named == [0, 3, 6, 9]
        assert followed.truncated
        fetcher._loop.close()
    finally:
        leader_log.close()
        follower_log.close()
