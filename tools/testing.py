"""`samsa testing serve`: a test broker (or cluster) for tests in any language.

Prints the bootstrap address on the first line of stdout, then one line per broker's
fault-injection endpoint (docs/testing.md), and serves until interrupted (SIGINT,
SIGTERM) or until stdin closes with --stdin-eof; then stops everything and removes
its directories. Configs are broker keys: ``num.partitions=3``.
"""
from __future__ import annotations

import argparse
import signal
import sys
import threading
from typing import Any


def _configs(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"samsa testing serve: expected KEY=VALUE, got {item!r}")
        out[key] = value
    return out


def _serve(args: argparse.Namespace) -> int:
    from samsa.testing import Broker, Cluster

    configs = _configs(args.config)
    users = dict(u.split(":", 1) for u in args.sasl_user) if args.sasl_user else None
    if args.brokers > 1 and (users or args.tls):
        raise SystemExit("samsa testing serve: --sasl-user and --tls are for a single broker")
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    thing = (Cluster(args.brokers, **configs) if args.brokers > 1
             else Broker(sasl_users=users, tls=args.tls, **configs))
    with thing:
        if isinstance(thing, Cluster):
            print(thing.bootstrap_servers)
            for i in range(args.brokers):
                print(f"broker {i} {thing.brokers[i].bootstrap} faults {thing.node(i).admin_url}")
        else:
            print(thing.bootstrap_servers)
            print(f"broker 0 {thing.bootstrap_servers} faults {thing.admin_url}")
            for key, value in thing.client_config().items():
                if key != "bootstrap.servers":
                    print(f"client {key}={value}")
        sys.stdout.flush()
        if args.stdin_eof:
            def until_eof() -> None:
                sys.stdin.read()
                stop.set()
            threading.Thread(target=until_eof, daemon=True).start()
        stop.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="samsa testing", description=(
        "Test brokers for client test suites: `samsa testing serve` prints the bootstrap "
        "address and serves until interrupted."))
    sub = parser.add_subparsers(dest="action", required=True)
    serve = sub.add_parser("serve", help="start a test broker or cluster and print its address")
    serve.add_argument("--brokers", type=int, default=1,
                       help="brokers (default 1: the embedded single broker; more: a real ZooKeeper cluster)")
    serve.add_argument("--sasl-user", action="append", metavar="USER:PASSWORD",
                       help="a SASL/PLAIN user (repeatable): adds a SASL listener, the one printed")
    serve.add_argument("--tls", action="store_true", help="an SSL listener with certificates made on the spot")
    serve.add_argument("--stdin-eof", action="store_true", help="also stop when stdin closes")
    serve.add_argument("config", nargs="*", metavar="KEY=VALUE", help="broker configs")
    args = parser.parse_args(argv)
    return _serve(args)
