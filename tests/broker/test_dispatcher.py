"""The dispatcher's plaintext fast path: a connection of a listener without
SASL never touches SASL state, and with no quota configured no quota object
is made per request; a SASL listener's connection still goes through the
gate, and a configured quota through ClientQuotas.admit."""
from __future__ import annotations

import asyncio

import pytest

from samsa.broker import dispatcher as dispatcher_module
from samsa.broker.dispatcher import Dispatcher
from samsa.broker.metadata import BrokerEndpoint, EmbeddedMetadataStore
from samsa.broker.metrics import BrokerMetrics
from samsa.broker.network.context import ConnectionContext
from samsa.broker.quotas import ClientQuotas, QuotaConfigs, QuotaWindow
from samsa.broker.security.sasl.settings import SaslSettings
from samsa.broker.server import advertised_apis
from samsa.protocol.messages import (ApiVersionsRequest, ApiVersionsResponse, ProduceRequest,
                               RequestHeader,
                               encode_request)
from samsa.protocol.model import ApiKey


class _Services:
    def __init__(self, store) -> None:
        self.advertised_apis = advertised_apis()
        self.metrics = BrokerMetrics()
        self.sasl = SaslSettings({})
        self.quotas = ClientQuotas(QuotaConfigs(store), QuotaWindow(11, 1000.0))


def _frame() -> memoryview:
    wire = encode_request(RequestHeader(api_key=ApiKey.API_VERSIONS, api_version=3, correlation_id=7,
                                        client_id="app"),
                          ApiVersionsRequest(client_software_name="t",
                                             client_software_version="1"))
    return memoryview(bytearray(wire))[4:]  # the network layer strips the size


class _Connection:
    """The network side of a connection, as far as the dispatcher sees it."""
    closed = False

    @property
    def peer_gone(self) -> bool:
        return self.closed

    def mute_remaining(self) -> float:
        return 0.0

    def mute_for(self, ms: int) -> None:
        pass


def _conn(security_protocol: str) -> ConnectionContext:
    return ConnectionContext("c", ("127.0.0.1", 1), ("127.0.0.1", 2), None, 0, _Connection(),
                             security_protocol=security_protocol)


@pytest.fixture
def setup(tmp_path, monkeypatch):
    store = EmbeddedMetadataStore(str(tmp_path), 0, BrokerEndpoint(0, "localhost", 9092))
    services = _Services(store)
    d = Dispatcher(services)
    answer = ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0)

    async def handler(ctx, req):
        return answer
    d.handlers[ApiKey.API_VERSIONS] = handler
    calls: list[str] = []

    def spy(name, real):
        def wrapped(*a, **kw):
            calls.append(name)
            return real(*a, **kw)
        return wrapped
    monkeypatch.setattr(dispatcher_module, "expects_raw_token",
                        spy("expects_raw_token", dispatcher_module.expects_raw_token))
    monkeypatch.setattr(dispatcher_module, "admits", spy("admits", dispatcher_module.admits))
    monkeypatch.setattr(services.quotas, "admit", spy("quota.admit", services.quotas.admit))
    return store, d, calls


def test_plaintext_without_quotas_takes_the_short_path(setup):
    store, d, calls = setup
    parts = asyncio.run(d(_conn("PLAINTEXT"), _frame()))
    assert parts and calls == []


def test_sasl_listener_and_quotas_still_take_their_paths(setup):
    store, d, calls = setup
    conn = _conn("SASL_PLAINTEXT")
    assert conn.sasl and not conn.authenticated
    assert asyncio.run(d(conn, _frame()))  # ApiVersions is allowed before authentication
    assert calls == ["expects_raw_token", "admits"]
    calls.clear()
    store.set_entity_configs("clients/app", {"request_percentage": "50"})
    assert asyncio.run(d(_conn("PLAINTEXT"), _frame()))
    assert calls == ["quota.admit"]


