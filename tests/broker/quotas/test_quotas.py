"""Client quota arithmetic and precedence, against Kafka's rules (no clocks:
times are given)."""
from __future__ import annotations

import asyncio

import pytest

from samsa.broker.metadata import BrokerEndpoint, EmbeddedMetadataStore
from samsa.broker.quotas import QuotaConfigs, QuotaManager, QuotaWindow, client_throttles
from samsa.broker.quotas.rate import WindowedRate, throttle_time_ms
from samsa.broker.quotas.timing import BusyTime


def test_rate_is_measured_over_at_least_samples_minus_one_windows():
    r = WindowedRate(11, 1000)
    r.record(10_000, 0)
    # 10 kB in the first millisecond is 1 kB/s over the 10 windows Kafka assumes
    assert r.window_size(0) == 10_000
    assert r.rate(0) == pytest.approx(1000)
    r.record(10_000, 5500)
    assert r.window_size(5500) == 10_500  # 5 full windows elapsed: 5 more assumed
    assert r.rate(5500) == pytest.approx(20_000 / 10.5)


def test_old_samples_expire():
    r = WindowedRate(3, 1000)
    r.record(900, 0)
    r.record(900, 1000)
    r.record(900, 2000)
    assert r.rate(2000) == pytest.approx(2700 / 2.0)
    # after samples * window the first sample is reset
    assert r.rate(3000) == pytest.approx(1800 / 2.0)
    assert r.rate(10_000) == 0


def test_throttle_time_is_kafkas_formula():
    # (rate - bound) / bound * window: twice the bound over 10 s waits 10 s
    assert throttle_time_ms(2000, 1000, 10_000) == 10_000
    assert throttle_time_ms(1000, 1000, 10_000) == 0
    assert throttle_time_ms(1500, 1000, 10_000) == 5_000
    assert throttle_time_ms(999, 1000, 10_000) == 0


def test_manager_throttles_once_over_bound_and_recovers(tmp_path):
    configs = QuotaConfigs(_store(tmp_path, {"clients/app": {"producer_byte_rate": "1000"}}))
    m = QuotaManager("producer_byte_rate", configs, QuotaWindow(11, 1000))
    match = m.match("ANONYMOUS", "app")
    assert match is not None and match.bound == 1000
    assert m.record(match, 9_000, 0) == 0          # 900 B/s over 10 s
    # 20 kB over 10.1 s: (1980 - 1000) / 1000 * 10100 ms
    assert m.record(match, 11_000, 100) == 9900
    assert m.max_in_window(match) == pytest.approx(10_000)
    # once the burst's window has expired the client is within its quota again
    assert m.record(match, 1, 11_000) == 0


def _store(tmp_path, entities):
    store = EmbeddedMetadataStore(str(tmp_path), 0, BrokerEndpoint(0, "localhost", 9092))
    for path, configs in entities.items():
        store.set_entity_configs(path, configs)
    return store


@pytest.mark.parametrize("entities,expected", [
    ({"users/alice/clients/app": 1, "users/alice/clients/<default>": 2, "users/alice": 3,
      "users/<default>/clients/app": 4, "users/<default>/clients/<default>": 5,
      "users/<default>": 6, "clients/app": 7, "clients/<default>": 8},
     (1, "alice", "app")),
    ({"users/alice/clients/<default>": 2, "users/alice": 3, "clients/app": 7},
     (2, "alice", "app")),
    ({"users/alice": 3, "users/<default>/clients/app": 4, "clients/app": 7},
     (3, "alice", "")),
    ({"users/<default>/clients/app": 4, "users/<default>": 6}, (4, "alice", "app")),
    ({"users/<default>/clients/<default>": 5, "users/<default>": 6}, (5, "alice", "app")),
    ({"users/<default>": 6, "clients/app": 7}, (6, "alice", "")),
    ({"clients/app": 7, "clients/<default>": 8, "users/bob": 1}, (7, "", "app")),
    ({"clients/<default>": 8, "clients/other": 1}, (8, "", "app")),
    ({"users/bob": 1, "clients/other": 2}, None),
])
def test_precedence_is_kafkas(tmp_path, entities, expected):
    store = _store(tmp_path, {p: {"consumer_byte_rate": str(v)} for p, v in entities.items()})
    got = QuotaConfigs(store).resolve("consumer_byte_rate", "alice", "app")
    assert (tuple(got) if got else None) == expected


def test_each_quota_type_resolves_on_its_own(tmp_path):
    store = _store(tmp_path, {"users/alice": {"request_percentage": "50"},
                              "clients/app": {"producer_byte_rate": "2048"}})
    configs = QuotaConfigs(store)
    assert configs.resolve("producer_byte_rate", "alice", "app").bound == 2048
    assert configs.resolve("request_percentage", "alice", "app").bound == 50
    assert configs.resolve("consumer_byte_rate", "alice", "app") is None


def test_changes_apply_at_once_and_sanitized_names_match(tmp_path):
    store = _store(tmp_path, {})
    configs = QuotaConfigs(store)
    assert not configs.any
    store.set_entity_configs("users/User%3Aa%2Fb", {"producer_byte_rate": "10"})
    assert configs.resolve("producer_byte_rate", "User:a/b", "x").bound == 10
    store.set_entity_configs("users/User%3Aa%2Fb", {"producer_byte_rate": "20"})
    assert configs.resolve("producer_byte_rate", "User:a/b", "x").bound == 20
    store.set_entity_configs("users/User%3Aa%2Fb", {})
    assert configs.resolve("producer_byte_rate", "User:a/b", "x") is None
    assert not configs.any


