"""Consumer groups: the classic-protocol coordinator and the offset store.

Entry points for the broker:
    GroupCoordinator(store, GroupCoordinatorConfig(...))   # coordinator.py
    ConsumerOffsetsLog(append_fn, read_all_fn, num_partitions)  # store.py
    CoordinatorBridge(coordinator)   # call it from other loops/threads
    partition_for(group_id, num_partitions)   # FindCoordinator key -> partition
"""
from .bridge import CoordinatorBridge
from .coordinator import GroupCoordinator, GroupCoordinatorConfig
from .group import GroupState
from .log_format import GroupRecord, MemberRecord, OffsetAndMetadata, partition_for
from .results import (
    FetchedOffset,
    GroupDescription,
    JoinResult,
    LeaveMemberResult,
    LeaveResult,
    ListedGroup,
    MemberDescription,
    OffsetDeleteResult,
    OffsetFetchResult,
    PartitionError,
    SyncResult,
)
from .store import OFFSETS_TOPIC, ConsumerOffsetsLog, OffsetStore

__all__ = [
    "ConsumerOffsetsLog", "CoordinatorBridge", "FetchedOffset", "GroupCoordinator",
    "GroupCoordinatorConfig", "GroupDescription", "GroupRecord", "GroupState", "JoinResult",
    "LeaveMemberResult", "LeaveResult", "ListedGroup", "MemberDescription", "MemberRecord",
    "OFFSETS_TOPIC", "OffsetAndMetadata", "OffsetDeleteResult", "OffsetFetchResult",
    "OffsetStore", "PartitionError", "SyncResult", "partition_for",
]