def test_a_mutation_quota_meters_only_the_topic_admin_apis(setup, tmp_path):
    store, d, calls = setup
    store.set_entity_configs("clients/app", {"controller_mutation_rate": "1"})
    assert asyncio.run(d(_conn("PLAINTEXT"), _frame()))
    assert calls == []  # ApiVersions, and as much Produce and Fetch: the short path
    quotas = d.services.quotas
    assert not quotas.meters(ApiKey.PRODUCE) and not quotas.meters(ApiKey.FETCH)
    assert (quotas.meters(ApiKey.CREATE_TOPICS) and quotas.meters(ApiKey.DELETE_TOPICS)
            and quotas.meters(ApiKey.CREATE_PARTITIONS))
    # CreateTopics is still charged: admitted with the client's mutation quota
    create = quotas.admit(_conn("PLAINTEXT"), RequestHeader(
        api_key=ApiKey.CREATE_TOPICS, api_version=6, correlation_id=1, client_id="app"), None, 0)
    assert create.mutation.match == (1, "", "app") and create.mutation.strict
    assert create.produce is create.fetch is create.request_time is None
    # and Metadata's auto-creation charges it without being metered
    assert quotas.mutation_quota("ANONYMOUS", "app", strict=False).match == (1, "", "app")
    store.set_entity_configs("clients/app", {"controller_mutation_rate": "1",
                                             "request_percentage": "50"})
    assert quotas.meters(ApiKey.PRODUCE) and quotas.meters(ApiKey.FETCH)


def _request_frame(api_key: int, version: int, correlation_id: int, request) -> memoryview:
    wire = encode_request(RequestHeader(api_key=api_key, api_version=version,
                                        correlation_id=correlation_id, client_id="app"), request)
    return memoryview(bytearray(wire))[4:]


def test_a_produce_that_fails_before_appending_lets_the_next_one_append(setup):
    """The dispatcher ends a Produce request's turn however its handler ends:
    one raising after a wait (as on the transaction coordinator) must not
    leave the connection's later Produce requests waiting for ever."""
    store, d, calls = setup
    appended: list[int] = []

    async def scenario() -> None:
        conn = _conn("PLAINTEXT")
        coordinator = asyncio.Event()

        async def produce(ctx, req):
            if ctx.header.correlation_id == 1:
                await coordinator.wait()
                raise RuntimeError("a handler bug")
            if not ctx.may_append():
                await ctx.wait_to_append()
            appended.append(ctx.header.correlation_id)
            ctx.appended()
            return None  # (as for acks=0)
        d.handlers[ApiKey.PRODUCE] = produce
        frames = [_request_frame(ApiKey.PRODUCE, 9, c, ProduceRequest(
            transactional_id=None, acks=1, timeout_ms=1000, topic_data=[])) for c in (1, 2)]
        first = asyncio.create_task(d(conn, frames[0]))
        second = asyncio.create_task(d(conn, frames[1]))
        for _ in range(3):
            await asyncio.sleep(0)
        assert appended == [] and not second.done()  # behind the first
        coordinator.set()
        with pytest.raises(RuntimeError):
            await first
        await asyncio.wait_for(second, 30)

    asyncio.run(scenario())
    assert appended == [2]


class _MutedConnection(_Connection):
    """Muted for a while after each request arrived (the task's name says how long),
    so that the timers of the requests held behind the mute end in reverse order."""

    def __init__(self, mutes: dict[str, float]) -> None:
        self.mutes = mutes
        self.until: dict[str, float] = {}

    def mute_remaining(self) -> float:
        task = asyncio.current_task()
        assert task is not None
        name = task.get_name()
        now = asyncio.get_running_loop().time()
        until = self.until.setdefault(name, now + self.mutes.get(name, 0.0))
        return max(0.0, until - now)


def test_requests_held_behind_a_mute_are_handled_in_the_order_they_arrived(setup):
    """As Kafka, reading one request of a connection at a time, would handle them
    (a consumer's pipelined commits, oldest first), however their timers end;
    one arriving once the mute is over still goes after those held."""
    store, d, calls = setup
    store.set_entity_configs("clients/app", {"request_percentage": "50"})
    handled: list[int] = []

    async def scenario() -> None:
        conn = ConnectionContext("c", ("127.0.0.1", 1), ("127.0.0.1", 2), None, 0,
                                 _MutedConnection({"r1": 0.06, "r2": 0.04, "r3": 0.02}))

        async def handler(ctx, req):
            handled.append(ctx.header.correlation_id)
            return ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0)
        d.handlers[ApiKey.API_VERSIONS] = handler
        frames = [_request_frame(ApiKey.API_VERSIONS, 3, c, ApiVersionsRequest(
            client_software_name="t", client_software_version="1")) for c in (1, 2, 3, 4)]
        held = [asyncio.create_task(d(conn, frames[i]), name=f"r{i + 1}") for i in range(3)]
        await asyncio.sleep(0)
        assert conn.holds_requests()
        late = asyncio.create_task(d(conn, frames[3]), name="r4")  # not muted itself
        await asyncio.wait_for(asyncio.gather(*held, late), 30)

    asyncio.run(scenario())
    assert handled == [1, 2, 3, 4]


