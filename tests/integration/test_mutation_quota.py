"""The controller mutation quota (controller_mutation_rate, KIP-599) as a
Kafka user meets it: topics created, deleted or grown over the rate are
refused with THROTTLING_QUOTA_EXCEEDED by the versions that expect that
(CreateTopics v6+, DeleteTopics v5+, CreatePartitions v3+; the Java Admin
client), while the others in the same request go through; older versions
(librdkafka's CreateTopics v4, raw older requests) get every change made and
a throttled answer.

One broker serves the module, each test with its own client ids. It keeps
controller.quota.window.num=2 one-second windows, so a client's bucket holds
two seconds' worth of mutations (Kafka: eleven); quota.window.*, the other
client quotas' window, is left at its default and does not size the bucket.
Rates are low enough that the refill during a request (milliseconds) cannot
change which topic is refused.
"""
from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AlterClientQuotasRequest, CreatePartitionsRequest,
                               CreateTopicsRequest, DeleteTopicsRequest,
                               DescribeClientQuotasRequest, MetadataRequest)
from tests.support.broker_process import BrokerProcess, broker_in_temp_dir

pytestmark = pytest.mark.timeout(180)

METADATA, CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 3, 19, 20, 37
DESCRIBE_QUOTAS, ALTER_QUOTAS = 48, 49
THROTTLED = ErrorCode.THROTTLING_QUOTA_EXCEEDED


@pytest.fixture(scope="module")
def mbroker():
    with broker_in_temp_dir("samsa-mutation-quota-", overrides={
            "controller.quota.window.num": "2", "controller.quota.window.size.seconds": "1"},
            metrics=True) as b:
        yield b


@pytest.fixture(autouse=True)
def _log_tail_on_failure(request, mbroker):
    yield
    reports = (getattr(request.node, f"_samsa_report_{when}", None) for when in ("setup", "call"))
    if any(getattr(r, "failed", False) for r in reports):
        print(f"\n--- samsa broker log tail ---\n{mbroker.log_tail(80)}", file=sys.stderr)


def _set_rate(bootstrap: str, client_id: str, rate: float) -> None:
    R = AlterClientQuotasRequest
    with SimpleClient(bootstrap) as c:
        r = c.call(ALTER_QUOTAS, R(validate_only=False, entries=[R.EntryData(
            entity=[R.EntityData(entity_type="client-id", entity_name=client_id)],
            ops=[R.OpData(key="controller_mutation_rate", value=float(rate), remove=False)])]))
    assert [e.error_code for e in r.entries] == [0]


def _create(client: SimpleClient, version: int, partitions: int, *names: str,
            validate_only: bool = False):
    R = CreateTopicsRequest
    return client.call(CREATE_TOPICS, R(timeout_ms=30000, validate_only=validate_only, topics=[
        R.CreatableTopic(name=n, num_partitions=partitions, replication_factor=1,
                         assignments=[], configs=[]) for n in names]), highest=version)


def _delete(client: SimpleClient, version: int, *names: str):
    R = DeleteTopicsRequest
    if version >= 6:
        req = R(timeout_ms=30000, topics=[R.DeleteTopicState(name=n, topic_id=None)
                                          for n in names])
    else:
        req = R(timeout_ms=30000, topic_names=list(names))
    return client.call(DELETE_TOPICS, req, highest=version)


def _grow(client: SimpleClient, version: int, count: int, *names: str):
    R = CreatePartitionsRequest
    return client.call(CREATE_PARTITIONS, R(timeout_ms=30000, validate_only=False, topics=[
        R.CreatePartitionsTopic(name=n, count=count, assignments=None) for n in names]),
        highest=version)


def _partition_counts(bootstrap: str, *names: str) -> dict[str, int | None]:
    """Each topic's partition count, None for one that does not exist."""
    with SimpleClient(bootstrap, client_id="observer") as c:
        r = c.call(METADATA, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name=n, topic_id=None) for n in names], allow_auto_topic_creation=False),
            highest=9)
    return {t.name: (len(t.partitions) if t.error_code == 0 else None) for t in r.topics}


def _setup_topics(bootstrap: str, partitions: int, *names: str) -> None:
    """Topics made by a client without a quota."""
    with SimpleClient(bootstrap, client_id="unlimited") as c:
        r = _create(c, 7, partitions, *names)
    assert [t.error_code for t in r.topics] == [0] * len(names)


