"""BrokerConfig: the broker's typed configuration, with Kafka's key names and defaults.

Each field of BrokerConfig is declared with the Kafka key it comes from (its
type, default, validator and doc live in the field's metadata), so this class
is the single table of broker keys.  A few fields are *resolved* from several
keys the way Kafka resolves them (log.dirs over log.dir, log.roll.ms over
log.roll.hours, log.retention.ms over .minutes over .hours, ...); those fields
always hold the effective value, never None.

Build one with `load_broker_config()` (file, environment, overrides) or
`BrokerConfig.from_dict({...})`; plain `BrokerConfig()` is all defaults.
"""
from __future__ import annotations

import dataclasses
import functools
import ipaddress
import logging
import os
import re
from typing import Any, Callable, Iterable, Iterator, Mapping, NamedTuple, Sequence

from .errors import ConfigError
from .properties import load_properties
from .topic import TopicConfig
from .zk_connect import parse_connect
from .topic_keys import (CLEANUP_POLICIES, COMPRESSION_TYPES, MIN_SEGMENT_BYTES,
                         TIMESTAMP_TYPES, TOPIC_KEYS, TopicKey, drop_removed_keys, to_attr_value)
from .values import (INT_MAX, LONG_MAX, ConfigKey, ConfigType as T, OneOf, Predicate,
                     SubsetOf, Validator, at_least, between)

log = logging.getLogger("config")


class Listener(NamedTuple):
    """One listener: name (upper case, e.g. PLAINTEXT), host ("" = all interfaces), port."""
    name: str
    host: str
    port: int


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
DEFAULT_LISTENERS = "PLAINTEXT://:9092"
DEFAULT_SECURITY_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
# The one replica selector Kafka ships (KIP-392); samsa implements its rules
# itself, so it is the only value replica.selector.class takes.
RACK_AWARE_REPLICA_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
# authorizer.class.name values that turn on ACLs (Kafka's ZooKeeper-era class,
# its predecessor, and KRaft's): the rules are AclAuthorizer's in every case.
AUTHORIZER_CLASS_NAMES = ("kafka.security.authorizer.AclAuthorizer",
                          "kafka.security.auth.SimpleAclAuthorizer",
                          "org.apache.kafka.metadata.authorizer.StandardAuthorizer")
# Hosts a client cannot connect to: advertise "localhost" instead so local clients work.
_WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def _key(name: str, type_: T, default: Any, validator: Validator | None = None, doc: str = "", *,
         value: Any = dataclasses.MISSING, factory: Callable[[], Any] | None = None) -> Any:
    """Declare a field fed by Kafka key `name`.

    `default` is the key's own default (what DescribeConfigs shows, may be None);
    `value` / `factory` give the field's default when the field holds a resolved
    or parsed form that differs from the key's default.
    """
    ck = ConfigKey(name, type_, default, validator, doc, sensitive=type_ is T.PASSWORD)
    md = {"key": ck}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=md)
    if value is dataclasses.MISSING:
        value = default
    if isinstance(value, list):
        v = list(value)
        return dataclasses.field(default_factory=lambda: list(v), metadata=md)
    return dataclasses.field(default=value, metadata=md)


def _default_listeners() -> list[Listener]:
    return [Listener("PLAINTEXT", "", 9092)]


def _default_advertised() -> list[Listener]:
    return [Listener("PLAINTEXT", "localhost", 9092)]


