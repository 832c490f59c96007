"""DescribeClientQuotas (48) and AlterClientQuotas (49): quotas of users,
client ids, user/client pairs and IPs, kept in the entity configs as Kafka
keeps them in /config/users, /config/clients and /config/ips.

An entity here is {entity type: name}, name None for the default entity. The
znode of a user also holds SCRAM credentials: only quota keys are described
and changed here, everything else in it is left as it is.
"""
from __future__ import annotations

import ipaddress

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AlterClientQuotasRequest, AlterClientQuotasResponse,
                               DescribeClientQuotasRequest, DescribeClientQuotasResponse)

from ..metadata.zk_layout import (client_entity_path, desanitize_entity_name,
                                  sanitize_entity_name, user_client_entity_path,
                                  user_entity_path)
from ..quotas.entities import CLIENT_QUOTA_KEYS, DEFAULT, IP_QUOTA_KEYS, check_quota_value
from . import authz
from .authz import Op
from .context import RequestContext, off_loop
from .services import MetadataView

USER, CLIENT_ID, IP = "user", "client-id", "ip"
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2
_STORE_TYPES = {USER: "users", CLIENT_ID: "clients", IP: "ips"}


class QuotaRequestError(Exception):
    """An entity, filter or operation Kafka refuses with INVALID_REQUEST."""


def _keys_for(entity: dict[str, str | None]) -> dict[str, bool]:
    return IP_QUOTA_KEYS if IP in entity else CLIENT_QUOTA_KEYS


def entity_path(entity: dict[str, str | None]) -> str:
    """{user: u, client-id: c} -> users/<u>/clients/<c> (names sanitized,
    None the default entity), spelled by zk_layout as for SCRAM credentials."""
    if set(entity) == {USER, CLIENT_ID}:
        return user_client_entity_path(entity[USER], entity[CLIENT_ID])
    if set(entity) == {USER}:
        return user_entity_path(entity[USER])
    if set(entity) == {CLIENT_ID}:
        return client_entity_path(entity[CLIENT_ID])
    ip = entity[IP]
    return f"ips/{DEFAULT if ip is None else sanitize_entity_name(ip)}"


def entity_of(path: str) -> dict[str, str | None]:
    """The inverse of entity_path."""
    parts = path.split("/")
    names = [None if n == DEFAULT else desanitize_entity_name(n) for n in parts[1::2]]
    if len(parts) == 4:
        return {USER: names[0], CLIENT_ID: names[1]}
    return {{v: k for k, v in _STORE_TYPES.items()}[parts[0]]: names[0]}


def check_entity(pairs: list[tuple[str, str | None]]) -> dict[str, str | None]:
    entity: dict[str, str | None] = {}
    for entity_type, name in pairs:
        if entity_type not in _STORE_TYPES:
            raise QuotaRequestError(f"Unexpected quota entity type: {entity_type}")
        if entity_type in entity:
            raise QuotaRequestError(f"Duplicate quota entity type: {entity_type}")
        if name is not None and name == "":
            raise QuotaRequestError(f"Empty {entity_type} name")
        entity[entity_type] = name
    if not entity:
        raise QuotaRequestError("Invalid empty client quota entity")
    if IP in entity and len(entity) > 1:
        raise QuotaRequestError("Invalid quota entity combination: ip with user or client-id")
    ip = entity.get(IP)
    if ip is not None:
        try:
            ipaddress.ip_address(ip)
        except ValueError:
            raise QuotaRequestError(f"{ip} is not a valid IP address") from None
    return entity


def format_value(key: str, value: float, keys: dict[str, bool]) -> str:
    """A quota value as Kafka writes it (its validity: check_quota_value)."""
    try:
        check_quota_value(key, value)
    except ValueError as e:
        raise QuotaRequestError(str(e)) from None
    return str(int(value)) if keys[key] else str(float(value))


# ----------------------------------------------------------------- Describe

_Component = DescribeClientQuotasRequest.ComponentData


def _matches(entity: dict[str, str | None], components: list[_Component], strict: bool) -> bool:
    wanted = {c.entity_type for c in components}
    if strict and set(entity) != wanted:
        return False
    for c in components:
        if c.entity_type not in entity:
            return False
        name = entity[c.entity_type]
        if c.match_type == MATCH_EXACT and name != c.match:
            return False
        if c.match_type == MATCH_DEFAULT and name is not None:
            return False
    return True


