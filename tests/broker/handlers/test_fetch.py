"""Fetch: the answers that need no log (unknown topic, not the leader, refused, sessions)."""
from __future__ import annotations

import asyncio
import threading
import uuid

from samsa.broker.handlers.fetch import _load_off_loop, _Target, handle_fetch
from samsa.broker.partitions import LeaderLookup
from samsa.broker.security.acl import AclOperation, ResourceType
from samsa.broker.security.principal import user
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import FetchRequest, FetchResponse
from samsa.protocol.model import ApiKey

from .acl_setup import allow
from .fakes import FakeAcls, FakeServices, context


def _request(*targets: tuple[str, int], session_id: int = 0, epoch: int = -1,
             forget: tuple[str, int] | None = None) -> FetchRequest:
    return FetchRequest(replica_id=-1, max_wait_ms=500, min_bytes=1, max_bytes=1 << 20,
                        session_id=session_id, session_epoch=epoch,
                        forgotten_topics_data=[] if forget is None else [
                            FetchRequest.ForgottenTopic(topic=forget[0],
                                                        partitions=[forget[1]])],
                        topics=[
                            FetchRequest.FetchTopic(topic=name, partitions=[
                                FetchRequest.FetchPartition(partition=p, fetch_offset=0,
                                                            partition_max_bytes=1 << 20)])
                            for name, p in targets])


def _codes(resp: FetchResponse | None) -> list[tuple[str, int, int]]:
    assert resp is not None
    return [(t.topic, p.partition_index, p.error_code) for t in resp.responses
            for p in t.partitions]


async def test_unknown_partitions_and_partitions_led_elsewhere_answer_at_once():
    services = FakeServices()
    services.topics.add("t", partitions=2)
    services.partitions.not_leader.add(("t", 1))
    ctx = context(services, ApiKey.FETCH, 12)
    resp = await handle_fetch(ctx, _request(("nope", 0), ("t", 1), ("t", 7)))
    assert _codes(resp) == [("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
                            ("t", 1, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                            ("t", 7, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert resp is not None
    assert all(p.high_watermark == -1 and p.records == b""
               for t in resp.responses for p in t.partitions)


async def test_an_unknown_fetch_session_is_refused_with_kafkas_code():
    ctx = context(FakeServices(), ApiKey.FETCH, 12)
    resp = await handle_fetch(ctx, _request(("t", 0), session_id=42, epoch=1))
    assert resp is not None and resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert resp.session_id == 0 and resp.responses == []


async def test_a_session_opened_by_a_full_fetch_serves_incremental_ones():
    services = FakeServices()
    services.topics.add("t", partitions=2)
    services.partitions.not_leader.add(("t", 0))
    ctx = context(services, ApiKey.FETCH, 12)
    first = await handle_fetch(ctx, _request(("t", 0), ("nope", 0), epoch=0))
    assert first is not None and first.session_id != 0
    sid = first.session_id
    # naming nothing: the session's partitions are read; errors are always answered
    resp = await handle_fetch(ctx, _request(session_id=sid, epoch=1))
    assert resp is not None and resp.session_id == sid
    assert _codes(resp) == [("t", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER),
                            ("nope", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    # the same epoch again, or one skipped: refused, the session kept
    for epoch in (1, 3):
        resp = await handle_fetch(ctx, _request(session_id=sid, epoch=epoch))
        assert resp is not None and resp.error_code == ErrorCode.INVALID_FETCH_SESSION_EPOCH
    # forgetting a partition never in the session is no error
    resp = await handle_fetch(ctx, _request(session_id=sid, epoch=2, forget=("t", 1)))
    assert resp is not None and resp.error_code == 0 and len(_codes(resp)) == 2
    resp = await handle_fetch(ctx, _request(session_id=sid, epoch=3, forget=("nope", 0)))
    assert _codes(resp) == [("t", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER)]
    # epoch -1 closes it; the fetch is answered without a session
    resp = await handle_fetch(ctx, _request(("t", 0), session_id=sid, epoch=-1))
    assert resp is not None and resp.session_id == 0 and len(_codes(resp)) == 1
    resp = await handle_fetch(ctx, _request(session_id=sid, epoch=4))
    assert resp is not None and resp.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


async def test_with_acls_reading_needs_read_on_the_topic_even_a_missing_one():
    services = FakeServices(acls=FakeAcls())
    services.topics.add("mine")
    services.partitions.not_leader.add(("mine", 0))
    assert services.acls is not None
    allow(services.acls, "User:bob", AclOperation.READ, ResourceType.TOPIC, "mine")
    ctx = context(services, ApiKey.FETCH, 12, user("bob"))
    assert _codes(await handle_fetch(ctx, _request(("mine", 0), ("missing", 0)))) == [
        ("mine", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ("missing", 0, ErrorCode.TOPIC_AUTHORIZATION_FAILED)]


class _Unloaded:
    """A log not read from disk yet (as storage/lazy_log.py's UnloadedLog): where it loads."""
    def __init__(self) -> None:
        self.loaded = False
        self.loaded_on: str | None = None

    def load(self) -> None:
        self.loaded_on = threading.current_thread().name
        self.loaded = True


async def test_a_fetch_naming_many_unloaded_logs_loads_them_off_the_event_loop():
    many = [_Unloaded() for _ in range(40)]
    few = [_Unloaded() for _ in range(3)]
    for logs in (many, few):
        targets = [_Target("t", uuid.UUID(int=0), i, 0, 100, LeaderLookup(ErrorCode.NONE, lg))
                   for i, lg in enumerate(logs)]
        await _load_off_loop(targets, asyncio.get_running_loop())
    assert all(lg.loaded_on and lg.loaded_on.startswith("samsa-fetch-load") for lg in many)
    # a few load where they are first read, as before
    assert all(lg.loaded_on is None for lg in few)


async def test_a_fetch_naming_thousands_of_partitions_lets_other_requests_run_meanwhile():
    """A follower's session names thousands of partitions; resolving and reading
    them all in one go held the event loop (every connection on it) for the
    whole pass. The pass gives the loop back between slices, so a request of
    another connection on the same loop is served before the big one ends."""
    services = FakeServices()
    services.topics.add("t", partitions=3000)
    services.partitions.not_leader.update(("t", p) for p in range(3000))
    looked_up: list[int] = []
    replica_log = services.partitions.replica_log

    def counted(topic: str, partition: int, epoch: int, replica_id: int) -> LeaderLookup:
        looked_up.append(partition)
        return replica_log(topic, partition, epoch, replica_id)

    services.partitions.replica_log = counted  # type: ignore[method-assign]
    seen_by_other: list[int] = []

    async def other_connections_request() -> None:
        seen_by_other.append(len(looked_up))

    request = _request(*(("t", p) for p in range(3000)))
    request.replica_id = 1  # a follower: its Fetch names every partition it follows
    other = asyncio.ensure_future(other_connections_request())
    resp = await handle_fetch(context(services, ApiKey.FETCH, 12), request)
    await other
    assert len(_codes(resp)) == 3000 and len(looked_up) == 3000
    # the other request ran while the big one was part way through its partitions
    assert 0 < seen_by_other[0] < 3000
