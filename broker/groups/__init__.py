"""Consumer groups: the coordinator and the offset store.

Layout: classic/ (the classic protocol's state and its state machine),
consumer/ (KIP-848 consumer groups, group.protocol=consumer: their state,
assignors, reconciliation, records and state machine),
effects.py (what a machine answers an event with), offsets.py (committed
offsets' rules, any group type), offset_manager.py (the committed offsets'
flows: commit, transactional commit, fetch, delete, retention), coordinator.py
(the runtime: store, clock, timers, waiting requests, membership mirror),
write_errors.py (how a failed write is answered), clock.py, store.py.

Wiring (broker integrator):

    from samsa.broker.groups import (GroupCoordinator, GroupCoordinatorConfig,
                               ConsumerOffsetsLog, CoordinatorBridge, OFFSETS_TOPIC)
    from samsa.broker.groups.log_adapter import offsets_log_functions
    # create OFFSETS_TOPIC partitions 0..N-1 (N = offsets.topic.num.partitions,
    # cleanup.policy=compact) in the metadata layer + LogManager, then:
    append, read_all = offsets_log_functions(lambda p: lm.get_log(OFFSETS_TOPIC, p), N)
    coord = GroupCoordinator(ConsumerOffsetsLog(append, read_all, N),
                             GroupCoordinatorConfig.from_broker_config(cfg))
    await coord.start()              # on the main loop, before serving
    groups = CoordinatorBridge(coord)  # handlers on processor loops: await groups.<method>(...)
    # periodically (offsets.retention.check.interval.ms): await groups.expire_offsets()
    # on stop: await coord.shutdown()

API -> method (all async; results in results.py):
    JoinGroup(11)      join_group(group_id, member_id, group_instance_id, client_id,
                       client_host, session_timeout_ms, rebalance_timeout_ms (v0: session),
                       protocol_type, [(name, metadata)], require_known_member_id=(v>=4),
                       reason) -> JoinResult  (protocol_name None -> "" before v7)
    SyncGroup(14)      sync_group(group_id, generation_id, member_id, group_instance_id,
                       protocol_type|None, protocol_name|None, [(member_id, bytes)]) -> SyncResult
    Heartbeat(12)      heartbeat(group_id, generation_id, member_id, group_instance_id) -> int
    LeaveGroup(13)     leave_group(group_id, [(member_id, group_instance_id, reason)]) -> LeaveResult
                       (v0-v2: one member; answer members[0].error_code)
    DescribeGroups(15) describe_groups(ids, unknown_is_error=(v>=6)) -> [GroupDescription]
    ListGroups(16)     list_groups(states_filter, types_filter) -> (error, [ListedGroup])
    DeleteGroups(42)   delete_groups(ids) -> [(group_id, error)]
    OffsetCommit(8)    commit_offsets(group_id, generation_id, member_id, group_instance_id,
                       [(topic, partition, offset, leader_epoch, metadata)],
                       retention_ms (v2-v4, -1 = default)) -> [PartitionError]
                       (the handler answers UNKNOWN_TOPIC_OR_PARTITION for unknown partitions itself)
    OffsetFetch(9)     fetch_offsets(group_id, [(topic, partition)] | None) -> OffsetFetchResult
                       (v8+: one call per group in the request)
    OffsetDelete(47)   delete_offsets(group_id, [(topic, partition)]) -> OffsetDeleteResult
    ConsumerGroupHeartbeat(68) consumer_group_heartbeat(group_id, consumer.Heartbeat(...))
                       -> consumer.HeartbeatResult
    ConsumerGroupDescribe(69) consumer_group_describe(ids) -> [consumer.machine.ConsumerGroupView]
    FindCoordinator(10) answered by CoordinatorLocator (locator.py): the leader of the group's
                       __consumer_offsets partition (partition_for(group, N)).
"""
from .bridge import CoordinatorBridge
from .coordinator import GroupCoordinator, GroupCoordinatorConfig
from .classic import GroupState
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
