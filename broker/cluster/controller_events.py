"""What the controller's event thread is fed: one small type per kind.

Watches and timers only enqueue these; the controller's thread takes them one
at a time (Kafka's controller event queue). An event a caller waits for
(controlled shutdown, ElectLeaders, AlterPartitionReassignments) carries a
``Reply``: the controller fills in ``value`` and sets ``done`` whatever
happens, so the caller goes on (with None after a failure or a resignation).

``kind`` is the name the controller's log gives the event.
"""
from __future__ import annotations

import enum
import threading
from dataclasses import dataclass, field
from typing import ClassVar, Generic, TypeVar

Partition = tuple[str, int]
T = TypeVar("T")
UNKNOWN_BROKER_EPOCH = -1  # ControlledShutdown v0/v1 carry none: not checked


class Reply(Generic[T]):
    """The answer to an event a caller waits for."""

    def __init__(self) -> None:
        self.value: T | None = None
        self.done = threading.Event()

    def wait(self, timeout: float) -> bool:
        return self.done.wait(timeout)


@dataclass(frozen=True)
class ControllerEvent:
    kind: ClassVar[str] = "event"


@dataclass(frozen=True)
class Elect(ControllerEvent):
    """Stand for election (/controller is gone, or a retry after an error)."""
    kind: ClassVar[str] = "elect"


@dataclass(frozen=True)
class Resign(ControllerEvent):
    """Our /controller went, or names another broker: the term is over."""
    kind: ClassVar[str] = "resign"


@dataclass(frozen=True)
class Stop(ControllerEvent):
    """The broker stops: resign and end the event thread."""
    kind: ClassVar[str] = "stop"


@dataclass(frozen=True)
class Tick(ControllerEvent):
    """Periodic work: the preferred-leader rebalance, reassignment re-checks."""
    kind: ClassVar[str] = "tick"


@dataclass(frozen=True)
class WatchTopics(ControllerEvent):
    """Taking office: topics whose watches are still to be set. Each watch's
    first read is a round trip (at 30,000 partitions, 30 topics took 2 s on a
    busy broker): a few per event, so that events queued meanwhile (a
    broker's death) are not held up behind all of them."""
    topics: tuple[str, ...]
    kind: ClassVar[str] = "watch topics"


@dataclass(frozen=True)
class BrokersChanged(ControllerEvent):
    """/brokers/ids listed again."""
    ids: tuple[str, ...]
    kind: ClassVar[str] = "brokers"


@dataclass(frozen=True)
class TopicsChanged(ControllerEvent):
    """/brokers/topics listed again (topics created or deleted)."""
    names: tuple[str, ...]
    kind: ClassVar[str] = "topics"


@dataclass(frozen=True)
class TopicChanged(ControllerEvent):
    """A topic's znode was rewritten (partitions added, say); ``version`` and
    ``created``: the znode's version and czxid the watch saw (None: unknown,
    read it again whatever it is)."""
    topic: str
    version: int | None = None
    created: int | None = None
    kind: ClassVar[str] = "topic"


@dataclass(frozen=True)
class PreferredElectionAsked(ControllerEvent):
    """/admin/preferred_replica_election changed (read again when handled)."""
    kind: ClassVar[str] = "preferred"


@dataclass(frozen=True)
class TopicsMarkedForDeletion(ControllerEvent):
    """/admin/delete_topics listed again."""
    names: tuple[str, ...]
    kind: ClassVar[str] = "delete"


@dataclass(frozen=True)
class IsrChangesNoticed(ControllerEvent):
    """/isr_change_notification listed again: leaders changed ISRs."""
    names: tuple[str, ...]
    kind: ClassVar[str] = "isr"


@dataclass(frozen=True)
class ReassignZnodeChanged(ControllerEvent):
    """/admin/reassign_partitions changed (read again when handled)."""
    kind: ClassVar[str] = "reassign_znode"


class ShutdownRefused(enum.Enum):
    """Why a controlled shutdown was refused (nothing moved)."""
    # not registered, or not yet seen registered by the controller
    UNKNOWN_BROKER = "not a live broker"
    # asked with the epoch of an earlier registration: that run of the
    # broker is over, and this one has not asked
    STALE_BROKER_EPOCH = "an earlier registration's broker epoch"


@dataclass(frozen=True)
class ControlledShutdown(ControllerEvent):
    """A broker asks to stop, with its broker epoch (its registration's
    czxid, or UNKNOWN_BROKER_EPOCH): its leaderships move; the reply holds
    the partitions it still leads, or why it was refused."""
    broker_id: int
    broker_epoch: int = UNKNOWN_BROKER_EPOCH
    reply: Reply[list[Partition] | ShutdownRefused] = field(default_factory=Reply, compare=False)
    kind: ClassVar[str] = "shutdown"


@dataclass(frozen=True)
class ElectLeaders(ControllerEvent):
    """ElectLeaders (None: every partition); the reply holds the error per
    partition."""
    partitions: list[Partition] | None
    unclean: bool
    reply: Reply[dict] = field(default_factory=Reply, compare=False)
    kind: ClassVar[str] = "elect_leaders"


@dataclass(frozen=True)
class Reassign(ControllerEvent):
    """AlterPartitionReassignments (a target per partition, None: cancel);
    the reply holds the outcome per partition."""
    requests: dict[Partition, list[int] | None]
    allow_replication_factor_change: bool = True
    reply: Reply[dict] = field(default_factory=Reply, compare=False)
    kind: ClassVar[str] = "reassign"


# The events a caller waits for.
Answered = ControlledShutdown | ElectLeaders | Reassign
