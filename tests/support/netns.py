"""A test network on this machine: one network namespace per node (each broker,
ZooKeeper), joined by veth pairs to a bridge in a namespace of its own, and a
veth from the root namespace onto the same bridge, so the test's clients (the
checker's producers and consumers, kazoo) stay where they are and reach every
node. Faults are nftables rules (and a qdisc) inside a node's namespace, so a
node can be cut from ZooKeeper and its peers while its clients still reach it.

    net = TestNetwork.create(["zk", "b0", "b1", "b2"])
    net.address("b0")                 # "10.213.N.11"
    net.wrap("b0", argv)              # ["ip", "netns", "exec", ns, *argv]
    net.cut("b0", ["zk", "b1"])       # both ways
    net.cut_inbound("b0", ["b1"])     # b0 sends, hears nothing from b1
    net.slow("b0", delay_ms=150, loss_pct=5)
    net.heal()                        # every rule and qdisc gone
    net.destroy()                     # namespaces, veths, addresses gone

Everything it creates is named ``smn<pid>...``: the pid of the process that
owns it, so parallel runs do not collide, and ``cleanup_stale()`` removes what
a run that died left behind (its pid gone) and nothing of a live run's. The
addresses are 10.213.N.0/24 with N picked per run, on the bridge only: no
route leaves the machine. Needs root, iproute2 and nftables.

Linux's netem qdisc is not in every kernel (not in this sandbox's): without it
a slow link is a token bucket (``tbf``: bandwidth, hence queueing delay under
load) plus random loss from an nftables rule; ``slow`` returns which it used.
"""
from __future__ import annotations

import os
import random
import re
import shutil
import string
import subprocess
from dataclasses import dataclass, field
from typing import Iterable, Sequence

PREFIX = "smn"
SUBNET_BASE = "10.213"
HOST_OCTET = 1            # the root namespace's address on the bridge
FIRST_NODE_OCTET = 10     # nodes from .10 on, in the order given
TABLE = "samsa_nemesis"


class NetworkUnavailable(Exception):
    """This machine cannot build the network (not root, no netns, no nft): a reason to skip."""


def _run(*argv: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, input=input)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()}")
    return r


def require_test_network() -> None:
    """Skip the calling test when network namespaces cannot be used here, except on
    CI: CI runs as root and scripts/setup.sh --test installs iproute2 and nftables,
    so there a missing test network is a setup failure, not a reason to skip."""
    import pytest
    reason = unavailable_reason()
    if reason is None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"no test network on CI: {reason}")
    pytest.skip(f"no test network: {reason}")


def unavailable_reason() -> str | None:
    """Why network namespaces cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs the suite as root)"
    for tool in ("ip", "nft", "tc"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (scripts/setup.sh --test installs iproute2 and nftables)"
    name = f"{PREFIX}{os.getpid()}probe"
    try:
        r = _run("ip", "netns", "add", name, check=False)
        if r.returncode != 0:
            return f"cannot create a network namespace: {r.stderr.strip()}"
        r = _run("ip", "netns", "exec", name, "nft", "add", "table", "inet", TABLE, check=False)
        if r.returncode != 0:
            return f"nftables does not work in a network namespace: {r.stderr.strip()}"
        r = _run("ip", "link", "add", f"{name}a", "type", "veth", "peer", "name", f"{name}b",
                 check=False)
        if r.returncode != 0:
            return f"cannot create veth pairs: {r.stderr.strip()}"
        _run("ip", "link", "del", f"{name}a", check=False)
    finally:
        _run("ip", "netns", "del", name, check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_OWNED = re.compile(rf"^{PREFIX}(\d+)")


def cleanup_stale(include_own: bool = False) -> list[str]:
    """Remove the namespaces and root-side veths of runs whose process is gone
    (and this process's own with ``include_own``); returns what was removed."""
    removed = []
    namespaces = [line.split()[0] for line in _run("ip", "netns", "list", check=False).stdout.splitlines()
                  if line.strip()]
    links = re.findall(r"^\d+: ([^:@]+)", _run("ip", "-o", "link", "show", check=False).stdout, re.M)
    for name in [*namespaces, *links]:
        m = _OWNED.match(name)
        if not m:
            continue
        pid = int(m.group(1))
        if pid == os.getpid() and not include_own:
            continue
        if pid != os.getpid() and _alive(pid):
            continue
        if name in namespaces:
            _kill_inside(name)
            _run("ip", "netns", "del", name, check=False)
        else:
            _run("ip", "link", "del", name, check=False)
        removed.append(name)
    return removed


def _kill_inside(namespace: str) -> None:
    """SIGKILL what still runs in a namespace of ours (a run that died left it)."""
    pids = _run("ip", "netns", "pids", namespace, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), 9)
        except (ProcessLookupError, ValueError):
            pass


