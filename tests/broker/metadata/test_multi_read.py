"""Many znodes read and watched in few requests (ZooKeeper's multiRead and
SetWatches), against a real ZooKeeper server; and the fall-back to one read
request each when the server refuses multiRead, as a server before 3.6 does."""
from __future__ import annotations

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.serialization import MultiHeader

from samsa.broker.metadata.zookeeper import multi_read
from samsa.broker.metadata.zookeeper.multi_read import (MultiRead, decode_answer, read_many,
                                                        seen_zxid, watch_many)
from tests.support.waiting import wait_until


def test_an_answer_that_is_not_a_multi_read_one_does_not_decode():
    with pytest.raises(ValueError):  # an operation of another kind
        decode_answer(bytes(MultiHeader(5, False, 0).serialize()) + bytes(100), 0, 1)
    done = bytes(MultiHeader(-1, True, -1).serialize())
    with pytest.raises(ValueError):  # fewer answers than reads asked
        decode_answer(done, 0, 1)


def test_reads_in_batches_under_a_chroot_and_falls_back_when_refused(zookeeper, monkeypatch):
    admin = KazooClient(hosts=zookeeper.connect)
    admin.start(timeout=20)
    tx = admin.transaction()
    tx.create("/root", b"")
    for i in range(25):
        tx.create(f"/root/n{i}", f"value {i}".encode())
    tx.commit()
    admin.set("/root/n3", b"changed")
    client = KazooClient(hosts=zookeeper.connect + "/root")
    client.start(timeout=20)
    try:
        paths = [f"/n{i}" for i in range(25)] + ["/missing", "/"]
        found = read_many(client, paths, per_request=4)
        assert [f[0] if f else None for f in found] == (
            [f"value {i}".encode() if i != 3 else b"changed" for i in range(25)] + [None, b""])
        assert found[3] is not None and found[3][1].version == 1
        assert found[-1] is not None and found[-1][1].numChildren == 25  # "/" is the chroot

        # Watches set with a read: relative to the zxid seen before it, a
        # change made between the read and the watch fires at once; later
        # ones fire too (each once, as ZooKeeper's watches do).
        fired: list[str] = []
        before = seen_zxid(client)
        read = read_many(client, ["/n1", "/n2", "/new"])
        assert read[2] is None
        admin.set("/root/n1", b"between")  # after the read, before the watch
        watch_many(client, before, ["/n1", "/n2"], ["/new"], lambda e: fired.append(e.path))
        wait_until(lambda: fired == ["/n1"], timeout=10, what="the missed change fired")
        admin.set("/root/n2", b"after")
        admin.create("/root/new", b"")
        wait_until(lambda: sorted(fired) == ["/n1", "/n2", "/new"], timeout=10,
                   what="later changes fired")

        # A server that does not know the operation refuses it (and ZooKeeper
        # then drops the connection): an operation code it does not know
        # stands for multiRead on an older server.
        monkeypatch.setattr(MultiRead, "type", 99)
        again = read_many(client, paths, per_request=4)
        expected = [b"value 0", b"between", b"after"] + [f[0] for f in found[3:25] if f]
        assert [f[0] if f else None for f in again] == expected + [None, b""]
        assert client in multi_read._without_multi_read
        assert read_many(client, ["/n1"])[0] is not None  # pipelined from now on
    finally:
        client.stop()
        admin.stop()


def test_reads_say_the_zxid_they_were_made_at(zookeeper):
    """A multiRead's answer says the state it was read at (its header's
    zxid): newer than the znodes' own last changes when others changed since.
    A watch set relative to it does not fire for what the read saw, and a
    read that found no znode can be told older than a write of it."""
    admin = KazooClient(hosts=zookeeper.connect)
    admin.start(timeout=20)
    client = KazooClient(hosts=zookeeper.connect)
    client.start(timeout=20)
    try:
        a = admin.create("/a", b"a")
        a_stat = admin.exists(a)
        later = admin.create("/elsewhere", b"")   # a change to another znode
        later_zxid = admin.exists(later).czxid
        pending = multi_read.send_reads(client, ["/a", "/gone"])
        found = pending.get()
        assert found[0] is not None and found[0][1].mzxid == a_stat.mzxid and found[1] is None
        assert pending.read_at >= later_zxid > a_stat.mzxid
        assert pending.read_zxids == [pending.read_at] * 2 and pending.read_at <= seen_zxid(client)
        fired: list[str] = []
        watch_many(client, pending.read_at, ["/a"], ["/gone"], lambda e: fired.append(e.path))
        admin.create("/gone", b"")
        wait_until(lambda: fired == ["/gone"], timeout=10, what="the creation fired")
        assert fired == ["/gone"]   # not the read's own /a
    finally:
        client.stop()
        admin.stop()