def _metric(broker: BrokerProcess, name: str, client_id: str) -> float:
    """A per-client quota gauge from the broker's Prometheus page."""
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics",
                                timeout=10) as page:
        text = page.read().decode()
    m = re.search(rf'^{name}{{client_id="{client_id}",user=""}} ([0-9.e+]+)$', text, re.M)
    assert m, f"{name} for {client_id} missing"
    return float(m.group(1))


# ------------------------------------------------------------ strict (new versions)

def test_java_admin_gets_throttling_quota_exceeded_for_the_excess_topics(mbroker, java_tools):
    # 0.5 mutations/s: a bucket of 1; the first topic's 2 partitions overdraw
    # it (-1), so the next ones are refused until it is back at zero (2 s)
    _set_rate(mbroker.bootstrap, "java-strict", 0.5)
    names = ["js-a", "js-b", "js-c"]
    r = java_tools.run("TopicMutations", "--bootstrap-server", mbroker.bootstrap,
                       "--client-id", "java-strict", "--no-retry-on-quota", "--create",
                       "--partitions", "2", *[x for n in names for x in ("--topic", n)])
    assert r.rc == 0, r.stderr
    lines = [ln.split("\t") for ln in r.stdout.splitlines()]
    assert [ln[:2] for ln in lines] == [["js-a", "OK"],
                                        ["js-b", "ThrottlingQuotaExceededException"],
                                        ["js-c", "ThrottlingQuotaExceededException"]]
    throttle = int(lines[1][2].removeprefix("throttleTimeMs="))
    assert 0 < throttle <= 2000
    assert _partition_counts(mbroker.bootstrap, *names) == {"js-a": 2, "js-b": None, "js-c": None}


def test_java_admin_retries_refused_topics_by_itself(mbroker, java_tools):
    """KIP-599's client side: by default the Admin client waits out the
    throttle time and asks again for the topics refused, so all are made."""
    _set_rate(mbroker.bootstrap, "java-retry", 1)   # a bucket of 2
    # jr-a overdraws it (-2); jr-b is refused for 2 s, then asked for again
    # and made, which overdraws it again (-4)
    names = ["jr-a", "jr-b"]
    r = java_tools.run("TopicMutations", "--bootstrap-server", mbroker.bootstrap,
                       "--client-id", "java-retry", "--create", "--partitions", "4",
                       *[x for n in names for x in ("--topic", n)])
    assert r.rc == 0, r.stderr
    assert r.stdout.splitlines() == [f"{n}\tOK" for n in names]
    assert _partition_counts(mbroker.bootstrap, *names) == {n: 4 for n in names}
    # the retried topic was charged too: the client is over its quota now
    with SimpleClient(mbroker.bootstrap, client_id="java-retry") as c:
        assert _create(c, 7, 1, "jr-c").topics[0].error_code == THROTTLED


def test_strict_versions_refuse_per_topic_with_the_throttle_time(mbroker):
    _set_rate(mbroker.bootstrap, "wire-strict", 0.5)   # a bucket of 1
    with SimpleClient(mbroker.bootstrap, client_id="wire-strict") as c:
        r = _create(c, 6, 3, "ws-a", "ws-b", "ws-c")
    assert [(t.name, t.error_code) for t in r.topics] == [
        ("ws-a", 0), ("ws-b", THROTTLED), ("ws-c", THROTTLED)]
    refused = r.topics[1]
    assert refused.error_message == "The throttling quota has been exceeded."
    assert (refused.num_partitions, refused.replication_factor) == (-1, -1)
    # 1 - 3 = -2 credits: 4 s at 0.5/s, less the little time the request took
    assert 3000 < r.throttle_time_ms <= 4000
    assert _partition_counts(mbroker.bootstrap, "ws-a", "ws-b", "ws-c") == {
        "ws-a": 3, "ws-b": None, "ws-c": None}


def test_validate_only_and_failed_topics_cost_nothing(mbroker):
    _set_rate(mbroker.bootstrap, "wire-validate", 0.5)   # a bucket of 1
    _setup_topics(mbroker.bootstrap, 1, "wv-exists")
    with SimpleClient(mbroker.bootstrap, client_id="wire-validate") as c:
        for _ in range(3):
            r = _create(c, 7, 50, "wv-a", "wv-b", validate_only=True)
            assert [t.error_code for t in r.topics] == [0, 0] and r.throttle_time_ms == 0
        r = _create(c, 7, 50, "wv-exists")                    # refused before charging
        assert r.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        # the bucket is still full, so both go through (the second on credit)...
        r = _create(c, 7, 1, "wv-a", "wv-b")
        assert [t.error_code for t in r.topics] == [0, 0] and r.throttle_time_ms == 0
        # ...and overdraw it: the quota is live
        r = _create(c, 7, 1, "wv-c")
        assert r.topics[0].error_code == THROTTLED and r.throttle_time_ms > 0


