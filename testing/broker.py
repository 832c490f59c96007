"""``samsa.testing.Broker`` and ``samsa.testing.Cluster``: brokers for other projects' tests.

    with samsa.testing.Broker(num_partitions=3) as b:      # broker configs as keywords
        b.bootstrap_servers                                # "127.0.0.1:PORT"
        b.create_topic("events", partitions=3)
        b.inject_errors("Produce", "NOT_LEADER_OR_FOLLOWER", count=3)

    with samsa.testing.Cluster(brokers=3) as c:           # a real ZooKeeper and 3 brokers
        c.bootstrap_servers
        c.node(1).pause()      # broker 1 stops answering

Keyword configs are Kafka's keys with dots as underscores (``num_partitions`` is
``num.partitions``), or pass a dict: ``Broker(**{"num.partitions": 3})``. Each
broker gets free ports and a temporary directory (under /dev/shm where the machine
has it), which stop() removes; a broker still running when the interpreter exits
is killed. Brokers are forked from a warm process (forkserver.py), so one starts
in about a tenth of a second once the first has paid the import.

Security on request: ``sasl_users={"alice": "alice-secret"}`` adds a SASL_PLAINTEXT
listener with those PLAIN users, ``tls=True`` an SSL listener with certificates made
on the spot (``b.certs``; needs ``cryptography``: ``pip install samsa[testing]``),
both a SASL_SSL one; ``bootstrap_servers`` is then that listener's address and
``client_config(user)`` the client properties that reach it. A PLAINTEXT listener
on loopback stays for the kit's own calls (``plaintext_bootstrap``).

Fault injection is on for these brokers (``samsa.testing.faults.enable``, loopback
listeners only): see faults.py for what a test can ask of a broker.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Mapping

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import CreateTopicsRequest, MetadataRequest
from samsa.protocol.model import ApiKey

from .broker_process import BrokerProcess
from .cluster import ClusterProcesses
from .faults import FaultControl
from .lifetime import remove_after_exit, removed
from .waiting import wait_until
from .wire import free_port

# What a test broker changes from a production default (any of them may be given
# again): a consumer group forms at once rather than after Kafka's 3 s wait for more
# members, and the internal topics have one partition, not 50 to create and load.
TEST_DEFAULTS = {"group.initial.rebalance.delay.ms": "0",
                 "offsets.topic.num.partitions": "1",
                 "transaction.state.log.num.partitions": "1"}

FAULTS_ENABLE = "samsa.testing.faults.enable"
FAULTS_PORT = "samsa.testing.faults.port"


def temp_root() -> str | None:
    """Where the kit's directories go: tmpfs (/dev/shm) where there is one."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    removed(path)


def broker_configs(configs: Mapping[str, Any]) -> dict[str, str]:
    """Keyword configs as broker keys: ``num_partitions`` -> ``num.partitions``
    (Kafka's keys have no underscores); booleans as Kafka writes them."""
    out = {}
    for key, value in configs.items():
        if isinstance(value, bool):
            value = "true" if value else "false"
        out[key.replace("_", ".")] = str(value)
    return out


def _jaas(users: Mapping[str, str]) -> str:
    entries = " ".join(f'user_{u}="{p}"' for u, p in users.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"


class _Security:
    """The extra listener a broker gets when SASL or TLS is asked for."""

    def __init__(self, work_dir: Path, sasl_users: Mapping[str, str] | None, tls: bool):
        self.sasl_users = dict(sasl_users or {})
        self.tls = tls
        self.protocol = {(False, False): None, (True, False): "SASL_PLAINTEXT",
                         (False, True): "SSL", (True, True): "SASL_SSL"}[(bool(sasl_users), tls)]
        self.certs = None
        if tls:
            from .certs import make_certs  # cryptography: the samsa[testing] extra
            self.certs = make_certs(work_dir / "certs")

    def overrides(self, plaintext_port: int, port: int) -> dict[str, str]:
        if self.protocol is None:
            return {}
        listeners = f"PLAINTEXT://127.0.0.1:{plaintext_port},{self.protocol}://127.0.0.1:{port}"
        out = {"listeners": listeners, "advertised.listeners": listeners,
               "inter.broker.listener.name": "PLAINTEXT"}
        if self.sasl_users:
            out["sasl.enabled.mechanisms"] = "PLAIN"
            out[f"listener.name.{self.protocol.lower()}.plain.sasl.jaas.config"] = _jaas(self.sasl_users)
        if self.certs is not None:
            out.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(self.certs.server),
                        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.certs.ca)})
        return out

    def client_config(self, user: str | None) -> dict[str, str]:
        """librdkafka / Java property names."""
        if self.protocol is None:
            return {}
        out = {"security.protocol": self.protocol}
        if self.sasl_users:
            name = user or next(iter(self.sasl_users))
            out.update({"sasl.mechanism": "PLAIN", "sasl.username": name,
                        "sasl.password": self.sasl_users[name]})
        if self.certs is not None:
            out["ssl.ca.location"] = str(self.certs.ca)
        return out