def _check_filter(components: list[_Component]) -> None:
    seen: set[str] = set()
    for c in components:
        if c.entity_type not in _STORE_TYPES:
            raise QuotaRequestError(f"Unexpected quota entity type: {c.entity_type}")
        if c.entity_type in seen:
            raise QuotaRequestError(f"Duplicate {c.entity_type} filter component entity type")
        if c.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
            raise QuotaRequestError(f"Unexpected match type: {c.match_type}")
        if c.match_type == MATCH_EXACT and c.match is None:
            raise QuotaRequestError("Exact match without a name")
        seen.add(c.entity_type)
    if IP in seen and len(seen) > 1:
        raise QuotaRequestError("Invalid entity filter component combination: ip with "
                                "user or client-id")


def describe(store: MetadataView, components: list[_Component], strict: bool
             ) -> list[tuple[dict[str, str | None], dict[str, float]]]:
    _check_filter(components)
    out = []
    for entity_type in ("users", "clients", "ips"):
        for path in store.entity_config_paths(entity_type):
            entity = entity_of(path)
            if not _matches(entity, components, strict):
                continue
            keys = _keys_for(entity)
            values: dict[str, float] = {}
            for k, v in store.entity_configs(path).items():
                if k in keys:
                    try:
                        values[k] = float(v)
                    except ValueError:
                        continue
            if values:
                out.append((entity, values))
    return out


async def handle_describe_client_quotas(ctx: RequestContext, req: DescribeClientQuotasRequest
                                        ) -> DescribeClientQuotasResponse:
    R = DescribeClientQuotasResponse
    if not authz.cluster(ctx, Op.DESCRIBE_CONFIGS):  # Kafka: DescribeConfigs on the cluster
        return R(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                 error_message=authz.CLUSTER_DENIED, entries=None)
    try:
        found = await off_loop(describe, ctx.broker.store, req.components or [], req.strict)
    except QuotaRequestError as e:
        return R(throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, error_message=str(e),
                 entries=None)
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=[
        R.EntryData(entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                    values=[R.ValueData(key=k, value=v) for k, v in sorted(values.items())])
        for entity, values in found])


# ----------------------------------------------------------------- Alter

def plan(store: MetadataView, entity: dict[str, str | None],
         ops: list[AlterClientQuotasRequest.OpData]) -> tuple[str, dict[str, str]]:
    """(entity path, its configs after ``ops``); QuotaRequestError if refused."""
    keys = _keys_for(entity)
    path = entity_path(entity)
    configs = store.entity_configs(path)
    seen: set[str] = set()
    for op in ops:
        if op.key not in keys:
            raise QuotaRequestError(f"Invalid configuration key {op.key}")
        if op.key in seen:
            raise QuotaRequestError(f"Duplicate quota key {op.key}")
        seen.add(op.key)
        if op.remove:
            configs.pop(op.key, None)
        else:
            configs[op.key] = format_value(op.key, op.value, keys)
    return path, configs


def alter_one(store: MetadataView, pairs: list[tuple[str, str | None]],
              ops: list[AlterClientQuotasRequest.OpData], validate_only: bool) -> None:
    entity = check_entity(pairs)
    path, configs = plan(store, entity, ops)
    if not validate_only:
        store.set_entity_configs(path, configs)


async def handle_alter_client_quotas(ctx: RequestContext, req: AlterClientQuotasRequest
                                     ) -> AlterClientQuotasResponse:
    R = AlterClientQuotasResponse
    store = ctx.broker.store
    allowed = authz.cluster(ctx, Op.ALTER_CONFIGS)  # Kafka: AlterConfigs on the cluster
    out = []
    for entry in req.entries or []:
        pairs = [(e.entity_type, e.entity_name) for e in entry.entity or []]
        code, message = ErrorCode.NONE, None
        try:
            if not allowed:
                code, message = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, authz.CLUSTER_DENIED
            else:
                await off_loop(alter_one, store, pairs, entry.ops or [], req.validate_only)
        except QuotaRequestError as e:
            code, message = ErrorCode.INVALID_REQUEST, str(e)
        out.append(R.EntryData(error_code=code, error_message=message, entity=[
            R.EntityData(entity_type=t, entity_name=n) for t, n in pairs]))
    return R(throttle_time_ms=0, entries=out)