@dataclasses.dataclass(frozen=True)
class BrokerConfig:
    # ------------------------------------------------------------ identity
    broker_id: int = _key("broker.id", T.INT, 0, at_least(0),
                          "This broker's id (node.id is accepted as a synonym).")
    node_id: int | None = _key("node.id", T.INT, None, at_least(0),
                               "KRaft-style synonym of broker.id; broker.id wins if both are set.")
    broker_rack: str | None = _key("broker.rack", T.STRING, None, None, "Rack of this broker.")
    cluster_id: str | None = _key(
        "cluster.id", T.STRING, None, None,
        "samsa: cluster id to use; None = keep/generate the one in meta.properties.")

    # ------------------------------------------------------------ network
    listeners: list[Listener] = _key(
        "listeners", T.STRING, DEFAULT_LISTENERS, None,
        "Comma list of NAME://host:port to bind; empty host = all interfaces, port 0 = any.",
        factory=_default_listeners)
    advertised_listeners: list[Listener] = _key(
        "advertised.listeners", T.STRING, None, None,
        "Listeners given to clients; default: listeners with a wildcard host as localhost.",
        factory=_default_advertised)
    listener_security_protocol_map: dict[str, str] = _key(
        "listener.security.protocol.map", T.STRING, DEFAULT_SECURITY_PROTOCOL_MAP, None,
        "Listener name -> security protocol.",
        factory=lambda: _parse_protocol_map(DEFAULT_SECURITY_PROTOCOL_MAP))
    inter_broker_listener_name: str | None = _key(
        "inter.broker.listener.name", T.STRING, None, None, "Listener brokers use between them.")
    # 1, not Kafka's 3: samsa's processor threads share one interpreter lock, so
    # more of them add no throughput (4 producers: 447 / 472 / 439 MB/s with 1 /
    # 2 / 4) but each hand-off between them waits for the lock: acks=all RF 3 at
    # 10,000 records/s had p99 32-194 ms with 3 and 16-25 ms with 1 (bench/).
    num_network_threads: int = _key("num.network.threads", T.INT, 1, at_least(1),
                                    "Network processor threads (event loops). samsa's share one "
                                    "interpreter lock: more than one adds no throughput, and "
                                    "adds latency.")
    num_io_threads: int = _key("num.io.threads", T.INT, 8, at_least(1),
                               "Threads for request handling / disk work.")
    background_threads: int = _key("background.threads", T.INT, 10, at_least(1),
                                   "Threads for background tasks.")
    queued_max_requests: int = _key("queued.max.requests", T.INT, 500, at_least(1),
                                    "Requests queued before network threads stop reading.")
    queued_max_request_bytes: int = _key(
        "queued.max.request.bytes", T.LONG, -1, at_least(-1),
        "Memory for requests being received, summed over all connections; a connection "
        "waits when it is used up. -1: socket.request.max.bytes times two plus 64 MiB, "
        "so partly received frames can never hold the broker's memory hostage.")
    socket_request_max_bytes: int = _key("socket.request.max.bytes", T.INT, 104857600,
                                         at_least(1), "Largest request frame accepted.")
    socket_send_buffer_bytes: int = _key("socket.send.buffer.bytes", T.INT, 102400, at_least(-1),
                                         "SO_SNDBUF of client sockets (-1: OS default).")
    socket_receive_buffer_bytes: int = _key("socket.receive.buffer.bytes", T.INT, 102400,
                                            at_least(-1),
                                            "SO_RCVBUF of client sockets (-1: OS default).")
    socket_listen_backlog_size: int = _key("socket.listen.backlog.size", T.INT, 50, at_least(1),
                                           "listen() backlog.")
    max_connections: int = _key("max.connections", T.INT, INT_MAX, at_least(0),
                                "Most client connections at once.")
    max_connections_per_ip: int = _key("max.connections.per.ip", T.INT, INT_MAX, at_least(0),
                                       "Most connections from one address.")
    max_connections_per_ip_overrides: str = _key(
        "max.connections.per.ip.overrides", T.STRING, "", None, "host:count,... exceptions.")
    max_connection_creation_rate: int = _key(
        "max.connection.creation.rate", T.INT, INT_MAX, at_least(0),
        "New connections per second the broker accepts over its listeners (the "
        "inter-broker one of several excepted); above it the acceptor waits. Per "
        "listener as listener.name.<listener>.max.connection.creation.rate.")
    connections_max_idle_ms: int = _key("connections.max.idle.ms", T.LONG, 600000, None,
                                        "Idle connections are closed after this long.")
    request_receive_timeout_ms: int = _key(
        "request.receive.timeout.ms", T.INT, 30000, at_least(1),
        "samsa: a request must arrive in full within this long of its first byte (time "
        "the broker spends not reading it does not count), else the connection is closed: "
        "a client that stops or trickles mid-request gives back the memory it holds.")
    # SASL (broker/security/sasl/settings.py reads these and the per-listener
    # listener.name.<listener>.* forms, and refuses bad ones at start-up).
    sasl_enabled_mechanisms: list[str] = _key(
        "sasl.enabled.mechanisms", T.LIST, ["GSSAPI"], None,
        "SASL mechanisms served on SASL_* listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. "
        "Kafka's default GSSAPI is not implemented, so unset means PLAIN.")
    sasl_mechanism_inter_broker_protocol: str = _key(
        "sasl.mechanism.inter.broker.protocol", T.STRING, "GSSAPI", None,
        "Mechanism a broker logs in to the others with on a SASL inter-broker listener "
        "(Kafka's default GSSAPI is not implemented, so unset means PLAIN).")
    connections_max_reauth_ms: int = _key(
        "connections.max.reauth.ms", T.LONG, 0, at_least(0),
        "SASL session lifetime (KIP-368): a connection that has not re-authenticated "
        "within it is closed at its next request; 0 = sessions never expire.")
    sasl_server_max_receive_size: int = _key(
        "sasl.server.max.receive.size", T.INT, 524288, at_least(1),
        "Largest frame a SASL listener reads from a connection that has not "
        "authenticated yet (larger ones close it).")
    connections_failed_authentication_delay_ms: int = _key(
        "connections.failed.authentication.delay.ms", T.INT, 100, at_least(0),
        "How long the answer to a failed SASL authentication (and the close after "
        "it) is held back, slowing down password guessing.")
    java_security_auth_login_config: str | None = _key(
        "java.security.auth.login.config", T.STRING, None, None,
        "JAAS file (KafkaServer or <listener>.KafkaServer section) for SASL/PLAIN users; "
        "Kafka takes it as a JVM system property, samsa as this key.")
    fetch_max_bytes: int = _key("fetch.max.bytes", T.INT, 57671680, at_least(1024),
                                "Most bytes one fetch response returns.")

    # ------------------------------------------------------------ log dirs
    log_dirs: list[str] = _key("log.dirs", T.STRING, None, None,
                          "Comma list of data directories (wins over log.dir).",
                          value=["/tmp/kafka-logs"])
    log_dir: str = _key("log.dir", T.STRING, "/tmp/kafka-logs", None,
                        "Data directory, used when log.dirs is not set.")
    num_recovery_threads_per_data_dir: int = _key(
        "num.recovery.threads.per.data.dir", T.INT, 1, at_least(1),
        "Threads per data dir for recovery at startup and flush at shutdown.")
    # samsa's own key (Kafka keeps every segment open and needs a ulimit to match)
    samsa_log_open_segment_files_max: int = _key(
        "samsa.log.open.segment.files.max", T.INT, -1,
        Predicate(lambda v: v == -1 or (isinstance(v, int) and v >= 1), "-1 or >= 1"),
        "samsa: segment files (.log) held open at once; past it the least recently "
        "used are closed and opened again when next read or written. -1: a quarter "
        "of the open-file limit (the hard one, which the broker raises its soft one to).")

    # ------------------------------------------------------------ topics
    num_partitions: int = _key("num.partitions", T.INT, 1, at_least(1),
                               "Partitions of an auto-created topic.")
    default_replication_factor: int = _key("default.replication.factor", T.INT, 1, at_least(1),
                                           "Replication factor of an auto-created topic.")
    auto_create_topics_enable: bool = _key("auto.create.topics.enable", T.BOOLEAN, True, None,
                                           "Create a topic when a client asks for an unknown one.")
    delete_topic_enable: bool = _key("delete.topic.enable", T.BOOLEAN, True, None,
                                     "Allow DeleteTopics.")
    min_insync_replicas: int = _key("min.insync.replicas", T.INT, 1, at_least(1),
                                    "Default min.insync.replicas of topics.")
    unclean_leader_election_enable: bool = _key(
        "unclean.leader.election.enable", T.BOOLEAN, False, None,
        "Default unclean.leader.election.enable of topics.")
    message_max_bytes: int = _key("message.max.bytes", T.INT, 1048588, at_least(0),
                                  "Largest record batch accepted (topic: max.message.bytes).")
    compression_type: str = _key("compression.type", T.STRING, "producer",
                                 OneOf(COMPRESSION_TYPES), "Codec of stored batches.")
    compression_gzip_level: int = _key("compression.gzip.level", T.INT, -1, between(-1, 9),
                                       "gzip level when recompressing.")
    compression_lz4_level: int = _key("compression.lz4.level", T.INT, 9, between(1, 17),
                                      "lz4 level when recompressing.")
    compression_zstd_level: int = _key("compression.zstd.level", T.INT, 3,
                                       between(-131072, 22), "zstd level when recompressing.")

    # ------------------------------------------------------------ segments
    log_segment_bytes: int = _key("log.segment.bytes", T.INT, 1073741824,
                                  at_least(MIN_SEGMENT_BYTES), "Size at which a segment rolls.")
    log_roll_ms: int = _key("log.roll.ms", T.LONG, None, at_least(1),
                            "Age at which a segment rolls (resolved: wins over log.roll.hours).",
                            value=168 * 3_600_000)
    log_roll_hours: int = _key("log.roll.hours", T.INT, 168, at_least(1),
                               "Age at which a segment rolls, in hours.")
    log_roll_jitter_ms: int = _key("log.roll.jitter.ms", T.LONG, None, at_least(0),
                                   "Roll jitter (resolved: wins over log.roll.jitter.hours).",
                                   value=0)
    log_roll_jitter_hours: int = _key("log.roll.jitter.hours", T.INT, 0, at_least(0),
                                      "Roll jitter in hours.")
    log_index_interval_bytes: int = _key("log.index.interval.bytes", T.INT, 4096, at_least(0),
                                         "Bytes between offset index entries.")
    log_index_size_max_bytes: int = _key("log.index.size.max.bytes", T.INT, 10485760,
                                         at_least(4), "Size of index files.")
    log_preallocate: bool = _key("log.preallocate", T.BOOLEAN, False, None,
                                 "Preallocate segment files.")
    log_segment_delete_delay_ms: int = _key("log.segment.delete.delay.ms", T.LONG, 60000,
                                            at_least(0), "Delay before deleted files go.")

    # ------------------------------------------------------------ retention
    log_retention_ms: int = _key(
        "log.retention.ms", T.LONG, None, None,
        "Retention time (resolved: ms > minutes > hours; any negative = -1 = forever).",
        value=168 * 3_600_000)
    log_retention_minutes: int | None = _key("log.retention.minutes", T.INT, None, None,
                                             "Retention time in minutes.")
    log_retention_hours: int = _key("log.retention.hours", T.INT, 168, None,
                                    "Retention time in hours.")
    log_retention_bytes: int = _key("log.retention.bytes", T.LONG, -1, None,
                                    "Partition size limit (-1: none).")
    log_retention_check_interval_ms: int = _key("log.retention.check.interval.ms", T.LONG,
                                                300000, at_least(1),
                                                "How often retention is enforced.")

    # ------------------------------------------------------------ flush
    log_flush_interval_messages: int = _key("log.flush.interval.messages", T.LONG, LONG_MAX,
                                            at_least(1), "fsync after this many messages.")
    log_flush_interval_ms: int = _key(
        "log.flush.interval.ms", T.LONG, None, None,
        "fsync after this long (resolved: falls back to log.flush.scheduler.interval.ms).",
        value=LONG_MAX)
    log_flush_scheduler_interval_ms: int = _key("log.flush.scheduler.interval.ms", T.LONG,
                                                LONG_MAX, None, "How often flush is checked.")
    log_flush_offset_checkpoint_interval_ms: int = _key(
        "log.flush.offset.checkpoint.interval.ms", T.INT, 60000, at_least(0),
        "How often recovery-point checkpoints are written.")
    log_flush_start_offset_checkpoint_interval_ms: int = _key(
        "log.flush.start.offset.checkpoint.interval.ms", T.INT, 60000, at_least(0),
        "How often log-start-offset checkpoints are written.")
    replica_high_watermark_checkpoint_interval_ms: int = _key(
        "replica.high.watermark.checkpoint.interval.ms", T.LONG, 5000, at_least(1),
        "How often high watermarks are written to replication-offset-checkpoint.")

    # ------------------------------------------------------------ timestamps
    log_message_timestamp_type: str = _key("log.message.timestamp.type", T.STRING, "CreateTime",
                                           OneOf(TIMESTAMP_TYPES), "Timestamp kept in batches.")
    log_message_timestamp_difference_max_ms: int = _key(
        "log.message.timestamp.difference.max.ms", T.LONG, LONG_MAX, at_least(0),
        "Deprecated: largest CreateTime skew accepted.")
    log_message_timestamp_before_max_ms: int = _key(
        "log.message.timestamp.before.max.ms", T.LONG, LONG_MAX, at_least(0),
        "How far in the past a CreateTime may be.")
    log_message_timestamp_after_max_ms: int = _key(
        "log.message.timestamp.after.max.ms", T.LONG, LONG_MAX, at_least(0),
        "How far in the future a CreateTime may be.")
    log_message_downconversion_enable: bool = _key(
        "log.message.downconversion.enable", T.BOOLEAN, True, None,
        "Down-convert batches for old fetchers.")

    # ------------------------------------------------------------ cleaner
    log_cleanup_policy: list[str] = _key("log.cleanup.policy", T.LIST, ["delete"],
                                    SubsetOf(CLEANUP_POLICIES, allow_empty=True),
                                    "delete and/or compact; empty keeps everything.")
    log_cleaner_enable: bool = _key("log.cleaner.enable", T.BOOLEAN, True, None,
                                    "Run the compaction cleaner.")
    log_cleaner_threads: int = _key("log.cleaner.threads", T.INT, 1, at_least(0),
                                    "Cleaner threads.")
    log_cleaner_backoff_ms: int = _key("log.cleaner.backoff.ms", T.LONG, 15000, at_least(0),
                                       "Cleaner sleep when there is nothing to clean.")
    log_cleaner_dedupe_buffer_size: int = _key("log.cleaner.dedupe.buffer.size", T.LONG,
                                               134217728, None, "Cleaner dedupe memory.")
    log_cleaner_delete_retention_ms: int = _key("log.cleaner.delete.retention.ms", T.LONG,
                                                86400000, at_least(0), "Tombstone retention.")
    log_cleaner_min_cleanable_ratio: float = _key("log.cleaner.min.cleanable.ratio", T.DOUBLE,
                                                  0.5, between(0, 1),
                                                  "Dirty ratio that triggers cleaning.")
    log_cleaner_min_compaction_lag_ms: int = _key("log.cleaner.min.compaction.lag.ms", T.LONG, 0,
                                                  at_least(0), "Shortest uncompacted time.")
    log_cleaner_max_compaction_lag_ms: int = _key("log.cleaner.max.compaction.lag.ms", T.LONG,
                                                  LONG_MAX, at_least(1),
                                                  "Longest uncompacted time.")

    # ------------------------------------------------------------ metadata store
    zookeeper_connect: str | None = _key(
        "zookeeper.connect", T.STRING, None, None,
        "host:port[,host:port][/chroot] of ZooKeeper; unset = embedded metadata store.")
    zookeeper_session_timeout_ms: int = _key("zookeeper.session.timeout.ms", T.INT, 18000,
                                             at_least(1), "ZooKeeper session timeout.")
    zookeeper_connection_timeout_ms: int | None = _key(
        "zookeeper.connection.timeout.ms", T.INT, None, at_least(1),
        "ZooKeeper connect timeout (unset: session timeout).")
    zookeeper_max_in_flight_requests: int = _key("zookeeper.max.in.flight.requests", T.INT, 10,
                                                 at_least(1), "Pipelined ZooKeeper requests.")
    zookeeper_set_acl: bool = _key("zookeeper.set.acl", T.BOOLEAN, False, None,
                                   "Create znodes with secure ACLs.")
    # samsa's own key (Kafka 0.8.2 had the same copy as the consumer's dual.commit.enabled)
    zookeeper_consumer_offsets_mirror_enable: bool = _key(
        "zookeeper.consumer.offsets.mirror.enable", T.BOOLEAN, True, None,
        "ZooKeeper mode: copy v1+ committed offsets to /consumers/<group>/offsets "
        "for tools that read the ZooKeeper-era registry.")

    # ------------------------------------------------------------ groups / offsets
    group_initial_rebalance_delay_ms: int = _key("group.initial.rebalance.delay.ms", T.INT, 3000,
                                                 at_least(0),
                                                 "Wait for more members before the first rebalance.")
    group_min_session_timeout_ms: int = _key("group.min.session.timeout.ms", T.INT, 6000, None,
                                             "Smallest session timeout a member may ask for.")
    group_max_session_timeout_ms: int = _key("group.max.session.timeout.ms", T.INT, 1800000, None,
                                             "Largest session timeout a member may ask for.")
    group_max_size: int = _key("group.max.size", T.INT, INT_MAX, at_least(1),
                               "Most members in one group.")
    # KIP-848 consumer groups (group.protocol=consumer)
    group_consumer_session_timeout_ms: int = _key(
        "group.consumer.session.timeout.ms", T.INT, 45000, at_least(1),
        "Session timeout of consumer-protocol group members.")
    group_consumer_min_session_timeout_ms: int = _key(
        "group.consumer.min.session.timeout.ms", T.INT, 45000, at_least(1),
        "Smallest consumer.session.timeout.ms a group may set.")
    group_consumer_max_session_timeout_ms: int = _key(
        "group.consumer.max.session.timeout.ms", T.INT, 60000, at_least(1),
        "Largest consumer.session.timeout.ms a group may set.")
    group_consumer_heartbeat_interval_ms: int = _key(
        "group.consumer.heartbeat.interval.ms", T.INT, 5000, at_least(1),
        "Heartbeat interval told to consumer-protocol group members.")
    group_consumer_min_heartbeat_interval_ms: int = _key(
        "group.consumer.min.heartbeat.interval.ms", T.INT, 5000, at_least(1),
        "Smallest consumer.heartbeat.interval.ms a group may set.")
    group_consumer_max_heartbeat_interval_ms: int = _key(
        "group.consumer.max.heartbeat.interval.ms", T.INT, 15000, at_least(1),
        "Largest consumer.heartbeat.interval.ms a group may set.")
    group_consumer_max_size: int = _key("group.consumer.max.size", T.INT, INT_MAX, at_least(1),
                                        "Most members in one consumer-protocol group.")
    group_consumer_assignors: str = _key(
        "group.consumer.assignors", T.STRING, "uniform,range", None,
        "Server-side assignors of consumer-protocol groups, the first the default "
        "(uniform, range; Kafka's class names are accepted).")
    group_consumer_migration_policy: str = _key(
        "group.consumer.migration.policy", T.STRING, "bidirectional",
        OneOf(("disabled", "upgrade", "downgrade", "bidirectional")),
        "Whether a classic group converts online to a consumer-protocol group when a "
        "consumer-protocol member joins it (upgrade), back when its last one leaves "
        "(downgrade), both or neither.")
    offsets_topic_num_partitions: int = _key("offsets.topic.num.partitions", T.INT, 50,
                                             at_least(1), "Partitions of __consumer_offsets.")
    offsets_topic_replication_factor: int = _key("offsets.topic.replication.factor", T.SHORT, 3,
                                                 at_least(1), "Replicas of __consumer_offsets.")
    offsets_topic_segment_bytes: int = _key("offsets.topic.segment.bytes", T.INT, 104857600,
                                            at_least(1), "Segment size of __consumer_offsets.")
    offsets_retention_minutes: int = _key("offsets.retention.minutes", T.INT, 10080, at_least(1),
                                          "How long committed offsets of empty groups are kept.")
    offsets_retention_check_interval_ms: int = _key("offsets.retention.check.interval.ms",
                                                    T.LONG, 600000, at_least(1),
                                                    "How often stale offsets are expired.")
    offsets_commit_timeout_ms: int = _key("offsets.commit.timeout.ms", T.INT, 5000, at_least(1),
                                          "Offset commit timeout.")
    offsets_load_buffer_size: int = _key("offsets.load.buffer.size", T.INT, 5242880, at_least(1),
                                         "Read size when loading offsets.")

    # ------------------------------------------------------------ transactions / producers
    transaction_state_log_num_partitions: int = _key(
        "transaction.state.log.num.partitions", T.INT, 50, at_least(1),
        "Partitions of __transaction_state.")
    transaction_state_log_replication_factor: int = _key(
        "transaction.state.log.replication.factor", T.SHORT, 3, at_least(1),
        "Replicas of __transaction_state.")
    transaction_state_log_min_isr: int = _key("transaction.state.log.min.isr", T.INT, 2,
                                              at_least(1), "min ISR of __transaction_state.")
    transaction_max_timeout_ms: int = _key("transaction.max.timeout.ms", T.INT, 900000,
                                           at_least(1), "Largest transaction timeout allowed.")
    transactional_id_expiration_ms: int = _key("transactional.id.expiration.ms", T.INT,
                                               604800000, at_least(1),
                                               "Idle transactional ids expire after this.")
    transaction_partition_verification_enable: bool = _key(
        "transaction.partition.verification.enable", T.BOOLEAN, True, None,
        "Partition leaders ask the transaction coordinator before a producer's first "
        "transactional write to a partition (KIP-890: no hanging transactions).")
    transaction_version: int = _key(
        "transaction.version", T.SHORT, 2, between(0, 2),
        "The finalized level of the transaction.version feature, advertised in ApiVersions "
        "(Kafka sets it with kafka-features / kafka-storage format): 2 offers transactions "
        "v2 (KIP-890 part 2: EndTxn v5, an epoch bump per transaction, partitions added "
        "on their first write), 1 only writes the flexible __transaction_state records, "
        "0 is the classic protocol throughout.")
    transaction_state_log_segment_bytes: int = _key(
        "transaction.state.log.segment.bytes", T.INT, 104857600, at_least(1),
        "Segment size of __transaction_state.")
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = _key(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms", T.INT, 10000,
        at_least(1), "How often the coordinator aborts transactions past their timeout.")
    transaction_remove_expired_transaction_cleanup_interval_ms: int = _key(
        "transaction.remove.expired.transaction.cleanup.interval.ms", T.INT, 3600000,
        at_least(1), "How often the coordinator forgets expired transactional ids.")
    producer_id_expiration_ms: int = _key(
        "producer.id.expiration.ms", T.INT, 86400000, at_least(1),
        "How long a partition remembers a producer id (its epoch, sequences) after the "
        "producer's last write, unless it has a transaction open.")
    producer_id_expiration_check_interval_ms: int = _key(
        "producer.id.expiration.check.interval.ms", T.INT, 600000, at_least(1),
        "How often partitions forget expired producer ids.")
    request_timeout_ms: int = _key(
        "request.timeout.ms", T.INT, 30000, at_least(0),
        "How long the broker's own acks=all appends (transaction markers) wait for "
        "replication before answering REQUEST_TIMED_OUT.")

    # ------------------------------------------------------------ share groups (KIP-932)
    group_share_record_lock_duration_ms: int = _key(
        "group.share.record.lock.duration.ms", T.INT, 30000, at_least(1),
        "How long a share consumer holds the records it fetched before they are offered again.")
    group_share_delivery_count_limit: int = _key(
        "group.share.delivery.count.limit", T.INT, 5, at_least(1),
        "Deliveries of a record before a share group archives it.")
    group_share_partition_max_record_locks: int = _key(
        "group.share.partition.max.record.locks", T.INT, 2000, at_least(1),
        "Records of one share-partition in flight at once.")
    group_share_session_timeout_ms: int = _key(
        "group.share.session.timeout.ms", T.INT, 45000, at_least(1),
        "A share-group member not heard from for this long is dropped.")
    group_share_heartbeat_interval_ms: int = _key(
        "group.share.heartbeat.interval.ms", T.INT, 5000, at_least(1),
        "How often share-group members heartbeat.")
    # bounds of the share.* group configs (GROUP resources), Kafka's defaults
    group_share_min_record_lock_duration_ms: int = _key(
        "group.share.min.record.lock.duration.ms", T.INT, 15000, at_least(1000),
        "Smallest share.record.lock.duration.ms a group may set.")
    group_share_max_record_lock_duration_ms: int = _key(
        "group.share.max.record.lock.duration.ms", T.INT, 60000, at_least(1000),
        "Largest share.record.lock.duration.ms a group may set.")
    group_share_min_delivery_count_limit: int = _key(
        "group.share.min.delivery.count.limit", T.INT, 2, at_least(1),
        "Smallest share.delivery.count.limit a group may set.")
    group_share_max_delivery_count_limit: int = _key(
        "group.share.max.delivery.count.limit", T.INT, 10, at_least(1),
        "Largest share.delivery.count.limit a group may set.")
    group_share_min_partition_max_record_locks: int = _key(
        "group.share.min.partition.max.record.locks", T.INT, 100, at_least(1),
        "Smallest share.partition.max.record.locks a group may set.")
    group_share_max_partition_max_record_locks: int = _key(
        "group.share.max.partition.max.record.locks", T.INT, 4000, at_least(1),
        "Largest share.partition.max.record.locks a group may set.")
    group_share_min_session_timeout_ms: int = _key(
        "group.share.min.session.timeout.ms", T.INT, 45000, at_least(1),
        "Smallest share.session.timeout.ms a group may set.")
    group_share_max_session_timeout_ms: int = _key(
        "group.share.max.session.timeout.ms", T.INT, 60000, at_least(1),
        "Largest share.session.timeout.ms a group may set.")
    group_share_min_heartbeat_interval_ms: int = _key(
        "group.share.min.heartbeat.interval.ms", T.INT, 5000, at_least(1),
        "Smallest share.heartbeat.interval.ms a group may set.")
    group_share_max_heartbeat_interval_ms: int = _key(
        "group.share.max.heartbeat.interval.ms", T.INT, 15000, at_least(1),
        "Largest share.heartbeat.interval.ms a group may set.")
    group_share_max_size: int = _key(
        "group.share.max.size", T.SHORT, 200, at_least(1), "Most members in one share group.")
    share_coordinator_state_topic_num_partitions: int = _key(
        "share.coordinator.state.topic.num.partitions", T.INT, 50, at_least(1),
        "Partitions of __share_group_state.")
    share_coordinator_state_topic_replication_factor: int = _key(
        "share.coordinator.state.topic.replication.factor", T.SHORT, 3, at_least(1),
        "Replicas of __share_group_state.")
    share_coordinator_state_topic_segment_bytes: int = _key(
        "share.coordinator.state.topic.segment.bytes", T.INT, 104857600, at_least(1),
        "Segment size of __share_group_state.")

    # ------------------------------------------------------------ client quotas
    quota_window_num: int = _key(
        "quota.window.num", T.INT, 11, at_least(1),
        "Samples a client quota's rate is measured over.")
    quota_window_size_seconds: int = _key(
        "quota.window.size.seconds", T.INT, 1, at_least(1),
        "Length of each client quota sample.")
    controller_quota_window_num: int = _key(
        "controller.quota.window.num", T.INT, 11, at_least(1),
        "Samples the controller mutation quota is measured over (its token bucket "
        "holds this many samples' worth of controller_mutation_rate).")
    controller_quota_window_size_seconds: int = _key(
        "controller.quota.window.size.seconds", T.INT, 1, at_least(1),
        "Length of each controller mutation quota sample.")

    # ------------------------------------------------------------ misc
    max_incremental_fetch_session_cache_slots: int = _key(
        "max.incremental.fetch.session.cache.slots", T.INT, 1000, at_least(0),
        "Incremental fetch sessions (KIP-227) the broker keeps; 0: none.")
    min_incremental_fetch_session_eviction_ms: int = _key(
        "min.incremental.fetch.session.eviction.ms", T.INT, 120000, at_least(0),
        "How long a fetch session is safe from being evicted by a new one.")
    replica_lag_time_max_ms: int = _key("replica.lag.time.max.ms", T.LONG, 30000, at_least(1),
                                        "Follower lag before it leaves the ISR.")
    replica_fetch_max_bytes: int = _key("replica.fetch.max.bytes", T.INT, 1048576, at_least(0),
                                        "Bytes a follower asks for per partition and fetch.")
    replica_fetch_response_max_bytes: int = _key(
        "replica.fetch.response.max.bytes", T.INT, 10485760, at_least(0),
        "Bytes a follower asks for per fetch.")
    replica_fetch_wait_max_ms: int = _key("replica.fetch.wait.max.ms", T.INT, 500, at_least(0),
                                          "How long a follower's fetch waits for data.")
    replica_fetch_min_bytes: int = _key("replica.fetch.min.bytes", T.INT, 1, at_least(1),
                                        "Bytes a follower's fetch waits for.")
    replica_fetch_backoff_ms: int = _key("replica.fetch.backoff.ms", T.INT, 1000, at_least(0),
                                         "Pause after a follower's fetch failed.")
    replica_socket_timeout_ms: int = _key("replica.socket.timeout.ms", T.INT, 30000,
                                          at_least(1), "A follower's request timeout.")
    replica_alter_log_dirs_io_max_bytes_per_second: int = _key(
        "replica.alter.log.dirs.io.max.bytes.per.second", T.LONG, LONG_MAX, at_least(1),
        "Bytes per second a partition moving to another log dir (AlterReplicaLogDirs) is "
        "copied at.")
    controlled_shutdown_enable: bool = _key(
        "controlled.shutdown.enable", T.BOOLEAN, True, None,
        "Move leadership off a broker before it stops.")
    controlled_shutdown_max_retries: int = _key(
        "controlled.shutdown.max.retries", T.INT, 3, at_least(0),
        "Attempts at a controlled shutdown before stopping anyway.")
    controlled_shutdown_retry_backoff_ms: int = _key(
        "controlled.shutdown.retry.backoff.ms", T.LONG, 5000, at_least(0),
        "Pause between controlled shutdown attempts.")
    auto_leader_rebalance_enable: bool = _key(
        "auto.leader.rebalance.enable", T.BOOLEAN, True, None,
        "The controller moves leadership back to preferred replicas.")
    leader_imbalance_per_broker_percentage: int = _key(
        "leader.imbalance.per.broker.percentage", T.INT, 10, at_least(0),
        "Share of a broker's preferred partitions led elsewhere that triggers a rebalance.")
    leader_imbalance_check_interval_seconds: int = _key(
        "leader.imbalance.check.interval.seconds", T.LONG, 300, at_least(1),
        "How often the controller checks preferred leadership.")
    replica_selector_class: str | None = _key(
        "replica.selector.class", T.STRING, None,
        OneOf((RACK_AWARE_REPLICA_SELECTOR,), allow_none=True),
        "KIP-392: how a leader picks the replica a rack-aware consumer reads from; "
        "unset: consumers read from leaders.")
    # ------------------------------------------------------------ authorization (ACLs)
    authorizer_class_name: str = _key(
        "authorizer.class.name", T.STRING, "", OneOf(("",) + AUTHORIZER_CLASS_NAMES),
        "Turns on ACL authorization with Kafka's AclAuthorizer rules (any of Kafka's "
        "authorizer class names); empty: every request is allowed.")
    super_users: str | None = _key(
        "super.users", T.STRING, None, None,
        "Principals allowed everything, separated by semicolons (User:admin;User:broker).")
    allow_everyone_if_no_acl_found: bool = _key(
        "allow.everyone.if.no.acl.found", T.BOOLEAN, False, None,
        "With an authorizer: allow an operation on a resource no ACL applies to.")
    metrics_port: int = _key(
        "metrics.port", T.INT, 0, between(0, 65535),
        "samsa: port of the Prometheus /metrics HTTP endpoint; 0 = disabled.")
    metrics_host: str = _key(
        "metrics.host", T.STRING, "", None,
        "samsa: address the /metrics endpoint binds; empty = all interfaces.")

    # ------------------------------------------------------------ the test kit (samsa.testing)
    samsa_testing_faults_enable: bool = _key(
        "samsa.testing.faults.enable", T.BOOLEAN, False, None,
        "samsa: serve the fault-injection endpoint (docs/testing.md) for tests; refused "
        "unless every listener is on loopback.")
    samsa_testing_faults_port: int = _key(
        "samsa.testing.faults.port", T.INT, 0, between(0, 65535),
        "samsa: port of the fault-injection endpoint on 127.0.0.1; 0 = any free port (logged).")

    # ------------------------------------------------------------ TLS (SSL, SASL_SSL listeners)
    # Each may be overridden per listener as listener.name.<lower-case name>.<key>
    # (BrokerConfig.listener_value); broker/security/tls_config.py turns them
    # into SSL contexts and names the key of whatever cannot be used.
    security_inter_broker_protocol: str = _key(
        "security.inter.broker.protocol", T.STRING, "PLAINTEXT", OneOf(SECURITY_PROTOCOLS),
        "Protocol between brokers when inter.broker.listener.name is not set.")
    ssl_keystore_type: str = _key(
        "ssl.keystore.type", T.STRING, "JKS", None,
        "Key store format; samsa reads PEM (JKS and PKCS12 refuse start-up).")
    ssl_keystore_location: str | None = _key(
        "ssl.keystore.location", T.STRING, None, None,
        "PEM file with the private key and the certificate chain.")
    ssl_keystore_password: str | None = _key(
        "ssl.keystore.password", T.PASSWORD, None, None,
        "Key store password (PEM: not used; the key is decrypted with ssl.key.password).")
    ssl_keystore_certificate_chain: str | None = _key(
        "ssl.keystore.certificate.chain", T.PASSWORD, None, None,
        "PEM certificate chain given in the config itself (with ssl.keystore.key).")
    ssl_keystore_key: str | None = _key(
        "ssl.keystore.key", T.PASSWORD, None, None,
        "PEM private key given in the config itself (with ssl.keystore.certificate.chain).")
    ssl_key_password: str | None = _key(
        "ssl.key.password", T.PASSWORD, None, None, "Password of an encrypted private key.")
    ssl_truststore_type: str = _key(
        "ssl.truststore.type", T.STRING, "JKS", None,
        "Trust store format; samsa reads PEM.")
    ssl_truststore_location: str | None = _key(
        "ssl.truststore.location", T.STRING, None, None, "PEM file of trusted CA certificates.")
    ssl_truststore_password: str | None = _key(
        "ssl.truststore.password", T.PASSWORD, None, None, "Trust store password (PEM: unused).")
    ssl_truststore_certificates: str | None = _key(
        "ssl.truststore.certificates", T.PASSWORD, None, None,
        "Trusted CA certificates in PEM, given in the config itself.")
    ssl_client_auth: str = _key(
        "ssl.client.auth", T.STRING, "none", OneOf(("required", "requested", "none")),
        "Whether clients of SSL listeners must (required) or may (requested) present "
        "a certificate.")
    ssl_enabled_protocols: list[str] = _key(
        "ssl.enabled.protocols", T.LIST, ["TLSv1.2", "TLSv1.3"],
        SubsetOf(("TLSv1", "TLSv1.1", "TLSv1.2", "TLSv1.3")), "TLS versions allowed.")
    ssl_protocol: str = _key(
        "ssl.protocol", T.STRING, "TLSv1.3", None,
        "Kafka's SSLContext protocol; samsa checks it names a TLS version.")
    ssl_cipher_suites: list[str] = _key(
        "ssl.cipher.suites", T.LIST, [], None,
        "Cipher suites allowed (OpenSSL or IANA names); empty: OpenSSL's defaults.")
    ssl_endpoint_identification_algorithm: str = _key(
        "ssl.endpoint.identification.algorithm", T.STRING, "https", None,
        "https: the broker checks the host name of brokers it connects to; empty: not.")
    ssl_principal_mapping_rules: str = _key(
        "ssl.principal.mapping.rules", T.STRING, "DEFAULT", None,
        "Rules mapping a client certificate's subject to a user name "
        "(RULE:pattern/replacement/[LU], DEFAULT).")

    # ------------------------------------------------------------ provenance
    # Everything given (file, then env, then overrides; later wins), unknown keys
    # included, as strings; and where each given key came from.
    raw: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)
    origins: dict[str, str] = dataclasses.field(default_factory=dict, compare=False)
    # The layers ``raw`` was merged from (see config/dynamic.py): the static
    # keys (file, env, overrides), the cluster-wide dynamic defaults and this
    # broker's dynamic keys, for DescribeConfigs' sources and synonyms.
    static_raw: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)
    dynamic_default: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)
    dynamic_broker: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    # ------------------------------------------------------------ API
    @classmethod
    def from_dict(cls, props: Mapping[str, Any], origins: Mapping[str, str] | None = None
                  ) -> "BrokerConfig":
        """Build from Kafka-named keys (string values, as in a .properties file)."""
        return _build(dict(props), dict(origins or {k: "override" for k in props}))

    @functools.cached_property
    def default_topic_config(self) -> TopicConfig:
        """The TopicConfig of a topic without overrides, from the log.* broker keys."""
        values = {}
        for tk in TOPIC_KEYS.values():
            if not tk.synonyms:
                continue
            # The first synonym's field holds the resolved value of the whole
            # synonym chain (e.g. log_retention_ms covers minutes and hours).
            attr = BROKER_FIELDS[tk.synonyms[0].name]
            values[tk.attr] = _to_topic_value(tk, getattr(self, attr))
        return TopicConfig(**values)

    def topic_config(self, overrides: Mapping[str, str | None] | None = None) -> TopicConfig:
        """TopicConfig for a topic with these Kafka topic-key overrides.

        Unknown key or bad value -> ConfigError (the handler answers INVALID_CONFIG).
        A None value means "not overridden".
        """
        base = self.default_topic_config
        changes = {tk.attr: to_attr_value(tk, v) for tk, v in parse_topic_overrides(overrides)}
        cfg = base.replace(**changes) if changes else base
        if cfg.min_compaction_lag_ms > cfg.max_compaction_lag_ms:
            raise ConfigError(
                "min.compaction.lag.ms", cfg.min_compaction_lag_ms,
                f"a value <= max.compaction.lag.ms ({cfg.max_compaction_lag_ms})")
        return cfg

    def is_set(self, key: str) -> bool:
        """Whether `key` was given explicitly (file, environment or override)."""
        return key in self.raw

    def listener(self, name: str) -> Listener | None:
        name = name.upper()
        return next((lst for lst in self.listeners if lst.name == name), None)

    def listener_value(self, listener: str, key: str) -> Any:
        """``key``'s value for one listener: Kafka's per-listener override
        ``listener.name.<lower-case listener>.<key>`` if given, else the broker-wide one."""
        raw = self.raw.get(f"{LISTENER_PREFIX}{listener.lower()}.{key}")
        if raw is not None:
            return BROKER_KEYS[key].parse(raw)
        return getattr(self, BROKER_FIELDS[key])

    def security_protocol(self, listener: str) -> str:
        """The security protocol of a listener (listener.security.protocol.map)."""
        return self.listener_security_protocol_map.get(listener.upper(), listener.upper())

    @property
    def inter_broker_listener(self) -> str:
        """The listener brokers reach each other on: inter.broker.listener.name, else
        the listener named after security.inter.broker.protocol (as Kafka resolves it)."""
        return self.inter_broker_listener_name or self.security_inter_broker_protocol

    def with_bound_ports(self, ports: Mapping[str, int]) -> "BrokerConfig":
        """Copy with port-0 listeners (and their advertised twins) set to the bound ports.

        The network layer calls this after binding, so Metadata advertises real ports.
        """
        def fix(lsts: list[Listener]) -> list[Listener]:
            return [lst._replace(port=ports[lst.name]) if lst.port == 0 and lst.name in ports
                    else lst for lst in lsts]
        return dataclasses.replace(self, listeners=fix(self.listeners),
                                   advertised_listeners=fix(self.advertised_listeners))


