"""KIP-848 consumer groups (``group.protocol=consumer``): the group and its
members (state.py), the server-side assignors (assignors.py), a member's
reconciliation towards its target assignment (reconcile.py), the subscribed
topic regex (regex.py), the records written to ``__consumer_offsets``
(records.py) and the rules as a state machine (machine.py) beside the
classic one in ../classic/."""
from .machine import ConsumerGroupConfig, ConsumerGroupMachine, Heartbeat, HeartbeatResult
from .state import ConsumerGroup, ConsumerGroupState, ConsumerMember, MemberState

__all__ = ["ConsumerGroup", "ConsumerGroupConfig", "ConsumerGroupMachine", "ConsumerGroupState",
           "ConsumerMember", "Heartbeat", "HeartbeatResult", "MemberState"]
