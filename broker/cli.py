"""`samsa server`: start a broker from a server.properties file (kafka-server-start)."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import NoReturn


def _server(args) -> int:
    from samsa.config import ConfigError, load_broker_config

    try:
        cfg = load_broker_config(args.config, overrides=args.override or [])
    except ConfigError as e:
        print(f"samsa: refusing to start: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"samsa: cannot read config file: {e}", file=sys.stderr)
        return 2
    from samsa.broker.server import Broker

    try:
        broker = Broker(cfg)
    except ConfigError as e:
        print(f"samsa: refusing to start: {e}", file=sys.stderr)
        return 2

    import uvloop  # a dependency: the broker's event loops are uvloop's
    from kazoo.exceptions import KazooException

    from samsa.storage.errors import StorageError

    from samsa.broker.metadata.zookeeper import ZooKeeperStoreError

    try:
        clean = uvloop.run(broker.run_until_signalled())
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
    _exit_now(0 if clean else 1)


def _exit_now(code: int) -> NoReturn:
    """Leave without the interpreter's teardown. The broker has stopped: every
    file it keeps is written, durable and closed, and its threads are done or
    daemons. What the teardown would do is free every object one by one (with
    10,000 partitions' logs most of a second between "stopped" and the exit a
    SIGTERM waits for) and write nothing anyone needs. Logs and the standard
    streams are flushed first."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a closed or broken stream: exiting regardless
            pass
    os._exit(code)


def server_main(argv) -> int:
    parser = argparse.ArgumentParser(prog="samsa server", description="Run a broker.")
    # Required, as kafka-server-start requires it: a broker started without one
    # would silently listen on every interface with data under /tmp.
    parser.add_argument("config", help="server.properties file (the repository's is a "
                                       "single-node default: localhost:9092, data in ./data)")
    parser.add_argument("--override", action="append", metavar="KEY=VALUE",
                        help="override one config key (repeatable)")
    return _server(parser.parse_args(argv))
