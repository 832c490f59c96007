"""ListConfigResources (KIP-1142, API key 74): the names of the resources that
have configs, for kafka-configs --describe without --entity-name and for
Admin.listConfigResources.

v0 was ListClientMetricsResources: client-metrics resources only, of which
samsa has none (no client telemetry). v1 takes a list of resource types (none:
every type the broker knows) and answers each resource with its type; a type
the broker does not know is UNSUPPORTED_VERSION, as Kafka answers.
"""
from __future__ import annotations

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (ListConfigResourcesRequest, ListConfigResourcesResponse)

from .. import group_configs
from ..metadata import brokers_on_listener
from ..metadata.zk_layout import desanitize_entity_name
from . import authz
from .authz import Op
from .context import RequestContext

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED_TYPES = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)


async def handle_list_config_resources(ctx: RequestContext, req: ListConfigResourcesRequest
                                       ) -> ListConfigResourcesResponse:
    R = ListConfigResourcesResponse
    if not authz.cluster(ctx, Op.DESCRIBE_CONFIGS):
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                 config_resources=[])
    if ctx.version == 0:
        return R(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=[])
    types = set(req.resource_types) or set(SUPPORTED_TYPES)
    if not types <= set(SUPPORTED_TYPES):
        return R(throttle_time_ms=0, error_code=ErrorCode.UNSUPPORTED_VERSION,
                 config_resources=[])
    broker = ctx.broker
    found: list[tuple[str, int]] = []
    if GROUP in types:
        # the groups this broker's coordinator holds (in one broker: all of them)
        code, groups = (await broker.groups.list_groups() if broker.groups is not None
                        else (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []))
        if code:
            return R(throttle_time_ms=0, error_code=code, config_resources=[])
        # and, as Kafka's, the share groups and every group with configs of its own
        ids = {g.group_id for g in groups}
        if broker.share_groups is not None:
            ids.update(broker.share_groups.group_ids())
        for path in broker.store.entity_config_paths(group_configs.ENTITY_TYPE):
            ids.add(desanitize_entity_name(path.partition("/")[2]))
        found += [(gid, GROUP) for gid in sorted(ids)]
    brokers = [str(b.node_id) for b in brokers_on_listener(broker.store.brokers(), ctx.listener)]
    if BROKER_LOGGER in types:
        found += [(b, BROKER_LOGGER) for b in brokers]
    if BROKER in types:
        found += [(b, BROKER) for b in brokers]
    if TOPIC in types:
        found += [(name, TOPIC) for name in sorted(broker.topics.topics())]
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, config_resources=[
        R.ConfigResource(resource_name=name, resource_type=t) for name, t in found])

