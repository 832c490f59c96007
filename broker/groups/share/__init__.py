"""KIP-932 share groups, beside the classic protocol (../classic/):
partition.py (one share-partition's delivery state: acquisition locks,
delivery counts, acknowledgements), group.py (membership and assignment,
ShareGroupHeartbeat), session.py (share sessions of ShareFetch and
ShareAcknowledge). All plain state machines fed events with the time
injected; the runtime around them is service.py, the durable state
state_log.py (ShareSnapshot records in __share_group_state)."""
