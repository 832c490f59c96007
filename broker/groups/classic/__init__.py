"""The classic group protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup):
its state (state.py) and its rules as a state machine (machine.py)."""
from .machine import ClassicGroupMachine
from .state import Group, GroupState, Member

__all__ = ["ClassicGroupMachine", "Group", "GroupState", "Member"]
