"""How many record batches a topic's log holds, read back from the broker after a run.

Why from the broker: the partition-scale scenario needs the number of partition-batches
its producers sent. librdkafka tells it only through its statistics callback, and at 1,000
partitions that is most of a megabyte of JSON per producer per second, parsed by the
producer processes on the two cores the broker under test runs on: counting that way
slowed the very MB/s it was meant to explain. The log has the same count at no cost
during the timed window: a producer's batch is appended as it came (samsa and Kafka keep
a v2 batch whole), so after the run one fetch of every partition, reading only the 61-byte
batch headers, counts them.

Which batches: those whose first record's CreateTime is at or after ``since_ms``, the
wall clock (ms) at which the timed sending began. The producers' untimed warm-up records
were acknowledged and at least a millisecond older (see ``load.produce_batches_worker``),
so they fall before it; the count of records in the batches taken is returned beside the
count of batches, for the caller to check against the records the producers had acked.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from samsa.client.blocking import SimpleClient, error_text
from samsa.protocol.messages import FetchRequest
from samsa.protocol.model import ApiKey
from samsa.protocol.records import iter_batch_headers

_LAST_FETCH_BY_NAME = 12          # v13 names topics by id
_PARTITION_MAX_BYTES = 8 << 20    # a sticky producer's batch is up to 1 MB
_MAX_BYTES = 64 << 20


@dataclass
class LogBatches:
    batches: int   # batches whose first record is at or after since_ms
    records: int   # records in those batches
    seconds: float  # how long the reading took (outside any timed window)


def count_batches_since(bootstrap: str, topic: str, partitions: int, since_ms: int,
                        timeout: float = 300.0) -> LogBatches:
    """Walk every partition of ``topic`` from offset 0 to its high watermark (one broker:
    the bench's single-broker setups) and count the batches that begin at or after
    ``since_ms``. The log's end is taken from the Fetch answers, not from ListOffsets:
    the peer (Tansu 0.6) answers ListOffsets "latest" with 1 for a partition holding 50
    records, and a Fetch that may return nothing at once (min_bytes 0) with no partitions
    at all, so every Fetch here asks for at least a byte; each partition asked for has data."""
    started = time.monotonic()
    batches = records = 0
    positions = {p: 0 for p in range(partitions)}
    deadline = started + timeout
    F = FetchRequest
    with SimpleClient(bootstrap, client_id="bench-batch-count") as client:
        while positions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}: {len(positions)} partitions not read to their end "
                                   f"in {timeout:.0f}s")
            req = F(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=_MAX_BYTES, isolation_level=0,
                    session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
                    topics=[F.FetchTopic(topic=topic, partitions=[
                        F.FetchPartition(partition=p, fetch_offset=at, partition_max_bytes=_PARTITION_MAX_BYTES)
                        for p, at in sorted(positions.items())])])
            resp = client.call(ApiKey.FETCH, req, highest=_LAST_FETCH_BY_NAME)
            if resp.error_code:
                raise RuntimeError(f"fetch of {topic}: {error_text(resp.error_code)}")
            for t in resp.responses:
                for pd in t.partitions:
                    p = pd.partition_index
                    if pd.error_code:
                        raise RuntimeError(f"fetch of {topic}-{p}: {error_text(pd.error_code)}")
                    at = positions[p]
                    for _, hdr in iter_batch_headers(pd.records or b""):
                        if hdr.next_offset <= at:
                            continue  # a batch that began before the position we asked for
                        if hdr.base_timestamp >= since_ms:
                            batches += 1
                            records += hdr.records_count
                        at = hdr.next_offset
                    if at >= pd.high_watermark:
                        del positions[p]
                    else:
                        positions[p] = at
    return LogBatches(batches, records, time.monotonic() - started)
