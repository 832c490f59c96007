"""The `samsa` command line: the server and the tools named after Kafka's."""
from __future__ import annotations

import argparse
import importlib
import logging
import sys


# Every command: its name, the function that runs it ("module:function", given
# the arguments after the name and parsing them itself, as each of Kafka's
# tools does) and its line in `samsa --help`. Dispatch, --help and the tests
# (which hold README.md to it) read this one table: a new tool is one line here.
COMMANDS = {
    "server": ("samsa.broker.cli:server_main", "kafka-server-start: run a broker"),
    "dump-log": ("samsa.tools.dump_log:main", "kafka-dump-log: print segment files"),
    "topics": ("samsa.tools.topics:main",
               "kafka-topics: create, list, describe, alter and delete topics"),
    "configs": ("samsa.tools.configs:main", "kafka-configs: describe and alter the "
                "configs of topics and brokers, quotas and SCRAM credentials"),
    "consumer-groups": ("samsa.tools.consumer_groups:main", "kafka-consumer-groups: list, describe, "
                        "reset the offsets of and delete consumer groups"),
    "get-offsets": ("samsa.tools.get_offsets:main",
                    "kafka-get-offsets: the offsets of partitions at a point in time"),
    "console-producer": ("samsa.tools.console_producer:main",
                         "kafka-console-producer: send lines of stdin as records"),
    "console-consumer": ("samsa.tools.console_consumer:main",
                         "kafka-console-consumer: print a topic's records"),
    "reassign-partitions": ("samsa.tools.reassign_partitions:main",
                            "kafka-reassign-partitions: move partitions between brokers"),
    "leader-election": ("samsa.tools.leader_election:main",
                        "kafka-leader-election: elect preferred or unclean leaders"),
    "acls": ("samsa.tools.acls:main", "kafka-acls: add, list and remove ACLs"),
    "testing": ("samsa.tools.testing:main", "test brokers for client test suites, with fault "
                "injection: `samsa testing serve` prints the bootstrap address"),
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
