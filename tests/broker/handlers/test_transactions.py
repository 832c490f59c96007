"""Transaction handlers: what reaches the coordinator, and the codes clients see."""
from __future__ import annotations

import re

from samsa.broker.handlers.transactions import (handle_add_offsets_to_txn,
                                                handle_add_partitions_to_txn, handle_end_txn,
                                                handle_list_transactions)
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AddOffsetsToTxnRequest, AddPartitionsToTxnRequest,
                                     EndTxnRequest, ListTransactionsRequest)
from samsa.protocol.model import OFFSETS_TOPIC, ApiKey

from .fakes import FakeServices, FakeTransactions, context


def _txns(services: FakeServices) -> FakeTransactions:
    assert services.transactions is not None
    return services.transactions


async def test_add_offsets_adds_the_groups_offsets_partition_to_the_transaction():
    services = FakeServices()
    resp = await handle_add_offsets_to_txn(
        context(services, ApiKey.ADD_OFFSETS_TO_TXN, 3),
        AddOffsetsToTxnRequest(transactional_id="tx", producer_id=7, producer_epoch=1,
                               group_id="g"))
    assert resp.error_code == 0
    assert _txns(services).calls == [
        ("add_partitions", ("tx", 7, 1, [(OFFSETS_TOPIC, services.coordinators.partition_of("g"))]))]


async def test_end_txn_passes_commit_and_fenced_is_invalid_epoch_to_old_versions():
    services = FakeServices()
    _txns(services).end_code = ErrorCode.PRODUCER_FENCED
    req = EndTxnRequest(transactional_id="tx", producer_id=7, producer_epoch=1, committed=True)
    new = await handle_end_txn(context(services, ApiKey.END_TXN, 3), req)
    old = await handle_end_txn(context(services, ApiKey.END_TXN, 1), req)
    assert (new.error_code, old.error_code) == (ErrorCode.PRODUCER_FENCED,
                                                ErrorCode.INVALID_PRODUCER_EPOCH)
    assert _txns(services).calls[0] == ("end_transaction", ("tx", 7, 1, True))


async def test_before_the_coordinator_runs_the_answer_is_load_in_progress():
    services = FakeServices(transactions=None)
    resp = await handle_end_txn(context(services, ApiKey.END_TXN, 3), EndTxnRequest(
        transactional_id="tx", producer_id=7, producer_epoch=1, committed=False))
    assert resp.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


async def test_list_transactions_with_a_pattern_that_is_no_regex_is_invalid_regular_expression():
    services = FakeServices()
    _txns(services).list_error = re.error("unbalanced parenthesis")
    resp = await handle_list_transactions(
        context(services, ApiKey.LIST_TRANSACTIONS, 2),
        ListTransactionsRequest(state_filters=[], producer_id_filters=[],
                                transactional_id_pattern="("))
    assert resp.error_code == ErrorCode.INVALID_REGULAR_EXPRESSION == 128


async def test_end_txn_v5_answers_the_producer_epoch_to_continue_with():
    services = FakeServices()
    req = EndTxnRequest(transactional_id="tx", producer_id=7, producer_epoch=1, committed=True)
    v5 = await handle_end_txn(context(services, ApiKey.END_TXN, 5), req)
    assert (v5.error_code, v5.producer_id, v5.producer_epoch) == (0, 7, 2)
    v4 = await handle_end_txn(context(services, ApiKey.END_TXN, 4), req)  # classic: no epoch
    assert (v4.error_code, v4.producer_id, v4.producer_epoch) == (0, -1, -1)


async def test_add_partitions_v5_from_a_leader_adds_for_a_v2_producer():
    """AddPartitionsToTxn v5 without verify_only is a partition leader adding
    the partition of a transactions v2 producer's first write; v4 is classic."""
    R = AddPartitionsToTxnRequest
    services = FakeServices()

    def request(verify_only: bool) -> AddPartitionsToTxnRequest:
        return R(transactions=[R.AddPartitionsToTxnTransaction(
            transactional_id="tx", producer_id=7, producer_epoch=3, verify_only=verify_only,
            topics=[R.AddPartitionsToTxnTopic(name="t", partitions=[0])])])
    services.topics.add("t")
    v5 = await handle_add_partitions_to_txn(
        context(services, ApiKey.ADD_PARTITIONS_TO_TXN, 5), request(False))
    v4 = await handle_add_partitions_to_txn(
        context(services, ApiKey.ADD_PARTITIONS_TO_TXN, 4), request(False))
    for resp in (v5, v4):
        assert resp.results_by_transaction[0].topic_results[0].results_by_partition[0] \
            .partition_error_code == 0
    assert _txns(services).calls == [("add_partitions", ("tx", 7, 3, [("t", 0)]))] * 2
    assert _txns(services).add_versions == [2, 0]