# Kafka key -> BrokerConfig field, and the reverse.
BROKER_KEYS: dict[str, ConfigKey] = {}
BROKER_FIELDS: dict[str, str] = {}
for _f in dataclasses.fields(BrokerConfig):
    if "key" in _f.metadata:
        BROKER_KEYS[_f.metadata["key"].name] = _f.metadata["key"]
        BROKER_FIELDS[_f.metadata["key"].name] = _f.name
del _f

# Keys whose values are ignored silently when derived from KAFKA_* environment
# variables: they configure the JVM / scripts of Kafka's images, not the broker.
_ENV_NOT_CONFIG = frozenset({
    "KAFKA_HEAP_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_DEBUG",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME", "KAFKA_JMX_PORT",
    "KAFKA_VERSION", "KAFKA_HOME", "KAFKA_CLASSPATH", "KAFKA_JVM_OPTS", "KAFKA_JAVA_OPTS",
})


def env_key(var: str) -> str | None:
    """KAFKA_LOG_DIRS -> log.dirs, as Kafka's container images map them.

    Strip KAFKA_, lower-case, then `___` -> `-`, `__` -> `_`, `_` -> `.`.
    Returns None for variables that are not broker config.
    """
    if not var.startswith("KAFKA_") or var in _ENV_NOT_CONFIG or len(var) == len("KAFKA_"):
        return None
    name = var[len("KAFKA_"):].lower()
    return re.sub(r"___|__|_", lambda m: {3: "-", 2: "_", 1: "."}[len(m.group())], name)


