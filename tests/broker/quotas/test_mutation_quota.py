"""The controller mutation quota (KIP-599) against Kafka's rules, without
clocks: the token bucket, strict and permissive charging, which request
versions are strict, what a topic change is charged (TopicService with a real
embedded store and logs on disk)."""
from __future__ import annotations

import pytest

from samsa.broker.metadata import BrokerEndpoint, EmbeddedMetadataStore
from samsa.broker.quotas import ClientQuotas, QuotaConfigs, QuotaWindow
from samsa.broker.quotas.manager import MutationQuotaManager
from samsa.broker.quotas.mutation import (UNBOUNDED, MutationQuota, ThrottlingQuotaExceeded,
                                    is_strict)
from samsa.broker.quotas.rate import TokenBucket, token_throttle_ms
from samsa.broker.topics import TopicError, TopicService
from samsa.config import load_broker_config
from samsa.storage.manager import LogManager

KEY = "controller_mutation_rate"


def _store(tmp_path, entities=None):
    store = EmbeddedMetadataStore(str(tmp_path / "meta"), 0, BrokerEndpoint(0, "localhost", 9092))
    for path, configs in (entities or {}).items():
        store.set_entity_configs(path, configs)
    return store


def _manager(tmp_path, rate: float, window=QuotaWindow(2, 1000)):
    configs = QuotaConfigs(_store(tmp_path, {"clients/admin": {KEY: str(rate)}}))
    m = MutationQuotaManager(KEY, configs, window)
    match = m.match("ANONYMOUS", "admin")
    assert match is not None and match.bound == rate
    return m, match


class _Clock:
    def __init__(self) -> None:
        self.ms = 0.0

    def __call__(self) -> float:
        return self.ms


# ------------------------------------------------------------ the bucket

def test_token_bucket_is_kafkas_example():
    """TokenBucket's own example: quota 5/s, 100 one-second samples, so a
    burst of 500; taking 560 overdraws it by 60, which takes 12 s to refill."""
    b = TokenBucket()
    assert b.measure(5, 500, 0) == 500               # starts full
    b.take(560, 5, 500, 0)
    assert b.measure(5, 500, 0) == -60
    assert token_throttle_ms(b.measure(5, 500, 0), 5, 1000) == 12_000
    assert b.measure(5, 500, 2_000) == -50            # refilled at 5/s
    assert b.measure(5, 500, 1_000_000) == 500        # never above the burst
    b.take(-1000, 5, 500, 1_000_000)                   # nor by taking back
    assert b.measure(5, 500, 1_000_000) == 500


def test_throttle_is_zero_unless_overdrawn():
    assert token_throttle_ms(0, 5, 1000) == 0
    assert token_throttle_ms(3, 5, 1000) == 0
    assert token_throttle_ms(-1, 2, 1000) == 500
    assert token_throttle_ms(-1, 0, 1000) == 1000     # a zero quota never refills


# ------------------------------------------------------------ strict / permissive

def test_strict_refuses_only_once_overdrawn(tmp_path):
    # 2 mutations/s over 2 one-second windows: a burst of 4
    m, match = _manager(tmp_path, 2)
    # the bucket has credit: taken whole, however big, and no throttle
    assert m.take_strict(match, 10, 0) == (True, 0)
    # now 6 below zero: refused, nothing taken, 3 s until back at zero
    assert m.take_strict(match, 1, 0) == (False, 3000)
    assert m.take_strict(match, 1, 1000) == (False, 2000)
    # back at zero is not overdrawn: taken again
    assert m.take_strict(match, 1, 3000) == (True, 0)
    assert m.take_strict(match, 0, 3000) == (False, 500)


def test_permissive_takes_everything_and_throttles(tmp_path):
    m, match = _manager(tmp_path, 2)
    assert m.take_permissive(match, 3, 0) == (True, 0)     # within the burst
    assert m.take_permissive(match, 7, 0) == (True, 3000)  # 6 below zero
    assert m.take_permissive(match, 1, 0) == (True, 3500)  # taken anyway
    # 4 s later 8 credits are back: 1 left, and taking 1 leaves it at zero
    assert m.take_permissive(match, 1, 4000) == (True, 0)


def test_a_request_charges_topic_by_topic(tmp_path):
    """One strict request: the topics charged while there is credit go
    through, the ones after are refused with the throttle time, and the
    response's throttle time counts down from when it was given."""
    m, match = _manager(tmp_path, 2)
    clock = _Clock()
    quota = MutationQuota(m, match, strict=True, clock=clock)
    quota.charge(3)
    quota.charge(3)                  # credit was left (1): taken, now -2
    assert quota.throttle_ms() == 0  # the strict quota does not throttle for that
    with pytest.raises(ThrottlingQuotaExceeded) as refused:
        quota.charge(1)
    assert refused.value.throttle_ms == 1000
    assert str(refused.value) == "The throttling quota has been exceeded."
    clock.ms = 400
    assert quota.throttle_ms() == 600
    clock.ms = 5000
    assert quota.throttle_ms() == 0


def test_an_old_request_is_never_refused(tmp_path):
    m, match = _manager(tmp_path, 2)
    clock = _Clock()
    quota = MutationQuota(m, match, strict=False, clock=clock)
    for _ in range(4):
        quota.charge(3)              # 4 - 12 = -8
    assert quota.throttle_ms() == 4000


def test_unbounded_charges_nothing():
    for _ in range(3):
        UNBOUNDED.charge(10_000)
    assert UNBOUNDED.throttle_ms() == 0


