"""Configs as Kafka takes them (issue 15, item 5): an emptied cleanup.policy
(Kafka 4.2+: keep everything) and the topic keys Kafka 4 removed."""
from __future__ import annotations

import logging

from samsa.config import load_broker_config
from samsa.config import topic_keys
from samsa.config.topic_keys import drop_removed_keys


def _config(**overrides):
    return load_broker_config(None, overrides=[f"{k}={v}" for k, v in overrides.items()], environ={})


def test_an_empty_cleanup_policy_keeps_everything():
    cfg = _config().topic_config({"cleanup.policy": ""})
    assert not cfg.compact and not cfg.delete
    assert not _config(**{"log.cleanup.policy": ""}).default_topic_config.delete


def test_keys_removed_in_kafka_4_are_ignored_with_one_warning(caplog):
    topic_keys._warned_removed.clear()  # other tests in this process may have warned
    with caplog.at_level(logging.WARNING, logger="config"):
        cfg = _config().topic_config({"message.format.version": "2.8",
                                      "message.downconversion.enable": "false",
                                      "retention.ms": "5"})
        drop_removed_keys({"message.format.version": "3.0"})
    assert cfg.retention_ms == 5
    warnings = [r.getMessage() for r in caplog.records if "removed in Kafka 4.0" in r.getMessage()]
    assert len(warnings) == 2  # one per key, however often it comes
    assert drop_removed_keys({"message.format.version": "2.8", "a": "b"}) == {"a": "b"}
