"""Drive transactions over the wire without a transaction coordinator: a
producer id from InitProducerId, transactional batches built by kafka-python's
own batch builder (an implementation independent of samsa's), and the
WriteTxnMarkers requests a coordinator would send; plus the reads that show
the result (Fetch with an isolation level, ListOffsets, DescribeProducers).

Transactional batches go with a transactional id, as Kafka requires
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED otherwise); with no coordinator
driving the transaction, the broker must run with
transaction.partition.verification.enable=false (NO_VERIFICATION below)."""
from __future__ import annotations

from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import (DescribeProducersRequest, FetchRequest, InitProducerIdRequest,
                               ListOffsetsRequest, ProduceRequest, WriteTxnMarkersRequest)
from samsa.protocol.records import iter_all_records
from tests.storage.helpers import build_batch

PRODUCE, FETCH, LIST_OFFSETS, INIT_PRODUCER_ID, WRITE_TXN_MARKERS, DESCRIBE_PRODUCERS = (
    0, 1, 2, 22, 27, 61)
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
# what a broker these tests drive needs: no coordinator verifies the partitions
NO_VERIFICATION = {"transaction.partition.verification.enable": "false"}
TRANSACTIONAL_ID = "txn-wire"


class TxnWire:
    def __init__(self, bootstrap: str, timeout: float = 30.0):
        self.client = SimpleClient(bootstrap, timeout=timeout)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "TxnWire":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def init_pid(self) -> tuple[int, int]:
        r = self.client.call(INIT_PRODUCER_ID, InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000))
        assert r.error_code == 0, r
        return r.producer_id, r.producer_epoch

    def produce(self, topic: str, values, *, pid: int = -1, epoch: int = -1, seq: int = -1,
                transactional: bool = False, partition: int = 0, acks: int = -1,
                transactional_id: str | None = TRANSACTIONAL_ID):
        batch = build_batch(list(values), producer_id=pid, producer_epoch=epoch,
                            base_sequence=seq, transactional=transactional)
        r = self.client.call(PRODUCE, ProduceRequest(
            acks=acks, timeout_ms=10000,
            transactional_id=transactional_id if transactional else None, topic_data=[
                ProduceRequest.TopicProduceData(name=topic, partition_data=[
                    ProduceRequest.PartitionProduceData(index=partition, records=batch)])]),
            highest=9)
        return r.responses[0].partition_responses[0]

    def marker(self, topic: str, pid: int, epoch: int, commit: bool, *, partitions=(0,),
               coordinator_epoch: int = 0, transaction_version: int = 0) -> dict[int, int]:
        """WriteTxnMarkers for one producer: partition -> error code."""
        W = WriteTxnMarkersRequest
        r = self.client.call(WRITE_TXN_MARKERS, W(markers=[W.WritableTxnMarker(
            producer_id=pid, producer_epoch=epoch, transaction_result=commit,
            coordinator_epoch=coordinator_epoch, transaction_version=transaction_version,
            topics=[W.WritableTxnMarkerTopic(name=topic, partition_indexes=list(partitions))])]))
        assert len(r.markers) == 1 and r.markers[0].producer_id == pid
        return {p.partition_index: p.error_code
                for t in r.markers[0].topics for p in t.partitions}

    def fetch(self, topic: str, offset: int, isolation: int, *, partition: int = 0,
              max_wait_ms: int = 0, min_bytes: int = 0):
        r = self.client.call(FETCH, FetchRequest(
            replica_id=-1, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=1 << 20,
            isolation_level=isolation, session_id=0, session_epoch=-1, topics=[
                FetchRequest.FetchTopic(topic=topic, partitions=[FetchRequest.FetchPartition(
                    partition=partition, current_leader_epoch=-1, fetch_offset=offset,
                    log_start_offset=-1, partition_max_bytes=1 << 20)])],
            forgotten_topics_data=[], rack_id=""), highest=11)
        assert r.error_code == 0, r
        return r.responses[0].partitions[0]

    def latest(self, topic: str, isolation: int, partition: int = 0) -> int:
        r = self.client.call(LIST_OFFSETS, ListOffsetsRequest(
            replica_id=-1, isolation_level=isolation, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=topic, partitions=[
                    ListOffsetsRequest.ListOffsetsPartition(partition_index=partition,
                                                            timestamp=-1)])]))
        p = r.topics[0].partitions[0]
        assert p.error_code == 0, p
        return p.offset

    def producers(self, topic: str, partition: int = 0):
        r = self.client.call(DESCRIBE_PRODUCERS, DescribeProducersRequest(topics=[
            DescribeProducersRequest.TopicRequest(name=topic, partition_indexes=[partition])]))
        return r.topics[0].partitions[0]


def data_records(pdata) -> list[tuple[int, bytes]]:
    """(offset, value) of the non-control records of a fetch answer."""
    return [(r.offset, r.value) for h, r in iter_all_records(bytes(pdata.records))
            if not h.is_control]