def test_a_pause_and_a_mute_on_one_connection_keep_the_arrival_order(setup):
    """The test kit's pause (faults/injector.py) and a mute hold requests at two
    places, in one order: a request muted, requests paused behind it, and one
    arriving right after the resume are handled as they arrived. The muted one,
    past the pause's place, goes on when its mute ends, pause or not."""
    from samsa.broker.faults.injector import FaultInjector
    store, d, calls = setup
    handled: list[int] = []

    async def scenario() -> None:
        conn = ConnectionContext("c", ("127.0.0.1", 1), ("127.0.0.1", 2), None, 0,
                                 _MutedConnection({"r1": 0.05}))

        async def handler(ctx, req):
            handled.append(ctx.header.correlation_id)
            return ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0)
        d.handlers[ApiKey.API_VERSIONS] = handler
        injector = FaultInjector(lambda topic_id: None)
        handle = injector.wrap(d)
        frames = [_request_frame(ApiKey.API_VERSIONS, 3, c, ApiVersionsRequest(
            client_software_name="t", client_software_version="1")) for c in range(1, 5)]
        tasks = [asyncio.create_task(handle(conn, frames[0]), name="r1")]
        await asyncio.sleep(0)
        assert conn.holds_requests()  # r1, behind its mute
        injector.rules.paused = True
        tasks += [asyncio.create_task(handle(conn, frames[i]), name=f"r{i + 1}") for i in (1, 2)]
        deadline = asyncio.get_running_loop().time() + 30
        while handled != [1]:  # r1's mute ends; r2 and r3 stay paused
            assert not handled and asyncio.get_running_loop().time() < deadline, handled
            await asyncio.sleep(0.005)
        injector.rules.paused = False
        tasks.append(asyncio.create_task(handle(conn, frames[3]), name="r4"))
        await asyncio.wait_for(asyncio.gather(*tasks), 30)
        assert not conn.holds_requests()

    asyncio.run(scenario())
    assert handled == [1, 2, 3, 4]


def test_a_request_that_waits_its_whole_turn_starts_once_the_earlier_ones_ended(setup):
    """request_order.py: an admin change and the Describe pipelined behind it go
    on in the order they arrived, also when the change raises; a request whose
    order does not matter (ApiVersions here, a Fetch in life) is not held; a
    Describe cancelled while it waits leaves the later ones free to go."""
    from samsa.protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
    store, d, calls = setup
    started: list[int] = []

    async def scenario() -> None:
        conn = _conn("PLAINTEXT")
        worker_thread = asyncio.Event()

        async def alter(ctx, req):
            started.append(ctx.header.correlation_id)
            await worker_thread.wait()
            raise RuntimeError("a handler bug")

        async def handler(ctx, req):
            started.append(ctx.header.correlation_id)
            return ApiVersionsResponse(error_code=0, api_keys=[], throttle_time_ms=0)
        d.handlers[ApiKey.INCREMENTAL_ALTER_CONFIGS] = alter
        d.handlers[ApiKey.DESCRIBE_CONFIGS] = d.handlers[ApiKey.API_VERSIONS] = handler
        alter_frame = _request_frame(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, 1,
                                     IncrementalAlterConfigsRequest(resources=[]))
        describe = [_request_frame(ApiKey.DESCRIBE_CONFIGS, 4, c, DescribeConfigsRequest(
            resources=[], include_synonyms=False, include_documentation=False)) for c in (2, 3)]
        versions = _request_frame(ApiKey.API_VERSIONS, 3, 4, ApiVersionsRequest(
            client_software_name="t", client_software_version="1"))
        first = asyncio.create_task(d(conn, alter_frame))
        cancelled = asyncio.create_task(d(conn, describe[0]))
        later = asyncio.create_task(d(conn, describe[1]))
        unordered = asyncio.create_task(d(conn, versions))
        await asyncio.wait_for(unordered, 30)
        assert started == [1, 4] and not later.done()  # behind the change
        cancelled.cancel()
        for _ in range(3):
            await asyncio.sleep(0)
        assert started == [1, 4] and not later.done()  # the change still holds it
        worker_thread.set()
        with pytest.raises(RuntimeError):
            await first
        await asyncio.wait_for(later, 30)
        assert cancelled.cancelled()

    asyncio.run(scenario())
    assert started == [1, 4, 3]


