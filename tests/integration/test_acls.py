"""ACLs against a real 3-broker ZooKeeper cluster, with real clients.

The ACL matrix: for each API family, a principal without the ACL is refused
with Kafka's error and nothing is written or read; with the ACL it is
allowed; a prefixed ACL grants a whole family of names; a DENY overrides an
ALLOW. ACLs are Kafka's znodes, and a change made through broker 0 reaches
brokers 1 and 2 (the delay is measured and printed).

The principal under test is a parameter: User:ANONYMOUS on a 3-broker
PLAINTEXT cluster, and User:alice authenticated with SASL PLAIN on a one-broker
SASL_PLAINTEXT cluster (brokers cannot yet use a second listener between
them). The admin path is kafka-acls' ZooKeeper mode
(`samsa acls --authorizer-properties zookeeper.connect=...`); the brokers,
which talk to each other as ANONYMOUS over PLAINTEXT, get ClusterAction on
the cluster (what a broker principal needs for follower fetches, transaction
markers and controlled shutdown) rather than super.users, which would make
every PLAINTEXT client a super user.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest
from confluent_kafka import (Consumer, KafkaError, KafkaException, Producer, TopicCollection,
                             TopicPartition)
from confluent_kafka import ElectionType
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation,
                                   AclPermissionType, AdminClient, AlterConfigOpType,
                                   ConfigEntry, ConfigResource, OffsetSpec,
                                   NewPartitions, NewTopic, ResourcePatternType, ResourceType)
from kafka import KafkaConsumer
from kafka.admin import ACLFilter as PyAclFilter
from kafka.admin import ACLOperation as PyAclOperation
from kafka.admin import ACLPermissionType as PyAclPermission
from kafka.admin import ACLResourcePatternType as PyPatternType
from kafka.admin import KafkaAdminClient
from kafka.admin import ResourcePatternFilter as PyPatternFilter
from kafka.admin import ResourceType as PyResourceType
from kafka.errors import ClusterAuthorizationFailedError, GroupAuthorizationFailedError
from kazoo.client import KazooClient

from samsa.tools import acls as acls_cli
from samsa.client.blocking import SimpleClient
from samsa.protocol.messages import MetadataRequest
from tests.integration.conftest import require_zookeeper
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import Cluster
from tests.support.kafka_wire import free_port
from tests.support.waiting import wait_until

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
              "super.users": "User:admin",
              "allow.everyone.if.no.acl.found": "false",
              "offsets.topic.replication.factor": "1",
              "transaction.state.log.replication.factor": "1",
              "transaction.state.log.min.isr": "1",
              "transaction.state.log.num.partitions": "3"}


class Principal(NamedTuple):
    name: str             # as ACLs name it
    client_config: dict   # what a librdkafka client sets to be this principal
    kafka_python: dict    # ... and a kafka-python client

    def java_properties(self, flag: str) -> list[str]:
        """The Java client's properties, as ``flag key=value`` arguments."""
        props = {}
        if self.client_config:
            c = self.client_config
            props = {"security.protocol": c["security.protocol"],
                     "sasl.mechanism": c["sasl.mechanism"],
                     "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule"
                                         f' required username="{c["sasl.username"]}"'
                                         f' password="{c["sasl.password"]}";'}
        return [a for k, v in props.items() for a in (flag, f"{k}={v}")]


# alice authenticates with SASL PLAIN on a SASL_PLAINTEXT listener (one broker:
# brokers cannot yet talk to each other on another listener than their only one)
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
              'username="admin" password="admin-secret" '
              'user_admin="admin-secret" user_alice="alice-secret";')
