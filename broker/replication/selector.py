"""Which replica a consumer should read from (KIP-392, Kafka's
``RackAwareReplicaSelector``), as a plain function.

A consumer that says where it runs (``client.rack``, sent as the Fetch
request's ``rack_id``) is sent to a replica in its own rack: the leader when
it is there, else the most caught-up in-sync follower there; with none in
its rack, or no rack, it stays on the leader. The leader then answers that
partition with no records and the chosen replica's id
(``preferred_read_replica``), and the client fetches from it.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple


class ReplicaView(NamedTuple):
    broker_id: int
    rack: str | None
    log_end_offset: int
    last_caught_up_ms: float


def select_rack_aware(client_rack: str, leader: ReplicaView,
                      followers: Iterable[ReplicaView]) -> int:
    """The broker id the consumer should read from (the leader's, to stay)."""
    if not client_rack:
        return leader.broker_id
    if leader.rack == client_rack:
        return leader.broker_id
    same_rack = [f for f in followers if f.rack == client_rack]
    if not same_rack:
        return leader.broker_id
    # Most caught up first; among equals, the one caught up most recently.
    return max(same_rack, key=lambda f: (f.log_end_offset, f.last_caught_up_ms)).broker_id