def _wait_for_leaders(bootstrap: str, topic: str, partitions: int, timeout: float = 30.0) -> None:
    def ready() -> bool:
        with SimpleClient(bootstrap, client_id="samsa-testing", timeout=10) as c:
            r = c.call(ApiKey.METADATA, MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=False))
        t = r.topics[0]
        return (t.error_code == 0 and len(t.partitions) == partitions
                and all(p.leader_id >= 0 and p.error_code == 0 for p in t.partitions))
    wait_until(ready, timeout, f"a leader for each of {partitions} partition(s) of {topic}")


def create_topic(bootstrap: str, name: str, partitions: int = 1, replication_factor: int = 1,
                 config: Mapping[str, Any] | None = None, wait_on: list[str] | None = None) -> None:
    """CreateTopics through ``bootstrap``; returns once every broker in ``wait_on``
    (default: that one) names a leader for every partition. RuntimeError with
    Kafka's error name when the broker refuses."""
    with SimpleClient(bootstrap, client_id="samsa-testing", timeout=30) as c:
        r = c.call(ApiKey.CREATE_TOPICS, CreateTopicsRequest(timeout_ms=30000, validate_only=False, topics=[
            CreateTopicsRequest.CreatableTopic(
                name=name, num_partitions=partitions, replication_factor=replication_factor,
                configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=str(v))
                         for k, v in (config or {}).items()])]))
    result = r.topics[0]
    if result.error_code:
        raise RuntimeError(f"creating topic {name}: {ErrorCode(result.error_code).name}"
                           f"{': ' + result.error_message if result.error_message else ''}")
    for b in wait_on or [bootstrap]:
        _wait_for_leaders(b, name, partitions)


