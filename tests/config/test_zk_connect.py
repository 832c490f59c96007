"""zookeeper.connect read as ZooKeeper's ConnectStringParser reads it (issue 24,
item 15): a host without a port is on 2181, a port that is not a number or
out of range refuses start-up naming the key (it was a traceback)."""
import pytest

from samsa.config import ConfigError, load_broker_config
from samsa.config.zk_connect import parse_connect


@pytest.mark.parametrize("connect, expected", [
    ("zk:2181", ("zk:2181", None)),
    ("a:1,b:2/kafka", ("a:1,b:2", "/kafka")),
    ("a:1/kafka/prod/", ("a:1", "/kafka/prod")),
    ("a:1/", ("a:1", None)),
    # ZooKeeper's default port for a host without one (or with an empty one)
    ("bogus", ("bogus:2181", None)),
    ("h1:2181,h2", ("h1:2181,h2:2181", None)),
    ("h:/chroot", ("h:2181", "/chroot")),
    ("a:1, b:2", ("a:1,b:2", None)),
    ("[::1]:2182,[fe80::1]/k", ("[::1]:2182,[fe80::1]:2181", "/k")),
])
def test_connect_string(connect, expected):
    assert parse_connect(connect) == expected


@pytest.mark.parametrize("connect, why", [
    ("", "no host"),
    ("/chroot", "no host"),
    ("a:1,,b:2", "a host is missing"),
    ("a:1,", "a host is missing"),
    ("bogus:abc", "not a number"),
    ("h:-1", "not a number"),
    ("127.0.0.1:99999", "outside 1-65535"),
    ("h:0", "outside 1-65535"),
    (":2181", "is not host:port"),
    ("a:b:2181", "is not host:port"),
    ("[::1", "IPv6"),
    ("a:1/k//p", "not a ZooKeeper path"),
    ("a:1/k/../p", "not a ZooKeeper path"),
])
def test_bad_connect_string_names_the_key(connect, why):
    with pytest.raises(ConfigError, match=why) as e:
        parse_connect(connect)
    assert e.value.key == "zookeeper.connect"


def test_the_broker_config_refuses_a_bad_connect_string():
    with pytest.raises(ConfigError, match="zookeeper.connect.*not a number"):
        load_broker_config(None, ["zookeeper.connect=bogus:abc"], environ={})
    assert load_broker_config(None, ["zookeeper.connect=h1:2181,h2"],
                              environ={}).zookeeper_connect == "h1:2181,h2"
