"""Request handlers, one module per API family, keyed by Kafka API key.

A handler is `async def handle(ctx: RequestContext, request) -> response | None`;
None means no response at all (Produce with acks=0).
"""
from .acls import handle_create_acls, handle_delete_acls, handle_describe_acls
from .admin import handle_create_partitions, handle_create_topics, handle_delete_topics
from .api_versions import handle_api_versions
from .client_quotas import handle_alter_client_quotas, handle_describe_client_quotas
from .config_resources import handle_list_config_resources
from .configs import (handle_alter_configs, handle_describe_configs,
                      handle_incremental_alter_configs)
from .context import RequestContext
from .controlled_shutdown import handle_controlled_shutdown
from .describe_producers import handle_describe_producers
from .elect_leaders import handle_elect_leaders
from .fetch import handle_fetch
from .log_dirs import handle_alter_replica_log_dirs, handle_describe_log_dirs
from .groups import (handle_delete_groups, handle_describe_groups, handle_find_coordinator,
                     handle_heartbeat, handle_join_group, handle_leave_group,
                     handle_list_groups, handle_offset_commit, handle_offset_delete,
                     handle_offset_fetch, handle_sync_group, handle_txn_offset_commit)
from .metadata import (handle_describe_cluster, handle_describe_topic_partitions,
                       handle_metadata)
from .offsets import handle_delete_records, handle_list_offsets, handle_offset_for_leader_epoch
from .produce import handle_produce
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
    0: handle_produce,
    1: handle_fetch,
    2: handle_list_offsets,
    3: handle_metadata,
    7: handle_controlled_shutdown,
    8: handle_offset_commit,
    9: handle_offset_fetch,
    10: handle_find_coordinator,
    11: handle_join_group,
    12: handle_heartbeat,
    13: handle_leave_group,
    14: handle_sync_group,
    15: handle_describe_groups,
    16: handle_list_groups,
    18: handle_api_versions,
    19: handle_create_topics,
    20: handle_delete_topics,
    21: handle_delete_records,
    22: handle_init_producer_id,
    23: handle_offset_for_leader_epoch,
    24: handle_add_partitions_to_txn,
    25: handle_add_offsets_to_txn,
    26: handle_end_txn,
    28: handle_txn_offset_commit,
    27: handle_write_txn_markers,
    32: handle_describe_configs,
    33: handle_alter_configs,
    34: handle_alter_replica_log_dirs,
    35: handle_describe_log_dirs,
    37: handle_create_partitions,
    42: handle_delete_groups,
    43: handle_elect_leaders,
    44: handle_incremental_alter_configs,
    45: handle_alter_partition_reassignments,
    46: handle_list_partition_reassignments,
    47: handle_offset_delete,
    60: handle_describe_cluster,
    65: handle_describe_transactions,
    66: handle_list_transactions,
    61: handle_describe_producers,
    74: handle_list_config_resources,
    75: handle_describe_topic_partitions,
    17: handle_sasl_handshake,
    36: handle_sasl_authenticate,
    48: handle_describe_client_quotas,
    49: handle_alter_client_quotas,
    29: handle_describe_acls,
    30: handle_create_acls,
    31: handle_delete_acls,
    50: handle_describe_user_scram_credentials,
    51: handle_alter_user_scram_credentials,
}

__all__ = ["HANDLERS", "RequestContext"]