PRINCIPALS = {
    "anonymous": Principal("User:ANONYMOUS", {}, {}),
    "alice": Principal(
        "User:alice",
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
         "sasl.username": "alice", "sasl.password": "alice-secret"},
        {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
         "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}),
}


class AclCluster:
    """The cluster plus the ways a test changes ACLs and waits for their effect."""

    def __init__(self, cluster: Cluster, who: Principal) -> None:
        self.cluster = cluster
        self.who = who
        self.bootstrap = cluster.bootstrap

    def wire_client(self, broker: int = 0) -> SimpleClient:
        """samsa's own client to a broker, logged in as the principal under test."""
        from samsa.client.sasl import SaslClientSettings
        conf = self.who.client_config
        sasl = (SaslClientSettings("PLAIN", conf["sasl.username"], conf["sasl.password"])
                if conf else None)
        return SimpleClient(self.cluster.brokers[broker].bootstrap, sasl=sasl)

    def zk_acls(self, *args: str, waits_for: list[str] = ()) -> None:
        """kafka-acls in ZooKeeper mode; then until every broker has processed
        the change notice of each resource in ``waits_for`` ("Topic:name")."""
        marks = self.cluster.log_marks()
        assert acls_cli.main(["--authorizer-properties",
                              f"zookeeper.connect={self.cluster.zookeeper_connect}",
                              "--force", *args]) == 0
        for resource in waits_for:
            rtype, _, name = resource.partition(":")
            pattern_type = "PREFIXED" if name.endswith("*") else "LITERAL"
            name = name.rstrip("*")
            text = (f"ACLs changed for ResourcePattern(resourceType={rtype}, name={name}, "
                    f"patternType={pattern_type})")
            for broker_id in range(self.cluster.size):
                self.cluster.wait_for_log(broker_id, text, since=marks[broker_id])

    def grant(self, resource: str, *ops: str, deny: bool = False, prefixed: bool = False,
              remove: bool = False) -> None:
        """``resource``: "topic:x", "group:g", "cluster", "transactional-id:t"."""
        kind, _, name = resource.partition(":")
        flag = ["--cluster"] if kind == "cluster" else [f"--{kind}", name]
        who = ["--deny-principal" if deny else "--allow-principal", self.who.name]
        args = ["--remove" if remove else "--add", *who, *flag,
                "--resource-pattern-type", "PREFIXED" if prefixed else "LITERAL"]
        for op in ops:
            args += ["--operation", op]
        zk_type = {"topic": "TOPIC", "group": "GROUP", "cluster": "CLUSTER",
                   "transactional-id": "TRANSACTIONAL_ID"}[kind]
        name = name or "kafka-cluster"
        # adding what is there already changes nothing, and no broker is told
        node = "/kafka-acl-extended/prefixed" if prefixed else "/kafka-acl"
        node += "/" + "".join(w.capitalize() for w in zk_type.split("_")) + "/" + name
        known = self.cluster.zk_client()
        acls = json.loads(known.get(node)[0])["acls"] if known.exists(node) else []
        if not remove and all({"principal": self.who.name, "host": "*", "operation": op,
                               "permissionType": "Deny" if deny else "Allow"} in acls
                              for op in ops):
            return
        self.zk_acls(*args, waits_for=[f"{zk_type}:{name}" + ("*" if prefixed else "")])

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap, **self.who.client_config})

    def producer(self, **extra) -> Producer:
        return Producer({"bootstrap.servers": self.bootstrap, "message.timeout.ms": 10000,
                         **self.who.client_config, **extra})

    def consumer(self, group: str = "unused", **extra) -> Consumer:
        return Consumer({"bootstrap.servers": self.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         **self.who.client_config, **extra})


def _broker(cluster: Cluster, broker_id: int, who: Principal) -> BrokerProcess:
    if not who.client_config:   # PLAINTEXT: the cluster's own brokers
        return cluster.broker_process(broker_id)
    port = free_port()
    listener = f"SASL_PLAINTEXT://127.0.0.1:{port}"
    return BrokerProcess(cluster.work_dir / f"broker-{broker_id}", port=port,
                         broker_id=broker_id, overrides={
                             "zookeeper.connect": cluster.zookeeper_connect, **cluster.overrides,
                             "listeners": listener, "advertised.listeners": listener,
                             "sasl.enabled.mechanisms": "PLAIN",
                             "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
                             # the broker logs in to itself as admin, a super user
                             "inter.broker.listener.name": "SASL_PLAINTEXT"})


def _start(work: Path, who: Principal) -> Cluster:
    cluster = Cluster(work, size=1 if who.client_config else 3, overrides=AUTHORIZER)
    cluster.zk.start()
    try:
        root = KazooClient(hosts=cluster.zk.connect)
        root.start(timeout=30)
        root.ensure_path(cluster.chroot)
        root.stop()
        root.close()
        # Brokers talk to each other as ANONYMOUS: they need ClusterAction.
        assert acls_cli.main(["--authorizer-properties",
                              f"zookeeper.connect={cluster.zookeeper_connect}", "--add",
                              "--allow-principal", "User:ANONYMOUS",
                              "--operation", "ClusterAction", "--cluster"]) == 0
        for i in range(cluster.size):
            cluster.brokers.append(_broker(cluster, i, who).start())
        cluster.wait_until_registered(range(cluster.size))
        cluster.wait_for_controller()
    except BaseException:
        cluster.stop()
        raise
    return cluster


@pytest.fixture(scope="module", params=sorted(PRINCIPALS))
def acl_cluster(request):
    require_zookeeper()
    who = PRINCIPALS[request.param]
    work = Path(tempfile.mkdtemp(prefix="samsa-acls-"))
    cluster = _start(work, who)
    env = AclCluster(cluster, who)
    try:
        # The topics the matrix works on, made while the principal may create.
        env.grant("cluster", "Create")
        admin = env.admin()
        replicas = min(3, cluster.size)
        for f in admin.create_topics([NewTopic(t, 1, replicas if t == "replicated" else 1)
                                      for t in ("produce", "hidden", "doomed", "conf",
                                                "replicated", "java", "resumed")]).values():
            f.result(30)
        env.grant("cluster", "Create", remove=True)
        yield env
    except BaseException:
        cluster.print_log_tails()
        raise
    finally:
        cluster.stop()
        shutil.rmtree(work, ignore_errors=True)


def _error_code(exc: BaseException) -> int:
    assert isinstance(exc, KafkaException), exc
    return exc.args[0].code()


def _produce(env: AclCluster, topic: str, value: bytes) -> KafkaError | None:
    outcome = []
    producer = env.producer()
    producer.produce(topic, value, on_delivery=lambda err, _m: outcome.append(err))
    producer.flush(30)
    assert outcome, "no delivery report"
    return outcome[0]


