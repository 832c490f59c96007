"""The controller of a one-broker cluster (the embedded store): this broker
is the controller Metadata names, so it answers the controller's admin APIs
(ElectLeaders, AlterPartitionReassignments, ListPartitionReassignments) as
Kafka's one-broker cluster does, instead of NOT_CONTROLLER.

The answers come from the ZooKeeper controller's own rules (elections.py,
reassignment.py) applied to what the store says. With one broker nothing can
ever move: every partition is led by its only replica, so an election is
never needed, and the only replica list a reassignment may name is this
broker, which is the list it already has.
"""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode

from . import reassignment as ra
from .elections import LeaderAndIsr, election_answer, elections_reported

Partition = tuple[str, int]


class SingleBrokerController:
    """The same calls as ZooKeeper mode's ``Controller`` makes the handlers;
    nothing here blocks or writes."""

    active = True

    def __init__(self, store) -> None:
        self.store = store

    def _replicas(self, tp: Partition):
        return self.store.partitions(tp[0]).get(tp[1])

    def _live(self) -> set[int]:
        return {b.node_id for b in self.store.brokers()}

    def elect_leaders(self, partitions: list[Partition] | None, unclean: bool,
                      timeout: float) -> dict[Partition, ErrorCode]:
        live = self._live()
        if partitions is None:
            wanted = [(t, p) for t in sorted(self.store.topics())
                      for p in sorted(self.store.partitions(t))]
        else:
            wanted = partitions
        out: dict[Partition, ErrorCode] = {}
        for tp in wanted:
            meta = self._replicas(tp)
            if meta is None:
                out[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            state = LeaderAndIsr(meta.leader, meta.leader_epoch, tuple(meta.isr))
            answer = election_answer(meta.replicas, state, live, live, unclean)
            # An election would need another broker to lead: there is none.
            out[tp] = answer if answer is not None else (
                ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE if unclean
                else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
        return elections_reported(out, partitions is None)

    def reassign(self, requests: dict[Partition, list[int] | None], timeout: float,
                 allow_replication_factor_change: bool = True
                 ) -> dict[Partition, tuple[ErrorCode, str | None]]:
        live = self._live()
        out: dict[Partition, tuple[ErrorCode, str | None]] = {}
        for tp, target in requests.items():
            meta = self._replicas(tp)
            if meta is None:
                out[tp] = ra.unknown_partition(tp)
            elif target is None:
                out[tp] = ra.nothing_to_cancel(tp)  # nothing ever runs here
            else:
                refused = ra.refusal(target, live, meta.replicas, allow_replication_factor_change)
                if refused is not None:
                    out[tp] = refused
                elif ra.begin(meta.replicas, None, target) is None:
                    out[tp] = (ErrorCode.NONE, None)  # its replicas already: nothing to move
                else:
                    # only a replica list naming a broker that is not alive
                    # differs from the current one, and check_target refuses it
                    out[tp] = (ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                               f"a one-broker cluster cannot move {tp[0]}-{tp[1]} "
                               f"to {list(target)}")
        return out

    def reassignments(self) -> dict[Partition, ra.Reassignment]:
        return {}

    def controlled_shutdown(self, broker_id: int, broker_epoch: int, timeout: float
                            ) -> list[Partition]:
        """Nothing to hand over: Kafka's controller counts only the replicated
        partitions a stopping broker leads, and here none is replicated."""
        return []
