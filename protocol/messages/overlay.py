"""Data only: what samsa serves, and how it widens Kafka 4's schemas back to old versions.

Why an overlay: kafka-python 3.0.12 ships Apache Kafka 4.x message schemas, and
Kafka 4.0 (KIP-896) raised the minimum ``validVersions`` of several APIs.  samsa
deliberately keeps serving the old versions (0.8-0.10 era clients).  Kafka only
narrowed ``validVersions``; the per-field ``versions`` ranges of the old fields
were left in the 4.x files (e.g. OffsetCommit ``CommitTimestamp`` "1", Fetch
``MaxBytes`` "3+", ListOffsets ``MaxNumOffsets``/``OldStyleOffsets`` "0").  This was
checked field by field against the 3.x schema files of apache/kafka and the old
hand-written kafka-python/aiokafka protocol classes, so widening ``validVersions``
alone reproduces the old wire layouts.

``ADD_FIELDS`` is the hook for a field that existed only in a dropped version and
was deleted from the 4.x file; none of the APIs we serve needs one today, but the
compiler applies it so such a fix stays data, not code.
"""
from __future__ import annotations

from typing import Any


# API name -> validVersions to use instead of the schema's (request and response alike).
VALID_VERSIONS = {
    "Produce": "0-13",               # 4.x: 3-13
    "Fetch": "0-18",                 # 4.x: 4-18
    "ListOffsets": "0-11",           # 4.x: 1-11
    "OffsetCommit": "0-10",          # 4.x: 2-10
    "OffsetFetch": "0-10",           # 4.x: 1-10
    "CreateTopics": "0-7",           # 4.x: 2-7
    "DeleteTopics": "0-6",           # 4.x: 1-6
    "OffsetForLeaderEpoch": "0-4",   # 4.x: 2-4
    "DescribeConfigs": "0-4",        # 4.x: 1-4
    "DescribeLogDirs": "0-5",        # 4.x: 1-5
    "AlterReplicaLogDirs": "0-2",    # 4.x: 1-2 (v0 is v1 without throttle-first)
    "DescribeAcls": "0-3",           # 4.x: 1-3
    "CreateAcls": "0-3",             # 4.x: 1-3
    "DeleteAcls": "0-3",             # 4.x: 1-3
}

# Schema message name -> list of (path of struct field names from the top, field json,
# insert-before field name or None to append).  Empty on purpose (see module docstring).
ADD_FIELDS: dict[str, list[tuple[tuple[str, ...], dict[str, Any], str | None]]] = {}

# What the broker serves and advertises in ApiVersions: name -> (key, min, max).
# The codecs accept every version of the (widened) schema; these ranges gate
# decode_request, so anything else is answered with UNSUPPORTED_VERSION.
SERVED = {
    "ApiVersions": (18, 0, 4),
    # v0 has a request header without client id; Kafka's own brokers send v1+
    "ControlledShutdown": (7, 1, 3),
    "Metadata": (3, 0, 13),
    "Produce": (0, 0, 13),
    "Fetch": (1, 0, 18),
    "ListOffsets": (2, 0, 10),
    "OffsetCommit": (8, 0, 9),
    "OffsetFetch": (9, 0, 9),
    "FindCoordinator": (10, 0, 6),
    "JoinGroup": (11, 0, 9),
    "Heartbeat": (12, 0, 4),
    "LeaveGroup": (13, 0, 5),
    "SyncGroup": (14, 0, 5),
    "DescribeGroups": (15, 0, 6),
    "ListGroups": (16, 0, 5),
    "DeleteGroups": (42, 0, 2),
    # KIP-848 consumer groups (group.protocol=consumer), as Kafka 4.x serves them
    "ConsumerGroupHeartbeat": (68, 0, 1),
    "ConsumerGroupDescribe": (69, 0, 1),
    "OffsetDelete": (47, 0, 0),
    "CreateTopics": (19, 0, 7),
    "DeleteTopics": (20, 0, 6),
    "CreatePartitions": (37, 0, 3),
    "DeleteRecords": (21, 0, 2),
    "InitProducerId": (22, 0, 5),
    # Transactions (KIP-98/447) and transactions v2 (KIP-890 part 2: EndTxn v5,
    # AddPartitionsToTxn v5 between brokers); clients take up v2 only when the
    # transaction.version feature in ApiVersions says 2.
    "AddPartitionsToTxn": (24, 0, 5),
    "AddOffsetsToTxn": (25, 0, 4),
    "EndTxn": (26, 0, 5),
    "TxnOffsetCommit": (28, 0, 5),
    "DescribeTransactions": (65, 0, 0),
    "ListTransactions": (66, 0, 2),
    "OffsetForLeaderEpoch": (23, 0, 4),
    "DescribeConfigs": (32, 0, 4),
    "AlterConfigs": (33, 0, 2),
    "IncrementalAlterConfigs": (44, 0, 1),
    "DescribeCluster": (60, 0, 2),
    "ElectLeaders": (43, 0, 2),
    "AlterPartitionReassignments": (45, 0, 1),
    "ListPartitionReassignments": (46, 0, 0),
    "DescribeLogDirs": (35, 0, 5),
    "AlterReplicaLogDirs": (34, 0, 2),
    "DescribeTopicPartitions": (75, 0, 0),
    # KIP-1142 (Kafka 4.1): v0 is the former ListClientMetricsResources
    "ListConfigResources": (74, 0, 1),
    "WriteTxnMarkers": (27, 1, 2),
    "DescribeProducers": (61, 0, 0),
    # SASL (KIP-43, KIP-152, KIP-368) and SCRAM credentials (KIP-554)
    "SaslHandshake": (17, 0, 1),
    "SaslAuthenticate": (36, 0, 2),
    "DescribeUserScramCredentials": (50, 0, 0),
    "AlterUserScramCredentials": (51, 0, 0),
    "DescribeClientQuotas": (48, 0, 1),
    "AlterClientQuotas": (49, 0, 1),
    "DescribeAcls": (29, 0, 3),
    "CreateAcls": (30, 0, 3),
    "DeleteAcls": (31, 0, 3),
    # KIP-932 share groups: v1 is the first stable version (Kafka 4.1); v0 was
    # early access only, and ShareFetch/ShareAcknowledge v2 (KIP-1206/1222's
    # acquire modes and renewals) are not offered
    "ShareGroupHeartbeat": (76, 1, 1),
    "ShareGroupDescribe": (77, 1, 1),
    "ShareFetch": (78, 1, 1),
    "ShareAcknowledge": (79, 1, 1),
    "DescribeShareGroupOffsets": (90, 0, 1),  # v1 adds the lag (Kafka 4.1)
    "AlterShareGroupOffsets": (91, 0, 0),
    "DeleteShareGroupOffsets": (92, 0, 0),
    # the share coordinator's inter-broker APIs (share-partition leaders ask it)
    "InitializeShareGroupState": (83, 0, 0),
    "ReadShareGroupState": (84, 0, 0),
    "WriteShareGroupState": (85, 0, 0),
    "DeleteShareGroupState": (86, 0, 0),
    "ReadShareGroupStateSummary": (87, 0, 0),
}
