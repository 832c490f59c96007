"""Connection creation rates (KIP-612) against Kafka's ConnectionQuotas
rules: times are given, nothing sleeps. The windows are quota.window.num=2
of one second, so a burst is measured over one second at least."""
from __future__ import annotations

import itertools

import pytest

from samsa.broker.metadata import BrokerEndpoint, EmbeddedMetadataStore
from samsa.broker.quotas.connection_rate import UNBOUNDED, ConnectionRateQuotas, canonical_ip
from samsa.broker.quotas.ip_configs import IpConnectionRateConfigs
from samsa.broker.quotas.manager import INACTIVE_EXPIRY_MS, QuotaWindow

WINDOW = QuotaWindow(2, 1000.0)


def quotas(broker_rate: int = UNBOUNDED, **listeners: int) -> ConnectionRateQuotas:
    q = ConnectionRateQuotas(WINDOW)
    q.add_listener("CLIENT")
    q.add_listener("INTERNAL", protected=True)
    q.set_rates(broker_rate, {"CLIENT": listeners.get("CLIENT", broker_rate),
                              "INTERNAL": listeners.get("INTERNAL", broker_rate)})
    return q


def delays(q: ConnectionRateQuotas, listener: str, n: int, now_ms: float = 0.0) -> list[int]:
    return [q.accept_delay_ms(listener, now_ms) for _ in range(n)]


def served(q: ConnectionRateQuotas, ip: str, n: int, now_ms: float = 0.0,
           listener: str = "CLIENT") -> int:
    return sum(q.ip_throttle_ms(listener, ip, now_ms) == 0 for _ in range(n))


_later = itertools.count(10_000.0, 10_000.0)  # each far past the last one's windows


def bound_of(q: ConnectionRateQuotas, ip: str) -> int:
    """The rate that bounds ``ip``, as the acceptor finds it: how many of a
    burst of 1000 in fresh windows are served (over the one-second minimum
    window: the rate itself), UNBOUNDED when all are."""
    n = served(q, ip, 1000, now_ms=next(_later))
    return UNBOUNDED if n == 1000 else n


def test_unbounded_by_default():
    q = quotas()
    assert delays(q, "CLIENT", 1000) == [0] * 1000
    assert served(q, "127.0.0.1", 1000) == 1000


def test_unbounded_rates_are_still_measured():
    # the acceptor skips the throttle arithmetic without a bound, not the count
    q = quotas()
    assert delays(q, "CLIENT", 4) == [0] * 4
    assert q.broker_accept_rate(0) == pytest.approx(4.0)
    assert {r.listener: r.accept_rate for r in q.listener_rates(0)}["CLIENT"] == pytest.approx(4.0)
    # a bound set later judges what was measured while there was none
    q.set_rates(5, {"CLIENT": 5, "INTERNAL": 5})
    assert delays(q, "CLIENT", 2) == [0, 200]


def test_over_the_broker_rate_the_acceptor_waits_kafkas_throttle():
    q = quotas(broker_rate=5)
    # 5 within the bound; the 6th makes 6/s over the one-second window:
    # (6 - 5) / 5 * 1000 ms, the 7th (7 - 5) / 5 * 1000 ms
    assert delays(q, "CLIENT", 7) == [0, 0, 0, 0, 0, 200, 400]


def test_a_delay_is_at_most_one_quota_window():
    q = quotas(broker_rate=1)
    assert max(delays(q, "CLIENT", 100)) == WINDOW.window_ms
    q = quotas(broker_rate=0)  # start-up takes 0: one connection per window
    assert delays(q, "CLIENT", 2) == [WINDOW.window_ms] * 2


def test_a_listeners_own_rate_bounds_it():
    q = quotas(broker_rate=100, CLIENT=2)
    assert delays(q, "CLIENT", 3) == [0, 0, 500]


def test_the_inter_broker_listener_is_outside_the_broker_wide_rate():
    q = quotas(broker_rate=2, INTERNAL=UNBOUNDED)
    assert delays(q, "INTERNAL", 50) == [0] * 50
    # and took nothing from the clients' budget
    assert delays(q, "CLIENT", 3) == [0, 0, 500]
    # its own rate (the broker-wide value unless overridden) still bounds it
    q = quotas(broker_rate=2)
    assert delays(q, "INTERNAL", 3) == [0, 0, 500]


def test_rate_changes_apply_to_what_was_measured():
    q = quotas(broker_rate=2)
    assert delays(q, "CLIENT", 3) == [0, 0, 500]
    q.set_rates(100, {"CLIENT": 100, "INTERNAL": 100})
    assert delays(q, "CLIENT", 3) == [0, 0, 0]


def test_over_its_ip_rate_a_connection_is_throttled_and_not_counted():
    q = quotas()
    q.set_ip_rate("127.0.0.1", 3)
    assert [q.ip_throttle_ms("CLIENT", "127.0.0.1", 0) for _ in range(5)] == [0, 0, 0, 333, 333]
    # the throttled ones were taken back: the address measured three, not five
    assert q.ip_accept_rates(0) == [("127.0.0.1", pytest.approx(3.0))]
    rates = {r.listener: r for r in q.listener_rates(0)}
    assert rates["CLIENT"].ip_throttle_time == pytest.approx(333)
    assert rates["INTERNAL"].ip_throttle_time == 0
    # other addresses are not bounded
    assert served(q, "10.0.0.1", 50) == 50


