"""KIP-932 share groups, beside the classic protocol (../classic/):
partition.py (one share-partition's delivery state: acquisition locks,
delivery counts, acknowledgements), group.py (membership and assignment,
ShareGroupHeartbeat), session.py (share sessions of ShareFetch and
ShareAcknowledge), coordinator.py (the share coordinator: the durable state
of the share-partitions keyed in the __share_group_state partitions led
here). All plain state machines fed events with the time injected; the
runtimes around them are service.py (the share-partitions served here),
share_coordinator.py (the coordinator's writes, state_log.py's ShareSnapshot
records), persister.py and persistence.py (a share-partition leader reading
and writing its state at the coordinator)."""