def env_properties(environ: Mapping[str, str]) -> dict[str, str]:
    out = {}
    for var in sorted(environ):
        key = env_key(var)
        if key is not None:
            out[key] = environ[var]
    return out


def parse_override(text: str) -> tuple[str, str]:
    """'key=value' (value may be empty or contain '=') -> (key, value)."""
    key, sep, value = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError("override", text, "key=value",
                          message=f"invalid override {text!r}: expected key=value")
    return key, value


def load_broker_config(path: str | os.PathLike[str] | None = None, overrides: Iterable[str] = (),
                       environ: Mapping[str, str] = os.environ) -> BrokerConfig:
    """Load the broker config: defaults < file < environment (KAFKA_*) < overrides.

    Pass environ={} to ignore the environment (tests do).  Unknown keys are
    logged as warnings on the "config" logger; bad values raise ConfigError.
    """
    if environ is None:
        environ = {}
    props: dict[str, str] = {}
    origins: dict[str, str] = {}
    if path is not None:
        try:
            file_props = load_properties(path)
        except OSError as e:
            raise ConfigError("config file", path, "a readable .properties file",
                              message=f"cannot read config file {str(path)!r}: {e.strerror or e}"
                              ) from e
        _check_is_broker_file(path, file_props)
        props.update(file_props)
        origins.update(dict.fromkeys(file_props, "file"))
    env_props = env_properties(environ)
    props.update(env_props)
    origins.update(dict.fromkeys(env_props, "env"))
    for text in overrides:
        key, value = parse_override(text)
        props[key] = value
        origins[key] = "override"
    return _build(props, origins)