def test_strict_deletes_are_counted_in_partitions(mbroker):
    _setup_topics(mbroker.bootstrap, 2, "wd-a", "wd-b", "wd-c")
    _set_rate(mbroker.bootstrap, "wire-delete", 0.5)   # a bucket of 1
    with SimpleClient(mbroker.bootstrap, client_id="wire-delete") as c:
        r = _delete(c, 5, "wd-a", "wd-b", "wd-unknown", "wd-c")
    assert [(t.name, t.error_code) for t in r.responses] == [
        ("wd-a", 0), ("wd-b", THROTTLED),
        ("wd-unknown", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), ("wd-c", THROTTLED)]
    assert 0 < r.throttle_time_ms <= 2000   # 1 - 2 = -1 credit at 0.5/s
    assert _partition_counts(mbroker.bootstrap, "wd-a", "wd-b", "wd-c") == {
        "wd-a": None, "wd-b": 2, "wd-c": 2}


def test_strict_create_partitions_counts_the_partitions_added(mbroker):
    _setup_topics(mbroker.bootstrap, 1, "wp-a", "wp-b")
    _set_rate(mbroker.bootstrap, "wire-grow", 1)   # a bucket of 2
    with SimpleClient(mbroker.bootstrap, client_id="wire-grow") as c:
        r = _grow(c, 3, 4, "wp-a", "wp-b")   # 3 partitions added to wp-a: -1
    assert [(t.name, t.error_code) for t in r.results] == [("wp-a", 0), ("wp-b", THROTTLED)]
    assert 0 < r.throttle_time_ms <= 1000
    assert _partition_counts(mbroker.bootstrap, "wp-a", "wp-b") == {"wp-a": 4, "wp-b": 1}


# ------------------------------------------------------------ permissive (old versions)

