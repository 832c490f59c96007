"""Micro-benchmark of the message codecs on the two hot paths.

- decode a Produce v9 request carrying 8 partitions of 16 KiB records
- encode a Fetch v12 response of 8 partitions with bytes records (16 KiB each)

Prints microseconds per operation (best of several rounds of many calls).
Target: 20 us or less each.  Not a test: run `python bench/bench_protocol.py`.
"""
from __future__ import annotations

import os
import sys
import timeit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from samsa.protocol.messages import (FetchResponse, ProduceRequest, RequestHeader,
                               decode_request, encode_request, encode_response)

PARTITIONS = 8
RECORDS = os.urandom(16 * 1024)


def produce_frame() -> memoryview:
    req = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
        name="bench-topic", partition_data=[
            ProduceRequest.PartitionProduceData(index=i, records=RECORDS) for i in range(PARTITIONS)])])
    return memoryview(encode_request(RequestHeader(0, 9, 1, "bench-client"), req))[4:]


def fetch_response() -> FetchResponse:
    P = FetchResponse.PartitionData
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[
        FetchResponse.FetchableTopicResponse(topic="bench-topic", partitions=[
            P(partition_index=i, error_code=0, high_watermark=1000, last_stable_offset=1000,
              log_start_offset=0, aborted_transactions=None, preferred_read_replica=-1,
              records=RECORDS) for i in range(PARTITIONS)])])


def best_us(fn, number=2000, repeat=7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def main():
    frame = produce_frame()
    decode_request(frame)  # compile once
    d = best_us(lambda: decode_request(frame))

    resp = fetch_response()
    hdr = RequestHeader(1, 12, 7, "bench-client")
    encode_response(hdr, resp)
    e = best_us(lambda: encode_response(hdr, resp))

    print(f"decode Produce v9 request, {PARTITIONS} x 16 KiB: {d:7.2f} us  (target <= 20)")
    print(f"encode Fetch v12 response, {PARTITIONS} x 16 KiB: {e:7.2f} us  (target <= 20)")


if __name__ == "__main__":
    main()