def _check_is_broker_file(path: str | os.PathLike[str], file_props: Mapping[str, str]) -> None:
    """A file of which no key is a broker key is the wrong file (a producer's
    config, a log4j file, a YAML file): started on it, the broker would run on
    every default (0.0.0.0:9092, data in /tmp/kafka-logs) with only warnings
    to say so. An empty file is not refused: it means "Kafka's defaults"."""
    if not file_props or any(key in BROKER_KEYS or key.startswith(LISTENER_PREFIX)
                             for key in file_props):
        return
    shown = ", ".join(repr(k) for k in list(file_props)[:3])
    raise ConfigError("config file", path, "a broker's server.properties", message=(
        f"{str(path)!r} has no broker config key (it has {shown}"
        f"{', ...' if len(file_props) > 3 else ''}): is it a server.properties?"))


# ---------------------------------------------------------------- building

def _build(props: dict[str, Any], origins: dict[str, str]) -> BrokerConfig:
    typed: dict[str, Any] = {}
    for key, raw in props.items():
        ck = BROKER_KEYS.get(key)
        if ck is None and key.startswith(LISTENER_PREFIX):
            ck = listener_override_key(key)
            if ck is not None:
                # e.g. listener.name.ssl.ssl.client.auth: checked as its key, named as given
                dataclasses.replace(ck, name=key).parse(raw)
            continue  # per-listener forms (also <mechanism>.sasl.jaas.config), read where used
        if ck is None:
            log.warning("unknown config key %r (from %s) is ignored", key, origins.get(key, "?"))
            continue
        typed[key] = ck.parse(raw)

    def get(key: str) -> Any:
        return typed[key] if key in typed else BROKER_KEYS[key].default

    fields: dict[str, Any] = {}
    for key, attr in BROKER_FIELDS.items():
        fields[attr] = get(key)

    # broker.id, with node.id as a synonym.
    if "broker.id" not in typed and typed.get("node.id") is not None:
        fields["broker_id"] = typed["node.id"]

    # Listeners.
    proto_map = _parse_protocol_map(get("listener.security.protocol.map"))
    fields["listener_security_protocol_map"] = proto_map
    listeners = _parse_listeners("listeners", get("listeners"), proto_map)
    if not listeners:
        raise ConfigError("listeners", get("listeners"), "at least one NAME://host:port")
    fields["listeners"] = listeners
    adv_raw = get("advertised.listeners")
    if adv_raw is None:
        adv = [lst._replace(host="localhost") if lst.host in _WILDCARD_HOSTS else lst
               for lst in listeners]
    else:
        adv = _parse_listeners("advertised.listeners", adv_raw, proto_map)
        names = {lst.name for lst in listeners}
        for lst in adv:
            if lst.host in ("0.0.0.0", "::"):
                raise ConfigError("advertised.listeners", adv_raw,
                                  "routable hosts (not the wildcard address " + lst.host + ")")
            if lst.name not in names:
                raise ConfigError("advertised.listeners", adv_raw,
                                  "listener names defined in listeners (" +
                                  ", ".join(sorted(names)) + ")")
        adv = [lst._replace(host="localhost") if lst.host == "" else lst for lst in adv]
    fields["advertised_listeners"] = adv
    ibl = get("inter.broker.listener.name")
    if ibl is not None:
        ibl = ibl.strip().upper()
        if ibl not in {lst.name for lst in listeners}:
            raise ConfigError("inter.broker.listener.name", get("inter.broker.listener.name"),
                              "a listener name from listeners")
        fields["inter_broker_listener_name"] = ibl

    if fields["samsa_testing_faults_enable"]:
        _check_loopback_only(listeners, get("listeners"))
    _check_inter_broker_listener(fields, typed, listeners, get("zookeeper.connect"))
    if get("zookeeper.connect"):
        parse_connect(get("zookeeper.connect"))  # refused here, not by the ZooKeeper client

    # log.dirs wins over log.dir.
    dirs_raw = get("log.dirs")
    if dirs_raw is None:
        dirs_raw = get("log.dir")
        dirs_key = "log.dir"
    else:
        dirs_key = "log.dirs"
    dirs = [d.strip() for d in dirs_raw.split(",") if d.strip()]
    if not dirs:
        raise ConfigError(dirs_key, dirs_raw, "a comma-separated list of at least one directory")
    fields["log_dirs"] = dirs

    # Time keys resolved as Kafka does: the finest unit given wins.
    fields["log_roll_ms"] = _first(typed, [("log.roll.ms", 1), ("log.roll.hours", 3_600_000)])
    fields["log_roll_jitter_ms"] = _first(
        typed, [("log.roll.jitter.ms", 1), ("log.roll.jitter.hours", 3_600_000)])
    retention_chain = [("log.retention.ms", 1), ("log.retention.minutes", 60_000),
                       ("log.retention.hours", 3_600_000)]
    retention = _first(typed, retention_chain)
    if retention == 0:
        # Kafka's KafkaConfig rule: unlimited or at least 1 ms (a negative value
        # means unlimited, so -7 is accepted as -1; 0 would delete at once)
        key = next(k for k, _ in retention_chain if typed.get(k) is not None)
        raise ConfigError(key, typed[key], "-1 (unlimited; any negative value means it) "
                                           "or a value >= 1")
    fields["log_retention_ms"] = -1 if retention < 0 else retention
    fields["log_flush_interval_ms"] = _first(
        typed, [("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)])

    if fields["group_min_session_timeout_ms"] > fields["group_max_session_timeout_ms"]:
        raise ConfigError("group.min.session.timeout.ms", fields["group_min_session_timeout_ms"],
                          f"a value <= group.max.session.timeout.ms "
                          f"({fields['group_max_session_timeout_ms']})")
    if fields["log_cleaner_min_compaction_lag_ms"] > fields["log_cleaner_max_compaction_lag_ms"]:
        raise ConfigError("log.cleaner.min.compaction.lag.ms",
                          fields["log_cleaner_min_compaction_lag_ms"],
                          "a value <= log.cleaner.max.compaction.lag.ms")

    fields["raw"] = {k: v for k, v in props.items()}
    fields["origins"] = dict(origins)
    fields["static_raw"] = dict(fields["raw"])
    return BrokerConfig(**fields)


LISTENER_PREFIX = "listener.name."


def listener_override_key(key: str) -> ConfigKey | None:
    """The broker key a ``listener.name.<listener>.<key>`` override stands for
    (listener names have no dots), or None."""
    if not key.startswith(LISTENER_PREFIX):
        return None
    _, _, rest = key[len(LISTENER_PREFIX):].partition(".")
    return BROKER_KEYS.get(rest)


def _check_loopback_only(listeners: list[Listener], raw: str | None) -> None:
    """Fault injection makes a broker misbehave on request: never where anything but
    this machine can reach it."""
    for lst in listeners:
        host = lst.host.strip("[]")
        if host == "localhost":
            continue
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        if not loopback:
            raise ConfigError("samsa.testing.faults.enable", "true", "loopback listeners only",
                              message=(f"samsa.testing.faults.enable=true is for test brokers only: "
                                       f"every listener must be on loopback (127.0.0.1, ::1, "
                                       f"localhost), and listeners={raw} has {lst.name} on "
                                       f"{lst.host or 'every interface (0.0.0.0)'}"))


def _check_inter_broker_listener(fields: dict[str, Any], typed: dict[str, Any], listeners: list[Listener],
                                 zookeeper_connect: str | None) -> None:
    """A cluster needs the inter-broker listener to exist (as Kafka requires)."""
    name = fields["inter_broker_listener_name"] or fields["security_inter_broker_protocol"]
    key = ("inter.broker.listener.name" if fields["inter_broker_listener_name"]
           else "security.inter.broker.protocol")
    if zookeeper_connect and name not in {lst.name for lst in listeners}:
        raise ConfigError(key, typed.get(key, name),
                          "a listener name from listeners (" +
                          ", ".join(lst.name for lst in listeners) + ")")


def _first(typed: dict[str, Any], chain: Sequence[tuple[str, int]]) -> int:
    """Value of the first key of `chain` that was given, else of the first with a default."""
    for key, scale in chain:
        if typed.get(key) is not None:
            given: int = typed[key] * scale
            return given
    for key, scale in chain:
        default = BROKER_KEYS[key].default
        if default is not None:
            scaled: int = default * scale
            return scaled
    raise AssertionError(f"no default for {chain}")


_LISTENER_RE = re.compile(r"([A-Za-z0-9_.\-]+)://(?:\[([0-9a-fA-F:.%A-Za-z\-]*)\]|([0-9A-Za-z\-%._]*)):([0-9]+)\Z")
_LISTENER_ALLOWED = "a comma-separated list of NAME://host:port (port 0-65535, names unique)"


def _parse_listeners(key: str, raw: str, proto_map: Mapping[str, str]) -> list[Listener]:
    result: list[Listener] = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        m = _LISTENER_RE.match(item)
        if m is None:
            raise ConfigError(key, raw, _LISTENER_ALLOWED)
        name = m.group(1).upper()
        host = m.group(2) if m.group(2) is not None else m.group(3)
        port = int(m.group(4))
        if port > 65535:
            raise ConfigError(key, raw, _LISTENER_ALLOWED)
        if any(lst.name == name for lst in result):
            raise ConfigError(key, raw, _LISTENER_ALLOWED + f"; {name} appears twice")
        if name not in proto_map:
            raise ConfigError(key, raw, "listener names defined in listener.security.protocol.map ("
                              + ", ".join(sorted(proto_map)) + ")")
        result.append(Listener(name, host, port))
    return result


def _parse_protocol_map(raw: str) -> dict[str, str]:
    allowed = ("a comma-separated list of NAME:PROTOCOL with PROTOCOL one of "
               + ", ".join(SECURITY_PROTOCOLS))
    out: dict[str, str] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, proto = item.partition(":")
        proto = proto.strip().upper()
        if not sep or not name.strip() or proto not in SECURITY_PROTOCOLS:
            raise ConfigError("listener.security.protocol.map", raw, allowed)
        out[name.strip().upper()] = proto
    return out


def parse_topic_overrides(overrides: Mapping[str, str | None] | None
                          ) -> Iterator[tuple[TopicKey, Any]]:
    """Yield (TopicKey, typed value) for each given override; ConfigError if bad."""
    for key, raw in drop_removed_keys(overrides or {}).items():
        tk = TOPIC_KEYS.get(key)
        if tk is None:
            raise ConfigError(key, raw, "a topic config key (" + ", ".join(sorted(TOPIC_KEYS)) + ")",
                              message=(f"unknown topic config {key!r} (value {raw!r}): expected "
                                       f"one of {', '.join(sorted(TOPIC_KEYS))}"))
        if raw is None:
            continue
        yield tk, tk.key.parse(raw)


def _to_topic_value(tk: TopicKey, broker_value: Any) -> Any:
    """Broker field value -> TopicConfig attribute value, clamped as Kafka does."""
    if tk.name == "retention.ms" and broker_value < 0:
        return -1
    if tk.key.type is T.LIST and isinstance(broker_value, list):
        return to_attr_value(tk, broker_value)
    # A broker value outside the topic key's range (e.g. INT vs LONG) is kept:
    # the broker key was validated by its own rules.
    return broker_value


__all__ = ["BrokerConfig", "Listener", "LISTENER_PREFIX", "listener_override_key", "load_broker_config", "BROKER_KEYS", "BROKER_FIELDS",
           "env_key", "env_properties", "parse_override", "parse_topic_overrides",
           "SECURITY_PROTOCOLS"]
