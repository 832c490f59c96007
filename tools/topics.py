"""`samsa topics`: create, list, describe, alter and delete topics over the wire."""
from __future__ import annotations

import argparse
import sys

from samsa.protocol.messages import (CreatePartitionsRequest, CreateTopicsRequest,
                               DeleteTopicsRequest, DescribeConfigsRequest, MetadataRequest)
from samsa.protocol.model import ApiKey

from samsa.client.blocking import error_text as _error, run_tool
from samsa.client.properties import add_command_config, command_config_or_exit
from samsa.broker.metadata import kafka_id

_DEFAULT_CONFIG = 5  # DescribeConfigs' config source of a key nobody set


def _parse_configs(items):
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"samsa topics: --config expects key=value, got {item!r}")
        out[key] = value
    return out


def _parse_replica_assignment(text: str) -> list[list[int]]:
    """kafka-topics' --replica-assignment, its checks and its words: the
    partitions separated by commas, each one's broker ids (its preferred
    leader first) by colons, e.g. 0:1:2,1:2:0."""
    partitions: list[list[int]] = []
    for i, part in enumerate(text.split(",")):
        brokers = []
        for word in part.split(":"):
            try:
                brokers.append(int(word.strip()))
            except ValueError:
                raise ValueError(f"--replica-assignment {text}: {word.strip()!r} is not a broker "
                                 f"id (partitions separated by commas, their broker ids by "
                                 f"colons, e.g. 0:1:2,1:2:0)") from None
        twice = sorted({b for b in brokers if brokers.count(b) > 1})
        if twice:
            raise ValueError("Partition replica lists may not contain duplicate entries: "
                             + ",".join(map(str, twice)))
        if partitions and len(brokers) != len(partitions[0]):
            raise ValueError(f"Partition {i} has different replication factor: "
                             f"[{', '.join(map(str, brokers))}]")
        partitions.append(brokers)
    return partitions


def _failed(reason: str) -> int:
    print(f"Error while executing topic command: {reason}", file=sys.stderr)
    return 1


def _metadata(client, topics=None):
    req = MetadataRequest(allow_auto_topic_creation=False, topics=None if topics is None else [
        MetadataRequest.MetadataRequestTopic(name=t) for t in topics])
    return client.call(ApiKey.METADATA, req)


def _create(client, args) -> int:
    # An explicit assignment stands for the partition count and replication factor.
    req = CreateTopicsRequest(timeout_ms=30000, validate_only=False, topics=[
        CreateTopicsRequest.CreatableTopic(
            name=args.topic, num_partitions=args.partitions or -1,
            replication_factor=args.replication_factor or -1,
            assignments=[CreateTopicsRequest.CreatableReplicaAssignment(
                partition_index=i, broker_ids=brokers)
                for i, brokers in enumerate(args.assignment or [])],
            configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                     for k, v in _parse_configs(args.config).items()])])
    result = client.call(ApiKey.CREATE_TOPICS, req).topics[0]
    if result.error_code:
        return _failed(_error(result.error_code, result.error_message))
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
        configs = client.call(ApiKey.DESCRIBE_CONFIGS, DescribeConfigsRequest(resources=[
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
    new = None
    if args.assignment is not None:
        # As kafka-topics: the assignment lists every partition, the existing
        # ones too; those after them are the new partitions'.
        topic = _metadata(client, [args.topic]).topics[0]
        if topic.error_code:
            return _failed(_error(topic.error_code))
        new = [CreatePartitionsRequest.CreatePartitionsAssignment(broker_ids=brokers)
               for brokers in args.assignment[len(topic.partitions):]]
    req = CreatePartitionsRequest(timeout_ms=30000, validate_only=False, topics=[
        CreatePartitionsRequest.CreatePartitionsTopic(name=args.topic, count=args.partitions,
                                                      assignments=new)])
    result = client.call(ApiKey.CREATE_PARTITIONS, req).results[0]
    if result.error_code:
        return _failed(_error(result.error_code, result.error_message))
    return 0


def _delete(client, args) -> int:
    version = client.version_for(ApiKey.DELETE_TOPICS)
    if version >= 6:
        req = DeleteTopicsRequest(timeout_ms=30000, topics=[
            DeleteTopicsRequest.DeleteTopicState(name=args.topic)])
    else:
        req = DeleteTopicsRequest(timeout_ms=30000, topic_names=[args.topic])
    result = client.call(ApiKey.DELETE_TOPICS, req).responses[0]
    if result.error_code:
        return _failed(_error(result.error_code, result.error_message))
    return 0


def main(argv) -> int:
    p = argparse.ArgumentParser(prog="samsa topics")
    p.add_argument("--bootstrap-server", default="localhost:9092")
    add_command_config(p)
    action = p.add_mutually_exclusive_group(required=True)
    for name in ("create", "list", "describe", "alter", "delete"):
        action.add_argument(f"--{name}", action="store_true")
    p.add_argument("--topic")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--replica-assignment", metavar="BROKERS:OF:P0,BROKERS:OF:P1,...",
                   help="with --create or --alter: each partition's broker ids, e.g. "
                        "0:1:2,1:2:0 (with --alter the existing partitions come first)")
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
    # kafka-topics' checks and words (an empty assignment is none, as there)
    args.assignment = None
    if args.replica_assignment:
        for other in ("list", "describe", "delete") + (
                ("partitions", "replication_factor") if args.create else ()):
            if getattr(args, other):
                p.error(f'Option "[replica-assignment]" can\'t be used with option '
                        f'"[{other.replace("_", "-")}]"')
        try:
            args.assignment = _parse_replica_assignment(args.replica_assignment)
        except ValueError as e:
            return _failed(str(e))
    sasl, tls = command_config_or_exit(p, args.command_config)
    actions = {"create": _create, "list": _list, "describe": _describe, "alter": _alter,
               "delete": _delete}
    chosen = next((fn for name, fn in actions.items() if getattr(args, name)), None)
    if chosen is None:
        return 2
    return run_tool("samsa topics", args.bootstrap_server, lambda client: chosen(client, args),
                    sasl=sasl, tls=tls)