def test_a_brokers_add_partitions_to_txn_takes_no_turn_a_producers_does(setup):
    """request_order.py: a producer's AddPartitionsToTxn (v3 and below) waits
    behind the EndTxn sent before it; a broker's (v4+, KIP-890 verification of
    many producers' partitions) does not wait on the connection's others."""
    from samsa.protocol.messages import AddPartitionsToTxnRequest, EndTxnRequest
    store, d, calls = setup
    started: list[int] = []

    async def scenario() -> None:
        conn = _conn("PLAINTEXT")
        written = asyncio.Event()

        async def end_txn(ctx, req):
            started.append(ctx.header.correlation_id)
            await written.wait()
            return None

        async def add(ctx, req):
            started.append(ctx.header.correlation_id)
            return None
        d.handlers[ApiKey.END_TXN] = end_txn
        d.handlers[ApiKey.ADD_PARTITIONS_TO_TXN] = add
        end = _request_frame(ApiKey.END_TXN, 3, 1, EndTxnRequest(
            transactional_id="t", producer_id=1, producer_epoch=0, committed=False))
        from_broker = _request_frame(ApiKey.ADD_PARTITIONS_TO_TXN, 4, 2,
                                     AddPartitionsToTxnRequest(transactions=[]))
        from_producer = _request_frame(ApiKey.ADD_PARTITIONS_TO_TXN, 3, 3,
                                       AddPartitionsToTxnRequest(
                                           v3_and_below_transactional_id="t",
                                           v3_and_below_producer_id=1,
                                           v3_and_below_producer_epoch=0,
                                           v3_and_below_topics=[]))
        first = asyncio.create_task(d(conn, end))
        broker = asyncio.create_task(d(conn, from_broker))
        producer = asyncio.create_task(d(conn, from_producer))
        await asyncio.wait_for(broker, 30)
        assert started == [1, 2] and not producer.done()  # behind the EndTxn
        written.set()
        await asyncio.wait_for(asyncio.gather(first, producer), 30)

    asyncio.run(scenario())
    assert started == [1, 2, 3]