def test_strict_from_kafkas_versions():
    """KafkaApis' strictSinceVersion: CreateTopics 6, DeleteTopics 5,
    CreatePartitions 3."""
    assert not is_strict(19, 5) and is_strict(19, 6)
    assert not is_strict(20, 4) and is_strict(20, 5)
    assert not is_strict(37, 2) and is_strict(37, 3)


def test_the_bucket_follows_the_controller_quota_window_not_the_client_one(tmp_path):
    """Kafka's ControllerMutationQuotaManager takes its samples from
    controller.quota.window.*: a bucket of 3 samples * 2 s * 5/s = 30
    credits, whatever quota.window.* (10 * 1 s, 50 credits) says."""
    cfg = load_broker_config(None, [f"log.dirs={tmp_path / 'logs'}",
                                    "quota.window.num=10", "quota.window.size.seconds=1",
                                    "controller.quota.window.num=3",
                                    "controller.quota.window.size.seconds=2"], environ={})
    store = _store(tmp_path, {"clients/admin": {KEY: "5"}})
    quotas = ClientQuotas.for_broker(QuotaConfigs(store), cfg)
    assert quotas.window == QuotaWindow(10, 1000)
    match = quotas.mutations.match("ANONYMOUS", "admin")
    assert quotas.mutations.burst(match) == 30
    assert quotas.mutations.take_strict(match, 30, 0) == (True, 0)
    assert quotas.mutations.take_permissive(match, 1, 0) == (True, 200)  # 1 over at 5/s


def test_client_quotas_resolve_the_mutation_quota(tmp_path):
    """The same precedence as every client quota (here users/<u>/clients/<default>
    over clients/<c>), one budget per (user, client id) it names."""
    store = _store(tmp_path, {"users/alice/clients/<default>": {KEY: "5"},
                              "clients/tool": {KEY: "1"}})
    quotas = ClientQuotas(QuotaConfigs(store), QuotaWindow(2, 1000))
    assert quotas.mutation_quota("bob", "other", strict=True) is UNBOUNDED
    strict = quotas.mutation_quota("alice", "tool", strict=True)
    assert strict.strict and strict.match == (5, "alice", "tool")
    old = quotas.mutation_quota("bob", "tool", strict=False)
    assert not old.strict and old.match == (1, "", "tool")


# ------------------------------------------------------------ what a change costs

class _Ledger:
    def __init__(self) -> None:
        self.charged: list[int] = []

    def __call__(self, partitions: int) -> None:
        self.charged.append(partitions)


@pytest.fixture
def topics(tmp_path):
    cfg = load_broker_config(None, [f"log.dirs={tmp_path / 'logs'}", "num.partitions=3"],
                             environ={})
    store = _store(tmp_path)
    logs = LogManager([str(tmp_path / "logs")], cfg.default_topic_config, 0, store.cluster_id)
    service = TopicService(store, logs, cfg)
    yield service
    logs.shutdown()


def test_create_charges_its_partitions_after_validation(topics):
    ledger = _Ledger()
    topics.create("a", 4, charge=ledger)
    topics.create("b", charge=ledger)                            # num.partitions
    topics.create("c", assignment={0: [0], 1: [0]}, charge=ledger)
    topics.create("d", 5, validate_only=True, charge=ledger)     # nothing made
    for bad in (lambda: topics.create("a", 2, charge=ledger),   # exists
                lambda: topics.create("e", 0, charge=ledger)):  # invalid
        with pytest.raises(TopicError):
            bad()
    assert ledger.charged == [4, 3, 2]


def test_auto_creation_charges_only_what_it_creates(topics):
    ledger = _Ledger()
    topics.get_or_create("auto", charge=ledger)                 # num.partitions
    topics.get_or_create("auto", charge=ledger)                 # already there
    assert ledger.charged == [3]


def test_permissive_charges_count_against_the_next_strict_request(tmp_path):
    store = _store(tmp_path, {"clients/app": {KEY: "1"}})
    quotas = ClientQuotas(QuotaConfigs(store), QuotaWindow(2, 1000))
    assert quotas.mutation_quota("ANONYMOUS", "other", strict=False) is UNBOUNDED
    quota = quotas.mutation_quota("ANONYMOUS", "app", strict=False)
    for _ in range(5):
        quota.charge(10)
    # the next strict request of the same client finds the bucket overdrawn
    assert quotas.mutations.take_strict(quota.match, 1, 0).accepted is False


def test_add_partitions_charges_the_increment(topics):
    ledger = _Ledger()
    topics.create("a", 2)
    topics.add_partitions("a", 5, charge=ledger)
    topics.add_partitions("a", 9, validate_only=True, charge=ledger)
    with pytest.raises(TopicError):
        topics.add_partitions("a", 5, charge=ledger)            # no increase
    assert ledger.charged == [3]


def test_delete_charges_the_topics_partitions(topics):
    ledger = _Ledger()
    topics.create("a", 6)
    topics.delete("a", charge=ledger)
    with pytest.raises(TopicError):
        topics.delete("a", charge=ledger)                        # gone
    assert ledger.charged == [6]


def test_a_refused_charge_changes_nothing(topics):
    def refuse(_partitions: int) -> None:
        raise ThrottlingQuotaExceeded(100)
    with pytest.raises(ThrottlingQuotaExceeded):
        topics.create("a", 2, charge=refuse)
    assert topics.get("a") is None
    topics.create("b", 2)
    for change in (lambda: topics.add_partitions("b", 4, charge=refuse),
                   lambda: topics.delete("b", charge=refuse)):
        with pytest.raises(ThrottlingQuotaExceeded):
            change()
    assert topics.get("b").num_partitions == 2
