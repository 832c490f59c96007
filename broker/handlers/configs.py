"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs.

Topic configs are overrides kept in the metadata store, so they survive
restarts, and so are group configs (GROUP resources, broker/group_configs.py); broker configs are the static ones (server.properties,
environment, --override) under the dynamic layers that AlterConfigs and
IncrementalAlterConfigs change on a BROKER resource (config/dynamic.py says
which keys, broker/dynamic_config.py keeps and applies them).
"""
from __future__ import annotations

from typing import Callable

from samsa.config import TOPIC_KEYS, ConfigType, describe_broker_config, describe_topic_config
from samsa.config.describe import ConfigEntry, describe_broker_defaults
from samsa.config.dynamic import DynamicConfigError, key_definition
from samsa.config.values import ConfigKey, render
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest,
                               DescribeConfigsResponse, IncrementalAlterConfigsRequest,
                               IncrementalAlterConfigsResponse)

from .. import group_configs
from ..topics import TopicError, name_error
from . import authz
from .authz import Op
from .context import RequestContext, off_loop
from .services import Services

TOPIC, BROKER, BROKER_LOGGER, GROUP = 2, 4, 8, group_configs.GROUP
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


# A resource's configs as a change sees them (None: not set), and a change of them
_Configs = dict[str, "str | None"]
_Change = Callable[[_Configs], _Configs]


def _entries(broker: Services, resource_type: int, name: str
             ) -> tuple[int, str | None, list[ConfigEntry]]:
    """(error code, message, config entries) for one resource."""
    if resource_type == TOPIC:
        if name_error(name):
            return ErrorCode.INVALID_TOPIC_EXCEPTION, name_error(name), []
        meta = broker.topics.get(name)
        if meta is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist", []
        return ErrorCode.NONE, None, describe_topic_config(broker.config, meta.configs)
    if resource_type == BROKER:
        if name not in ("", str(broker.config.broker_id)):
            return ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.config.broker_id}", []
        if name == "":
            return ErrorCode.NONE, None, describe_broker_defaults(broker.config)
        return ErrorCode.NONE, None, describe_broker_config(broker.config)
    if resource_type == BROKER_LOGGER:
        return ErrorCode.NONE, None, []
    if resource_type == GROUP:
        if not name:
            return ErrorCode.INVALID_GROUP_ID, "Group id must not be empty.", []
        own = broker.store.entity_configs(group_configs.entity_path(name))
        return ErrorCode.NONE, None, group_configs.describe(own, broker.config)
    return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}", []


def _refusal(ctx: RequestContext, resource_type: int, name: str, operation: Op
             ) -> tuple[ErrorCode, str] | None:
    """Kafka's check: the operation on the topic, or on the cluster for
    broker and broker-logger resources."""
    if resource_type == TOPIC:
        if not authz.topic(ctx, operation, name):
            return ErrorCode.TOPIC_AUTHORIZATION_FAILED, authz.TOPIC_DENIED
    elif resource_type in (BROKER, BROKER_LOGGER) and not authz.cluster(ctx, operation):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authz.CLUSTER_DENIED
    elif resource_type == GROUP and not authz.group(ctx, operation, name):
        return (ErrorCode.GROUP_AUTHORIZATION_FAILED,
                "Group authorization failed.")
    return None


async def handle_describe_configs(ctx: RequestContext, req: DescribeConfigsRequest
                                  ) -> DescribeConfigsResponse:
    broker = ctx.broker
    R = DescribeConfigsResponse
    results = []
    for res in req.resources:
        refused = _refusal(ctx, res.resource_type, res.resource_name, Op.DESCRIBE_CONFIGS)
        code, message, entries = (*refused, []) if refused else _entries(
            broker, res.resource_type, res.resource_name)
        if res.configuration_keys is not None:
            keys = set(res.configuration_keys)
            entries = [e for e in entries if e.name in keys]
        configs = [
            R.DescribeConfigsResourceResult(
                name=e.name, value=e.value, read_only=e.read_only, config_source=e.source,
                is_default=e.is_default, is_sensitive=e.is_sensitive,
                synonyms=[R.DescribeConfigsSynonym(name=s[0], value=s[1], source=s[2])
                          for s in e.synonyms] if req.include_synonyms else [],
                config_type=e.config_type,
                documentation=e.documentation if req.include_documentation else None)
            for e in entries]
        results.append(R.DescribeConfigsResult(error_code=code, error_message=message,
                                               resource_type=res.resource_type,
                                               resource_name=res.resource_name, configs=configs))
    return R(throttle_time_ms=0, results=results)


def _alter(broker: Services, resource_type: int, resource_name: str, new_configs_fn: _Change,
           validate_only: bool) -> tuple[int, str | None]:
    """Apply one resource's change; returns (code, message)."""
    if resource_type == BROKER:
        dynamic = broker.dynamic_config
        entity = dynamic.owns(resource_name)
        if entity is False:
            return (ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected "
                    f"{broker.config.broker_id} or the empty string (cluster default)")
        try:
            current: _Configs = {**dynamic.entity_configs(entity)}
            dynamic.alter(entity, new_configs_fn(current), validate_only)
        except DynamicConfigError as e:
            return ErrorCode.INVALID_REQUEST, str(e)
        except TopicError as e:  # an unknown incremental operation
            return e.code, e.message
        return ErrorCode.NONE, None
    if resource_type == GROUP:
        return _alter_group(broker, resource_name, new_configs_fn, validate_only)
    if resource_type != TOPIC:
        return ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource_type}"
    if name_error(resource_name):
        return ErrorCode.INVALID_TOPIC_EXCEPTION, name_error(resource_name)
    meta = broker.topics.get(resource_name)
    if meta is None:
        return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                f"Topic {resource_name} does not exist")
    try:
        configs = new_configs_fn({**meta.configs})
        broker.topics.set_configs(meta.name, configs, validate_only=validate_only)
    except TopicError as e:
        return e.code, e.message
    return ErrorCode.NONE, None


