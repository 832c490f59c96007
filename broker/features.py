"""The feature flags (KIP-584) a broker advertises in ApiVersions v3+.

Kafka 4 brokers list what they support (SupportedFeatures: name, min and max
level) and what the cluster has finalized (FinalizedFeatures, with an epoch
that only grows, so a client keeps the newest answer of all brokers). Clients
decide on them: the Java producer 4.x speaks transactions v2 (KIP-890 part
2) only when `transaction.version` is finalized at 2 or more. samsa has no
feature controller: the finalized level is the broker's `transaction.version`
setting, and the epoch is the time this broker started (a restart with
another setting is seen as newer by clients that connect to it). It is taken
when the broker starts, not at import: test-kit brokers fork from a process
that imported the broker already, and would all share one epoch.
"""
from __future__ import annotations

import time
from typing import NamedTuple

TRANSACTION_VERSION = "transaction.version"

# name -> (min level, max level) this broker can run
SUPPORTED: dict[str, tuple[int, int]] = {TRANSACTION_VERSION: (0, 2)}


def new_epoch() -> int:
    """A finalized-features epoch for a broker starting now."""
    return int(time.time() * 1000)


class Finalized(NamedTuple):
    epoch: int
    levels: dict[str, int]   # name -> finalized level; a feature at level 0 is left out


def finalized(transaction_version: int, epoch: int) -> Finalized:
    levels = {TRANSACTION_VERSION: transaction_version}
    return Finalized(epoch, {name: level for name, level in levels.items() if level > 0})