def test_kip_219_versions():
    assert not client_throttles(0, 5) and client_throttles(0, 6)      # Produce
    assert not client_throttles(1, 7) and client_throttles(1, 8)      # Fetch
    assert not client_throttles(3, 5) and client_throttles(3, 6)      # Metadata
    assert client_throttles(48, 0) and client_throttles(60, 0)        # newer APIs


def test_busy_time_counts_steps_not_waits():
    async def handler():
        await asyncio.sleep(0.2)
        return 42

    async def main():
        timed = BusyTime(handler())
        return await timed, timed.seconds
    value, busy = asyncio.run(main())
    assert value == 42 and busy < 0.1


def test_quota_entity_paths_are_spelled_by_zk_layout():
    """Quota lookups, AlterClientQuotas and SCRAM credentials name the same
    znodes: all of them go through zk_layout's entity path helpers."""
    from samsa.broker.handlers.client_quotas import entity_path
    from samsa.broker.metadata import zk_layout
    from samsa.broker.quotas.entities import candidate_entities
    user, client = "User:a/b *", "app 1"
    paths = [p for p, _, _ in candidate_entities(user, client)]
    assert paths == [zk_layout.user_client_entity_path(user, client),
                     zk_layout.user_client_entity_path(user, None),
                     zk_layout.user_entity_path(user),
                     zk_layout.user_client_entity_path(None, client),
                     zk_layout.user_client_entity_path(None, None),
                     zk_layout.user_entity_path(None),
                     zk_layout.client_entity_path(client),
                     zk_layout.client_entity_path(None)]
    assert entity_path({"user": user, "client-id": None}) == \
        zk_layout.user_client_entity_path(user, None)
    assert entity_path({"user": None}) == zk_layout.user_entity_path(None)
    assert entity_path({"client-id": client}) == zk_layout.client_entity_path(client)
    assert entity_path({"ip": "::1"}) == "ips/%3A%3A1"


@pytest.mark.parametrize("key,value,ok", [
    ("producer_byte_rate", 1024.0, True), ("producer_byte_rate", 1.5, False),
    ("consumer_byte_rate", -1.0, False), ("consumer_byte_rate", float("nan"), False),
    ("consumer_byte_rate", float("inf"), False), ("request_percentage", 12.5, True),
    ("request_percentage", -0.5, False), ("request_percentage", float("nan"), False),
    ("controller_mutation_rate", 2.5, True), ("connection_creation_rate", 2.5, False),
    ("connection_creation_rate", 10.0, True),
])
def test_one_rule_for_quota_values(key, value, ok):
    """What AlterClientQuotas accepts is exactly what the broker enforces
    when it reads it back (one rule: entities.check_quota_value)."""
    from samsa.broker.handlers.client_quotas import QuotaRequestError, format_value
    from samsa.broker.quotas.entities import CLIENT_QUOTA_KEYS, IP_QUOTA_KEYS, parse_quota_value
    keys = IP_QUOTA_KEYS if key in IP_QUOTA_KEYS else CLIENT_QUOTA_KEYS
    try:
        stored = format_value(key, value, keys)
    except QuotaRequestError:
        stored = None
    assert (stored is not None) == ok
    if ok:
        assert parse_quota_value(key, stored) == value
    else:
        with pytest.raises(ValueError):
            parse_quota_value(key, repr(value))


def test_broker_services_always_have_quotas():
    """The dispatcher calls services.quotas on every request: the field is
    required and typed as such, not Optional with a None default."""
    import dataclasses
    import typing

    from samsa.broker.quotas import ClientQuotas
    from samsa.broker.server import BrokerServices
    field = {f.name: f for f in dataclasses.fields(BrokerServices)}["quotas"]
    assert field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    assert typing.get_type_hints(BrokerServices)["quotas"] is ClientQuotas


def test_budgets_of_idle_clients_expire(tmp_path):
    """A <default> quota gives every client id its own budget; one idle for
    an hour (Kafka's inactive sensor expiry) is dropped, an active one kept."""
    from samsa.broker.quotas.manager import INACTIVE_EXPIRY_MS, SWEEP_INTERVAL_MS
    configs = QuotaConfigs(_store(tmp_path, {"clients/<default>": {"producer_byte_rate": "1000"}}))
    m = QuotaManager("producer_byte_rate", configs, QuotaWindow(11, 1000))
    for i in range(500):
        m.record(m.match("ANONYMOUS", f"c{i}"), 10, 0)
    assert m.budget_count() == 500
    keep = m.match("ANONYMOUS", "c7")
    m.record(keep, 10, INACTIVE_EXPIRY_MS / 2)
    later = INACTIVE_EXPIRY_MS + SWEEP_INTERVAL_MS
    m.record(m.match("ANONYMOUS", "new"), 10, later)
    assert m.budget_count() == 2  # c7 (used half an hour ago) and new
    assert {c for _, c, _, _ in m.snapshot(later)} == {"c7", "new"}
    assert {c for _, c, _, _ in m.snapshot(2 * later)} == set()  # snapshot sweeps too


def test_resolved_quotas_are_bounded(tmp_path, monkeypatch):
    from samsa.broker.quotas import entities
    monkeypatch.setattr(entities, "MAX_RESOLVED", 50)
    configs = QuotaConfigs(_store(tmp_path, {"clients/<default>": {"producer_byte_rate": "1000"}}))
    for i in range(1000):
        assert configs.resolve("producer_byte_rate", "ANONYMOUS", f"c{i}").client_id == f"c{i}"
    assert len(configs._resolved) <= 50
