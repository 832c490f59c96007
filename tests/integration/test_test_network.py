"""The test network itself (tests/support/netns.py): which links a fault cuts,
that the host (where the clients run) reaches every node throughout, and that
healing and destroying leave nothing behind. Listeners are plain TCP servers
inside the namespaces; connections are tried from the host and from inside."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.support.netns import TestNetwork, require_test_network
from tests.support.waiting import wait_until

pytestmark = pytest.mark.integration
PORT = 7000
LISTEN = ("import socket\n"
          "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
          f"s.bind(('0.0.0.0', {PORT})); s.listen(64)\n"
          "while True:\n    s.accept()[0].close()\n")
CONNECT = ("import socket, sys\n"
           "try:\n"
           f"    socket.create_connection((sys.argv[1], {PORT}), timeout=1).close(); print('yes')\n"
           "except OSError:\n    print('no')\n")


@pytest.fixture
def net():
    require_test_network()
    network = TestNetwork.create(["zk", "b0", "b1"])
    servers = [subprocess.Popen(network.wrap(n, [sys.executable, "-c", LISTEN]))
               for n in network.nodes]
    try:
        wait_until(lambda: all(_from_host(network, n) for n in network.nodes), 30,
                   "every node's listener reachable from the host")
        yield network
    finally:
        for s in servers:
            s.kill()
            s.wait()
        network.destroy()


def _from_host(net: TestNetwork, node: str) -> bool:
    try:
        socket.create_connection((net.address(node), PORT), timeout=1).close()
        return True
    except OSError:
        return False


def _reaches(net: TestNetwork, src: str, dst: str) -> bool:
    out = subprocess.run(net.wrap(src, [sys.executable, "-c", CONNECT, net.address(dst)]),
                         capture_output=True, text=True).stdout.strip()
    return out == "yes"


def test_a_node_cut_from_its_peers_still_reaches_and_is_reached_by_the_host(net):
    net.cut("b0", ["zk", "b1"])
    assert not _reaches(net, "b0", "zk") and not _reaches(net, "b0", "b1")
    assert not _reaches(net, "b1", "b0")
    assert _reaches(net, "b1", "zk")            # the others untouched
    assert _from_host(net, "b0")                 # its clients still reach it
    net.heal()
    assert _reaches(net, "b0", "b1") and _reaches(net, "b1", "b0")


def test_a_one_way_cut_and_halves(net):
    net.cut_inbound("b0", ["b1"])
    # b0 hears nothing from b1: neither side completes a TCP handshake
    assert not _reaches(net, "b1", "b0") and not _reaches(net, "b0", "b1")
    assert _reaches(net, "b0", "zk")
    net.heal()
    net.partition(["zk", "b0"], ["b1"])
    assert _reaches(net, "b0", "zk") and not _reaches(net, "b1", "zk")
    assert not _reaches(net, "b1", "b0") and _from_host(net, "b1")
    net.heal()
    assert _reaches(net, "b1", "zk")


def test_destroy_leaves_no_namespace_or_link_behind():
    require_test_network()
    network = TestNetwork.create(["n0"])
    network.destroy()
    namespaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert network.prefix not in namespaces and network.prefix not in links
