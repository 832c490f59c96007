"""Which of a connection's requests take effect in the order they arrived,
and where each one's turn (network/turns.py) ends.

Kafka reads one request of a connection at a time, so whatever a client
pipelines on one connection takes effect in the order sent, and a request
sees what every earlier one did. samsa handles a connection's requests
concurrently, which keeps that order only where a request takes effect
before its first await, and only where the next request does not depend on
the first one's being done. The request types below may wait first (a
worker thread, ZooKeeper, the transaction coordinator), or the next one
would meet their write in flight, so each takes a turn on its connection
when it arrives (the dispatcher, before any await) and goes on only once
every earlier turn has ended.

The group coordinator's membership requests (JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, ConsumerGroupHeartbeat) take effect before their first
await (posted to the coordinator's state machine, which decides them in the
order posted), but a JoinGroup may then wait a whole rebalance for its answer:
each waits for the earlier turns and ends its own as it starts, so a consumer's
LeaveGroup or JoinGroup never overtakes the commit it sent before (which,
overtaken, was refused UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION and lost), and
its long wait holds nothing back. OffsetCommit (v1 and later) goes the same
way: handed to the coordinator as it starts, it is written and applied in the
order handed, and what reads or deletes the group's offsets behind it waits
for it there (BY_VERSION below says why).

Every other request type takes effect before its first await and leaves
nothing in flight for the next (DeleteRecords and WriteTxnMarkers append
before their first await), or no client sends anything that depends on it
before its answer (InitProducerId: the producer waits for its id and epoch).
Or its order is one no client relies on and its waiting must not hold
others back: a long-polling Fetch (a fetch session's epoch is checked when
it arrives, and an answer overtaken by the session's next fetch is sent
empty), ShareFetch / ShareAcknowledge (a share session's epoch is checked
when the request arrives and moves on once its acknowledgements are written:
a request pipelined with the next epoch would be refused
INVALID_SHARE_SESSION_EPOCH, not taken out of order).
"""
from __future__ import annotations

import enum

from samsa.protocol.model import ApiKey


class Turn(enum.Enum):
    # The handler waits for its turn right before it takes effect and ends it
    # right after (RequestContext.may_append / wait_to_append / appended), so
    # acks=all Produce requests still wait for replication together. Only the
    # handler gives this kind its meaning (the dispatcher only takes the turn
    # and ends it at the latest when the handler is done): a type given it
    # whose handler never waits is not ordered.
    AT_THE_EFFECT = 1
    # The handler starts once every earlier turn has ended, and its turn ends
    # with it: what it changes runs on a worker thread (or waits on ZooKeeper)
    # and what it reads must show every earlier change of the connection.
    WHOLE = 2
    # The kind depends on the request's version: BY_VERSION below
    BY_VERSION = 3
    # The handler starts once every earlier turn has ended and its turn ends
    # as it starts: it takes effect at once, then may wait long (a JoinGroup
    # for the rebalance) without holding the later ones
    AT_THE_START = 4


PRODUCERS_ADD_PARTITIONS_THROUGH = 3  # the last AddPartitionsToTxn version a producer sends

# api key -> (through version, its kind up to that version, the kind after it)
BY_VERSION: dict[int, tuple[int, Turn | None, Turn | None]] = {
    # A producer's AddPartitionsToTxn (v3 and below) waits its whole turn; a
    # broker's (v4+, KIP-890: many producers' partitions verified or added per
    # request) takes none: those must not wait on each other's coordinator writes.
    ApiKey.ADD_PARTITIONS_TO_TXN: (PRODUCERS_ADD_PARTITIONS_THROUGH, Turn.WHOLE, None),
    # OffsetCommit v0 writes ZooKeeper on a worker thread: its whole turn. v1+
    # is handed to the group coordinator as it starts, which writes a group's
    # commits in the order handed, applies them in the order written, and
    # goes on with an OffsetFetch, OffsetDelete or DeleteGroups of the group
    # only once the commits handed before it are applied (offset_manager.py:
    # checked_after_commits): so a consumer's pipelined commits are replicated
    # together, not one round of replication each (bench/bench_commits.py:
    # several times the commits a second on 3 brokers), and still land
    # oldest first.
    ApiKey.OFFSET_COMMIT: (0, Turn.WHOLE, Turn.AT_THE_START),
}


def by_version(api_key: int, version: int) -> Turn | None:
    """The kind of a BY_VERSION request type's turn at ``version``."""
    through, up_to, after = BY_VERSION[api_key]
    return up_to if version <= through else after


ORDERED: dict[int, Turn] = {
    ApiKey.PRODUCE: Turn.AT_THE_EFFECT,
    # admin changes, each on a worker thread: a pipelined CreatePartitions or
    # config change must find the topic created before it, and the last of
    # several changes must be the one that stays
    **{key: Turn.WHOLE for key in (
        ApiKey.CREATE_TOPICS, ApiKey.DELETE_TOPICS, ApiKey.CREATE_PARTITIONS,
        ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS,
        ApiKey.CREATE_ACLS, ApiKey.DELETE_ACLS, ApiKey.ALTER_CLIENT_QUOTAS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        ApiKey.ALTER_REPLICA_LOG_DIRS, ApiKey.ELECT_LEADERS,
        # and the requests that read what those change: an admin client's
        # Create then Describe sees what it created
        ApiKey.METADATA, ApiKey.DESCRIBE_TOPIC_PARTITIONS, ApiKey.DESCRIBE_CONFIGS,
        ApiKey.DESCRIBE_ACLS, ApiKey.DESCRIBE_CLIENT_QUOTAS,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, ApiKey.LIST_PARTITION_REASSIGNMENTS,
        ApiKey.DESCRIBE_LOG_DIRS,
        # committed offsets (OffsetCommit: BY_VERSION below): a fetch behind a
        # commit must read it; a transactional commit may first wait on the
        # transaction coordinator (KIP-890)
        ApiKey.OFFSET_FETCH, ApiKey.TXN_OFFSET_COMMIT,
        # a group's deletions are applied once written (replicated), and what
        # reads the group behind them must not find it as it was
        ApiKey.OFFSET_DELETE, ApiKey.DELETE_GROUPS, ApiKey.DESCRIBE_GROUPS,
        ApiKey.LIST_GROUPS, ApiKey.CONSUMER_GROUP_DESCRIBE,
        # a transaction's state changes: while one is written (acks=all) the
        # coordinator refuses the next CONCURRENT_TRANSACTIONS, where Kafka
        # would only have read it once the first was answered (librdkafka
        # sends an abort right behind an unanswered AddPartitionsToTxn)
        ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN,
        # a share group's offsets are changed after awaits (the share
        # coordinator's state written first), and what reads them must not
        # find them as they were
        ApiKey.ALTER_SHARE_GROUP_OFFSETS, ApiKey.DELETE_SHARE_GROUP_OFFSETS,
        ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS, ApiKey.SHARE_GROUP_DESCRIBE)},
    **{key: Turn.BY_VERSION for key in (ApiKey.ADD_PARTITIONS_TO_TXN, ApiKey.OFFSET_COMMIT)},
    **{key: Turn.AT_THE_START for key in (
        ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
        ApiKey.CONSUMER_GROUP_HEARTBEAT)},
}
