"""The exactly-once sink without Spark: its options, the "already written" decision (pure), and
one task's transactional write (pipeline/eos_writer.py) against a real samsa broker, called the
way a Spark task calls it, with the task's query id, batch id and partition given explicitly.

The Spark query killed mid-batch is in test_eos_streaming.py.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from samsa.pipeline.eos import Mark, TaskBatch, already_written, mark_for, prefix_for, transactional_id
from samsa.pipeline.eos_writer import ExactlyOnceWriteError, check_marker_topic, write_exactly_once
from samsa.pipeline.options import ExactlyOnce, SamsaOptionError, parse_write_options

from .conftest import consume_all, create_topic

BOOT = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


# ---------------------------------------------------------------------------------------------
# Options

def test_exactly_once_is_opt_in():
    assert parse_write_options({**BOOT, "topic": "t"}).exactly_once is None
    assert parse_write_options({**BOOT, "topic": "t", "exactlyOnce": "false"}).exactly_once is None


def test_exactly_once_options():
    o = parse_write_options({**BOOT, "topic": " out ", "EXACTLYONCE": "True", "transactionalIdPrefix": " q1 "})
    assert o.exactly_once == ExactlyOnce(transactional_id_prefix="q1", marker_topic="out")
    # Rows carry their topic: the marks need a topic named for them.
    o = parse_write_options({**BOOT, "exactlyOnce": "true", "exactlyOnceMarkerTopic": "marks"})
    assert o.exactly_once == ExactlyOnce(transactional_id_prefix=None, marker_topic="marks")


@pytest.mark.parametrize("opts, message", [
    ({"topic": "t", "exactlyOnce": "yes"}, "Invalid value 'yes' for option 'exactlyOnce': expected 'true' or 'false'"),
    ({"topic": "t", "transactionalIdPrefix": "q"},
     "Option 'transactionalIdPrefix' is only used with 'exactlyOnce' set to 'true'"),
    ({"topic": "t", "exactlyOnce": "false", "exactlyOnceMarkerTopic": "m"},
     "Option 'exactlyOnceMarkerTopic' is only used with 'exactlyOnce' set to 'true'"),
    ({"exactlyOnce": "true"}, "Option 'exactlyOnceMarkerTopic' is required with 'exactlyOnce' when there is no 'topic' option"),
    ({"topic": "t", "exactlyOnce": "true", "transactionalIdPrefix": " "},
     "Invalid value ' ' for option 'transactionalIdPrefix': must not be empty"),
    ({"topic": "t", "exactlyOnce": "true", "kafka.enable.idempotence": "false"},
     "Option 'kafka.enable.idempotence' cannot be 'false' with 'exactlyOnce'"),
    ({"topic": "t", "kafka.transactional.id": "x"}, "Kafka option 'transactional.id' is not supported"),
    ({"topic": "t", "exactlyOnce": "true", "kafka.transactional.id": "x"}, "Set 'exactlyOnce' to 'true'"),
])
def test_exactly_once_option_errors(opts, message):
    with pytest.raises(SamsaOptionError) as e:
        parse_write_options({**BOOT, **opts})
    assert message in str(e.value)


# ---------------------------------------------------------------------------------------------
# The decision

def test_names():
    assert prefix_for("orders-eos", "q-1") == "orders-eos"
    assert prefix_for(None, "5940f3b8") == "samsa-5940f3b8"
    assert transactional_id("orders-eos", 3) == "orders-eos-3"


@pytest.mark.parametrize("mark, batch, written", [
    (None, 0, False),                           # nothing committed yet
    (Mark(5, "q"), 5, False),                   # batch 4 committed: 5 is new
    (Mark(5, "q"), 4, True),                    # batch 4 run again: skip
    (Mark(5, "q"), 2, True),                    # an older batch: its records went out already
    (Mark(5, "other query"), 4, False),         # another query's mark (the prefix reused)
    (Mark(5, ""), 4, False),                    # a mark without query id is not ours
])
def test_already_written(mark, batch, written):
    assert already_written(mark, TaskBatch("q", batch, 0)) is written


def test_mark_of_a_batch():
    assert mark_for(TaskBatch("q", 7, 1)) == Mark(8, "q")
    assert already_written(mark_for(TaskBatch("q", 7, 1)), TaskBatch("q", 7, 1))


# ---------------------------------------------------------------------------------------------
# One task's transaction against a real broker

def rows(values: list[str]) -> pa.RecordBatch:
    return pa.record_batch([pa.array([v.encode() for v in values], pa.binary())], names=["value"])


def values(bootstrap: str, topic: str, isolation: str) -> list[str]:
    return [r[1].decode() for r in consume_all(bootstrap, topic, include_headers=False, isolation=isolation)]


def opts_for(bootstrap: str, topic: str, prefix: str | None = "eos-test"):
    extra = {"transactionalIdPrefix": prefix} if prefix else {}
    return parse_write_options({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                                "exactlyOnce": "true", **extra})


def committed_mark(bootstrap: str, group: str, topic: str) -> tuple[int, str]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "isolation.level": "read_committed"})
    try:
        [tp] = c.committed([TopicPartition(topic, 0)], timeout=30)
        return tp.offset, tp.metadata
    finally:
        c.close()


def test_a_batch_run_again_is_not_written_again(broker):
    b = broker.bootstrap
    create_topic(b, "eos-out", 1)
    opts = opts_for(b, "eos-out")
    first = write_exactly_once(opts, TaskBatch("q", 0, 0), [rows(["a", "b"]), rows(["c"])])
    assert (first.records, first.skipped) == (3, False)
    assert committed_mark(b, "eos-test-0", "eos-out") == (1, "q")
    again = write_exactly_once(opts, TaskBatch("q", 0, 0), [rows(["a", "b"]), rows(["c"])])
    assert (again.records, again.skipped) == (0, True)
    # Another task partition has marks of its own.
    other = write_exactly_once(opts, TaskBatch("q", 0, 1), [rows(["x"])])
    assert (other.records, other.skipped) == (1, False)
    nxt = write_exactly_once(opts, TaskBatch("q", 1, 0), [rows(["d"])])
    assert (nxt.records, nxt.skipped) == (1, False)
    assert committed_mark(b, "eos-test-0", "eos-out") == (2, "q")
    # A new query reusing the prefix starts from batch 0: the old query's marks are not its own.
    fresh = write_exactly_once(opts, TaskBatch("q2", 0, 0), [rows(["e"])])
    assert (fresh.records, fresh.skipped) == (1, False)
    # An empty task starts no transaction and leaves the mark alone.
    empty = write_exactly_once(opts, TaskBatch("q2", 1, 0), [rows([])])
    assert (empty.records, empty.skipped) == (0, False)
    assert committed_mark(b, "eos-test-0", "eos-out") == (1, "q2")
    assert sorted(values(b, "eos-out", "read_committed")) == ["a", "b", "c", "d", "e", "x"]


def test_the_prefix_defaults_to_the_query_id(broker):
    b = broker.bootstrap
    create_topic(b, "eos-default", 1)
    write_exactly_once(opts_for(b, "eos-default", prefix=None), TaskBatch("5940f3b8", 3, 2), [rows(["a"])])
    assert committed_mark(b, "samsa-5940f3b8-2", "eos-default") == (4, "5940f3b8")


def test_a_dead_attempt_is_fenced_and_its_records_aborted(broker):
    """An earlier attempt of the task that began its transaction and wrote (then hung, or its
    process died): the next attempt's init_transactions aborts its records at once, and the old
    producer can no longer commit them."""
    b = broker.bootstrap
    create_topic(b, "eos-zombie", 1)
    zombie = Producer({"bootstrap.servers": b, "transactional.id": "eos-test-0"})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    for v in ("z1", "z2"):
        zombie.produce("eos-zombie", v.encode())
    assert zombie.flush(30) == 0
    done = write_exactly_once(opts_for(b, "eos-zombie"), TaskBatch("q", 0, 0), [rows(["a", "b"])])
    assert (done.records, done.skipped) == (2, False)
    with pytest.raises(KafkaException) as e:
        zombie.commit_transaction(30)
    assert e.value.args[0].fatal() or e.value.args[0].txn_requires_abort(), e.value
    assert sorted(values(b, "eos-zombie", "read_committed")) == ["a", "b"]
    assert sorted(values(b, "eos-zombie", "read_uncommitted")) == ["a", "b", "z1", "z2"]


def test_errors_name_the_topic_and_the_option(broker):
    b = broker.bootstrap
    with pytest.raises(SamsaOptionError) as e:
        check_marker_topic(opts_for(b, "no-such-topic"))
    assert "Option 'topic'" in str(e.value) and "'no-such-topic'" in str(e.value)
    o = parse_write_options({"kafka.bootstrap.servers": b, "exactlyOnce": "true",
                             "exactlyOnceMarkerTopic": "no-marks"})
    with pytest.raises(SamsaOptionError) as e:
        check_marker_topic(o)
    assert "Option 'exactlyOnceMarkerTopic'" in str(e.value)
    # A failure inside the transaction names the batch, the task and the transactional id.
    create_topic(b, "eos-errors", 1)
    bad = parse_write_options({"kafka.bootstrap.servers": b, "exactlyOnce": "true", "topic": "eos-errors",
                               "transactionalIdPrefix": "eos-err", "kafka.transaction.timeout.ms": "1000",
                               "kafka.message.timeout.ms": "1000"})
    with pytest.raises(ExactlyOnceWriteError) as e:
        write_exactly_once(bad, TaskBatch("q", 4, 1),
                           [pa.record_batch([pa.array([b"v"]), pa.array([7], pa.int32())],
                                            names=["value", "partition"])])
    text = str(e.value)
    assert "batch 4, task partition 1, transactional.id 'eos-err-1'" in text, text
    assert "eos-errors" in text, text


def test_a_failed_task_commits_nothing_and_its_retry_writes_the_batch(broker):
    """A row the sink refuses (a null topic) after others were produced: the task fails naming
    its transactional id, its transaction is aborted, no mark; the task run again writes it all."""
    b = broker.bootstrap
    create_topic(b, "eos-abort", 1)
    o = parse_write_options({"kafka.bootstrap.servers": b, "exactlyOnce": "true",
                             "exactlyOnceMarkerTopic": "eos-abort", "transactionalIdPrefix": "eos-abort"})
    good = pa.record_batch([pa.array([b"a", b"b"]), pa.array(["eos-abort", "eos-abort"])], names=["value", "topic"])
    bad = pa.record_batch([pa.array([b"c"]), pa.array([None], pa.string())], names=["value", "topic"])
    with pytest.raises(ExactlyOnceWriteError) as e:
        write_exactly_once(o, TaskBatch("q", 0, 0), [good, bad])
    assert "null topic" in str(e.value) and "transactional.id 'eos-abort-0'" in str(e.value)
    assert committed_mark(b, "eos-abort-0", "eos-abort")[0] < 0
    retry = write_exactly_once(o, TaskBatch("q", 0, 0), [good])
    assert (retry.records, retry.skipped) == (2, False)
    assert sorted(values(b, "eos-abort", "read_committed")) == ["a", "b"]
    assert committed_mark(b, "eos-abort-0", "eos-abort") == (1, "q")
