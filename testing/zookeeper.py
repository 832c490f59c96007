"""A real ZooKeeper server (Debian's ``zookeeper`` package) as a child process.

Started without Debian's service scripts, from the package's jars, with a
config of our own: a free port, a data dir in the test's temp dir, a short
tick so tests can use short session timeouts (a session may last 2 to 20
ticks), the admin server off, and the ``ruok`` command allowed for the
readiness probe (srvr).

    zk = ZooKeeperProcess(tmp_dir).start()
    zk.connect        # "127.0.0.1:PORT" for zookeeper.connect / kazoo
    zk.kill(); zk.start()   # crash and restart with the same data and port
"""
from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import Sequence

from .wire import free_port
from .process import ManagedProcess

# Where the jars are: Debian's package puts them here; SAMSA_ZOOKEEPER_JARS says where else.
JARS = os.environ.get("SAMSA_ZOOKEEPER_JARS", "/usr/share/java")
# The server and what it needs at run time, as Debian 12 packages them.
CLASSPATH = ":".join(f"{JARS}/{jar}" for jar in (
    "zookeeper.jar", "slf4j-api.jar", "slf4j-simple.jar", "netty.jar", "jline.jar"))
TICK_MS = 200


def zookeeper_installed() -> bool:
    return Path(f"{JARS}/zookeeper.jar").exists() and shutil.which("java") is not None


class ZooKeeperProcess(ManagedProcess):
    def __init__(self, work_dir: Path, port: int | None = None, startup_timeout: float = 60.0,
                 host: str = "127.0.0.1", launcher: Sequence[str] = ()):
        """``host``: the address it listens on; ``launcher``: argv that runs the server
        (``ip netns exec NS``: tests/support/netns.py)."""
        self.work_dir = Path(work_dir)
        data_dir = self.work_dir / "zk-data"
        data_dir.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        config = self.work_dir / "zoo.cfg"
        config.write_text(
            f"tickTime={TICK_MS}\n"
            f"dataDir={data_dir}\n"
            f"clientPort={port}\n"
            f"clientPortAddress={host}\n"
            "admin.enableServer=false\n"
            "4lw.commands.whitelist=ruok,srvr,cons\n"
            "maxSessionTimeout=60000\n")
        argv = [*launcher, "java", "-Xmx256m", "-Dzookeeper.jmx.log4j.disable=true", "-cp", CLASSPATH,
                "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(config)]
        super().__init__("zookeeper", argv, host, port, self.work_dir / "zookeeper.log",
                         startup_timeout=startup_timeout)

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    def command(self, word: bytes, timeout: float = 5.0) -> bytes:
        """The server's answer to a four-letter command (those whitelisted in
        zoo.cfg: ruok, srvr, cons)."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as s:
            s.sendall(word)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        return answer

    def probe(self) -> None:
        # Not "ruok": it answers imok as soon as the port is open, before the
        # database is loaded, and a client connecting then has its session
        # closed ("ZooKeeperServer not running"). "srvr" says whether it serves.
        answer = self.command(b"srvr", timeout=1.0)
        if b"Zookeeper version" not in answer or b"not currently serving" in answer:
            raise ConnectionError("zookeeper not serving yet")
