"""`samsa configs` for client quotas (users, clients, user+client pairs, ips),
as kafka-configs does them through DescribeClientQuotas / AlterClientQuotas:

    samsa configs --bootstrap-server H:P --alter --add-config \\
        'producer_byte_rate=1024,consumer_byte_rate=2048' --entity-type users --entity-name alice
    samsa configs --bootstrap-server H:P --alter --add-config request_percentage=50 \\
        --entity-type users --entity-name alice --entity-type clients --entity-default
    samsa configs --bootstrap-server H:P --describe --entity-type clients
    samsa configs --bootstrap-server H:P --alter --delete-config producer_byte_rate \\
        --entity-type clients --entity-name app

As in kafka-configs, each --entity-name / --entity-default belongs to the
--entity-type before it; a type without a name describes every entity of it.
"""
from __future__ import annotations

import argparse
import sys

from samsa.protocol.messages import AlterClientQuotasRequest, DescribeClientQuotasRequest
from samsa.protocol.model import ApiKey

from samsa.tools.configs import scram
from samsa.client.blocking import SimpleClient, error_text, run_tool
from samsa.client.properties import add_command_config, command_config_or_exit
from samsa.tools.configs.lists import alter_lists

QUOTA_ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_MATCH_EXACT, _MATCH_DEFAULT, _MATCH_SPECIFIED = 0, 1, 2
_NO_NAME = object()  # a type given without --entity-name / --entity-default


def is_quota_command(argv: list[str]) -> bool:
    """Whether a `samsa configs` command line is about client quota entities."""
    return any(a in QUOTA_ENTITY_TYPES for a, prev in zip(argv, [None, *argv])
               if prev == "--entity-type") or any(
        a.startswith("--entity-type=") and a.split("=", 1)[1] in QUOTA_ENTITY_TYPES
        for a in argv)


def _entities(argv: list[str]) -> tuple[list[tuple[str, object]], list[str]]:
    """((entity type, name | None for default | _NO_NAME) in order, other args)."""
    pairs: list[list] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, inline = arg.partition("=")
        if flag in ("--entity-type", "--entity-name"):
            value = inline if eq else (argv[i + 1] if i + 1 < len(argv) else None)
            if value is None:
                raise ValueError(f"{flag} needs a value")
            i += 1 if eq else 2
            if flag == "--entity-type":
                if value not in QUOTA_ENTITY_TYPES:
                    raise ValueError(f"--entity-type {value} cannot be combined with "
                                     "users, clients or ips")
                pairs.append([value, _NO_NAME])
            elif not pairs or pairs[-1][1] is not _NO_NAME:
                raise ValueError("--entity-name must follow its --entity-type")
            else:
                pairs[-1][1] = value
            continue
        if arg == "--entity-default":
            if not pairs or pairs[-1][1] is not _NO_NAME:
                raise ValueError("--entity-default must follow its --entity-type")
            pairs[-1][1] = None
        else:
            rest.append(arg)
        i += 1
    return [(t, n) for t, n in pairs], rest


def _show_name(name) -> str:
    return "<default>" if name is None else name


def _describe(client: SimpleClient, pairs) -> int:
    R = DescribeClientQuotasRequest
    components = []
    for entity_type, name in pairs:
        t = QUOTA_ENTITY_TYPES[entity_type]
        if name is _NO_NAME:
            components.append(R.ComponentData(entity_type=t, match_type=_MATCH_SPECIFIED))
        elif name is None:
            components.append(R.ComponentData(entity_type=t, match_type=_MATCH_DEFAULT))
        else:
            components.append(R.ComponentData(entity_type=t, match_type=_MATCH_EXACT,
                                              match=name))
    resp = client.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, R(components=components, strict=True))
    if resp.error_code:
        print(f"Error while executing config command: "
              f"{error_text(resp.error_code, resp.error_message)}", file=sys.stderr)
        return 1
    labels = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
    for entry in resp.entries or []:
        who = ", ".join(f"{labels.get(e.entity_type, e.entity_type)} "
                        f"'{_show_name(e.entity_name)}'" for e in entry.entity)
        values = ", ".join(f"{v.key}={v.value}" for v in entry.values)
        print(f"Quota configs for {who} are {values}")
    if [t for t, _ in pairs] == ["users"] and pairs[0][1] is not None:
        # A user's znode also holds its SCRAM credentials; kafka-configs shows both.
        user = None if pairs[0][1] is _NO_NAME else pairs[0][1]
        return scram.describe(client, user, quiet_if_none=True)
    return 0