def test_librdkafka_old_create_topics_gets_all_made_and_is_throttled(mbroker):
    """librdkafka sends CreateTopics v4: below the strict versions, so every
    topic is made and the answer carries the throttle time (it reaches the
    throttle callback)."""
    _set_rate(mbroker.bootstrap, "rdkafka-admin", 2)   # a bucket of 4
    throttles = []
    admin = AdminClient({"bootstrap.servers": mbroker.bootstrap, "client.id": "rdkafka-admin",
                         "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    names = ["rk-a", "rk-b", "rk-c"]
    futures = admin.create_topics([NewTopic(n, 2, 1) for n in names], operation_timeout=30)
    for f in futures.values():
        f.result(timeout=60)
    deadline = time.monotonic() + 30
    while not throttles and time.monotonic() < deadline:
        admin.poll(0.2)
    # 4 - 6 = -2 credits at 2/s: a second, less the time the request took
    assert throttles and 0 < max(throttles) <= 1.0
    assert _partition_counts(mbroker.bootstrap, *names) == {n: 2 for n in names}


def test_permissive_versions_make_every_change_and_throttle(mbroker):
    _setup_topics(mbroker.bootstrap, 2, "wo-d1", "wo-d2")
    _setup_topics(mbroker.bootstrap, 1, "wo-g1", "wo-g2")
    _set_rate(mbroker.bootstrap, "wire-old", 0.5)   # a bucket of 1
    started = time.monotonic()

    def reflects_overdraft(throttle_ms: int, charged: int) -> bool:
        """The throttle is the time the bucket (1 credit, 0.5/s) takes to
        refill what ``charged`` overdrew: at most the whole overdraft's
        time, and short of it by no more than the time since ``started``
        (the most the bucket can have refilled meanwhile), however slow."""
        overdraft_ms = (charged - 1) / 0.5 * 1000
        refilled_ms = (time.monotonic() - started) * 1000
        return overdraft_ms - refilled_ms - 1 <= throttle_ms <= overdraft_ms

    with SimpleClient(mbroker.bootstrap, client_id="wire-old") as c:
        r = _create(c, 5, 2, "wo-a", "wo-b")           # 1 - 4 = -3: 6 s
        assert [t.error_code for t in r.topics] == [0, 0]
        assert r.throttle_time_ms > 0 and reflects_overdraft(r.throttle_time_ms, 4)
    with SimpleClient(mbroker.bootstrap, client_id="wire-old") as c:
        r = _delete(c, 4, "wo-d1", "wo-d2")             # -3 - 4 = -7 (less the refill)
        assert [t.error_code for t in r.responses] == [0, 0]
        assert r.throttle_time_ms > 0 and reflects_overdraft(r.throttle_time_ms, 8)
    with SimpleClient(mbroker.bootstrap, client_id="wire-old") as c:
        r = _grow(c, 2, 3, "wo-g1", "wo-g2")            # 2 more each: -11
        assert [t.error_code for t in r.results] == [0, 0]
        assert r.throttle_time_ms > 0 and reflects_overdraft(r.throttle_time_ms, 12)
    assert _partition_counts(mbroker.bootstrap, "wo-a", "wo-b", "wo-d1", "wo-d2",
                             "wo-g1", "wo-g2") == {
        "wo-a": 2, "wo-b": 2, "wo-d1": None, "wo-d2": None, "wo-g1": 3, "wo-g2": 3}


def test_old_clients_that_do_not_back_off_get_a_late_answer(mbroker):
    """CreateTopics v2 has throttle_time_ms but its clients do not wait by
    themselves (KIP-219 came with v3): the answer itself is held back."""
    _set_rate(mbroker.bootstrap, "wire-v2", 1)   # a bucket of 2
    with SimpleClient(mbroker.bootstrap, client_id="wire-v2") as c:
        sent = time.monotonic()
        r = _create(c, 2, 3, "wv2-a")            # 2 - 3 = -1: a second
        answered = time.monotonic() - sent
    assert r.topics[0].error_code == 0
    assert 0 < r.throttle_time_ms <= 1000
    assert answered >= r.throttle_time_ms / 1000.0 * 0.9


def test_metadata_auto_creation_counts_but_is_never_refused(mbroker):
    """Kafka charges topics that Metadata auto-creates to the client's quota
    (permissively, the Metadata answer not throttled for it): they are all
    made, and the client's next CreateTopics finds its bucket overdrawn."""
    _set_rate(mbroker.bootstrap, "auto-creator", 0.5)   # a bucket of 1
    names = ["ac-a", "ac-b", "ac-c"]                    # num.partitions=1 each: -2
    with SimpleClient(mbroker.bootstrap, client_id="auto-creator") as c:
        r = c.call(METADATA, MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(
            name=n, topic_id=None) for n in names], allow_auto_topic_creation=True),
            highest=9)
        assert r.throttle_time_ms == 0
        assert _partition_counts(mbroker.bootstrap, *names) == {n: 1 for n in names}
        assert _create(c, 7, 1, "ac-d").topics[0].error_code == THROTTLED


# ------------------------------------------------------------ managing it

def test_samsa_configs_sets_it_and_describe_client_quotas_shows_it(mbroker):
    tool = [sys.executable, "-m", "samsa", "configs", "--bootstrap-server", mbroker.bootstrap]
    out = subprocess.run([*tool, "--alter", "--add-config", "controller_mutation_rate=12.5",
                          "--entity-type", "clients", "--entity-name", "cli-set"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    R = DescribeClientQuotasRequest
    with SimpleClient(mbroker.bootstrap) as c:
        r = c.call(DESCRIBE_QUOTAS, R(strict=True, components=[
            R.ComponentData(entity_type="client-id", match_type=0, match="cli-set")]))
    assert r.error_code == 0
    assert [[(v.key, v.value) for v in e.values] for e in r.entries] == [
        [("controller_mutation_rate", 12.5)]]
    # and it is enforced: a bucket of 25 partitions
    with SimpleClient(mbroker.bootstrap, client_id="cli-set") as c:
        r = _create(c, 7, 25, "cs-a", "cs-b", "cs-c")
    assert [t.error_code for t in r.topics] == [0, 0, THROTTLED]


def test_controller_mutation_metrics(mbroker):
    """Kafka's kafka.server:type=ControllerMutation,user=,client-id= beans
    (mutation-rate, throttle-time) under the JMX exporter's names."""
    _set_rate(mbroker.bootstrap, "metered", 0.5)
    with SimpleClient(mbroker.bootstrap, client_id="metered") as c:
        r = _create(c, 6, 2, "mm-a", "mm-b")
    assert [t.error_code for t in r.topics] == [0, THROTTLED]
    for name in ("kafka_server_controllermutation_mutation_rate",
                 "kafka_server_controllermutation_throttle_time"):
        assert _metric(mbroker, name, "metered") > 0