def _alter_group(broker: Services, group_id: str, new_configs_fn: _Change,
                 validate_only: bool) -> tuple[int, str | None]:
    """A group's own configs (group_configs.py), kept as the metadata store's
    entity configs so every broker's coordinator follows them."""
    if not group_id:
        return ErrorCode.INVALID_GROUP_ID, "Group id must not be empty."
    path = group_configs.entity_path(group_id)
    try:
        configs = new_configs_fn({**broker.store.entity_configs(path)})
    except TopicError as e:
        return e.code, e.message
    refused = group_configs.validate(configs, broker.config)
    if refused:
        return ErrorCode.INVALID_CONFIG, refused
    if not validate_only:
        broker.store.set_entity_configs(path, {k: v for k, v in configs.items()
                                               if v is not None})
    return ErrorCode.NONE, None


async def handle_alter_configs(ctx: RequestContext, req: AlterConfigsRequest
                               ) -> AlterConfigsResponse:
    return await off_loop(_alter_configs, ctx, req)


def _alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    """AlterConfigs replaces a topic's whole set of overrides."""
    R = AlterConfigsResponse
    out = []
    for res in req.resources:
        replacement: _Configs = {c.name: c.value for c in res.configs if c.value is not None}
        code, message = _refusal(ctx, res.resource_type, res.resource_name,
                                 Op.ALTER_CONFIGS) or _alter(
            ctx.broker, res.resource_type, res.resource_name, _replace_with(replacement),
            req.validate_only)
        out.append(R.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                  resource_type=res.resource_type,
                                                  resource_name=res.resource_name))
    return R(throttle_time_ms=0, responses=out)


def _key_of(resource_type: int, name: str) -> ConfigKey | None:
    """The definition of a config key of a topic or broker resource."""
    if resource_type == TOPIC:
        tk = TOPIC_KEYS.get(name)
        return tk.key if tk is not None else None
    if resource_type == GROUP:
        return None
    return key_definition(name)


def _replace_with(replacement: _Configs) -> _Change:
    return lambda _old: replacement


def _incremental(ops: list[IncrementalAlterConfigsRequest.AlterableConfig], resource_type: int
                 ) -> _Change:
    def apply(configs: _Configs) -> _Configs:
        for op in ops:
            if op.config_operation == SET:
                configs[op.name] = op.value
            elif op.config_operation == DELETE:
                configs.pop(op.name, None)
            elif op.config_operation in (APPEND, SUBTRACT):
                key = _key_of(resource_type, op.name)
                verb = "append" if op.config_operation == APPEND else "subtract"
                if key is None:
                    raise TopicError(ErrorCode.INVALID_CONFIG, "Unknown " + (
                        {TOPIC: "topic", GROUP: "group"}.get(resource_type, "broker"))
                        + f" config name: {op.name}")
                if key.type is not ConfigType.LIST:
                    raise TopicError(ErrorCode.INVALID_REQUEST, f"Config value {verb} is not "
                                     f"allowed for config key: {op.name}")
                # A key not set starts from its default, as Kafka's does
                # (cleanup.policy APPEND compact is "delete,compact").
                current = configs.get(op.name)
                if current is None:
                    current = render(ConfigType.LIST, key.default) or ""
                items = [v for v in current.split(",") if v]
                for v in (op.value or "").split(","):
                    if op.config_operation == APPEND and v and v not in items:
                        items.append(v)
                    elif op.config_operation == SUBTRACT and v in items:
                        items.remove(v)
                configs[op.name] = ",".join(items)
            else:
                raise TopicError(ErrorCode.INVALID_REQUEST,
                                 f"Unknown config operation {op.config_operation}")
        return configs
    return apply


async def handle_incremental_alter_configs(ctx: RequestContext, req: IncrementalAlterConfigsRequest
                                           ) -> IncrementalAlterConfigsResponse:
    return await off_loop(_incremental_alter_configs, ctx, req)


def _incremental_alter_configs(ctx: RequestContext, req: IncrementalAlterConfigsRequest
                               ) -> IncrementalAlterConfigsResponse:
    R = IncrementalAlterConfigsResponse
    out = []
    for res in req.resources:
        code, message = _refusal(ctx, res.resource_type, res.resource_name,
                                 Op.ALTER_CONFIGS) or _alter(
            ctx.broker, res.resource_type, res.resource_name,
            _incremental(res.configs, res.resource_type), req.validate_only)
        out.append(R.AlterConfigsResourceResponse(error_code=code, error_message=message,
                                                  resource_type=res.resource_type,
                                                  resource_name=res.resource_name))
    return R(throttle_time_ms=0, responses=out)