def _consume_all(env: AclCluster, topic: str) -> list[bytes]:
    consumer = env.consumer()
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
        got: list[bytes] = []
        while len(got) < high:
            # short calls: consume() waits its whole timeout when fewer records are left
            for m in consumer.consume(100, 0.1):
                if m.error() and m.error().code() != KafkaError.GROUP_AUTHORIZATION_FAILED:
                    raise KafkaException(m.error())
                if m.error():
                    continue  # the unused group's coordinator lookup, not the fetch
                got.append(m.value())
        return got
    finally:
        consumer.close()


def _topics_in_zookeeper(env: AclCluster) -> set[str]:
    return set(env.cluster.zk_client().get_children("/brokers/topics"))


# ------------------------------------------------------------------ produce and fetch

def test_produce_and_fetch_need_write_and_read(acl_cluster):
    env = acl_cluster
    env.grant("topic:produce", "Describe")
    err = _produce(env, "produce", b"refused")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    env.grant("topic:produce", "Write")
    assert _produce(env, "produce", b"allowed") is None

    consumer = env.consumer()
    try:
        consumer.assign([TopicPartition("produce", 0, 0)])
        # (librdkafka also looks up the unused group's coordinator: refused too)
        refused = wait_until(lambda: [m for m in consumer.consume(10, 0.1) if m.error() and
                                      m.error().code() != KafkaError.GROUP_AUTHORIZATION_FAILED],
                             30, "a refused fetch")
        assert refused[0].error().code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()

    env.grant("topic:produce", "Read")
    assert _consume_all(env, "produce") == [b"allowed"]   # the refused record was never written


def test_java_client_refused_then_allowed(acl_cluster, java_tools):
    env = acl_cluster
    env.grant("topic:java", "Describe")
    props = env.who.java_properties("--producer-property")
    # not idempotent: with no Write anywhere an idempotent producer is refused earlier,
    # at InitProducerId (ClusterAuthorizationException, KIP-679), as by Kafka
    refused = java_tools.produce(env.bootstrap, "java", ["refused"], *props,
                                 "--producer-property", "enable.idempotence=false", timeout=90)
    assert refused.rc != 0, refused
    assert "TopicAuthorizationException" in refused.stderr, refused.stderr
    env.grant("topic:java", "Write")
    java_tools.produce(env.bootstrap, "java", ["allowed"], *props, timeout=90).check()
    env.grant("topic:java", "Read")
    assert _consume_all(env, "java") == [b"allowed"]


def test_followers_fetch_with_cluster_action(acl_cluster):
    """Brokers replicate as ANONYMOUS with ClusterAction: every replica gets the records."""
    env = acl_cluster
    env.grant("topic:replicated", "Write")
    producer = env.producer(acks="all")
    outcome = []
    for i in range(10):
        producer.produce("replicated", b"r%d" % i, on_delivery=lambda e, _m: outcome.append(e))
    producer.flush(30)
    assert outcome == [None] * 10
    replicas = env.cluster.assignment("replicated")["partitions"][0]
    assert len(replicas) == min(3, env.cluster.size)
    for broker_id in replicas:
        segment = (env.cluster.broker(broker_id).data_dir / "replicated-0"
                   / "00000000000000000000.log")
        wait_until(lambda: segment.exists() and segment.stat().st_size > 0, 30,
                   f"the records on broker {broker_id}")


# ------------------------------------------------------------------ metadata

def test_metadata_hides_topics_and_refuses_auto_creation(acl_cluster):
    env = acl_cluster
    listed = env.admin().list_topics(timeout=30).topics
    assert "hidden" not in listed
    named = env.admin().list_topics("hidden", timeout=30).topics["hidden"]
    assert named.error is not None
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # authorized operations, as Kafka computes them from the ACLs
    env.grant("topic:produce", "Read", "Write")
    admin = env.admin()
    described = admin.describe_topics(TopicCollection(["produce"]),
                                      include_authorized_operations=True)["produce"].result(30)
    assert set(described.authorized_operations) == {
        AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE}

    ghost = f"auto-{uuid.uuid4().hex[:6]}"
    env.grant(f"topic:{ghost}", "Describe")   # may describe, may not create
    named = env.admin().list_topics(ghost, timeout=30).topics[ghost]   # auto-creation allowed
    assert named.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert ghost not in _topics_in_zookeeper(env)


def test_a_deny_for_the_client_host_wins(acl_cluster):
    """Hosts are matched against the client's address, as Kafka matches them."""
    env = acl_cluster
    env.zk_acls("--add", "--allow-principal", env.who.name, "--operation", "Describe",
                "--topic", "conf", waits_for=["TOPIC:conf"])
    assert env.admin().list_topics("conf", timeout=30).topics["conf"].error is None
    env.zk_acls("--add", "--deny-principal", env.who.name, "--deny-host", "10.9.9.9",
                "--operation", "Describe", "--topic", "conf", waits_for=["TOPIC:conf"])
    assert env.admin().list_topics("conf", timeout=30).topics["conf"].error is None
    env.zk_acls("--add", "--deny-principal", env.who.name, "--deny-host", "127.0.0.1",
                "--operation", "Describe", "--topic", "conf", waits_for=["TOPIC:conf"])
    error = env.admin().list_topics("conf", timeout=30).topics["conf"].error
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    env.zk_acls("--remove", "--deny-principal", env.who.name, "--deny-host", "127.0.0.1",
                "--deny-host", "10.9.9.9", "--operation", "Describe", "--topic", "conf",
                waits_for=["TOPIC:conf"])
    assert env.admin().list_topics("conf", timeout=30).topics["conf"].error is None