class Broker(FaultControl):
    """One samsa broker (the embedded single-node metadata) for a test."""

    def __init__(self, *, sasl_users: Mapping[str, str] | None = None, tls: bool = False,
                 faults: bool = True, startup_timeout: float = 30.0, **configs: Any):
        self.work_dir = Path(tempfile.mkdtemp(prefix="samsa-testing-", dir=temp_root()))
        remove_after_exit(self.work_dir)  # should this process be killed before stop()
        try:
            self.security = _Security(self.work_dir, sasl_users, tls)
        except BaseException:
            _remove(self.work_dir)
            raise
        port = free_port()
        self.secure_port = free_port() if self.security.protocol else None
        overrides: dict[str, str] = dict(TEST_DEFAULTS)
        admin_port = None
        if faults:
            admin_port = free_port()
            overrides.update({FAULTS_ENABLE: "true", FAULTS_PORT: str(admin_port)})
        overrides.update(self.security.overrides(port, self.secure_port or 0))
        overrides.update(broker_configs(configs))
        self.process = BrokerProcess(self.work_dir, port=port, overrides=overrides,
                                     startup_timeout=startup_timeout, fork=True)
        super().__init__("127.0.0.1", admin_port)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> "Broker":
        if not self.process.is_running():
            self.process.start()
        return self

    def stop(self) -> None:
        """Stop the broker (SIGTERM, SIGKILL after 15 s) and remove its directory."""
        try:
            self.process.resume()  # a paused (SIGSTOP) broker cannot stop
            self.process.stop()
        finally:
            _remove(self.work_dir)

    def restart(self) -> "Broker":
        """Stop and start again: same ports, same data."""
        self.process.restart()
        return self

    def kill(self) -> None:
        """SIGKILL (a crash); start() brings it back with its data."""
        self.process.kill()

    def __enter__(self) -> "Broker":
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------ what a test uses

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` of the listener clients use (the secured one when asked for)."""
        if self.secure_port:
            return f"127.0.0.1:{self.secure_port}"
        return self.process.bootstrap

    @property
    def plaintext_bootstrap(self) -> str:
        return self.process.bootstrap

    @property
    def port(self) -> int:
        return int(self.bootstrap_servers.rpartition(":")[2])

    @property
    def certs(self):
        """The CA, broker and client certificates (tls=True), as PEM files."""
        return self.security.certs

    def client_config(self, user: str | None = None) -> dict[str, str]:
        """Client properties (librdkafka's and Java's names) that reach
        ``bootstrap_servers``: bootstrap.servers, and security.protocol, SASL and
        TLS settings when the broker has them (``user``: which SASL user)."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.security.client_config(user)}

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def log_text(self) -> str:
        """Everything the broker has logged so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: Mapping[str, Any] | None = None) -> None:
        create_topic(self.plaintext_bootstrap, name, partitions, replication_factor, config)

    def freeze(self) -> None:
        """SIGSTOP the process (it holds its sockets and answers nothing, the admin
        endpoint neither); thaw() sends SIGCONT. pause() holds requests instead."""
        self.process.pause()

    def thaw(self) -> None:
        self.process.resume()


class ClusterBroker(FaultControl):
    """One broker of a Cluster: its process and its fault controls."""

    def __init__(self, process: BrokerProcess, admin_port: int | None):
        self.process = process
        super().__init__("127.0.0.1", admin_port)

    @property
    def broker_id(self) -> int:
        return self.process.broker_id

    @property
    def bootstrap_servers(self) -> str:
        return self.process.bootstrap

    @property
    def log_path(self) -> Path:
        return self.process.log_path

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def freeze(self) -> None:
        self.process.pause()

    def thaw(self) -> None:
        self.process.resume()


class Cluster(ClusterProcesses):
    """A real ZooKeeper and ``brokers`` samsa brokers (ids 0..N-1) in a temporary
    directory; configs as for Broker. Needs Java and ZooKeeper's jars (Debian's
    ``zookeeper`` package; elsewhere set SAMSA_ZOOKEEPER_JARS)."""

    def __init__(self, brokers: int = 3, *, faults: bool = True, session_timeout_ms: int = 6000,
                 **configs: Any):
        self._root = Path(tempfile.mkdtemp(prefix="samsa-testing-cluster-", dir=temp_root()))
        remove_after_exit(self._root)
        self._admin_ports = {i: free_port() for i in range(brokers)} if faults else {}
        per_broker = {i: {FAULTS_ENABLE: "true", FAULTS_PORT: str(p)}
                      for i, p in self._admin_ports.items()}
        overrides = {**TEST_DEFAULTS,
                     "offsets.topic.replication.factor": str(min(3, brokers)),
                     "transaction.state.log.replication.factor": str(min(3, brokers)),
                     "transaction.state.log.min.isr": "1",
                     **broker_configs(configs)}
        super().__init__(self._root, brokers, session_timeout_ms=session_timeout_ms,
                         offsets_partitions=1, overrides=overrides,
                         broker_overrides=per_broker, fork=True)

    def start(self) -> "Cluster":
        try:
            super().start()
        except BaseException:
            _remove(self._root)
            raise
        return self

    def stop(self) -> None:
        try:
            for b in self.brokers:
                b.resume()
            super().stop()
        finally:
            _remove(self._root)

    def __enter__(self) -> "Cluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def bootstrap_servers(self) -> str:
        return self.bootstrap

    def node(self, broker_id: int) -> ClusterBroker:
        """Broker ``broker_id`` with its fault controls."""
        return ClusterBroker(self.brokers[broker_id], self._admin_ports.get(broker_id))

    def move_leader(self, topic: str, partition: int, to: int) -> None:
        """Make broker ``to`` the partition's leader (asked of the controller), and
        wait until every running broker says so."""
        self.node(self.wait_for_controller()).move_leader(topic, partition, to)
        wait_until(lambda: self.leaders(topic).get(partition) == to, 30,
                   f"broker {to} leading {topic}-{partition}")
        self.wait_until_settled()

    def shrink_isr(self, topic: str, partition: int, isr: list[int]) -> None:
        """Set the partition's ISR (asked of its leader; it must stay in it)."""
        self.node(self.leaders(topic)[partition]).shrink_isr(topic, partition, isr)

    def expire_member(self, group: str, member_id: str | None = None) -> str:
        """Expire a member of ``group`` on whichever broker coordinates it."""
        refusals = []
        for i, b in enumerate(self.brokers):
            if not b.is_running():
                continue
            try:
                return self.node(i).expire_member(group, member_id)
            except ValueError as e:
                refusals.append(str(e))
        raise ValueError("no broker coordinates a member of group " + group + ": " + "; ".join(refusals))

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: Mapping[str, Any] | None = None) -> None:
        """Create it and wait until every broker names a leader for every partition."""
        create_topic(self.brokers[0].bootstrap, name, partitions, replication_factor, config,
                     wait_on=[b.bootstrap for b in self.brokers if b.is_running()])