def _alter(client: SimpleClient, pairs, adds: dict[str, str], deletes: list[str]) -> int:
    scram_adds = {k: v for k, v in adds.items() if scram.is_scram_key(k)}
    scram_deletes = [k for k in deletes if scram.is_scram_key(k)]
    if scram_adds or scram_deletes:
        if [t for t, _ in pairs] != ["users"] or pairs[0][1] is None:
            print("samsa configs: SCRAM credentials belong to one named user "
                  "(--entity-type users --entity-name NAME)", file=sys.stderr)
            return 2
        code = scram.alter(client, pairs[0][1], scram_adds, scram_deletes,
                                       announce=False)
        if code:
            return code
        adds = {k: v for k, v in adds.items() if k not in scram_adds}
        deletes = [k for k in deletes if k not in scram_deletes]
        if not adds and not deletes:
            print(f"Completed updating config for user {pairs[0][1]}.")
            return 0
    R = AlterClientQuotasRequest
    ops = []
    for key, text in adds.items():
        try:
            value = float(text)
        except ValueError:
            print(f"samsa configs: --add-config: {key} needs a number, not {text!r}",
                  file=sys.stderr)
            return 2
        ops.append(R.OpData(key=key, value=value, remove=False))
    ops += [R.OpData(key=k, value=0.0, remove=True) for k in deletes]
    entity = [R.EntityData(entity_type=QUOTA_ENTITY_TYPES[t], entity_name=n) for t, n in pairs]
    resp = client.call(ApiKey.ALTER_CLIENT_QUOTAS, R(entries=[R.EntryData(entity=entity, ops=ops)],
                             validate_only=False))
    for entry in resp.entries:
        if entry.error_code:
            print(f"Error while executing config command: "
                  f"{error_text(entry.error_code, entry.error_message)}", file=sys.stderr)
            return 1
    first_type, first_name = pairs[0]
    if first_name is None:
        print(f"Completed updating default config for {first_type} in the cluster.")
    else:
        print(f"Completed updating config for {first_type[:-1]} {first_name}.")
    return 0


def main(argv: list[str]) -> int:
    try:
        pairs, rest = _entities(argv)
    except ValueError as e:
        print(f"samsa configs: {e}", file=sys.stderr)
        return 2
    p = argparse.ArgumentParser(prog="samsa configs",
                                description="Describe or change client quotas.")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    p.add_argument("--add-config", metavar="K1=V1,K2=V2")
    p.add_argument("--delete-config", metavar="K1,K2")
    add_command_config(p)
    args = p.parse_args(rest)
    sasl, tls = command_config_or_exit(p, args.command_config)
    if len({t for t, _ in pairs}) != len(pairs):
        p.error("each --entity-type may be given once")
    if args.describe:
        return run_tool("samsa configs", args.bootstrap_server,
                        lambda client: _describe(client, pairs), sasl=sasl, tls=tls)
    if any(n is _NO_NAME for _, n in pairs):
        p.error("--alter needs --entity-name or --entity-default for every --entity-type")
    lists = alter_lists(args.add_config, args.delete_config)
    if lists is None:
        return 2
    adds, deletes = lists
    return run_tool("samsa configs", args.bootstrap_server,
                    lambda client: _alter(client, pairs, adds, deletes), sasl=sasl, tls=tls)