def test_a_throttled_connection_is_taken_out_of_the_listener_and_broker_rates():
    q = quotas(broker_rate=4)
    q.set_ip_rate("127.0.0.1", 2)
    for _ in range(10):  # the acceptor's order: accept delay, then the address
        assert q.accept_delay_ms("CLIENT", 0) == 0
        q.ip_throttle_ms("CLIENT", "127.0.0.1", 0)
    # 2 served, 8 throttled: the broker counted 2, so 2 more are free
    assert q.broker_accept_rate(0) == pytest.approx(2.0)
    assert delays(q, "CLIENT", 3) == [0, 0, 250]


def test_after_the_window_an_address_is_served_again():
    q = quotas()
    q.set_ip_rate("127.0.0.1", 3)
    assert served(q, "127.0.0.1", 10, now_ms=0) == 3
    assert served(q, "127.0.0.1", 1, now_ms=100) == 0  # 4 over 1.1 s is over 3/s
    # samples * window later the burst's window has expired
    assert served(q, "127.0.0.1", 3, now_ms=2000) == 3


def test_a_specific_ip_wins_over_the_default_entity():
    q = quotas()
    q.set_ip_rate(None, 1)
    q.set_ip_rate("127.0.0.1", 100)
    assert served(q, "10.0.0.1", 5) == 1
    assert served(q, "127.0.0.1", 5) == 5
    q.set_ip_rate("127.0.0.1", None)  # removed: the default applies
    assert served(q, "127.0.0.1", 5, now_ms=10) == 0  # 5 measured already
    assert bound_of(q, "127.0.0.1") == 1 and bound_of(q, "10.0.0.1") == 1
    q.set_ip_rate(None, None)
    assert bound_of(q, "127.0.0.1") == UNBOUNDED


def test_raising_an_ip_rate_serves_an_address_already_over_it():
    q = quotas()
    q.set_ip_rate(None, 2)
    assert served(q, "127.0.0.1", 5) == 2
    q.set_ip_rate(None, 1000)
    assert served(q, "127.0.0.1", 5) == 5


def test_ip_spellings_match():
    assert canonical_ip("::ffff:127.0.0.1") == "127.0.0.1"
    assert canonical_ip("0:0:0:0:0:0:0:1") == "::1"
    q = quotas()
    q.set_ip_rate("127.0.0.1", 1)
    assert served(q, "::ffff:127.0.0.1", 3) == 1  # a dual-stack listener's peer
    q.set_ip_rate("0:0:0:0:0:0:0:1", 1)
    assert bound_of(q, "::1") == 1


def test_measurements_of_idle_addresses_expire():
    q = quotas()
    q.set_ip_rate(None, 5)
    for i in range(100):
        q.ip_throttle_ms("CLIENT", f"10.0.0.{i}", 0)
    assert len(q.ip_accept_rates(0)) == 100
    q.ip_throttle_ms("CLIENT", "10.1.0.1", INACTIVE_EXPIRY_MS)
    assert [ip for ip, _ in q.ip_accept_rates(INACTIVE_EXPIRY_MS)] == ["10.1.0.1"]


def test_addresses_left_without_a_quota_are_forgotten():
    q = quotas()
    q.set_ip_rate(None, 5)
    q.set_ip_rate("10.0.0.1", 5)
    for ip in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        q.ip_throttle_ms("CLIENT", ip, 0)
    q.set_ip_rate(None, None)  # only 10.0.0.1's own quota is left
    assert [ip for ip, _ in q.ip_accept_rates(0)] == ["10.0.0.1"]
    q.set_ip_rate("10.0.0.1", None)
    assert q.ip_accept_rates(0) == []


def test_ip_entity_configs_are_kept_current(tmp_path):
    store = EmbeddedMetadataStore(str(tmp_path), 0, BrokerEndpoint(0, "localhost", 9092))
    store.set_entity_configs("ips/127.0.0.1", {"connection_creation_rate": "3.0"})
    store.set_entity_configs("users/alice", {"producer_byte_rate": "10"})
    q = quotas()
    IpConnectionRateConfigs(store, q)
    assert bound_of(q, "127.0.0.1") == 3 and bound_of(q, "10.0.0.1") == UNBOUNDED
    store.set_entity_configs("ips/<default>", {"connection_creation_rate": "7"})
    store.set_entity_configs("ips/%3A%3A1", {"connection_creation_rate": "4"})  # ::1 sanitized
    assert bound_of(q, "10.0.0.1") == 7 and bound_of(q, "::1") == 4
    store.set_entity_configs("ips/127.0.0.1", {})
    assert bound_of(q, "127.0.0.1") == 7
    store.set_entity_configs("ips/10.0.0.2", {"connection_creation_rate": "-1"})  # by hand
    assert bound_of(q, "10.0.0.2") == 7
