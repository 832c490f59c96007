"""Which partition states the batched state watch reads, and which reads it
hands over (broker/metadata/zookeeper/state_watch.py's StateReads)."""
from kazoo.protocol.states import ZnodeStat

from samsa.broker.metadata import zk_layout as z
from samsa.broker.metadata.zookeeper.state_watch import StateReads


def _stat(mzxid: int) -> ZnodeStat:
    return ZnodeStat(czxid=1, mzxid=mzxid, ctime=0, mtime=0, version=mzxid, cversion=0,
                     aversion=0, ephemeralOwner=0, dataLength=1, numChildren=0, pzxid=1)


def test_a_followed_partition_is_read_once_however_many_watch_events_came():
    reads = StateReads()
    assert reads.follow(("t", 0)) and not reads.follow(("t", 0))
    for _ in range(3):
        reads.changed(("t", 0))
    reads.changed(("other", 1))  # not followed: nothing to read
    assert reads.take() == [("t", 0)]
    assert reads.take() == []


def test_only_first_reads_and_changes_are_handed_over():
    reads = StateReads()
    reads.follow(("t", 0))
    reads.follow(("t", 1))
    first = [(("t", 0), b"a", _stat(5)), (("t", 1), None, None)]
    assert reads.news(first) == first  # a missing znode's first read too
    assert reads.news(first) == []  # read again (a reconnection): nothing new
    changed = [(("t", 0), b"b", _stat(6)), (("t", 1), None, None)]
    assert reads.news(changed) == changed[:1]


def test_a_forgotten_topic_is_neither_read_nor_handed_over_and_starts_afresh():
    reads = StateReads()
    reads.follow(("t", 0))
    reads.news([(("t", 0), b"a", _stat(5))])
    reads.changed(("t", 0))
    reads.forget_topic("t")
    assert reads.take() == []
    assert reads.news([(("t", 0), b"a", _stat(5))]) == []
    reads.follow(("t", 0))  # the topic created again: its first read is news again
    assert reads.news([(("t", 0), b"a", _stat(5))]) == [(("t", 0), b"a", _stat(5))]


def test_a_new_connection_reads_every_followed_partition():
    reads = StateReads()
    reads.follow(("t", 0))
    reads.follow(("u", 3))
    reads.take()
    reads.everything_again()
    assert reads.take() == [("t", 0), ("u", 3)]


def test_state_paths_parse_back_and_other_paths_do_not():
    assert z.parse_partition_state_path(z.partition_state_path("a.b-c", 12)) == ("a.b-c", 12)
    for path in (z.partition_path("t", 1), z.topic_path("t"), "/brokers/topics/t/partitions/x/state",
                 "/brokers/ids/1", "/brokers/topics/t/partitions/1/state/more"):
        assert z.parse_partition_state_path(path) is None


def test_a_read_older_than_the_state_handed_over_is_stale_not_news():
    """A read sent before the broker's own write was handed over (the
    controller's, state_watch.written) may be answered after it: handing it
    over would put the old leader back until the watch fired again."""
    reads = StateReads()
    reads.follow(("t", 0))
    assert reads.news([(("t", 0), b"a", _stat(5))])
    assert reads.news([(("t", 0), b"ours", _stat(9))])  # our own write, handed over
    assert reads.news([(("t", 0), b"a", _stat(5))]) == []  # the read sent before it
    assert reads.news([(("t", 0), b"later", _stat(12))])  # a later change still is news
    assert reads.news([(("t", 0), None, None)])  # and so is the znode's deletion


def test_a_read_that_found_no_znode_made_before_the_state_handed_over_is_stale():
    """A new topic's state read (no znode yet) answered after the broker's
    controller created and wrote it, and handed its write over: the read was
    made at an older zxid, so the partition does not vanish. Made after the
    write, the znode's deletion is news; made at a zxid not known (pipelined
    gets), it is news too, as before."""
    reads = StateReads()
    reads.follow(("t", 0))
    assert reads.news([(("t", 0), b"ours", _stat(9))])  # our own write, handed over
    assert reads.news([(("t", 0), None, None)], [8]) == []  # read before it
    assert reads.news([(("t", 0), b"ours", _stat(9))], [11]) == []  # the same state
    assert reads.news([(("t", 0), None, None)], [12])  # read after: deleted
    reads.follow(("u", 0))
    assert reads.news([(("u", 0), b"ours", _stat(9))])
    assert reads.news([(("u", 0), None, None)], [0])  # made when, not known
