"""A share group's settings read its share.* group configs by the GROUP config
table's rules (broker/group_configs.py KEYS): one rule, in one place."""
from __future__ import annotations

from samsa.broker.groups.share.config import ShareDefaults, settings


def test_an_override_below_the_keys_floor_is_ignored_as_set_would_refuse_it():
    # Kafka's GroupConfig: lock duration at least 1000, delivery count limit
    # at least 2, max record locks at least 100
    got = settings(ShareDefaults(), {"share.record.lock.duration.ms": "500",
                                     "share.delivery.count.limit": "1",
                                     "share.partition.max.record.locks": "50"})
    assert got.limits == settings(ShareDefaults(), {}).limits


def test_overrides_within_the_rules_are_read():
    got = settings(ShareDefaults(), {"share.record.lock.duration.ms": "1000",
                                     "share.delivery.count.limit": "2",
                                     "share.partition.max.record.locks": "100",
                                     "share.session.timeout.ms": "6000",
                                     "share.heartbeat.interval.ms": "2000",
                                     "share.isolation.level": "read_committed",
                                     "share.auto.offset.reset": "by_duration:PT1M"})
    assert (got.limits.lock_duration_ms, got.limits.delivery_count_limit,
            got.limits.max_in_flight) == (1000, 2, 100)
    assert (got.session_timeout_ms, got.heartbeat_interval_ms) == (6000, 2000)
    assert got.read_committed and got.auto_offset_reset == 60_000


def test_bad_strings_fall_back_to_the_defaults():
    got = settings(ShareDefaults(), {"share.isolation.level": "dirty",
                                     "share.auto.offset.reset": "never",
                                     "share.session.timeout.ms": "soon"})
    assert not got.read_committed and got.auto_offset_reset == "latest"
    assert got.session_timeout_ms == ShareDefaults().session_timeout_ms
