"""`samsa configs`: kafka-configs over the wire, with its flags and its output.

    samsa configs --bootstrap-server H:P --entity-type topics --entity-name T --describe [--all]
    samsa configs --bootstrap-server H:P --entity-type brokers --entity-name 0 \\
        --alter --add-config log.retention.ms=1000,cleanup.policy=[compact,delete]
    samsa configs --bootstrap-server H:P --entity-type brokers --entity-default \\
        --alter --delete-config log.retention.ms

Changes go through IncrementalAlterConfigs (SET for --add-config, DELETE for
--delete-config), so other keys of the entity stay as they are.
"""
from __future__ import annotations

import argparse
import sys
from typing import Any

from samsa.config.describe import ConfigSource
from samsa.protocol.messages import DescribeConfigsRequest, IncrementalAlterConfigsRequest
from samsa.protocol.model import ApiKey

from samsa.client.blocking import SimpleClient, error_text, run_tool
from samsa.client.properties import add_command_config, command_config_or_exit
from samsa.tools.configs.lists import alter_lists
from samsa.tools.configs.quotas import is_quota_command, main as quotas_main

TOPIC, BROKER = 2, 4
SET, DELETE = 0, 1
_SOURCE_NAMES = {
    ConfigSource.TOPIC_CONFIG: "DYNAMIC_TOPIC_CONFIG",
    ConfigSource.DYNAMIC_BROKER_CONFIG: "DYNAMIC_BROKER_CONFIG",
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG: "DYNAMIC_DEFAULT_BROKER_CONFIG",
    ConfigSource.STATIC_BROKER_CONFIG: "STATIC_BROKER_CONFIG",
    ConfigSource.DEFAULT_CONFIG: "DEFAULT_CONFIG",
    ConfigSource.DYNAMIC_BROKER_LOGGER_CONFIG: "DYNAMIC_BROKER_LOGGER_CONFIG",
}

def _dynamic_source(rtype: int, name: str) -> int:
    """The one source kafka-configs' describe (without --all) lists for an
    entity (ConfigCommand.getResourceConfig): a topic's own overrides, a
    broker's own dynamic keys, or the cluster-wide defaults; so a broker's
    describe leaves out the defaults it inherits, as Kafka's does."""
    if rtype == TOPIC:
        return ConfigSource.TOPIC_CONFIG
    return ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG if name == "" \
        else ConfigSource.DYNAMIC_BROKER_CONFIG


def _resource(args) -> tuple[int, str, str]:
    """(resource type, resource name, how kafka-configs names it)."""
    if args.entity_type == "topics":
        return TOPIC, args.entity_name, f"topic {args.entity_name}"
    if args.entity_default:
        return BROKER, "", "brokers in the cluster"
    return BROKER, args.entity_name, f"broker {args.entity_name}"


def _refused(what: str, result: Any) -> int:
    """A resource's error in a describe or alter answer, as kafka-configs prints it."""
    print(f"{what}: {error_text(result.error_code, result.error_message)}", file=sys.stderr)
    return 1


def _describe(client: SimpleClient, args) -> int:
    rtype, name, label = _resource(args)
    resp = client.call(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest(
        include_synonyms=True, include_documentation=False,
        resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=rtype, resource_name=name, configuration_keys=None)]))
    result = resp.results[0]
    if result.error_code:
        return _refused(f"Error while describing configs for {label}", result)
    if args.all:
        heading = f"All configs for {label} are:"
    elif name == "" and rtype == BROKER:
        heading = "Default configs for brokers in the cluster are:"
    else:
        heading = f"Dynamic configs for {label} are:"
    print(heading)
    dynamic = _dynamic_source(rtype, name)
    for c in sorted(result.configs, key=lambda c: c.name):
        if not args.all and c.config_source != dynamic:
            continue
        value = "null" if c.is_sensitive else c.value
        synonyms = ", ".join(f"{_SOURCE_NAMES.get(s.source, s.source)}:{s.name}={s.value}"
                             for s in c.synonyms)
        print(f"  {c.name}={value} sensitive={str(c.is_sensitive).lower()} "
              f"synonyms={{{synonyms}}}")
    return 0


def _alter(client: SimpleClient, args) -> int:
    lists = alter_lists(args.add_config, args.delete_config)
    if lists is None:
        return 2
    adds, deletes = lists
    rtype, name, label = _resource(args)
    R = IncrementalAlterConfigsRequest
    ops = ([R.AlterableConfig(name=k, config_operation=SET, value=v) for k, v in adds.items()]
           + [R.AlterableConfig(name=k, config_operation=DELETE, value=None) for k in deletes])
    resp = client.call(ApiKey.INCREMENTAL_ALTER_CONFIGS, R(validate_only=False, resources=[R.AlterConfigsResource(
        resource_type=rtype, resource_name=name, configs=ops)]))
    result = resp.responses[0]
    if result.error_code:
        return _refused("Error while executing config command", result)
    what = "default config for brokers in the cluster" if label.startswith("brokers in") \
        else f"config for {label}"
    print(f"Completed updating {what}.")
    return 0


def main(argv) -> int:
    if is_quota_command(argv):  # users, clients, ips: quotas and SCRAM (quotas.py)
        return quotas_main(argv)
    p = argparse.ArgumentParser(prog="samsa configs",
                                description="Describe or change topic and broker configs.")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    p.add_argument("--entity-type", required=True, choices=("topics", "brokers"))
    who = p.add_mutually_exclusive_group()
    who.add_argument("--entity-name")
    who.add_argument("--entity-default", action="store_true",
                     help="the cluster-wide broker defaults (brokers only)")
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true")
    action.add_argument("--alter", action="store_true")
    p.add_argument("--all", action="store_true", help="describe every config, not only overrides")
    p.add_argument("--add-config", metavar="K1=V1,K2=[A,B]")
    p.add_argument("--delete-config", metavar="K1,K2")
    add_command_config(p)
    args = p.parse_args(argv)
    if args.entity_type == "topics" and (args.entity_default or not args.entity_name):
        p.error("--entity-type topics needs --entity-name")
    if args.entity_type == "brokers" and not (args.entity_default or args.entity_name):
        p.error("--entity-type brokers needs --entity-name or --entity-default")
    sasl, tls = command_config_or_exit(p, args.command_config)
    fn = _describe if args.describe else _alter
    return run_tool("samsa configs", args.bootstrap_server, lambda client: fn(client, args),
                    sasl=sasl, tls=tls)