def _free_subnet(rng: random.Random) -> str:
    used = _run("ip", "-4", "route", "show", check=False).stdout
    octets = list(range(1, 255))
    rng.shuffle(octets)
    for n in octets:
        subnet = f"{SUBNET_BASE}.{n}"
        if f"{subnet}.0/24" not in used:
            return subnet
    raise NetworkUnavailable(f"no free /24 left in {SUBNET_BASE}.0.0/16")


@dataclass
class TestNetwork:
    prefix: str
    subnet: str                          # "10.213.N"
    nodes: dict[str, int]                # name -> last octet
    has_netem: bool = False
    _faults: set[str] = field(default_factory=set)   # nodes with rules or a qdisc
    __test__ = False  # not a pytest test class

    # ------------------------------------------------------------ build

    @classmethod
    def create(cls, names: Sequence[str], seed: int | None = None) -> "TestNetwork":
        reason = unavailable_reason()
        if reason:
            raise NetworkUnavailable(reason)
        cleanup_stale()
        rng = random.Random(seed)
        # "smn<pid>x<letter>": at most 12 characters, and veth names (<= 15) add two
        tag = f"{PREFIX}{os.getpid()}x{rng.choice(string.ascii_lowercase)}"
        net = cls(tag, _free_subnet(rng),
                  {n: FIRST_NODE_OCTET + i for i, n in enumerate(names)})
        try:
            net._build()
        except BaseException:
            net.destroy()
            raise
        return net

    @property
    def bridge_ns(self) -> str:
        return f"{self.prefix}-br"

    def namespace(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def address(self, node: str) -> str:
        return f"{self.subnet}.{self.nodes[node]}"

    @property
    def host_address(self) -> str:
        return f"{self.subnet}.{HOST_OCTET}"

    def _in(self, ns: str, *argv: str, check: bool = True, input: str | None = None):
        return _run("ip", "netns", "exec", ns, *argv, check=check, input=input)

    def _build(self) -> None:
        br = self.bridge_ns
        _run("ip", "netns", "add", br)
        self._in(br, "ip", "link", "add", "br0", "type", "bridge")
        self._in(br, "ip", "link", "set", "br0", "up")
        self._in(br, "ip", "link", "set", "lo", "up")
        # The root namespace's leg: clients stay in the test process.
        host, host_peer = f"{self.prefix}h", f"{self.prefix}hb"
        _run("ip", "link", "add", host, "type", "veth", "peer", "name", host_peer)
        _run("ip", "link", "set", host_peer, "netns", br)
        self._in(br, "ip", "link", "set", host_peer, "master", "br0", "up")
        _run("ip", "addr", "add", f"{self.host_address}/24", "dev", host)
        _run("ip", "link", "set", host, "up")
        self.has_netem = True
        for i, node in enumerate(self.nodes):
            ns = self.namespace(node)
            leg, peer = f"{self.prefix}{i}", f"{self.prefix}{i}b"
            _run("ip", "netns", "add", ns)
            _run("ip", "link", "add", leg, "type", "veth", "peer", "name", peer)
            _run("ip", "link", "set", leg, "netns", ns)
            _run("ip", "link", "set", peer, "netns", br)
            self._in(br, "ip", "link", "set", peer, "master", "br0", "up")
            self._in(ns, "ip", "link", "set", "lo", "up")
            self._in(ns, "ip", "link", "set", leg, "name", "eth0")
            self._in(ns, "ip", "addr", "add", f"{self.address(node)}/24", "dev", "eth0")
            self._in(ns, "ip", "link", "set", "eth0", "up")
            self._in(ns, "nft", "-f", "-", input=(
                f"table inet {TABLE} {{\n"
                "  chain input { type filter hook input priority 0; policy accept; }\n"
                "  chain output { type filter hook output priority 0; policy accept; }\n"
                "}\n"))
        probe = self.namespace(next(iter(self.nodes)))
        r = self._in(probe, "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms",
                     check=False)
        self.has_netem = r.returncode == 0
        if self.has_netem:
            self._in(probe, "tc", "qdisc", "del", "dev", "lo", "root", check=False)

    def wrap(self, node: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside ``node``'s namespace (ip netns exec execs it: same pid)."""
        return ["ip", "netns", "exec", self.namespace(node), *argv]

    def destroy(self) -> None:
        """Every namespace and veth of this network (processes inside are killed)."""
        for node in self.nodes:
            ns = self.namespace(node)
            _kill_inside(ns)
            _run("ip", "netns", "del", ns, check=False)
        _run("ip", "netns", "del", self.bridge_ns, check=False)
        _run("ip", "link", "del", f"{self.prefix}h", check=False)

    # ------------------------------------------------------------ faults

    def _rules(self, node: str, rules: Iterable[str]) -> None:
        script = "".join(f"add rule inet {TABLE} {r}\n" for r in rules)
        self._in(self.namespace(node), "nft", "-f", "-", input=script)
        self._faults.add(node)

    def _set(self, others: Iterable[str]) -> str:
        return "{ " + ", ".join(self.address(o) for o in others) + " }"

    def cut(self, node: str, others: Iterable[str]) -> None:
        """No packet between ``node`` and any of ``others``, either way."""
        others = list(others)
        if others:
            s = self._set(others)
            self._rules(node, [f"input ip saddr {s} drop", f"output ip daddr {s} drop"])

    def cut_inbound(self, node: str, others: Iterable[str]) -> None:
        """``node`` still sends to ``others`` but hears nothing from them."""
        others = list(others)
        if others:
            self._rules(node, [f"input ip saddr {self._set(others)} drop"])

    def partition(self, *sides: Iterable[str]) -> None:
        """Nodes on different sides stop hearing each other (the host still reaches all)."""
        groups = [list(s) for s in sides]
        for i, side in enumerate(groups):
            rest = [n for j, g in enumerate(groups) if j != i for n in g]
            for node in side:
                self.cut(node, rest)

    def slow(self, node: str, delay_ms: int = 150, jitter_ms: int = 50, loss_pct: float = 5.0) -> str:
        """Every packet ``node`` sends delayed and some lost; returns what did it."""
        ns = self.namespace(node)
        self._faults.add(node)
        if self.has_netem:
            self._in(ns, "tc", "qdisc", "replace", "dev", "eth0", "root", "netem", "delay",
                     f"{delay_ms}ms", f"{jitter_ms}ms", "loss", f"{loss_pct}%")
            return f"netem delay {delay_ms}±{jitter_ms} ms, loss {loss_pct}%"
        # A narrow link: 1 Mbit/s with up to delay_ms of queue (tbf drops past it).
        self._in(ns, "tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", "1mbit",
                 "burst", "16kb", "latency", f"{delay_ms}ms")
        lose = f"numgen random mod 1000 < {int(loss_pct * 10)} drop"
        self._rules(node, [f'output oifname "eth0" {lose}', f'input iifname "eth0" {lose}'])
        return f"tbf 1 Mbit/s (queue up to {delay_ms} ms), loss {loss_pct}% each way (no netem here)"

    def heal(self) -> None:
        """Every rule and qdisc a fault put in place, gone."""
        for node in list(self._faults):
            ns = self.namespace(node)
            self._in(ns, "nft", "flush", "chain", "inet", TABLE, "input", check=False)
            self._in(ns, "nft", "flush", "chain", "inet", TABLE, "output", check=False)
            self._in(ns, "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
        self._faults.clear()

    def rules(self, node: str) -> str:
        """The node's nftables table as nft lists it (for reports and tests)."""
        return self._in(self.namespace(node), "nft", "list", "table", "inet", TABLE).stdout
