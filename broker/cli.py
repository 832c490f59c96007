"""The `samsa` command line: the server and the tools named after Kafka's."""
from __future__ import annotations

import argparse
import asyncio
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


def _dump_log(argv) -> int:
    from storage.dump_log import main as dump_log_main
    return dump_log_main(argv)


def _topics(argv) -> int:
    from .topics_cli import main as topics_main
    return topics_main(argv)


def _configs(argv) -> int:
    from .configs_cli import main as configs_main
    return configs_main(argv)


def _consumer_groups(argv) -> int:
    from .groups_cli import main as groups_main
    return groups_main(argv)


def _get_offsets(argv) -> int:
    from .offsets_cli import main as offsets_main
    return offsets_main(argv)


def _console_producer(argv) -> int:
    from .console_producer_cli import main as producer_main
    return producer_main(argv)


def _console_consumer(argv) -> int:
    from .console_consumer_cli import main as consumer_main
    return consumer_main(argv)


def _reassign_partitions(argv) -> int:
    from .reassign_cli import main as reassign_main
    return reassign_main(argv)


def _leader_election(argv) -> int:
    from .leader_election_cli import main as election_main
    return election_main(argv)


def _acls(argv) -> int:
    from .acls_cli import main as acls_main
    return acls_main(argv)


# Tools with Kafka's names and flags, each parsing its own arguments.
_TOOLS = {"dump-log": _dump_log, "topics": _topics, "configs": _configs,
          "get-offsets": _get_offsets, "consumer-groups": _consumer_groups,
          "console-producer": _console_producer, "console-consumer": _console_consumer,
          "reassign-partitions": _reassign_partitions, "leader-election": _leader_election,
          "acls": _acls}


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
    if argv and argv[0] in _TOOLS:
        return _TOOLS[argv[0]](argv[1:])
    parser = argparse.ArgumentParser(prog="samsa", description="A Kafka-compatible broker.")
    parser.add_argument("--version", action="version", version=f"samsa {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    srv = sub.add_parser("server", help="run a broker")
    # Required, as kafka-server-start requires it: a broker started without one
    # would silently listen on every interface with data under /tmp.
    srv.add_argument("config", help="server.properties file (the repository's is a "
                                    "single-node default: localhost:9092, data in ./data)")
    srv.add_argument("--override", action="append", metavar="KEY=VALUE",
                     help="override one config key (repeatable)")
    sub.add_parser("dump-log", help="print segment files like kafka-dump-log", add_help=False)
    sub.add_parser("topics", help="create/list/describe/delete topics", add_help=False)
    sub.add_parser("configs", help="describe/alter topic and broker configs (kafka-configs)",
                   add_help=False)
    sub.add_parser("consumer-groups", help="list, describe, reset offsets of and delete "
                   "consumer groups (kafka-consumer-groups)", add_help=False)
    sub.add_parser("get-offsets", help="offsets at a point in time (kafka-get-offsets)",
                   add_help=False)
    sub.add_parser("console-producer", help="send lines of stdin as records "
                   "(kafka-console-producer)", add_help=False)
    sub.add_parser("console-consumer", help="print a topic's records "
                   "(kafka-console-consumer)", add_help=False)
    args = parser.parse_args(argv)
    if args.command == "server":
        return _server(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
