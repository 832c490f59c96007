"""A real samsa cluster for tests: one ZooKeeper server and N samsa brokers, each
its own process, joined through ``zookeeper.connect=<zk>/<chroot>``.

    cluster = ClusterProcesses(tmp_dir, size=3).start()
    cluster.bootstrap            # "127.0.0.1:P0,127.0.0.1:P1,127.0.0.1:P2"
    cluster.broker(1).bootstrap  # one broker
    cluster.kill(1); cluster.restart(1)   # SIGKILL, then start again (same port and data)
    zk = cluster.zk_client()     # kazoo on the chroot, for reading znodes
    cluster.controller_id()      # from /controller
    cluster.wait_for_leaders(t, 3)   # leaders in ZooKeeper (not yet acting as leaders)
    cluster.wait_until_led(t, 3)     # ... known to every broker, each leader acting as one
    cluster.stop()

Broker ids are the indexes 0..N-1. Nothing here looks inside a broker: what a
test learns comes from ZooKeeper (kazoo), the Kafka protocol, or the log files.
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss, NoNodeError, SessionExpiredError

from samsa.broker.metadata.zookeeper.session import retry_about_every_second
from samsa.client.blocking import ClientError, SimpleClient
from samsa.protocol.messages import ListOffsetsRequest, MetadataRequest

from .broker_process import BrokerProcess
from .wire import free_port
from .waiting import wait_until
from .zookeeper import ZooKeeperProcess

CHROOT = "/samsa"
LIST_OFFSETS, METADATA = 2, 3


class ClusterProcesses:
    """The processes of a cluster in ``work_dir`` (samsa.testing.Cluster is the
    context manager over it that owns a temporary directory)."""

    def __init__(self, work_dir: Path, size: int = 3, *, session_timeout_ms: int = 2000,
                 offsets_partitions: int = 6, overrides: Mapping[str, object] | None = None,
                 broker_overrides: Mapping[int, Mapping[str, object]] | None = None,
                 chroot: str = CHROOT, fork: bool = False):
        self.work_dir = Path(work_dir)
        self.size = size
        self.chroot = chroot
        self.session_timeout_ms = session_timeout_ms
        self.zk = ZooKeeperProcess(self.work_dir / "zk")
        self.overrides = {
            "zookeeper.session.timeout.ms": str(session_timeout_ms),
            "offsets.topic.num.partitions": str(offsets_partitions),
            **(overrides or {}),
        }
        self.broker_overrides = dict(broker_overrides or {})  # by broker id (broker.rack, ...)
        self.brokers: list[BrokerProcess] = []
        self.fork = fork  # brokers forked from the warm fork server (forkserver.py)
        self._clients: list[KazooClient] = []

    # ------------------------------------------------------------ lifecycle

    @property
    def zookeeper_connect(self) -> str:
        """``zookeeper.connect`` as the brokers have it (host:port/chroot)."""
        return self.zk.connect + self.chroot

    def broker_process(self, broker_id: int, work_dir: Path | None = None) -> BrokerProcess:
        """A (not started) broker process configured for this cluster."""
        return BrokerProcess(work_dir or self.work_dir / f"broker-{broker_id}", broker_id=broker_id,
                             overrides={"zookeeper.connect": self.zookeeper_connect,
                                        **self.overrides,
                                        **self.broker_overrides.get(broker_id, {})},
                             fork=self.fork)

    def start(self) -> "ClusterProcesses":
        try:
            self.zk.start()
            for i in range(self.size):
                self.brokers.append(self.broker_process(i).start())
            self.wait_until_registered(range(self.size))
            self.wait_for_controller()
            # Registered in ZooKeeper is not yet known to every broker: a
            # CreateTopics of RF 3 to a broker whose metadata had two of the
            # three refused INVALID_REPLICATION_FACTOR on a loaded machine.
            self.wait_until_settled()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every broker (SIGTERM), then ZooKeeper; close our kazoo clients."""
        for client in self._clients:
            try:
                client.stop()
                client.close()
            except Exception:  # teardown goes on
                pass
        self._clients.clear()
        try:
            for b in self.brokers:
                b.stop()
        finally:
            self.zk.stop()

    @property
    def processes(self):
        return [*self.brokers, self.zk]

    def log_tails(self, lines: int = 80) -> str:
        parts = []
        for i, b in enumerate(self.brokers):
            parts.append(f"--- samsa broker {i} {b.bootstrap} "
                         f"({'running' if b.is_running() else 'not running'}) "
                         f"log tail ({b.log_path}) ---\n{b.log_tail(lines)}")
        parts.append(f"--- zookeeper {self.zk.bootstrap} log tail ({self.zk.log_path}) ---\n"
                     f"{self.zk.log_tail(15)}")
        return "\n".join(parts)

    def print_log_tails(self, lines: int = 80) -> None:
        print("\n" + self.log_tails(lines), file=sys.stderr)

    # ------------------------------------------------------------ brokers

    @property
    def bootstrap(self) -> str:
        """Every broker, comma-separated, for bootstrap.servers."""
        return ",".join(b.bootstrap for b in self.brokers)

    def broker(self, broker_id: int) -> BrokerProcess:
        return self.brokers[broker_id]

    def kill(self, broker_id: int) -> None:
        """SIGKILL: no resignation, no session close; ZooKeeper notices only
        when the session times out."""
        self.brokers[broker_id].kill()

    def terminate(self, broker_id: int) -> int | None:
        """SIGTERM and wait for the exit (a clean shutdown); returns the exit code."""
        return self.brokers[broker_id].stop()

    def restart(self, broker_id: int) -> BrokerProcess:
        """Start a stopped or killed broker again (same id, port and data);
        returns once it answers ApiVersions and is registered in ZooKeeper."""
        b = self.brokers[broker_id]
        if b.is_running():
            b.stop()
        b.start()
        self.wait_until_registered([broker_id])
        self.wait_until_known_to(broker_id)
        return b

    def add_broker(self) -> int:
        """Start one more broker (the next id) in this cluster; returns its id once
        it is registered."""
        broker_id = len(self.brokers)
        self.brokers.append(self.broker_process(broker_id).start())
        self.wait_until_registered([broker_id])
        self.wait_until_known_to(broker_id)
        return broker_id

    def pause(self, broker_id: int) -> None:
        """SIGSTOP the broker (it holds its sockets but answers nothing)."""
        self.brokers[broker_id].pause()

    def resume(self, broker_id: int) -> None:
        self.brokers[broker_id].resume()

    def log_marks(self) -> dict[int, int]:
        """{broker id: current size of its log}, for wait_for_log(since=...)."""
        return {i: (b.log_path.stat().st_size if b.log_path.exists() else 0)
                for i, b in enumerate(self.brokers)}

    def wait_for_log(self, broker_id: int, text: str, since: int = 0, timeout: float = 30.0) -> None:
        """Until broker ``broker_id``'s log has ``text`` after byte offset ``since``."""
        path = self.brokers[broker_id].log_path

        def logged():
            with open(path, "rb") as f:
                f.seek(since)
                return text.encode() in f.read()
        wait_until(logged, timeout, f"{text!r} in broker {broker_id}'s log")

    # ------------------------------------------------------------ ZooKeeper

    def zk_client(self, new: bool = False, timeout: float = 30.0) -> KazooClient:
        """A started kazoo client rooted at the cluster's chroot, for reading znodes:
        the cluster's shared one, or (``new``) one of your own. stop() closes them."""
        if self._clients and not new:
            return self._clients[0]
        client = KazooClient(hosts=self.zookeeper_connect, timeout=timeout,
                             connection_retry=retry_about_every_second())
        client.start(timeout=30)
        self._clients.append(client)
        return client

    def _client(self) -> _Reads:
        return _Reads(self.zk_client())

    def registered_ids(self) -> set[int]:
        return {int(c) for c in self._client().get_children("/brokers/ids") if c.isdigit()}

    def wait_until_registered(self, ids: Iterable[int], timeout: float = 30.0) -> None:
        """Until every id in ``ids`` has its /brokers/ids/<id> znode."""
        wanted = set(ids)
        wait_until(lambda: wanted <= self.registered_ids(), timeout,
                   f"brokers {sorted(wanted)} registered in {self.chroot}/brokers/ids")

    def metadata(self, broker_id: int) -> tuple[set[int], dict[str, dict[int, int]]] | None:
        """What broker ``broker_id`` answers Metadata (every topic) with: the
        broker ids it lists and {topic: {partition: leader}}; None when it
        does not answer (yet)."""
        try:
            with SimpleClient(self.brokers[broker_id].bootstrap, timeout=10) as c:
                r = c.call(METADATA, MetadataRequest(topics=None,
                                                     allow_auto_topic_creation=False))
        except (ClientError, OSError):
            return None
        return ({b.node_id for b in r.brokers},
                {t.name: {p.partition_index: p.leader_id for p in t.partitions}
                 for t in r.topics})

    def wait_until_known_to(self, broker_id: int, timeout: float = 30.0) -> None:
        """Until broker ``broker_id``'s Metadata lists every registered broker."""
        def knows():
            md = self.metadata(broker_id)
            return md is not None and self.registered_ids() <= md[0]
        wait_until(knows, timeout, f"broker {broker_id}'s Metadata listing every registered "
                                   f"broker ({sorted(self.registered_ids())})")

    def wait_until_settled(self, timeout: float = 60.0) -> None:
        """Until every broker is registered and every broker's Metadata lists
        all of them, with a leader for every partition of every topic."""
        ids = set(range(len(self.brokers)))
        self.wait_until_registered(ids, timeout)

        def settled():
            for i in ids:
                md = self.metadata(i)
                if md is None or not ids <= md[0]:
                    return False
                if any(leader < 0 for leaders in md[1].values() for leader in leaders.values()):
                    return False
            return True
        wait_until(settled, timeout, f"every broker's Metadata listing brokers {sorted(ids)} "
                                     f"and a leader for every partition")

    def controller_id(self) -> int:
        """The broker id in /controller, or -1 when there is none."""
        try:
            data, _ = self._client().get("/controller")
        except NoNodeError:
            return -1
        return int(json.loads(data)["brokerid"])

    def controller_epoch(self) -> int:
        try:
            return int(self._client().get("/controller_epoch")[0])
        except NoNodeError:
            return 0

    def wait_for_controller(self, among: Iterable[int] | None = None, timeout: float = 30.0) -> int:
        """The id of the controller once one of ``among`` (default: any) holds /controller."""
        allowed = set(range(self.size) if among is None else among)

        def elected():
            c = self.controller_id()
            return c if c in allowed else None
        # wait_until needs a truthy value and broker 0 is a fine controller.
        found: tuple[int] | None = wait_until(
            lambda: (c,) if (c := elected()) is not None else None, timeout,
            f"a controller among {sorted(allowed)}")
        assert found is not None
        return found[0]

    def partition_state(self, topic: str, partition: int) -> dict | None:
        try:
            data, _ = self._client().get(f"/brokers/topics/{topic}/partitions/{partition}/state")
        except NoNodeError:
            return None
        return json.loads(data)

    def assignment(self, topic: str) -> dict:
        """/brokers/topics/<topic> as written: partitions, adding_replicas,
        removing_replicas (keys as ints), topic_id ({} for no such topic)."""
        try:
            value = json.loads(self._client().get(f"/brokers/topics/{topic}")[0])
        except NoNodeError:
            return {}
        for field in ("partitions", "adding_replicas", "removing_replicas"):
            value[field] = {int(p): r for p, r in (value.get(field) or {}).items()}
        return value

    def leaders(self, topic: str) -> dict[int, int]:
        """{partition: leader} from the state znodes the controller wrote (-1: none)."""
        client = self._client()
        try:
            assignment = json.loads(client.get(f"/brokers/topics/{topic}")[0])
        except NoNodeError:
            return {}
        out = {}
        for p in assignment["partitions"]:
            state = self.partition_state(topic, int(p))
            out[int(p)] = -1 if state is None else state["leader"]
        return out

    def wait_for_leaders(self, topic: str, partitions: int, timeout: float = 30.0) -> dict[int, int]:
        """Until every partition of ``topic`` has a leader in ZooKeeper."""
        def ready():
            leaders = self.leaders(topic)
            if len(leaders) == partitions and all(l >= 0 for l in leaders.values()):
                return leaders
            return None
        return wait_until(ready, timeout, f"a leader for each of {partitions} partitions of {topic}")

    def wait_until_led(self, topic: str, partitions: int, timeout: float = 30.0) -> dict[int, int]:
        """Until the leaders ZooKeeper names for ``topic`` have taken their roles
        up; returns {partition: leader}. ZooKeeper names a leader before the
        leader acts as one (as in Kafka, where LeaderAndIsr follows the znode
        write): a request sent on the strength of the znode alone may be
        answered UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER, or be
        taken by a leader still at the epoch before. So: every running broker's
        Metadata lists the running brokers and gives each partition the leader
        and leader epoch of its state znode, and each leader answers ListOffsets
        as leader at that epoch. (PLAINTEXT listeners only: the brokers of a
        SaslPlaintextCluster need credentials this class does not hold.)"""
        def led() -> dict[int, int] | None:
            named: dict[int, tuple[int, int]] = {}
            for p in range(partitions):
                state = self.partition_state(topic, p)
                if state is None or state["leader"] < 0:
                    return None
                named[p] = (state["leader"], state["leader_epoch"])
            running = {i for i, b in enumerate(self.brokers) if b.is_running()}
            if any(self._leaders_told_by(i, topic) != (running, named) for i in running):
                return None
            if not all(self._leads_at(leader, topic, p, epoch)
                       for p, (leader, epoch) in named.items()):
                return None
            return {p: leader for p, (leader, _) in named.items()}
        found = wait_until(led, timeout, f"the leaders ZooKeeper names for the {partitions} "
                                         f"partitions of {topic} known to every broker and "
                                         f"acting as leaders")
        assert found is not None
        return found

    def _leaders_told_by(self, broker_id: int, topic: str
                         ) -> tuple[set[int], dict[int, tuple[int, int]]] | None:
        """(the broker ids, {partition: (leader, leader epoch)} of the partitions
        it answers without error) of broker ``broker_id``'s Metadata for
        ``topic``; None when it does not answer."""
        try:
            with SimpleClient(self.brokers[broker_id].bootstrap, timeout=10) as c:
                r = c.call(METADATA, MetadataRequest(
                    topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                    allow_auto_topic_creation=False))
        except (ClientError, OSError):
            return None
        return ({b.node_id for b in r.brokers},
                {p.partition_index: (p.leader_id, p.leader_epoch)
                 for t in r.topics for p in t.partitions if p.error_code == 0})

    def _leads_at(self, broker_id: int, topic: str, partition: int, epoch: int) -> bool:
        """Whether broker ``broker_id`` answers ListOffsets for the partition as
        its leader at ``epoch`` (its own role, not only its metadata's word)."""
        L = ListOffsetsRequest
        try:
            with SimpleClient(self.brokers[broker_id].bootstrap, timeout=10) as c:
                r = c.call(LIST_OFFSETS, L(replica_id=-1, isolation_level=0, topics=[
                    L.ListOffsetsTopic(name=topic, partitions=[L.ListOffsetsPartition(
                        partition_index=partition, current_leader_epoch=epoch,
                        timestamp=-1)])]))
        except (ClientError, OSError):
            return False
        return r.topics[0].partitions[0].error_code == 0


