"""Which of a connection's requests take effect in the order they arrived,
and where each one's turn (network/turns.py) ends.

Kafka reads one request of a connection at a time, so whatever a client
pipelines on one connection takes effect in the order sent, and a request
sees what every earlier one did. samsa handles a connection's requests
concurrently, which keeps that order only where a request takes effect
before its first await. The request types below may wait first (a worker
thread, ZooKeeper, the transaction coordinator), so each takes a turn on its
connection when it arrives (the dispatcher, before any await) and goes on
only once every earlier turn has ended. Every other request type takes
effect before its first await (the group and transaction coordinators decide
on their own loop, in the order the calls were posted), or is one whose
order no client relies on and whose waiting must not hold others back
(a long-polling Fetch).
"""
from __future__ import annotations

import enum

from samsa.protocol.model import ApiKey


class Turn(enum.Enum):
    # The handler waits for its turn right before it takes effect and ends it
    # right after (RequestContext.may_append / wait_to_append / appended), so
    # acks=all Produce requests still wait for replication together.
    AT_THE_EFFECT = 1
    # The handler starts once every earlier turn has ended, and its turn ends
    # with it: what it changes runs on a worker thread (or waits on ZooKeeper)
    # and what it reads must show every earlier change of the connection.
    WHOLE = 2


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
        # committed offsets: v0 goes to ZooKeeper on a worker thread (async
        # commits landing out of order would move the group's offset back);
        # v1+ is answered once replicated, and a fetch behind a commit must
        # read it; a transactional commit may first wait on the transaction
        # coordinator (KIP-890)
        ApiKey.OFFSET_COMMIT, ApiKey.OFFSET_FETCH, ApiKey.TXN_OFFSET_COMMIT)},
}
