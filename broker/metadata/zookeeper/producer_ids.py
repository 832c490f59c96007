"""Producer ids in ZooKeeper mode: each broker claims blocks of 1,000 from
``/latest_producer_id_block`` (Kafka's layout) with a conditional write, so
two brokers never hand out the same id, and allocates from its block."""
from __future__ import annotations

import threading

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from .. import zk_layout as z
from .session import retriable_on_zookeeper_errors


class ProducerIdBlocks:
    def __init__(self, zk: KazooClient, broker_id: int, lock: threading.Lock) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self._lock = lock  # the store's: serializes its writes
        self._producer_ids: tuple[int, int] = (0, -1)  # next, last of the claimed block

    @retriable_on_zookeeper_errors
    def allocate_producer_id(self) -> int:
        with self._lock:
            next_id, last = self._producer_ids
            if next_id > last:
                block = self._claim_producer_id_block()
                next_id, last = block.start, block.end
            self._producer_ids = (next_id + 1, last)
            return next_id

    def _claim_producer_id_block(self) -> z.ProducerIdBlock:
        """The next block of 1,000 ids, claimed with a conditional write so two
        brokers never get the same block."""
        while True:
            try:
                data, stat = self.zk.get(z.LATEST_PRODUCER_ID_BLOCK)
            except NoNodeError:
                block = z.next_producer_id_block(None, self.broker_id)
                try:
                    self.zk.create(z.LATEST_PRODUCER_ID_BLOCK, z.encode_producer_id_block(block))
                    return block
                except NodeExistsError:
                    continue
            block = z.next_producer_id_block(z.decode_producer_id_block(data), self.broker_id)
            try:
                self.zk.set(z.LATEST_PRODUCER_ID_BLOCK, z.encode_producer_id_block(block),
                            version=stat.version)
                return block
            except BadVersionError:
                continue