def test_a_membership_request_goes_after_the_earlier_turns_and_holds_none_while_it_waits(setup):
    """request_order.py: a LeaveGroup pipelined behind a commit still waiting
    its turn starts only once the commit has started (overtaking it, it
    removed the member and the commit was refused); a v0 commit (ZooKeeper,
    a worker thread) holds it until it has ended; a commit waiting for
    replication (v1+) and a JoinGroup waiting for its rebalance hold back no
    request sent after them."""
    from samsa.protocol.messages import (CreateTopicsRequest, DescribeGroupsRequest,
                                         JoinGroupRequest, LeaveGroupRequest,
                                         OffsetCommitRequest)
    store, d, calls = setup
    started: list[int] = []

    async def scenario() -> None:
        conn = _conn("PLAINTEXT")
        created = asyncio.Event()
        replicated = asyncio.Event()
        written_to_zookeeper = asyncio.Event()
        rebalanced = asyncio.Event()

        def waiting_for(event: asyncio.Event):
            async def handler(ctx, req):
                started.append(ctx.header.correlation_id)
                await event.wait()
                return None
            return handler

        async def quick(ctx, req):
            started.append(ctx.header.correlation_id)
            return None

        async def commit(ctx, req):
            started.append(ctx.header.correlation_id)
            await (replicated if ctx.version >= 1 else written_to_zookeeper).wait()
            return None
        d.handlers[ApiKey.CREATE_TOPICS] = waiting_for(created)
        d.handlers[ApiKey.OFFSET_COMMIT] = commit
        d.handlers[ApiKey.JOIN_GROUP] = waiting_for(rebalanced)
        d.handlers[ApiKey.LEAVE_GROUP] = d.handlers[ApiKey.DESCRIBE_GROUPS] = quick

        def leave(correlation_id: int) -> asyncio.Task:
            return asyncio.create_task(d(conn, _request_frame(
                ApiKey.LEAVE_GROUP, 4, correlation_id, LeaveGroupRequest(group_id="g",
                                                                         members=[]))))
        create = asyncio.create_task(d(conn, _request_frame(
            ApiKey.CREATE_TOPICS, 5, 1, CreateTopicsRequest(topics=[], timeout_ms=1000,
                                                            validate_only=False))))
        committing = asyncio.create_task(d(conn, _request_frame(
            ApiKey.OFFSET_COMMIT, 8, 2, OffsetCommitRequest(group_id="g", topics=[]))))
        leaving = leave(3)
        for _ in range(5):
            await asyncio.sleep(0)
        assert started == [1] and not leaving.done()  # behind the commit behind the create
        created.set()
        await asyncio.wait_for(asyncio.gather(create, leaving), 30)
        assert started == [1, 2, 3] and not committing.done()  # replication holds none
        replicated.set()
        await asyncio.wait_for(committing, 30)

        committing = asyncio.create_task(d(conn, _request_frame(
            ApiKey.OFFSET_COMMIT, 0, 4, OffsetCommitRequest(group_id="g", topics=[]))))
        leaving = leave(5)
        for _ in range(5):
            await asyncio.sleep(0)
        assert started[3:] == [4] and not leaving.done()  # behind the v0 commit
        written_to_zookeeper.set()
        await asyncio.wait_for(asyncio.gather(committing, leaving), 30)
        assert started[3:] == [4, 5]

        J = JoinGroupRequest
        joining = asyncio.create_task(d(conn, _request_frame(ApiKey.JOIN_GROUP, 5, 6, J(
            group_id="g", session_timeout_ms=30000, rebalance_timeout_ms=30000, member_id="",
            group_instance_id=None, protocol_type="consumer", protocols=[]))))
        describe = asyncio.create_task(d(conn, _request_frame(
            ApiKey.DESCRIBE_GROUPS, 5, 7, DescribeGroupsRequest(groups=["g"]))))
        await asyncio.wait_for(describe, 30)  # not held by the join's wait
        assert started[5:] == [6, 7] and not joining.done()
        rebalanced.set()
        await asyncio.wait_for(joining, 30)

    asyncio.run(scenario())


def test_requests_waiting_their_turn_are_not_handled_once_the_client_went(setup):
    """A config change (or a LeaveGroup) waiting behind a slow request is
    dropped when the connection closes meanwhile: Kafka, reading one request
    at a time, never read it, and a client that timed out and retried on a
    new connection must not see this stale one land after its retry."""
    from samsa.protocol.messages import (IncrementalAlterConfigsRequest, LeaveGroupRequest)
    store, d, calls = setup
    started: list[int] = []

    async def scenario() -> None:
        conn = _conn("PLAINTEXT")
        worker_thread = asyncio.Event()

        async def slow(ctx, req):
            started.append(ctx.header.correlation_id)
            await worker_thread.wait()
            return None

        async def quick(ctx, req):
            started.append(ctx.header.correlation_id)
            return None
        d.handlers[ApiKey.CREATE_TOPICS] = slow
        d.handlers[ApiKey.INCREMENTAL_ALTER_CONFIGS] = d.handlers[ApiKey.LEAVE_GROUP] = quick
        from samsa.protocol.messages import CreateTopicsRequest
        first = asyncio.create_task(d(conn, _request_frame(
            ApiKey.CREATE_TOPICS, 5, 1, CreateTopicsRequest(topics=[], timeout_ms=1000,
                                                            validate_only=False))))
        change = asyncio.create_task(d(conn, _request_frame(
            ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, 2,
            IncrementalAlterConfigsRequest(resources=[], validate_only=False))))
        leave = asyncio.create_task(d(conn, _request_frame(
            ApiKey.LEAVE_GROUP, 4, 3, LeaveGroupRequest(group_id="g", members=[]))))
        for _ in range(5):
            await asyncio.sleep(0)
        assert started == [1]
        conn._conn.closed = True  # the client went
        worker_thread.set()
        await asyncio.wait_for(asyncio.gather(first, change, leave), 30)

    asyncio.run(scenario())
    assert started == [1]
