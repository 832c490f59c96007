"""`samsa topics`: create, list, describe, alter and delete topics over the wire."""
from __future__ import annotations

import argparse
import sys

from protocol.messages import (CreatePartitionsRequest, CreateTopicsRequest,
                               DeleteTopicsRequest, DescribeConfigsRequest, MetadataRequest)

from .client import error_text as _error, run_tool
from .tool_config import command_config_security
from .metadata import kafka_id

_DEFAULT_CONFIG = 5  # DescribeConfigs' config source of a key nobody set


def _parse_configs(items):
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"samsa topics: --config expects key=value, got {item!r}")
        out[key] = value
    return out


def _metadata(client, topics=None):
    req = MetadataRequest(allow_auto_topic_creation=False, topics=None if topics is None else [
        MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
    return client.call(3, req)


def _create(client, args) -> int:
    req = CreateTopicsRequest(timeout_ms=30000, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(
            name=args.topic, num_partitions=args.partitions or -1,
            replication_factor=args.replication_factor or -1,
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                     for k, v in _parse_configs(args.config).items()])])
    result = client.call(19, req).topics[0]
    if result.error_code:
        print(f"Error while executing topic command: {_error(result.error_code, result.error_message)}",
              file=sys.stderr)
        return 1
    print(f"Created topic {args.topic}.")
    return 0


def _list(client, args) -> int:
    for t in sorted(_metadata(client).topics, key=lambda t: t.name):
        print(t.name)
    return 0


def _partition_filter(args):
    """kafka-topics' partition filters: with one, only the partitions it
    selects are printed, without the topic lines."""
    if args.under_replicated_partitions:
        return lambda p: len(p.isr_nodes) < len(p.replica_nodes)
    if args.unavailable_partitions:
        return lambda p: p.leader_id < 0
    return None


def _describe(client, args) -> int:
    resp = _metadata(client, [args.topic] if args.topic else None)
    selected = _partition_filter(args)
    rc = 0
    for t in sorted(resp.topics, key=lambda t: t.name or ""):
        if t.error_code:
            print(f"Error for topic {t.name}: {_error(t.error_code)}", file=sys.stderr)
            rc = 1
            continue
        if selected is not None:
            _print_partitions(t, [p for p in t.partitions if selected(p)])
            continue
        configs = client.call(32, DescribeConfigsRequest(resources=[
            DescribeConfigsRequest.DescribeConfigsResource(resource_type=2, resource_name=t.name,
                                                           configuration_keys=None)]))
        # Kafka's "Configs:" lists every value not at its default
        # (ConfigEntry.isDefault: any source but DEFAULT_CONFIG), so keys set
        # in the brokers' server.properties show up too, in the broker's order.
        overrides = ",".join(f"{c.name}={c.value}" for c in configs.results[0].configs
                             if c.config_source != _DEFAULT_CONFIG)
        factor = len(t.partitions[0].replica_nodes) if t.partitions else 0
        print(f"Topic: {t.name}\tTopicId: {kafka_id(t.topic_id)}\tPartitionCount: {len(t.partitions)}\t"
              f"ReplicationFactor: {factor}\tConfigs: {overrides}")
        _print_partitions(t, t.partitions)
    return rc


def _print_partitions(topic, partitions) -> None:
    for p in sorted(partitions, key=lambda p: p.partition_index):
        replicas = ",".join(map(str, p.replica_nodes))
        isr = ",".join(map(str, p.isr_nodes))
        # kafka-topics prints "none" where a partition has no leader
        leader = p.leader_id if p.leader_id >= 0 else "none"
        # Kafka 3.7+ ends the line with the eligible leader replicas (KIP-966),
        # "N/A" for a cluster without them (ZooKeeper mode, as samsa is).
        print(f"\tTopic: {topic.name}\tPartition: {p.partition_index}\tLeader: {leader}\t"
              f"Replicas: {replicas}\tIsr: {isr}\tElr: N/A\tLastKnownElr: N/A")


def _alter(client, args) -> int:
    req = CreatePartitionsRequest(timeout_ms=30000, validate_only=False, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=args.topic, count=args.partitions,
                                                      assignments=None)])
    result = client.call(37, req).results[0]
    if result.error_code:
        print(f"Error while executing topic command: {_error(result.error_code, result.error_message)}",
              file=sys.stderr)
        return 1
    return 0


def _delete(client, args) -> int:
    version = client.version_for(20)
    if version >= 6:
        req = DeleteTopicsRequest(timeout_ms=30000, topics=[
            DeleteTopicsRequest.DeleteTopicState(name=args.topic)])
    else:
        req = DeleteTopicsRequest(timeout_ms=30000, topic_names=[args.topic])
    result = client.call(20, req).responses[0]
    if result.error_code:
        print(f"Error while executing topic command: {_error(result.error_code, result.error_message)}",
              file=sys.stderr)
        return 1
    return 0


def main(argv) -> int:
    p = argparse.ArgumentParser(prog="samsa topics")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    p.add_argument("--command-config", metavar="FILE",
                   help="Kafka client properties: security.protocol, sasl.mechanism, "
                        "sasl.jaas.config, ssl.truststore.*, ssl.keystore.*")
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--config", action="append", metavar="KEY=VALUE")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--under-replicated-partitions", action="store_true",
                      help="with --describe: only partitions whose ISR lacks a replica")
    only.add_argument("--unavailable-partitions", action="store_true",
                      help="with --describe: only partitions without a leader")
    args = p.parse_args(argv)
    if (args.under_replicated_partitions or args.unavailable_partitions) and not args.describe:
        p.error("--under-replicated-partitions and --unavailable-partitions go with --describe")
    if (args.create or args.alter or args.delete) and not args.topic:
        p.error("--topic is required")
    if args.alter and not args.partitions:
        p.error("--alter needs --partitions")
    try:
        sasl, tls = command_config_security(args.command_config)
    except (OSError, ValueError) as e:
        p.error(f"--command-config {args.command_config}: {e}")
    for name, fn in (("create", _create), ("list", _list), ("describe", _describe),
                     ("alter", _alter), ("delete", _delete)):
        if getattr(args, name):
            return run_tool("samsa topics", args.bootstrap_server,
                            lambda client, fn=fn: fn(client, args), sasl=sasl, tls=tls)
    return 2
