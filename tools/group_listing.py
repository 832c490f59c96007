"""ListGroups asked of every broker, as Kafka's AdminClient.listGroups does: a broker
lists only the groups it coordinates. Shared by consumer-groups and share-groups."""
from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from samsa.client.blocking import ClientError, Cluster, error_text
from samsa.protocol.messages import ListGroupsRequest
from samsa.protocol.model import ApiKey


def list_groups_everywhere(cluster: Cluster, prog: str, *, states: Sequence[str] = (),
                           types: Sequence[str] = ()) -> tuple[list[Any], bool]:
    """Every broker's listed groups, and whether some broker did not answer (each such
    broker is one line on stderr; the others' groups are still returned)."""
    groups: list[Any] = []
    failed = False
    for node_id, address in cluster.brokers().items():
        try:
            conn = cluster.broker(node_id)
        except ClientError as e:  # "cannot reach broker N at host:port: ..."
            print(f"{prog}: {e}", file=sys.stderr)
            failed = True
            continue
        try:
            resp = conn.call(ApiKey.LIST_GROUPS, ListGroupsRequest(states_filter=list(states),
                                                                   types_filter=list(types)))
            error = error_text(resp.error_code) if resp.error_code else None
        except ClientError as e:
            cluster.forget(node_id)
            error = str(e)
        if error is not None:
            print(f"{prog}: cannot list the groups of broker {node_id} at {address}: {error}",
                  file=sys.stderr)
            failed = True
            continue
        groups.extend(resp.groups)
    return groups, failed