# ------------------------------------------------------------------ topic admin

def test_topic_admin_needs_create_delete_alter(acl_cluster):
    env = acl_cluster
    admin = env.admin()
    new = f"new-{uuid.uuid4().hex[:6]}"
    with pytest.raises(KafkaException) as e:
        admin.create_topics([NewTopic(new, 1, 1)])[new].result(30)
    assert _error_code(e.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as e:
        admin.delete_topics(["doomed"])["doomed"].result(30)
    assert _error_code(e.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as e:
        admin.create_partitions([NewPartitions("doomed", 2)])["doomed"].result(30)
    assert _error_code(e.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert new not in _topics_in_zookeeper(env)
    assert "doomed" in _topics_in_zookeeper(env)
    assert list(env.cluster.assignment("doomed")["partitions"]) == [0]

    # a prefixed ACL grants every name that starts with it
    env.grant("topic:new-", "Create", prefixed=True)
    admin.create_topics([NewTopic(new, 1, 1)])[new].result(30)
    assert new in _topics_in_zookeeper(env)
    env.grant("topic:doomed", "Delete")
    admin.delete_topics(["doomed"])["doomed"].result(30)
    wait_until(lambda: "doomed" not in _topics_in_zookeeper(env), 30, "doomed deleted")


# ------------------------------------------------------------------ configs

def test_delete_by_id_names_no_topic_the_caller_may_not_describe(acl_cluster):
    """DeleteTopics v6 by id: without Describe the refusal carries no name
    (Kafka sets it null), so ids cannot be turned into names."""
    import base64
    import uuid as uuid_
    from samsa.protocol.messages import DeleteTopicsRequest
    env = acl_cluster
    zk = json.loads(env.cluster.zk_client().get("/brokers/topics/hidden")[0])
    topic_id = uuid_.UUID(bytes=base64.urlsafe_b64decode(zk["topic_id"] + "=="))
    D = DeleteTopicsRequest
    with env.wire_client() as client:
        resp = client.call(20, D(timeout_ms=5000, topic_names=[], topics=[
            D.DeleteTopicState(name=None, topic_id=topic_id)]), highest=6)
    result = resp.responses[0]
    assert result.error_code == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert result.name is None and result.topic_id == topic_id
    assert "hidden" in _topics_in_zookeeper(env)


def test_configs_need_describe_configs_and_alter_configs(acl_cluster):
    env = acl_cluster
    admin = env.admin()
    topic = ConfigResource(ConfigResource.Type.TOPIC, "conf")
    with pytest.raises(KafkaException) as e:
        admin.describe_configs([topic])[topic].result(30)
    assert _error_code(e.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    broker = ConfigResource(ConfigResource.Type.BROKER, "0")
    with pytest.raises(KafkaException) as e:
        admin.describe_configs([broker])[broker].result(30)
    assert _error_code(e.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    change = ConfigResource(ConfigResource.Type.TOPIC, "conf", incremental_configs=[
        ConfigEntry("retention.ms", "12345", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as e:
        admin.incremental_alter_configs([change])[change].result(30)
    assert _error_code(e.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED

    env.grant("topic:conf", "AlterConfigs")   # implies DescribeConfigs
    admin.incremental_alter_configs([change])[change].result(30)
    described = admin.describe_configs([topic])[topic].result(30)
    assert described["retention.ms"].value == "12345"


# ------------------------------------------------------------------ groups

def test_groups_need_read_on_the_group_and_deny_wins(acl_cluster):
    env = acl_cluster
    env.grant("topic:produce", "Read")

    def commit_as(group: str) -> None:
        consumer = KafkaConsumer(bootstrap_servers=env.bootstrap, group_id=group,
                                 enable_auto_commit=False, **env.who.kafka_python)
        try:
            from kafka import TopicPartition as KTP
            from kafka.structs import OffsetAndMetadata
            consumer.commit({KTP("produce", 0): OffsetAndMetadata(1, "", -1)})
        finally:
            consumer.close()

    with pytest.raises(GroupAuthorizationFailedError):
        commit_as("team-a")
    env.grant("group:team-", "All", prefixed=True)
    commit_as("team-a")
    env.grant("group:team-blocked", "Read", deny=True)
    with pytest.raises(GroupAuthorizationFailedError):
        commit_as("team-blocked")
    admin = env.admin()  # kept: futures fail once their client is collected
    offsets = admin.list_consumer_group_offsets([_group_request("team-a")])["team-a"].result(30)
    assert [(tp.topic, tp.offset) for tp in offsets.topic_partitions] == [("produce", 1)]
    # OffsetFetch of a topic the principal may not describe: refused for that topic
    from confluent_kafka import ConsumerGroupTopicPartitions
    asked = ConsumerGroupTopicPartitions("team-a", [TopicPartition("hidden", 0)])
    offsets = admin.list_consumer_group_offsets([asked])["team-a"].result(30)
    assert [tp.error.code() for tp in offsets.topic_partitions] == [
        KafkaError.TOPIC_AUTHORIZATION_FAILED]


def test_offset_fetch_v0_from_zookeeper_refuses_topics_without_describe(acl_cluster):
    """OffsetFetch v0 reads ZooKeeper's offsets; a topic the caller may not
    Describe is TOPIC_AUTHORIZATION_FAILED there too, as in Kafka."""
    from samsa.protocol.messages import OffsetFetchRequest
    env = acl_cluster
    env.grant("group:zk-offsets", "Describe")
    env.grant("topic:produce", "Describe")
    O = OffsetFetchRequest
    with env.wire_client() as client:
        resp = client._call(9, 0, O(group_id="zk-offsets", topics=[
            O.OffsetFetchRequestTopic(name=t, partition_indexes=[0])
            for t in ("hidden", "produce")]))
    codes = {t.name: t.partitions[0].error_code for t in resp.topics}
    assert codes == {"hidden": KafkaError.TOPIC_AUTHORIZATION_FAILED, "produce": 0}


def test_offset_for_leader_epoch_allows_describe_whatever_replica_id(acl_cluster):
    """Kafka allows ClusterAction on the cluster OR Describe on the topic,
    whatever replica_id the request carries: alice, without ClusterAction,
    names a replica id and has Describe on one topic; ANONYMOUS, the brokers'
    principal in that cluster, has ClusterAction and is answered for all."""
    from samsa.protocol.messages import OffsetForLeaderEpochRequest as O
    env = acl_cluster
    env.grant("topic:produce", "Describe")
    with env.wire_client() as client:
        resp = client.call(23, O(replica_id=1, topics=[O.OffsetForLeaderTopic(
            topic=t, partitions=[O.OffsetForLeaderPartition(
                partition=0, current_leader_epoch=-1, leader_epoch=0)])
            for t in ("produce", "hidden")]))
    codes = {t.topic: t.partitions[0].error_code for t in resp.topics}
    if env.who.client_config:  # alice: Describe on "produce" only
        assert codes == {"produce": 0, "hidden": KafkaError.TOPIC_AUTHORIZATION_FAILED}
    else:  # ANONYMOUS, the brokers' principal here, has ClusterAction: every topic
        # is authorized (one led by another broker answers NOT_LEADER_OR_FOLLOWER)
        assert set(codes) == {"produce", "hidden"}
        assert set(codes.values()) <= {0, KafkaError.NOT_LEADER_FOR_PARTITION}, codes


def _group_request(group: str):
    from confluent_kafka import ConsumerGroupTopicPartitions
    return ConsumerGroupTopicPartitions(group, [TopicPartition("produce", 0)])


# ------------------------------------------------------------------ offsets, groups, cluster admin

def test_offsets_groups_and_cluster_admin_refusals(acl_cluster):
    env = acl_cluster
    admin = env.admin()
    env.grant("topic:produce", "Read", "Write")
    # (ListOffsets needs Describe, as Metadata does: a client refused one never gets to the other)
    produce = TopicPartition("produce", 0)
    assert _produce(env, "produce", b"kept") is None
    end = admin.list_offsets({produce: OffsetSpec.latest()})[produce].result(30).offset
    assert end >= 1
    cut = TopicPartition("produce", 0, 1)
    with pytest.raises(KafkaException) as e:   # DeleteRecords needs Delete
        admin.delete_records([cut])[cut].result(30)
    assert _error_code(e.value) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    start = admin.list_offsets({produce: OffsetSpec.earliest()})[produce].result(30).offset
    assert start == 0                           # nothing was deleted

    with pytest.raises(KafkaException) as e:   # DescribeGroups needs Describe on the group
        admin.describe_consumer_groups(["other-team"])["other-team"].result(30)
    assert _error_code(e.value) == KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(KafkaException) as e:   # DeleteGroups needs Delete on it
        admin.delete_consumer_groups(["other-team"])["other-team"].result(30)
    assert _error_code(e.value) == KafkaError.GROUP_AUTHORIZATION_FAILED

    with pytest.raises(KafkaException) as e:   # ElectLeaders needs Alter on the cluster
        admin.elect_leaders(ElectionType.PREFERRED, [produce]).result(30)
    assert _error_code(e.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    py_admin = KafkaAdminClient(bootstrap_servers=env.bootstrap, **env.who.kafka_python)
    try:   # DescribeLogDirs needs Describe on the cluster
        dirs = py_admin.describe_log_dirs()
    finally:
        py_admin.close()
    # (kafka-python keeps no top-level error: a refused broker lists no log dir at all)
    assert len(dirs) == env.cluster.size and all(d["log_dirs"] == [] for d in dirs), dirs


# ------------------------------------------------------------------ transactions

def test_transactional_id_needs_write(acl_cluster):
    env = acl_cluster
    env.grant("topic:produce", "Write")
    producer = env.producer(**{"transactional.id": "tx-orders"})
    with pytest.raises(KafkaException) as e:
        producer.init_transactions(30)
    assert _error_code(e.value) == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    env.grant("transactional-id:tx-orders", "Write")
    producer = env.producer(**{"transactional.id": "tx-orders"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("produce", b"in-a-transaction")
    producer.commit_transaction(30)


def test_describe_transactions_leaves_out_topics_the_caller_may_not_describe(acl_cluster):
    """As Kafka: DescribeTransactions lists only the topics the caller may Describe."""
    from samsa.protocol.messages import DescribeTransactionsRequest
    env = acl_cluster
    env.grant("transactional-id:tx-describe", "Write")
    env.grant("topic:hidden", "Write")
    producer = env.producer(**{"transactional.id": "tx-describe"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("hidden", b"secret")
    assert producer.flush(30) == 0
    env.grant("topic:hidden", "Write", remove=True)
    try:
        def described():   # by whichever broker is its coordinator
            for i in range(len(env.cluster.brokers)):
                with env.wire_client(i) as client:
                    r = client.call(65, DescribeTransactionsRequest(
                        transactional_ids=["tx-describe"])).transaction_states[0]
                if r.error_code == 0:
                    return r
            return None
        state = wait_until(described, 30, "the transaction described")
        assert state.transaction_state == "Ongoing"
        assert state.topics == []
    finally:
        producer.abort_transaction(30)


# ------------------------------------------------------------------ ACL admin, znodes, propagation

def _describe_topic_on(env: AclCluster, broker, topic: str) -> int:
    """The error code broker ``broker`` answers a Metadata request for ``topic`` with."""
    if env.who.client_config:   # authenticated: through librdkafka (a one-broker cluster)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap, **env.who.client_config})
        error = admin.list_topics(topic, timeout=30).topics[topic].error
        return error.code() if error is not None else 0
    with SimpleClient(broker.bootstrap) as client:
        resp = client.call(3, MetadataRequest(
            topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
            allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False), highest=8)
        return resp.topics[0].error_code


def test_acl_admin_znodes_and_propagation_to_every_broker(acl_cluster):
    env = acl_cluster
    admin = env.admin()
    binding = AclBinding(ResourceType.TOPIC, "hidden", ResourcePatternType.LITERAL, env.who.name,
                         "*", AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        admin.create_acls([binding])[binding].result(30)
    assert _error_code(e.value) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    # (librdkafka 2.16 drops DescribeAcls' top-level error; kafka-python reports it)
    py_admin = KafkaAdminClient(bootstrap_servers=env.bootstrap, **env.who.kafka_python)
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            py_admin.describe_acls(PyAclFilter(None, None, PyAclOperation.ANY,
                                               PyAclPermission.ANY, PyPatternFilter(
                                                   PyResourceType.ANY, None,
                                                   PyPatternType.ANY)))
    finally:
        py_admin.close()

    env.grant("cluster", "Alter", "Describe")
    # the znodes are Kafka's
    zk = env.cluster.zk_client()
    doc = json.loads(zk.get("/kafka-acl/Topic/produce")[0])
    assert doc["version"] == 1
    assert {"principal": env.who.name, "permissionType": "Allow", "operation": "Write",
            "host": "*"} in doc["acls"]
    prefixed = json.loads(zk.get("/kafka-acl-extended/prefixed/Group/team-")[0])
    assert prefixed["acls"] == [{"principal": env.who.name, "permissionType": "Allow",
                                 "operation": "All", "host": "*"}]
    assert zk.get_children("/kafka-acl-changes")
    notices = [json.loads(zk.get(f"/kafka-acl-extended-changes/{c}")[0])
               for c in zk.get_children("/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "GROUP", "name": "team-",
            "patternType": "PREFIXED"} in notices

    # a change through broker 0 reaches the others (brokers 1 and 2 of three)
    brokers = env.cluster.brokers
    assert [_describe_topic_on(env, b, "hidden") for b in brokers] == [29] * len(brokers)
    broker0 = AdminClient({"bootstrap.servers": env.cluster.broker(0).bootstrap,
                           **env.who.client_config})
    broker0.create_acls([binding])[binding].result(30)
    created = time.monotonic()
    seen = {}
    while len(seen) < len(brokers):
        for i, b in enumerate(brokers):
            if i not in seen and _describe_topic_on(env, b, "hidden") == 0:
                seen[i] = time.monotonic() - created
        assert time.monotonic() - created < 10, f"brokers that saw the ACL: {seen}"
    print("\nACL propagation delay from broker 0: " + ", ".join(
        f"broker {i} {d * 1000:.0f} ms" for i, d in sorted(seen.items())))

    listed = admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, "hidden", ResourcePatternType.MATCH, None, None,
        AclOperation.ANY, AclPermissionType.ANY)).result(30)
    assert listed == [binding]
    deleted = admin.delete_acls([everything.__class__(
        ResourceType.TOPIC, "hidden", ResourcePatternType.LITERAL, None, None,
        AclOperation.ANY, AclPermissionType.ANY)])
    assert [b for f in deleted.values() for b in f.result(30)] == [binding]
    wait_until(lambda: all(_describe_topic_on(env, b, "hidden") == 29 for b in brokers),
               10, "the deleted ACL gone on every broker")
    env.grant("cluster", "Alter", "Describe", remove=True)   # as the other tests expect
    if env.who.client_config:   # SASL: admin is in super.users and needs no ACL
        superuser = AdminClient({"bootstrap.servers": env.bootstrap, **env.who.client_config,
                                 "sasl.username": "admin", "sasl.password": "admin-secret"})
        assert superuser.list_topics("hidden", timeout=30).topics["hidden"].error is None


def test_a_name_with_a_slash_is_refused_not_lost(acl_cluster):
    """Kafka's AclAuthorizer refuses "/" in a resource name: stored a level
    deeper (/kafka-acl/Group/team/a) a DENY would vanish at the next load."""
    env = acl_cluster
    env.grant("cluster", "Alter")
    try:
        admin = env.admin()
        for name in ("team/a", ".."):
            binding = AclBinding(ResourceType.GROUP, name, ResourcePatternType.LITERAL,
                                 env.who.name, "*", AclOperation.READ, AclPermissionType.DENY)
            with pytest.raises(KafkaException) as e:
                admin.create_acls([binding])[binding].result(30)
            assert _error_code(e.value) == KafkaError.INVALID_REQUEST, name
        assert not env.cluster.zk_client().exists("/kafka-acl/Group/team")
        # the connection is still good, and an ordinary name still lands
        ok = AclBinding(ResourceType.GROUP, "team-a", ResourcePatternType.LITERAL,
                        env.who.name, "*", AclOperation.READ, AclPermissionType.DENY)
        admin.create_acls([ok])[ok].result(30)
        assert env.cluster.zk_client().exists("/kafka-acl/Group/team-a")
        for f in admin.delete_acls([AclBindingFilter(
                ResourceType.GROUP, "team-a", ResourcePatternType.LITERAL, None, None,
                AclOperation.ANY, AclPermissionType.ANY)]).values():
            assert f.result(30) == [ok]
    finally:
        env.grant("cluster", "Alter", remove=True)


# ------------------------------------------------------------------ one broker, embedded store

def test_embedded_store_keeps_acls_across_restarts(tmp_path, capsys):
    """Without ZooKeeper the ACLs live in the embedded store's file; without an
    authorizer the ACL APIs answer SECURITY_DISABLED; `samsa acls` over the
    wire prints what kafka-acls prints."""
    binding = AclBinding(ResourceType.GROUP, "g-", ResourcePatternType.PREFIXED, "User:alice",
                         "*", AclOperation.READ, AclPermissionType.DENY)
    plain = BrokerProcess(tmp_path / "plain").start()
    try:
        admin = AdminClient({"bootstrap.servers": plain.bootstrap})
        with pytest.raises(KafkaException) as e:
            admin.create_acls([binding])[binding].result(30)
        assert _error_code(e.value) == KafkaError.SECURITY_DISABLED
    finally:
        plain.stop()

    broker = BrokerProcess(tmp_path / "acls", overrides={
        "authorizer.class.name": "kafka.security.auth.SimpleAclAuthorizer",
        "allow.everyone.if.no.acl.found": "true"}).start()
    try:
        capsys.readouterr()
        assert acls_cli.main(["--bootstrap-server", broker.bootstrap, "--add",
                              "--deny-principal", "User:alice", "--operation", "Read",
                              "--group", "g-", "--resource-pattern-type", "prefixed"]) == 0
        pattern = "ResourcePattern(resourceType=GROUP, name=g-, patternType=PREFIXED)"
        entry = "(principal=User:alice, host=*, operation=READ, permissionType=DENY)"
        assert capsys.readouterr().out == (
            f"Adding ACLs for resource `{pattern}`: \n \t{entry} \n\n"
            f"Current ACLs for resource `{pattern}`: \n \t{entry} \n\n")
        broker.stop()
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        found = admin.describe_acls(AclBindingFilter(
            ResourceType.GROUP, "g-1", ResourcePatternType.MATCH, None, None,
            AclOperation.ANY, AclPermissionType.ANY)).result(30)
        assert found == [binding]
        capsys.readouterr()
        assert acls_cli.main(["--bootstrap-server", broker.bootstrap, "--list",
                              "--principal", "User:bob", "--principal", "User:alice"]) == 0
        assert capsys.readouterr().out == (
            "ACLs for principal `User:bob`\n"
            "ACLs for principal `User:alice`\n"
            f"Current ACLs for resource `{pattern}`: \n \t{entry} \n\n")
        assert acls_cli.main(["--bootstrap-server", broker.bootstrap, "--remove", "--force",
                              "--group", "g-", "--resource-pattern-type", "prefixed"]) == 0
        assert admin.describe_acls(AclBindingFilter(
            ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
            AclOperation.ANY, AclPermissionType.ANY)).result(30) == []
        capsys.readouterr()
        assert acls_cli.main(["--bootstrap-server", broker.bootstrap, "--add",
                              "--allow-principal", "alice", "--topic", "t"]) == 1
        assert capsys.readouterr().err == (
            "samsa acls: Invalid principal 'alice': expected <type>:<name>, e.g. User:alice\n")
    finally:
        broker.stop()


def test_remove_with_producer_removes_what_add_granted_and_ignores_other_resources(tmp_path, capsys):
    """kafka-acls --remove --producer --idempotent takes away what the same --add granted,
    the cluster's IdempotentWrite too, and a --cluster named beside it is no crash."""
    broker = BrokerProcess(tmp_path, overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:ANONYMOUS"}).start()  # the tool and the test's admin
    try:
        who = ["--allow-principal", "User:p", "--producer", "--idempotent", "--topic", "t"]
        assert acls_cli.main(["--bootstrap-server", broker.bootstrap, "--add", *who]) == 0
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        every = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                 AclOperation.ANY, AclPermissionType.ANY)
        granted = admin.describe_acls(every).result(30)
        assert {(b.restype, b.operation) for b in granted} == {
            (ResourceType.TOPIC, AclOperation.WRITE), (ResourceType.TOPIC, AclOperation.DESCRIBE),
            (ResourceType.TOPIC, AclOperation.CREATE),
            (ResourceType.BROKER, AclOperation.IDEMPOTENT_WRITE)}
        # without --idempotent: the topic's entries go; the --cluster beside it is not the
        # producer's resource (Kafka's AclCommand ignores it), and the cluster entry stays
        producer = ["--allow-principal", "User:p", "--producer", "--topic", "t"]
        assert acls_cli.main(["--bootstrap-server", broker.bootstrap, "--remove", "--force",
                              *producer, "--cluster"]) == 0
        assert [(b.restype, b.operation) for b in admin.describe_acls(every).result(30)] == [
            (ResourceType.BROKER, AclOperation.IDEMPOTENT_WRITE)]
        # with --idempotent (and no --cluster): the cluster's IdempotentWrite goes too
        assert acls_cli.main(["--bootstrap-server", broker.bootstrap, "--remove", "--force",
                              *who]) == 0
        assert admin.describe_acls(every).result(30) == []
    finally:
        broker.stop()


def test_unknown_authorizer_class_refuses_to_start(tmp_path):
    broker = BrokerProcess(tmp_path, overrides={"authorizer.class.name": "com.example.Mine"},
                           startup_timeout=20)
    with pytest.raises(Exception):
        broker.start()
    assert "authorizer.class.name" in broker.log_path.read_text()


def test_concurrent_writers_to_one_resource_lose_nothing(acl_cluster):
    """Two brokers' stores adding ACLs to one resource at once: the versioned
    writes retry, and every entry lands."""
    from concurrent.futures import ThreadPoolExecutor

    from samsa.broker.metadata.acl_store import ZooKeeperAclStore
    from samsa.broker.security.acl import AccessControlEntry as Ace
    from samsa.broker.security.acl import AclOperation as Op
    from samsa.broker.security.acl import AclPermissionType as Perm
    from samsa.broker.security.acl import ResourcePattern as RP
    from samsa.broker.security.acl import ResourceType as RT
    stores = [ZooKeeperAclStore(acl_cluster.cluster.zk_client(new=True)) for _ in range(2)]
    pattern = RP(RT.TOPIC, "contended")
    entries = [Ace(f"User:u{i}", "*", Op.READ, Perm.ALLOW) for i in range(40)]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: stores[i % 2].update(pattern, lambda old: old | {entries[i]}),
                      range(len(entries))))
    assert stores[0].load(pattern) == frozenset(entries)
    for s in stores:
        s.close()


def test_a_broker_back_from_a_lost_session_reads_every_acl_again(acl_cluster, monkeypatch):
    """A change made while a broker's ZooKeeper session was gone, whose notice
    was purged meanwhile, still reaches it: a new session reloads everything."""
    from samsa.broker.metadata import acl_store
    env = acl_cluster
    last = env.cluster.size - 1
    broker = env.cluster.broker(last)
    assert _describe_topic_on(env, broker, "resumed") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    env.cluster.pause(last)
    try:
        wait_until(lambda: last not in env.cluster.registered_ids(), 30,
                   f"broker {last}'s session to expire")
        env.zk_acls("--add", "--allow-principal", env.who.name, "--operation", "Describe",
                    "--topic", "resumed")
        monkeypatch.setattr(acl_store, "NOTICE_EXPIRY_MS", -1)   # purge every notice now
        acl_store.ZooKeeperAclStore(env.cluster.zk_client(new=True)).close()
        assert env.cluster.zk_client().get_children("/kafka-acl-changes") == []
    finally:
        env.cluster.resume(last)
    env.cluster.wait_until_registered([last])
    wait_until(lambda: _describe_topic_on(env, broker, "resumed") == 0, 30,
               f"broker {last} to see the ACL")


def test_old_change_notices_are_purged(acl_cluster, monkeypatch):
    """As Kafka's brokers do after 15 minutes (here: at once)."""
    from samsa.broker.metadata import acl_store
    zk = acl_cluster.cluster.zk_client()
    acl_cluster.zk_acls("--add", "--allow-principal", "User:nobody", "--topic", "purge-me",
                        waits_for=["TOPIC:purge-me"])
    assert zk.get_children("/kafka-acl-changes")
    monkeypatch.setattr(acl_store, "NOTICE_EXPIRY_MS", -1)
    acl_store.ZooKeeperAclStore(acl_cluster.cluster.zk_client(new=True)).close()
    assert zk.get_children("/kafka-acl-changes") == []
    assert zk.get_children("/kafka-acl-extended-changes") == []