class SaslPlaintextCluster(ClusterProcesses):
    """Every broker with one SASL_PLAINTEXT listener, on a port of its own (the
    SASL settings, the JAAS entry and the inter-broker listener come in
    ``overrides``)."""

    def metadata(self, broker_id: int):
        # Its listeners need SASL credentials this class does not hold: what
        # the brokers know is checked by the tests through their clients.
        return self.registered_ids(), {}

    def broker_process(self, broker_id: int, work_dir: Path | None = None) -> BrokerProcess:
        port = free_port()
        return BrokerProcess(work_dir or self.work_dir / f"broker-{broker_id}", port=port,
                             broker_id=broker_id, overrides={
                                 "zookeeper.connect": self.zookeeper_connect, **self.overrides,
                                 "listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}",
                                 "advertised.listeners": f"SASL_PLAINTEXT://127.0.0.1:{port}"})


_T = TypeVar("_T")


class _Reads:
    """The shared client's reads, each retried across a session lost to a
    ZooKeeper outage (tests kill ZooKeeper for longer than a session): kazoo
    starts a new session by itself, but the request that found the old one
    expired fails with it."""

    def __init__(self, client: KazooClient, patience_s: float = 30.0) -> None:
        self._zk = client
        self._patience_s = patience_s

    def get(self, path: str) -> tuple[bytes, object]:
        return self._retried(lambda: self._zk.get(path))

    def get_children(self, path: str) -> list[str]:
        return self._retried(lambda: self._zk.get_children(path))

    def _retried(self, read: Callable[[], _T]) -> _T:
        deadline = time.monotonic() + self._patience_s
        while True:
            try:
                return read()
            except (SessionExpiredError, ConnectionLoss):
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.1)  # kazoo's reconnection runs on its own thread
