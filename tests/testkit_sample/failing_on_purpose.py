"""Run by name only: a failing test whose report must carry its broker's log."""
from record import record


def test_fails_and_shows_the_broker_log(samsa_broker):
    record(samsa_broker)
    samsa_broker.create_topic("visible-in-the-log")
    raise AssertionError("failing on purpose")
