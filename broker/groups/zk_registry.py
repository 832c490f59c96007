"""The consumer registry of Kafka's ZooKeeper era, kept by the brokers.

Kafka 0.8.x consumers kept their group's state in ZooKeeper: committed
offsets under ``/consumers/<group>/offsets/<topic>/<partition>`` (a decimal
string; OffsetCommit v0 / OffsetFetch v0 read and write exactly these),
members under ``/consumers/<group>/ids/<consumer id>`` and partition
ownership under ``/consumers/<group>/owners/<topic>/<partition>`` (both
ephemeral). Tools written against that layout (lag checkers, dashboards,
the 0.8 high-level consumer itself) keep working when samsa's group
coordinator publishes its classic groups there:

- v0 offsets are written through before the commit is answered, and read
  back from here, so they survive broker restarts and coordinator moves;
- v1+ offsets stay in ``__consumer_offsets``; a copy is mirrored here
  (Kafka 0.8.2's dual commit), coalesced per partition and written by a
  background thread every ``flush_interval`` seconds, so a commit-heavy
  group does not flood ZooKeeper;
- members and owners are ephemeral in the coordinator's session, so they
  vanish with a dead coordinator and the next one publishes them again.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable, Iterable, Mapping

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError

from samsa.broker.metadata import zk_layout as z
from samsa.broker.metadata.zookeeper import retriable_on_zookeeper_errors
from samsa.broker.metadata.zookeeper.writes import Znodes, over_kazoo
from samsa.protocol.model import TopicPartition

if TYPE_CHECKING:
    from .coordinator import GroupMembership

log = logging.getLogger("broker.groups.zk_registry")



class ConsumerRegistry:
    def __init__(self, zk: Znodes | KazooClient, *, mirror_offsets: bool = True,
                 flush_interval: float = 1.0, clock: Callable[[], float] = time.time) -> None:
        self.zk: Znodes = over_kazoo(zk)
        self.mirror_enabled = mirror_offsets
        self._clock = clock
        self._pending: dict[tuple[str, str, int], int] = {}  # (group, topic, p) -> offset
        self._pending_lock = threading.Lock()
        self._published: dict[str, set[str]] = {}  # group -> ephemeral paths we own
        self._stop = threading.Event()
        self._flush_interval = flush_interval
        self._flusher = threading.Thread(target=self._flush_loop, daemon=True,
                                         name="samsa-zk-offsets-mirror")
        self._flusher.start()
        self._publisher = ThreadPoolExecutor(max_workers=1,
                                             thread_name_prefix="samsa-zk-consumer-registry")

    # ------------------------------------------------------------ offsets v0

    @retriable_on_zookeeper_errors
    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """OffsetCommit v0: written before the commit is answered."""
        for (topic, partition), offset in offsets.items():
            self._write_offset(group, topic, partition, offset)

    @retriable_on_zookeeper_errors
    def fetch(self, group: str, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """OffsetFetch v0: -1 where the group has committed nothing."""
        result = {}
        for topic, partition in partitions:
            try:
                data = self.zk.get(z.consumer_offset_path(group, topic, partition))[0]
                result[(topic, partition)] = int(data.decode())
            except NoNodeError:
                result[(topic, partition)] = -1
            except (ValueError, UnicodeDecodeError):
                log.warning("ignoring non-numeric offset at %s",
                            z.consumer_offset_path(group, topic, partition))
                result[(topic, partition)] = -1
        return result

    def _write_offset(self, group: str, topic: str, partition: int, offset: int) -> None:
        path = z.consumer_offset_path(group, topic, partition)
        data = str(offset).encode()
        try:
            self.zk.set(path, data)
        except NoNodeError:
            try:
                self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                self.zk.set(path, data)

    # ------------------------------------------------------------ the mirror

    def mirror(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """A v1+ commit's copy: queued, the latest per partition wins."""
        if not self.mirror_enabled:
            return
        with self._pending_lock:
            for (topic, partition), offset in offsets.items():
                self._pending[(group, topic, partition)] = offset

    def flush(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, {}
        failed = {}
        for (group, topic, partition), offset in pending.items():
            try:
                self._write_offset(group, topic, partition, offset)
            except KazooException as e:
                log.warning("mirroring offsets of group %s to ZooKeeper failed: %s", group, e)
                failed[(group, topic, partition)] = offset
        if failed:
            with self._pending_lock:
                for key, offset in failed.items():
                    self._pending.setdefault(key, offset)  # a newer one may have arrived

    def _flush_loop(self) -> None:
        while not self._stop.wait(self._flush_interval):
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - keep mirroring on the next round
                log.exception("offset mirror flush failed")

    # ------------------------------------------------------------ members, owners

    def membership_changed(self, membership: "GroupMembership") -> None:
        """The coordinator's word on a group's members (called on its event
        loop): published in order on one worker thread, off that loop."""
        if self._stop.is_set():
            return
        self._publisher.submit(self._publish_membership, membership)

    def _publish_membership(self, membership: "GroupMembership") -> None:
        try:
            if not membership.members:
                self.unpublish(membership.group_id)
                return
            owners = {(t, p): member
                      for member, (_, assigned) in membership.members.items()
                      for t, ps in assigned.items() for p in ps}
            self.publish(membership.group_id,
                         {m: topics for m, (topics, _) in membership.members.items()}, owners)
        except KazooException as e:
            log.warning("publishing group %s in ZooKeeper failed: %s", membership.group_id, e)

    def publish(self, group: str, subscriptions: Mapping[str, Iterable[str]],
                owners: Mapping[TopicPartition, str]) -> None:
        """The group's current members (member id -> subscribed topics) and
        partition owners, replacing what was published before."""
        wanted: dict[str, bytes] = {}
        now = str(int(self._clock() * 1000))
        for member, topics in subscriptions.items():
            wanted[z.consumer_id_path(group, member)] = json.dumps(
                {"version": 1, "subscription": {t: 1 for t in sorted(set(topics))},
                 "pattern": "static", "timestamp": now}, separators=(",", ":")).encode()
        for (topic, partition), member in owners.items():
            # The 0.8 consumer names the owning thread "<consumer id>-<n>".
            wanted[z.consumer_owner_path(group, topic, partition)] = f"{member}-0".encode()
        mine = self._published.get(group, set())
        for path in mine - set(wanted):
            self._delete(path)
        for path, data in wanted.items():
            self._put_ephemeral(path, data)
        self._published[group] = set(wanted)

    def unpublish(self, group: str) -> None:
        """The coordinator gave the group up (or the group is empty)."""
        for path in self._published.pop(group, set()):
            self._delete(path)

    def _put_ephemeral(self, path: str, data: bytes) -> None:
        try:
            self.zk.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            _, stat = self.zk.get(path)
            if stat.ephemeralOwner == self.zk.session_id():
                self.zk.set(path, data, version=stat.version)
            else:
                # Another session holds it: a previous coordinator whose session
                # has not ended yet, or a real 0.8 consumer of a group by the same
                # name. Never take it: that consumer's ownership is its own.
                log.warning("not publishing %s: held by another ZooKeeper session", path)

    def _delete(self, path: str) -> None:
        try:
            self.zk.delete(path)
        except NoNodeError:
            pass

    def close(self) -> None:
        self._stop.set()
        self._publisher.shutdown(wait=True)
        self._flusher.join(timeout=5)
        try:
            self.flush()
        except Exception:  # noqa: BLE001 - ZooKeeper may be gone at shutdown
            log.warning("final offset mirror flush failed", exc_info=True)
