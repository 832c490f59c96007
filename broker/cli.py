"""The `samsa` command line: the server and the tools named after Kafka's."""
from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import sys


def _server(args) -> int:
    from config import ConfigError, load_broker_config

    try:
        cfg = load_broker_config(args.config, overrides=args.override or [])
    except ConfigError as e:
        print(f"samsa: refusing to start: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"samsa: cannot read config file: {e}", file=sys.stderr)
        return 2
    from .server import Broker

    try:
        broker = Broker(cfg)
    except ConfigError as e:
        print(f"samsa: refusing to start: {e}", file=sys.stderr)
        return 2

    try:
        import uvloop
        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    from kazoo.exceptions import KazooException

    from storage.errors import StorageError

    from .metadata.zookeeper import ZooKeeperStoreError

    try:
        clean = runner(broker.run_until_signalled())
    except KeyboardInterrupt:
        return 0
    except ConfigError as e:  # e.g. an SSL listener's key store (read at start)
        print(f"samsa: refusing to start: {e}", file=sys.stderr)
        return 2
    except (OSError, StorageError, ZooKeeperStoreError) as e:
        # A full disk, an unwritable log dir, a port in use: one line naming it.
        print(f"samsa: cannot run the broker: {e}", file=sys.stderr)
        return 1
    except KazooException as e:  # ZooKeeper failed the broker while it started
        print(f"samsa: cannot run the broker: ZooKeeper: {type(e).__name__} {e}".rstrip(),
              file=sys.stderr)
        return 1
    return 0 if clean else 1


def server_main(argv) -> int:
    parser = argparse.ArgumentParser(prog="samsa server", description="Run a broker.")
    # Required, as kafka-server-start requires it: a broker started without one
    # would silently listen on every interface with data under /tmp.
    parser.add_argument("config", help="server.properties file (the repository's is a "
                                       "single-node default: localhost:9092, data in ./data)")
    parser.add_argument("--override", action="append", metavar="KEY=VALUE",
                        help="override one config key (repeatable)")
    return _server(parser.parse_args(argv))


# Every command: its name, the function that runs it ("module:function", given
# the arguments after the name and parsing them itself, as each of Kafka's
# tools does) and its line in `samsa --help`. Dispatch, --help and the tests
# (which hold README.md to it) read this one table: a new tool is one line here.
COMMANDS = {
    "server": ("broker.cli:server_main", "kafka-server-start: run a broker"),
    "dump-log": ("storage.dump_log:main", "kafka-dump-log: print segment files"),
    "topics": ("broker.topics_cli:main",
               "kafka-topics: create, list, describe, alter and delete topics"),
    "configs": ("broker.configs_cli:main", "kafka-configs: describe and alter the "
                "configs of topics and brokers, quotas and SCRAM credentials"),
    "consumer-groups": ("broker.groups_cli:main", "kafka-consumer-groups: list, describe, "
                        "reset the offsets of and delete consumer groups"),
    "get-offsets": ("broker.offsets_cli:main",
                    "kafka-get-offsets: the offsets of partitions at a point in time"),
    "console-producer": ("broker.console_producer_cli:main",
                         "kafka-console-producer: send lines of stdin as records"),
    "console-consumer": ("broker.console_consumer_cli:main",
                         "kafka-console-consumer: print a topic's records"),
    "reassign-partitions": ("broker.reassign_cli:main",
                            "kafka-reassign-partitions: move partitions between brokers"),
    "leader-election": ("broker.leader_election_cli:main",
                        "kafka-leader-election: elect preferred or unclean leaders"),
    "acls": ("broker.acls_cli:main", "kafka-acls: add, list and remove ACLs"),
}


def _run(name: str, argv) -> int:
    module, _, function = COMMANDS[name][0].partition(":")
    return getattr(importlib.import_module(module), function)(argv)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("samsa")
    except PackageNotFoundError:  # run from a source tree without installing
        return "unknown (not installed)"


def main(argv=None) -> int:
    try:
        return _main(argv)
    except BrokenPipeError:
        # Output piped into head & co.: the reader has gone, as Kafka's tools
        # treat it, quietly. Point stdout at /dev/null so the interpreter's
        # final flush does not complain either.
        import os
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


def _main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="[%(asctime)s] %(levelname)s %(name)s: %(message)s")
    if argv and argv[0] in COMMANDS:
        return _run(argv[0], argv[1:])
    parser = argparse.ArgumentParser(prog="samsa",
                                     description="A Kafka-compatible broker, and Kafka's tools.")
    parser.add_argument("--version", action="version", version=f"samsa {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True,
                                title="commands (each takes --help)")
    for name, (_, help_line) in COMMANDS.items():
        sub.add_parser(name, help=help_line, add_help=False)
    parser.parse_args(argv)  # --help, --version, or no or an unknown command: exits
    return 2


if __name__ == "__main__":
    sys.exit(main())
