"""Request handlers, one module per API family, keyed by Kafka API key.

A handler is `async def handle(ctx: RequestContext, req: XRequest) -> XResponse` (the classes
of protocol/messages/__init__.pyi; ctx.broker is the Services of services.py);
None means no response at all (Produce with acks=0).
"""
from samsa.protocol.model import ApiKey

from .acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from .admin import handle_create_partitions, handle_create_topics, handle_delete_topics
from .api_versions import handle_api_versions
from .client_quotas import handle_alter_client_quotas, handle_describe_client_quotas
from .config_resources import handle_list_config_resources
from .configs import (handle_alter_configs, handle_describe_configs,
                      handle_incremental_alter_configs)
from .context import RequestContext
from .consumer_groups import handle_consumer_group_describe, handle_consumer_group_heartbeat
from .controlled_shutdown import handle_controlled_shutdown
from .describe_producers import handle_describe_producers
from .elect_leaders import handle_elect_leaders
from .fetch import handle_fetch
from .log_dirs import handle_alter_replica_log_dirs, handle_describe_log_dirs
from .share_admin import handle_alter_share_group_offsets, handle_delete_share_group_offsets
from .groups import (handle_delete_groups, handle_describe_groups, handle_find_coordinator,
                     handle_heartbeat, handle_join_group, handle_leave_group,
                     handle_list_groups, handle_offset_commit, handle_offset_delete,
                     handle_offset_fetch, handle_sync_group, handle_txn_offset_commit)
from .metadata import (handle_describe_cluster, handle_describe_topic_partitions,
                       handle_metadata)
from .offsets import handle_delete_records, handle_list_offsets, handle_offset_for_leader_epoch
from .produce import handle_produce
from .share import (handle_describe_share_group_offsets, handle_share_acknowledge, handle_share_fetch,
                    handle_share_group_describe, handle_share_group_heartbeat)
from .share_state import (handle_delete_share_group_state,
                          handle_initialize_share_group_state, handle_read_share_group_state,
                          handle_read_share_group_state_summary, handle_write_share_group_state)
from .sasl import handle_sasl_authenticate, handle_sasl_handshake
from .scram_credentials import (handle_alter_user_scram_credentials,
                                handle_describe_user_scram_credentials)
from .producer_ids import handle_init_producer_id
from .reassignments import (handle_alter_partition_reassignments,
                            handle_list_partition_reassignments)
from .transactions import (handle_add_offsets_to_txn, handle_add_partitions_to_txn,
                           handle_describe_transactions, handle_end_txn,
                           handle_list_transactions)
from .txn_markers import handle_write_txn_markers

HANDLERS = {
    ApiKey.PRODUCE: handle_produce,
    ApiKey.FETCH: handle_fetch,
    ApiKey.LIST_OFFSETS: handle_list_offsets,
    ApiKey.METADATA: handle_metadata,
    ApiKey.CONTROLLED_SHUTDOWN: handle_controlled_shutdown,
    ApiKey.OFFSET_COMMIT: handle_offset_commit,
    ApiKey.OFFSET_FETCH: handle_offset_fetch,
    ApiKey.FIND_COORDINATOR: handle_find_coordinator,
    ApiKey.JOIN_GROUP: handle_join_group,
    ApiKey.HEARTBEAT: handle_heartbeat,
    ApiKey.LEAVE_GROUP: handle_leave_group,
    ApiKey.SYNC_GROUP: handle_sync_group,
    ApiKey.DESCRIBE_GROUPS: handle_describe_groups,
    ApiKey.LIST_GROUPS: handle_list_groups,
    ApiKey.API_VERSIONS: handle_api_versions,
    ApiKey.CREATE_TOPICS: handle_create_topics,
    ApiKey.DELETE_TOPICS: handle_delete_topics,
    ApiKey.DELETE_RECORDS: handle_delete_records,
    ApiKey.INIT_PRODUCER_ID: handle_init_producer_id,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: handle_offset_for_leader_epoch,
    ApiKey.ADD_PARTITIONS_TO_TXN: handle_add_partitions_to_txn,
    ApiKey.ADD_OFFSETS_TO_TXN: handle_add_offsets_to_txn,
    ApiKey.END_TXN: handle_end_txn,
    ApiKey.TXN_OFFSET_COMMIT: handle_txn_offset_commit,
    ApiKey.WRITE_TXN_MARKERS: handle_write_txn_markers,
    ApiKey.DESCRIBE_CONFIGS: handle_describe_configs,
    ApiKey.ALTER_CONFIGS: handle_alter_configs,
    ApiKey.ALTER_REPLICA_LOG_DIRS: handle_alter_replica_log_dirs,
    ApiKey.DESCRIBE_LOG_DIRS: handle_describe_log_dirs,
    ApiKey.CREATE_PARTITIONS: handle_create_partitions,
    ApiKey.DELETE_GROUPS: handle_delete_groups,
    ApiKey.ELECT_LEADERS: handle_elect_leaders,
    ApiKey.INCREMENTAL_ALTER_CONFIGS: handle_incremental_alter_configs,
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: handle_alter_partition_reassignments,
    ApiKey.LIST_PARTITION_REASSIGNMENTS: handle_list_partition_reassignments,
    ApiKey.OFFSET_DELETE: handle_offset_delete,
    ApiKey.DESCRIBE_CLUSTER: handle_describe_cluster,
    ApiKey.DESCRIBE_TRANSACTIONS: handle_describe_transactions,
    ApiKey.LIST_TRANSACTIONS: handle_list_transactions,
    ApiKey.CONSUMER_GROUP_HEARTBEAT: handle_consumer_group_heartbeat,
    ApiKey.CONSUMER_GROUP_DESCRIBE: handle_consumer_group_describe,
    ApiKey.DESCRIBE_PRODUCERS: handle_describe_producers,
    ApiKey.LIST_CONFIG_RESOURCES: handle_list_config_resources,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: handle_describe_topic_partitions,
    ApiKey.SASL_HANDSHAKE: handle_sasl_handshake,
    ApiKey.SASL_AUTHENTICATE: handle_sasl_authenticate,
    ApiKey.DESCRIBE_CLIENT_QUOTAS: handle_describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: handle_alter_client_quotas,
    ApiKey.DESCRIBE_ACLS: handle_describe_acls,
    ApiKey.CREATE_ACLS: handle_create_acls,
    ApiKey.DELETE_ACLS: handle_delete_acls,
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: handle_describe_user_scram_credentials,
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: handle_alter_user_scram_credentials,
    ApiKey.SHARE_GROUP_HEARTBEAT: handle_share_group_heartbeat,
    ApiKey.SHARE_GROUP_DESCRIBE: handle_share_group_describe,
    ApiKey.SHARE_FETCH: handle_share_fetch,
    ApiKey.SHARE_ACKNOWLEDGE: handle_share_acknowledge,
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: handle_describe_share_group_offsets,
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: handle_alter_share_group_offsets,
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: handle_delete_share_group_offsets,
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: handle_initialize_share_group_state,
    ApiKey.READ_SHARE_GROUP_STATE: handle_read_share_group_state,
    ApiKey.WRITE_SHARE_GROUP_STATE: handle_write_share_group_state,
    ApiKey.DELETE_SHARE_GROUP_STATE: handle_delete_share_group_state,
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: handle_read_share_group_state_summary,
}

__all__ = ["HANDLERS", "RequestContext"]
