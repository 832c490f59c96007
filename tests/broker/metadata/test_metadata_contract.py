"""One contract, two metadata stores: the embedded store (files in the log
dir) and the ZooKeeper store (a real ZooKeeper server, Kafka's layout).
Then what only the ZooKeeper store promises: Kafka's znodes readable by any
ZooKeeper client, several brokers on one ensemble, a duplicate broker id
refused, a chroot created, topics written by a tool picked up."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from samsa.broker.metadata import (BrokerEndpoint, EmbeddedMetadataStore, IsrChange,
                             MetadataUnavailableError, TopicExistsError, UnknownTopicError,
                             kafka_id)
from samsa.broker.cluster.controller import Controller
from samsa.broker.metadata.zookeeper import BrokerIdInUseError, ZooKeeperMetadataStore
from tests.support.waiting import wait_until


class _Stores:
    """Opens stores of one kind; ``reopen`` is a broker restart."""

    def __init__(self, kind, tmp_path: Path, request):
        self.kind = kind
        self.tmp_path = tmp_path
        self.opened = []
        self.connect = None
        self.controller = None
        if kind == "zookeeper":
            self.connect = request.getfixturevalue("zookeeper").connect + "/samsa-test"

    def open(self, broker_id=0, port=9092):
        endpoint = BrokerEndpoint(broker_id, "127.0.0.1", port)
        if self.kind == "embedded":
            store = EmbeddedMetadataStore(str(self.tmp_path / f"data-{broker_id}"), broker_id,
                                          endpoint)
        else:
            store = ZooKeeperMetadataStore(self.connect, broker_id, endpoint,
                                           session_timeout_ms=6000)
            if self.controller is None:
                # A cluster always has one: it carries out deletions (and
                # writes partition states), as Kafka's does. Its own session,
                # so that closing a store (a broker restart) leaves it running.
                self.controller_zk = KazooClient(hosts=self.connect)
                self.controller_zk.start(timeout=20)
                self.controller = Controller(self.controller_zk, 1000)
                self.controller.start()
        self.opened.append(store)
        return store

    def reopen(self, store):
        store.close()
        return self.open(store.broker_id)

    def close_all(self):
        if self.controller is not None:
            self.controller.stop()
            self.controller_zk.stop()
            self.controller_zk.close()
        for s in self.opened:
            s.close()


# The ZooKeeper store asks for the zookeeper fixture at run time (getfixturevalue), which
# the marking by fixture name in tests/conftest.py cannot see: marked here.
@pytest.fixture(params=["embedded", pytest.param("zookeeper", marks=pytest.mark.integration)])
def stores(request, tmp_path):
    s = _Stores(request.param, tmp_path, request)
    try:
        yield s
    finally:
        s.close_all()


def test_topics_are_created_read_and_kept(stores):
    store = stores.open()
    meta = store.create_topic("orders", 3, {"retention.ms": "1000"})
    assert (meta.name, meta.num_partitions, meta.configs) == ("orders", 3, {"retention.ms": "1000"})
    assert store.topic("orders") == meta
    assert store.topic_by_id(meta.topic_id) == meta
    with pytest.raises(TopicExistsError):
        store.create_topic("orders", 1, {})
    again = stores.reopen(store)
    assert again.topic("orders") == meta
    assert again.cluster_id == store.cluster_id


def test_partition_counts_and_configs_change(stores):
    store = stores.open()
    meta = store.create_topic("t", 1, {})
    grown = store.set_partition_count("t", 4)
    assert grown.num_partitions == 4 and grown.topic_id == meta.topic_id
    changed = store.set_topic_configs("t", {"cleanup.policy": "compact"})
    assert changed.configs == {"cleanup.policy": "compact"}
    assert store.topic("t").configs == {"cleanup.policy": "compact"}
    with pytest.raises(UnknownTopicError):
        store.set_partition_count("nope", 2)
    with pytest.raises(UnknownTopicError):
        store.set_topic_configs("nope", {})
    again = stores.reopen(store)
    assert again.topic("t").num_partitions == 4
    assert again.topic("t").configs == {"cleanup.policy": "compact"}


def test_deleted_topics_are_gone(stores):
    store = stores.open()
    meta = store.create_topic("gone", 2, {})
    assert store.delete_topic("gone") == meta
    assert store.topic("gone") is None
    with pytest.raises(UnknownTopicError):
        store.delete_topic("gone")
    # A re-created topic is a new topic.
    assert store.create_topic("gone", 1, {}).topic_id != meta.topic_id
    assert stores.reopen(store).topic("gone").num_partitions == 1


def test_internal_topics_are_marked(stores):
    store = stores.open()
    assert store.create_topic("__consumer_offsets", 2, {}, is_internal=True).is_internal
    assert stores.reopen(store).topic("__consumer_offsets").is_internal


def test_producer_ids_are_never_handed_out_twice(stores):
    store = stores.open()
    first = [store.allocate_producer_id() for _ in range(1500)]
    assert len(set(first)) == 1500
    again = stores.reopen(store)
    later = [again.allocate_producer_id() for _ in range(10)]
    assert min(later) > max(first)


def test_the_broker_itself_is_listed(stores):
    store = stores.open(broker_id=3, port=9555)
    wait_until(lambda: [(b.node_id, b.host, b.port) for b in store.brokers()] == [
        (3, "127.0.0.1", 9555)], what="the broker's own registration")


# ----------------------------------------------------------------- ZooKeeper only

@pytest.fixture
def zk_stores(request, tmp_path, zookeeper):
    s = _Stores("zookeeper", tmp_path, request)
    try:
        yield s
    finally:
        s.close_all()


@pytest.fixture
def kazoo(zookeeper):
    client = KazooClient(hosts=zookeeper.connect)
    client.start(timeout=20)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def _json(kazoo, path):
    return json.loads(kazoo.get(path)[0])


def test_znodes_are_kafkas(zk_stores, kazoo):
    store = zk_stores.open(broker_id=1, port=9093)
    meta = store.create_topic("events", 2, {"retention.ms": "5000"})
    root = "/samsa-test"  # the chroot, created by the store
    cluster = _json(kazoo, f"{root}/cluster/id")
    assert cluster == {"version": "1", "id": store.cluster_id} and len(cluster["id"]) == 22
    reg = _json(kazoo, f"{root}/brokers/ids/1")
    assert reg["version"] == 5 and reg["host"] == "127.0.0.1" and reg["port"] == 9093
    assert reg["endpoints"] == ["PLAINTEXT://127.0.0.1:9093"]
    assert reg["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert reg["jmx_port"] == -1 and reg["features"] == {} and reg["timestamp"].isdigit()
    assert kazoo.get(f"{root}/brokers/ids/1")[1].ephemeralOwner != 0
    topic = _json(kazoo, f"{root}/brokers/topics/events")
    assert topic == {"version": 3, "partitions": {"0": [1], "1": [1]}, "adding_replicas": {},
                     "removing_replicas": {}, "topic_id": kafka_id(meta.topic_id)}
    assert _json(kazoo, f"{root}/config/topics/events") == {
        "version": 1, "config": {"retention.ms": "5000"}}
    store.set_topic_configs("events", {"retention.ms": "6000"})
    notices = sorted(kazoo.get_children(f"{root}/config/changes"))
    assert notices and notices[-1].startswith("config_change_")
    assert _json(kazoo, f"{root}/config/changes/{notices[-1]}") == {
        "version": 2, "entity_path": "topics/events"}
    store.allocate_producer_id()
    assert _json(kazoo, f"{root}/latest_producer_id_block") == {
        "version": 1, "broker": 1, "block_start": "0", "block_end": "999"}
    for path in ("/brokers/seqid", "/admin/delete_topics", "/isr_change_notification",
                 "/config/brokers", "/consumers"):
        assert kazoo.exists(root + path), path


def test_brokers_see_each_other_and_each_others_topics(zk_stores):
    a = zk_stores.open(broker_id=0, port=9092)
    b = zk_stores.open(broker_id=1, port=9093)
    assert a.cluster_id == b.cluster_id
    for store in (a, b):
        wait_until(lambda s=store: [x.node_id for x in s.brokers()] == [0, 1], what="both brokers")
    meta = a.create_topic("shared", 6, {})
    assert wait_until(lambda: b.topic("shared"), what="the topic on the other broker") == meta
    # Partitions are spread over both brokers.
    b.set_topic_configs("shared", {"retention.ms": "1"})
    wait_until(lambda: a.topic("shared").configs == {"retention.ms": "1"}, what="the config change")
    b.delete_topic("shared")
    wait_until(lambda: a.topic("shared") is None, what="the deletion")
    b.close()
    wait_until(lambda: [x.node_id for x in a.brokers()] == [0], what="the departure")
    # Producer-id blocks never overlap between brokers.
    c = zk_stores.open(broker_id=2, port=9094)
    ids = {a.allocate_producer_id() for _ in range(5)} | {c.allocate_producer_id()
                                                        for _ in range(5)}
    assert len(ids) == 10


def test_a_duplicate_broker_id_refuses_to_start(zk_stores):
    zk_stores.open(broker_id=5)
    with pytest.raises(BrokerIdInUseError, match="broker.id 5 is already registered"):
        zk_stores.open(broker_id=5, port=9999)


def test_topics_written_by_a_tool_are_picked_up(zk_stores, kazoo):
    store = zk_stores.open()
    # What a ZooKeeper-era kafka-topics.sh wrote: no topic id, no config.
    kazoo.create("/samsa-test/brokers/topics/legacy", b'{"version":1,"partitions":{"0":[0],"1":[0]}}')
    meta = wait_until(lambda: store.topic("legacy"), what="the tool's topic")
    assert meta.num_partitions == 2 and meta.configs == {}
    # It was given a topic id, written back in Kafka's format.
    assert _json(kazoo, "/samsa-test/brokers/topics/legacy")["topic_id"] == kafka_id(meta.topic_id)
    # ... and deleted it the way such a tool does: a marker the controller acts on.
    kazoo.create("/samsa-test/admin/delete_topics/legacy")
    wait_until(lambda: store.topic("legacy") is None, what="the tool's deletion")
    wait_until(lambda: not kazoo.exists("/samsa-test/admin/delete_topics/legacy"),
               what="the marker removed once the deletion is done")


def test_an_expired_session_registers_again(zk_stores, kazoo):
    store = zk_stores.open(broker_id=7)
    old_session = store.zk.client_id
    # The broker epoch a ControlledShutdown carries: the registration's czxid.
    first_epoch = store.broker_epoch
    assert first_epoch == kazoo.get("/samsa-test/brokers/ids/7")[1].czxid
    # Expire the broker's session the way ZooKeeper does: a second client with
    # the same session id and password connects and closes it.
    twin = KazooClient(hosts=zk_stores.connect.split("/")[0], client_id=old_session)
    twin.start(timeout=20)
    twin.stop()
    twin.close()
    wait_until(lambda: store.zk.client_id != old_session and kazoo.exists("/samsa-test/brokers/ids/7")
           and kazoo.get("/samsa-test/brokers/ids/7")[1].ephemeralOwner == store.zk.client_id[0],
           timeout=30, what="the re-registration under a new session")
    # (the epoch is kept once the create is answered, just after the znode appears)
    epoch = wait_until(lambda: store.broker_epoch != first_epoch and store.broker_epoch,
                       what="the new registration's epoch")
    assert epoch == kazoo.get("/samsa-test/brokers/ids/7")[1].czxid > first_epoch
    # Watches work again: a topic created elsewhere shows up.
    other = zk_stores.open(broker_id=8)
    other.create_topic(f"after-{uuid.uuid4().hex[:6]}", 1, {})
    wait_until(lambda: len(store.topics()) == 1, what="watches after the new session")


def test_dynamic_broker_configs_are_kept(stores):
    store = stores.open(broker_id=2)
    assert store.broker_configs(None) == {} and store.broker_configs(2) == {}
    store.set_broker_configs(None, {"log.retention.ms": "1000"})
    store.set_broker_configs(2, {"log.segment.bytes": "2000000"})
    again = stores.reopen(store)
    assert again.broker_configs(None) == {"log.retention.ms": "1000"}
    assert again.broker_configs(2) == {"log.segment.bytes": "2000000"}
    again.set_broker_configs(2, {})
    assert again.broker_configs(2) == {}


def test_dynamic_broker_configs_in_kafkas_znodes(zk_stores, kazoo):
    store = zk_stores.open(broker_id=1)
    store.set_broker_configs(None, {"log.retention.ms": "1000"})
    store.set_broker_configs(1, {"message.max.bytes": "2000"})
    assert _json(kazoo, "/samsa-test/config/brokers/<default>") == {
        "version": 1, "config": {"log.retention.ms": "1000"}}
    assert _json(kazoo, "/samsa-test/config/brokers/1") == {
        "version": 1, "config": {"message.max.bytes": "2000"}}
    notices = sorted(kazoo.get_children("/samsa-test/config/changes"))
    entities = [_json(kazoo, f"/samsa-test/config/changes/{n}")["entity_path"] for n in notices]
    assert entities[-2:] == ["brokers/<default>", "brokers/1"]


def test_partitions_name_replicas_leader_epoch_and_isr(stores):
    store = stores.open(broker_id=4)
    store.create_topic("p", 3, {})
    assert store.partitions("nope") == {}
    if stores.kind == "embedded":
        parts = store.partitions("p")
    else:
        # Online once the controller wrote their state (until then: no leader).
        parts = wait_until(lambda: (ps := store.partitions("p")) and all(
            p.leader >= 0 for p in ps.values()) and ps, what="the controller's states")
    assert sorted(parts) == [0, 1, 2]
    for p in parts.values():
        assert (p.replicas, p.leader, p.leader_epoch, p.isr, p.offline_replicas) == (
            (4,), 4, 0, (4,), ())
    # One partition at a time (the request path's lookup) says the same.
    for i, p in parts.items():
        assert store.partition("p", i) == p
    assert store.partition("p", 3) is None and store.partition("nope", 0) is None


def test_a_change_of_partitions_comes_with_a_new_snapshot_token(stores):
    """Metadata reuses a topic's built partitions while the store's
    topic_token() is the same objects (and an all-topics answer while
    snapshot_token() is): a change must replace one of them, and only of the
    topic that changed."""
    store = stores.open()
    store.create_topic("s", 1, {})
    store.create_topic("other", 1, {})
    wait_until(lambda: len(store.partitions("s")) == 1 and all(
        p.leader >= 0 for t in ("s", "other") for p in store.partitions(t).values()),
        what="the topics online")
    before = store.snapshot_token()
    assert before and all(a is b for a, b in zip(before, store.snapshot_token()))
    topic_before, other_before = store.topic_token("s"), store.topic_token("other")
    store.set_partition_count("s", 3)
    wait_until(lambda: len(store.partitions("s")) == 3 and all(
        p.leader >= 0 for p in store.partitions("s").values()), what="the new partitions")
    assert any(a is not b for a, b in zip(before, store.snapshot_token()))
    assert any(a is not b for a, b in zip(topic_before, store.topic_token("s")))
    # Another topic's token stays: its Metadata answer is kept through the change.
    assert all(a is b for a, b in zip(other_before, store.topic_token("other")))


def test_explicit_assignments_are_kept(stores):
    store = stores.open(broker_id=3)
    meta = store.create_topic("placed", 2, {}, assignment={0: [3], 1: [3]})
    assert meta.num_partitions == 2
    store.set_partition_count("placed", 3, {2: [3]})
    assert {i: p.replicas for i, p in store.partitions("placed").items()} == {
        0: (3,), 1: (3,), 2: (3,)}


def test_a_broker_hears_of_config_changes_made_through_another(zk_stores):
    a, b = zk_stores.open(broker_id=1), zk_stores.open(broker_id=2, port=9093)
    heard, changed_topics = [], []
    b.on_broker_config_change(lambda: heard.append(b.broker_configs(None)))
    b.on_topic_change(changed_topics.append)
    a.set_broker_configs(None, {"log.retention.ms": "5000"})
    wait_until(lambda: {"log.retention.ms": "5000"} in heard, what="b told of a's change")
    a.create_topic("cfg", 1, {})
    a.set_topic_configs("cfg", {"retention.ms": "100"})
    wait_until(lambda: b.topic("cfg") is not None and b.topic("cfg").configs == {
        "retention.ms": "100"}, what="b sees the topic's new config")
    assert "cfg" in changed_topics


def test_user_and_client_configs_are_kept_and_listed(stores):
    store = stores.open(broker_id=5)
    heard = {}
    store.on_entity_config_change(heard.__setitem__)
    assert store.entity_configs("users/alice") == {}
    store.set_entity_configs("users/alice", {"producer_byte_rate": "1024"})
    store.set_entity_configs("users/alice/clients/app", {"consumer_byte_rate": "2048"})
    store.set_entity_configs("clients/<default>", {"request_percentage": "50"})
    # This store's own writes are heard too (ZooKeeper: through the change notice).
    wait_until(lambda: set(heard) >= {"users/alice", "users/alice/clients/app",
                                      "clients/<default>"}, what="entity change notices")
    assert heard["users/alice"] == {"producer_byte_rate": "1024"}  # the configs come along
    again = stores.reopen(store)
    assert again.entity_configs("users/alice") == {"producer_byte_rate": "1024"}
    assert again.entity_config_paths("users") == ["users/alice", "users/alice/clients/app"]
    assert again.entity_config_paths("clients") == ["clients/<default>"]
    again.set_entity_configs("users/alice", {})
    assert again.entity_configs("users/alice") == {}
    assert again.entity_config_paths("users") == ["users/alice/clients/app"]
    with pytest.raises(ValueError):
        again.entity_configs("topics/x")


def test_user_configs_in_kafkas_znodes(zk_stores, kazoo):
    from samsa.broker.metadata.zk_layout import desanitize_entity_name, sanitize_entity_name
    name = sanitize_entity_name("CN=bob,O=x *")
    assert name == "CN%3Dbob%2CO%3Dx%20%2A" and desanitize_entity_name(name) == "CN=bob,O=x *"
    # a principal named "<default>" is not the default entity (Kafka's Sanitizer escapes it)
    from samsa.broker.metadata.zk_layout import user_client_entity_path, user_entity_path
    assert user_entity_path("<default>") == "users/%3Cdefault%3E"
    assert user_entity_path(None) == "users/<default>"
    assert user_client_entity_path("<default>", None) == "users/%3Cdefault%3E/clients/<default>"
    assert desanitize_entity_name(sanitize_entity_name("<default>")) == "<default>"
    a, b = zk_stores.open(broker_id=1), zk_stores.open(broker_id=2, port=9093)
    heard = {}
    b.on_entity_config_change(heard.__setitem__)
    a.set_entity_configs(f"users/{name}", {"SCRAM-SHA-256": "salt=abc,iterations=4096"})
    assert _json(kazoo, f"/samsa-test/config/users/{name}") == {
        "version": 1, "config": {"SCRAM-SHA-256": "salt=abc,iterations=4096"}}
    wait_until(lambda: f"users/{name}" in heard, what="the other broker told")
    notices = sorted(kazoo.get_children("/samsa-test/config/changes"))
    assert _json(kazoo, f"/samsa-test/config/changes/{notices[-1]}") == {
        "version": 2, "entity_path": f"users/{name}"}


def test_a_registration_that_could_not_be_read_is_read_again(zk_stores, kazoo, caplog):
    """A broker registration whose read failed (in the field: this broker's
    session expired while another broker came back; here: a ZooKeeper ACL that
    refuses the read, lifted afterwards) is read again until it can be, although
    the list of broker ids does not change meanwhile, so no watch fires again.
    Without it, followers never found that broker and its partitions never got
    their full ISR back (seen in a 100-round nemesis run)."""
    from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl
    a = zk_stores.open(broker_id=1)
    a.register()
    b = zk_stores.open(broker_id=2, port=9093)
    b.register()
    wait_until(lambda: {x.node_id for x in a.brokers()} == {1, 2}, what="broker 2 seen")
    path = "/samsa-test/brokers/ids/2"
    registration = kazoo.get(path)[0]
    b.close()
    wait_until(lambda: {x.node_id for x in a.brokers()} == {1}, what="broker 2 gone")
    kazoo.add_auth("digest", "nemesis:secret")
    kazoo.create(path, registration, acl=[make_digest_acl("nemesis", "secret", all=True)])
    wait_until(lambda: "reading the broker registrations failed (NoAuthError)" in caplog.text,
               what="a's read of broker 2's registration refused")
    assert {x.node_id for x in a.brokers()} == {1}
    kazoo.set_acls(path, OPEN_ACL_UNSAFE)
    wait_until(lambda: {x.node_id for x in a.brokers()} == {1, 2}, 15,
               "broker 2's registration read again")
    kazoo.delete(path)


def test_a_change_notice_that_could_not_be_read_is_read_again(zk_stores, kazoo, caplog):
    """The same for a config change notice: one whose read failed is read again
    and acted on, instead of being marked seen and lost (a quota or SCRAM
    credential changed through another broker would never have applied here)."""
    from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl
    a = zk_stores.open(broker_id=1)
    heard = {}
    a.on_entity_config_change(heard.__setitem__)
    kazoo.add_auth("digest", "nemesis:secret")
    kazoo.ensure_path("/samsa-test/config/changes")
    notice = kazoo.create("/samsa-test/config/changes/config_change_", json.dumps(
        {"version": 2, "entity_path": "users/alice"}).encode(), sequence=True,
        acl=[make_digest_acl("nemesis", "secret", all=True)])
    wait_until(lambda: "(NoAuthError); reading it again" in caplog.text,
               what="a's read of the notice refused")
    assert heard == {}
    kazoo.set_acls(notice, OPEN_ACL_UNSAFE)
    wait_until(lambda: "users/alice" in heard, 15, "the notice read again and acted on")



def test_an_entity_config_that_could_not_be_read_is_read_again(zk_stores, kazoo, caplog):
    """The notice reads, but the entity's config does not (yet): the listeners
    are told once it does, with its configs, instead of each keeping its old
    values for good."""
    from kazoo.security import OPEN_ACL_UNSAFE, make_digest_acl
    a = zk_stores.open(broker_id=1)
    heard = {}
    a.on_entity_config_change(heard.__setitem__)
    kazoo.add_auth("digest", "nemesis:secret")
    entity = kazoo.create("/samsa-test/config/users/bob", json.dumps(
        {"version": 1, "config": {"producer_byte_rate": "2048"}}).encode(), makepath=True,
        acl=[make_digest_acl("nemesis", "secret", all=True)])
    kazoo.ensure_path("/samsa-test/config/changes")
    kazoo.create("/samsa-test/config/changes/config_change_", json.dumps(
        {"version": 2, "entity_path": "users/bob"}).encode(), sequence=True)
    wait_until(lambda: "(NoAuthError); reading it again" in caplog.text,
               what="a's read of bob's config refused")
    assert heard == {}
    kazoo.set_acls(entity, OPEN_ACL_UNSAFE)
    wait_until(lambda: heard.get("users/bob") == {"producer_byte_rate": "2048"}, 15,
               "bob's config read again and told")


def test_isr_changes_are_written_together_with_one_notification(zk_stores, kazoo):
    """A leader's ISR changes, many at once (followers rejoining after a restart):
    each conditional on the state it knew, refused with the state as it is when
    that moved on, and one change notification naming every partition written."""
    store = zk_stores.open(broker_id=1)
    zk_stores.controller.stop()  # it would delete the notifications as it reads them
    root = "/samsa-test"
    _topic_znode(kazoo, f"{root}/brokers/topics/t", {p: [1, 0, 2] for p in range(5)})
    for p, (leader, epoch) in enumerate([(1, 3), (1, 3), (1, 3), (2, 4)]):
        kazoo.create(f"{root}/brokers/topics/t/partitions/{p}/state", json.dumps(
            {"version": 1, "leader": leader, "leader_epoch": epoch, "controller_epoch": 1,
             "isr": [leader]}).encode(), makepath=True)
    kazoo.set(f"{root}/brokers/topics/t/partitions/2/state", json.dumps(
        {"version": 1, "leader": 1, "leader_epoch": 3, "controller_epoch": 1,
         "isr": [1, 2]}).encode())  # version 1: our change to it was made at version 0
    # a state no broker can read fails its own change only, not the batch's
    kazoo.create(f"{root}/brokers/topics/t/partitions/4/state", b"{not json", makepath=True)
    before = set(kazoo.get_children(f"{root}/isr_change_notification"))
    results = store.update_isrs([IsrChange("t", 0, 3, (1, 2), 0), IsrChange("t", 1, 3, (1, 0), 0),
                                 IsrChange("t", 2, 3, (1, 0), 0), IsrChange("t", 3, 3, (1, 2), 0),
                                 IsrChange("t", 9, 3, (1, 2), 0), IsrChange("t", 4, 3, (1, 2), 0)])
    assert [(r.written, r.leader, r.leader_epoch, r.isr, r.version) for r in results[:4]] == [
        (True, 1, 3, (1, 2), 1), (True, 1, 3, (1, 0), 1), (False, 1, 3, (1, 2), 1),
        (False, 2, 4, (2,), 0)]
    assert isinstance(results[4], MetadataUnavailableError)  # no such partition
    assert isinstance(results[5], MetadataUnavailableError)  # unreadable
    assert _json(kazoo, f"{root}/brokers/topics/t/partitions/1/state")["isr"] == [1, 0]
    notices = set(kazoo.get_children(f"{root}/isr_change_notification")) - before
    assert len(notices) == 1
    assert _json(kazoo, f"{root}/isr_change_notification/{notices.pop()}")["partitions"] == [
        {"topic": "t", "partition": 0}, {"topic": "t", "partition": 1}]


def test_an_isr_write_refused_inside_a_multi_leaves_the_others_written(zk_stores, kazoo,
                                                                       monkeypatch):
    """ISR writes go in multis, which are all or nothing: when one partition's
    state moves on between the read and the write (a controller's decision),
    that write is refused with the state as it is, and the others of its multi
    are written all the same."""
    from samsa.broker.metadata.zookeeper import admin

    store = zk_stores.open(broker_id=1)
    root = "/samsa-test"
    zk_stores.controller.stop()  # it would bring the topic written below online itself
    _topic_znode(kazoo, f"{root}/brokers/topics/m", {p: [1, 0] for p in range(3)})
    for p in range(3):
        kazoo.create(f"{root}/brokers/topics/m/partitions/{p}/state", json.dumps(
            {"version": 1, "leader": 1, "leader_epoch": 3, "controller_epoch": 1,
             "isr": [1]}).encode(), makepath=True)
    real_read_many = admin.read_many

    def read_then_controller_writes(zk, paths):
        found = real_read_many(zk, paths)
        if len(paths) == 3:   # the first read: then partition 1 moves on
            kazoo.set(f"{root}/brokers/topics/m/partitions/1/state", json.dumps(
                {"version": 1, "leader": 2, "leader_epoch": 4, "controller_epoch": 2,
                 "isr": [2]}).encode())
        return found

    monkeypatch.setattr(admin, "read_many", read_then_controller_writes)
    results = store.update_isrs([IsrChange("m", p, 3, (1, 0), 0) for p in range(3)])
    assert [(r.written, r.leader, r.leader_epoch, r.isr) for r in results] == [
        (True, 1, 3, (1, 0)), (False, 2, 4, (2,)), (True, 1, 3, (1, 0))]
    assert [_json(kazoo, f"{root}/brokers/topics/m/partitions/{p}/state")["isr"]
            for p in range(3)] == [[1, 0], [2], [1, 0]]


def _topic_znode(kazoo, path, partitions):
    kazoo.create(path, json.dumps({"version": 3, "partitions": {
        str(p): r for p, r in partitions.items()}}).encode(), makepath=True)


def test_a_leader_cannot_let_a_replica_no_longer_assigned_back_into_the_isr(zk_stores, kazoo):
    """A reassignment's end writes the shorter replica list and the new leader
    epoch together, but a leader reads them apart: one that took the new epoch
    with the old replica list up let the removed replica (still fetching until
    it read its removal) back into the ISR, after the controller had taken it
    out. Joining the ISR is refused unless every member is a replica now;
    leaving it, and replicas that are assigned, are written as before."""
    store = zk_stores.open(broker_id=2)
    zk_stores.controller.stop()
    root = "/samsa-test"
    _topic_znode(kazoo, f"{root}/brokers/topics/r", {0: [2, 1], 1: [2, 1, 0]})
    for p in range(2):
        kazoo.create(f"{root}/brokers/topics/r/partitions/{p}/state", json.dumps(
            {"version": 1, "leader": 2, "leader_epoch": 2, "controller_epoch": 1,
             "isr": [1, 2]}).encode(), makepath=True)
    results = store.update_isrs([IsrChange("r", 0, 2, (0, 1, 2), 0),
                                 IsrChange("r", 1, 2, (0, 1, 2), 0)])
    assert [(r.written, r.leader, r.leader_epoch, r.isr, r.version) for r in results] == [
        (False, 2, 2, (1, 2), 0), (True, 2, 2, (0, 1, 2), 1)]
    assert _json(kazoo, f"{root}/brokers/topics/r/partitions/0/state")["isr"] == [1, 2]
    # one at a time, the same rule; shrinking needs no replica list
    assert store.update_isr("r", 0, 2, (0, 1, 2), 0).written is False
    assert store.update_isr("r", 0, 2, (2,), 0).written is True
    assert _json(kazoo, f"{root}/brokers/topics/r/partitions/0/state")["isr"] == [2]


def test_the_controllers_broker_names_the_leaders_its_controller_wrote_at_once(zk_stores):
    """The controller's decisions (fenced writes through the store's session)
    are in its own broker's snapshot when the write returns, not once the
    broker's state watch has read them back (at 30,000 partitions, seconds
    during which the controller's broker named the dead leaders); and a state
    written after ours by someone else (a leader's ISR change) still replaces it."""
    from samsa.broker.metadata import zk_layout as z
    from samsa.broker.metadata.zookeeper.writes import SetData

    store = zk_stores.open(broker_id=1)
    store.create_topic("led", 3, {})
    wait_until(lambda: all(m.leader == 1 for m in store.partitions("led").values()),
               what="the test controller brings the partitions online")
    zk_stores.controller.stop()  # from here on, this store's session decides
    zk = store.znodes
    before = {p: (store.partition("led", p).leader_epoch, store.partition_version("led", p))
              for p in range(3)}
    epoch_version = zk.get(z.CONTROLLER_EPOCH)[1].version
    zk.commit_fenced(epoch_version, [
        SetData(z.partition_state_path("led", p),
                z.encode_partition_state(z.PartitionState(1, epoch + 1, (1,), 9)), version)
        for p, (epoch, version) in before.items()])
    assert {p: store.partition("led", p).leader_epoch for p in range(3)} == {
        p: epoch + 1 for p, (epoch, _) in before.items()}
    # someone else's later write is read through the watch, as before
    zk.set(z.partition_state_path("led", 0),
           z.encode_partition_state(z.PartitionState(1, before[0][0] + 2, (1,), 9)))
    wait_until(lambda: store.partition("led", 0).leader_epoch == before[0][0] + 2,
               what="the later write read back")
