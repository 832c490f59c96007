"""``zookeeper.connect``: ``host[:port][,host[:port]...][/chroot]``, read as
ZooKeeper's ConnectStringParser reads it.

The chroot starts at the first ``/`` (``/`` alone is no chroot); the hosts are
comma-separated, each ``host``, ``host:port`` or ``[IPv6]:port``; a host without
a port (or with an empty one, ``host:``) is on ZooKeeper's 2181. A port that is
not a number or outside 1-65535 is refused here, at start-up, naming the key:
ZooKeeper's client would throw on it, and kazoo raised a bare ValueError. A
host that does not resolve is not a config error: ZooKeeper retries it until
the connection timeout, as samsa does.
"""
from __future__ import annotations

import re

from .errors import ConfigError

KEY = "zookeeper.connect"
DEFAULT_PORT = 2181
_ALLOWED = "host[:port][,host[:port]...][/chroot] with ports 1-65535"
# What ZooKeeper's PathUtils.validatePath refuses in a path besides empty,
# "." and ".." names: control characters and the non-characters it lists.
_BAD_PATH_CHAR = re.compile("[\u0000-\u001f\u007f-\u009f\ud800-\uf8ff\ufff0-\uffff]")


def parse_connect(connect: str) -> tuple[str, str | None]:
    """-> (``host:port,...`` with every port explicit, chroot or None);
    ConfigError naming ``zookeeper.connect`` and what is wrong."""
    def bad(why: str) -> ConfigError:
        return ConfigError(KEY, connect, f"{_ALLOWED} ({why})")

    hosts_part, slash, chroot = connect.partition("/")
    hosts = []
    for item in hosts_part.split(","):
        item = item.strip()
        if not item:
            raise bad("a host is missing" if hosts_part.strip() else "no host given")
        if item.startswith("["):  # [IPv6] or [IPv6]:port
            host, close, rest = item[1:].partition("]")
            if not close or not host or (rest and not rest.startswith(":")):
                raise bad(f"{item!r} is not [IPv6 address]:port")
            host, port = f"[{host}]", rest[1:]
        else:
            host, _, port = item.rpartition(":") if ":" in item else (item, "", "")
            if not host or ":" in host:
                raise bad(f"{item!r} is not host:port")
        if port and not (port.isascii() and port.isdigit()):
            raise bad(f"the port of {item!r} is not a number")
        number = int(port) if port else DEFAULT_PORT
        if not 1 <= number <= 65535:
            raise bad(f"the port of {item!r} is outside 1-65535")
        hosts.append(f"{host}:{number}")
    if not slash:
        return ",".join(hosts), None
    chroot = "/" + chroot.rstrip("/")  # "/kafka/" is taken as "/kafka"
    if chroot == "/":
        return ",".join(hosts), None
    names = chroot[1:].split("/")
    if any(n in ("", ".", "..") for n in names) or _BAD_PATH_CHAR.search(chroot):
        raise bad(f"{chroot!r} is not a ZooKeeper path")
    return ",".join(hosts), chroot
