"""`samsa reassign-partitions`: kafka-reassign-partitions over the wire.

    samsa reassign-partitions --bootstrap-server H:P --reassignment-json-file F
        --execute | --verify | --cancel
    samsa reassign-partitions --bootstrap-server H:P --list
    samsa reassign-partitions --bootstrap-server H:P --topics-to-move-json-file F
        --broker-list 1,2,3 --generate
    ... [--command-config client.properties]   (SSL, SASL: Kafka's admin client properties)

The JSON files are Kafka's: ``{"version":1,"partitions":[{"topic":"t",
"partition":0,"replicas":[1,2,3]}]}`` to reassign, ``{"version":1,
"topics":[{"topic":"t"}]}`` to generate a proposal for. Execute, cancel and
list go to the controller (AlterPartitionReassignments,
ListPartitionReassignments); verify compares the metadata with the file, as
Kafka's tool does. Output follows Kafka's tool line for line.
"""
from __future__ import annotations

import argparse
import json
import sys

from samsa.protocol.messages import (AlterPartitionReassignmentsRequest,
                               ListPartitionReassignmentsRequest)
from samsa.protocol.model import TopicPartition

from samsa.client.blocking import ClientError, Cluster, error_text, run_cluster_tool
from samsa.client.properties import ClientConfigFlags
from samsa.broker.cluster.assignment import AssignmentError, assign_replicas

PROG = "samsa reassign-partitions"
_CLIENT_CONFIG = ClientConfigFlags(files=("--command-config",))
ALTER, LIST = 45, 46


class UsageError(Exception):
    pass


def _read_json(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror or e}") from None
    except json.JSONDecodeError as e:
        raise UsageError(f"{path} is not JSON: {e}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path}: expected a JSON object")
    return value


def parse_reassignment(value: dict) -> dict[TopicPartition, list[int]]:
    """{(topic, partition): replicas} from a reassignment JSON document."""
    entries = value.get("partitions")
    if not isinstance(entries, list) or not entries:
        raise UsageError("the reassignment JSON has no \"partitions\" list")
    out: dict[TopicPartition, list[int]] = {}
    for e in entries:
        try:
            tp = (str(e["topic"]), int(e["partition"]))
            replicas = [int(r) for r in e["replicas"]]
        except (KeyError, TypeError, ValueError):
            raise UsageError(f"bad partition entry in the reassignment JSON: {e}") from None
        if tp in out:
            raise UsageError(f"partition {tp[0]}-{tp[1]} is listed twice")
        out[tp] = replicas
    return out


def _document(assignment: dict[TopicPartition, list[int]]) -> str:
    return json.dumps({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(assignment.items())]}, separators=(",", ":"))


def _current(cluster: Cluster, topics: set[str]) -> dict[TopicPartition, list[int]]:
    out = {}
    for t in cluster.metadata(sorted(topics)).topics:
        if t.error_code:
            raise ClientError(f"topic {t.name}: {error_text(t.error_code)}")
        for p in t.partitions:
            out[(t.name, p.partition_index)] = list(p.replica_nodes)
    return out


def _alter(cluster: Cluster, wanted: dict[TopicPartition, list[int] | None]) -> dict[TopicPartition, str]:
    """AlterPartitionReassignments at the controller: {partition: error text} of the refused."""
    R = AlterPartitionReassignmentsRequest
    by_topic: dict[str, list] = {}
    for (t, p), replicas in sorted(wanted.items()):
        by_topic.setdefault(t, []).append(R.ReassignablePartition(partition_index=p,
                                                                  replicas=replicas))
    resp = cluster.controller().call(ALTER, R(timeout_ms=30000, allow_replication_factor_change=True,
                                              topics=[R.ReassignableTopic(name=t, partitions=ps)
                                                      for t, ps in by_topic.items()]))
    if resp.error_code:
        raise ClientError(error_text(resp.error_code, resp.error_message))
    return {(t.name, p.partition_index): error_text(p.error_code, p.error_message)
            for t in resp.responses for p in t.partitions if p.error_code}


def _ongoing(cluster: Cluster) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
    resp = cluster.controller().call(LIST, ListPartitionReassignmentsRequest(timeout_ms=30000,
                                                                            topics=None))
    if resp.error_code:
        raise ClientError(error_text(resp.error_code, resp.error_message))
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                          list(p.removing_replicas))
            for t in resp.topics for p in t.partitions}


def _names(partitions) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(partitions))


def _execute(cluster: Cluster, wanted: dict[TopicPartition, list[int]]) -> int:
    current = _current(cluster, {t for t, _ in wanted})
    missing = sorted(tp for tp in wanted if tp not in current)
    if missing:
        raise ClientError(f"unknown partition(s): {_names(missing)}")
    print("Current partition replica assignment\n")
    print(_document({tp: current[tp] for tp in wanted}))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    refused = _alter(cluster, dict(wanted))
    for tp, text in sorted(refused.items()):
        print(f"Error reassigning partition {tp[0]}-{tp[1]}: {text}", file=sys.stderr)
    started = [tp for tp in wanted if tp not in refused]
    if started:
        print(f"Successfully started partition reassignment{'s' if len(started) > 1 else ''} "
              f"for {_names(started)}")
    return 1 if refused else 0


def _verify(cluster: Cluster, wanted: dict[TopicPartition, list[int]]) -> int:
    ongoing = _ongoing(cluster)
    current = _current(cluster, {t for t, _ in wanted})
    print("Status of partition reassignment:")
    rc = 0
    for tp, replicas in sorted(wanted.items()):
        name = f"{tp[0]}-{tp[1]}"
        if tp in ongoing:
            print(f"Reassignment of partition {name} is still in progress.")
            rc = 1
        elif current.get(tp) == replicas:
            print(f"Reassignment of partition {name} is completed.")
        else:
            have = ",".join(map(str, current.get(tp, [])))
            print(f"There is no active reassignment of partition {name}, but replica set is "
                  f"{have} rather than {','.join(map(str, replicas))}.")
            rc = 1
    return rc


def _cancel(cluster: Cluster, wanted: dict[TopicPartition, list[int]]) -> int:
    # As Kafka's tool: only the reassignments running now are cancelled.
    active = [tp for tp in wanted if tp in _ongoing(cluster)]
    if not active:
        print("None of the specified partition reassignments are active.")
        return 0
    refused = _alter(cluster, {tp: None for tp in active})
    for tp, text in sorted(refused.items()):
        print(f"Error cancelling reassignment of partition {tp[0]}-{tp[1]}: {text}",
              file=sys.stderr)
    cancelled = [tp for tp in active if tp not in refused]
    if cancelled:
        print(f"Successfully cancelled partition reassignment{'s' if len(cancelled) > 1 else ''} "
              f"for: {_names(cancelled)}")
    return 1 if refused else 0


def _list(cluster: Cluster) -> int:
    ongoing = _ongoing(cluster)
    if not ongoing:
        print("No partition reassignments found.")
        return 0
    print("Current partition reassignments:")
    for (t, p), (replicas, adding, removing) in sorted(ongoing.items()):
        print(f"{t}-{p}: replicas: {','.join(map(str, replicas))}. "
              f"adding: {','.join(map(str, adding))}. removing: {','.join(map(str, removing))}.")
    return 0


def _generate(cluster: Cluster, topics_doc: dict, brokers: list[int]) -> int:
    entries = topics_doc.get("topics")
    if not isinstance(entries, list) or not entries:
        raise UsageError("the topics-to-move JSON has no \"topics\" list")
    try:
        topics = sorted({str(e["topic"]) for e in entries})
    except (KeyError, TypeError):
        raise UsageError("every entry of \"topics\" needs a \"topic\"") from None
    meta = cluster.metadata([])
    racks = {b.node_id: b.rack for b in meta.brokers}
    unknown = sorted(set(brokers) - set(racks))
    if unknown:
        raise ClientError(f"brokers not in the cluster: {','.join(map(str, unknown))}")
    current = _current(cluster, set(topics))
    proposed: dict[TopicPartition, list[int]] = {}
    for topic in topics:
        parts = sorted(p for t, p in current if t == topic)
        rf = len(current[(topic, parts[0])])
        try:
            placed = assign_replicas(brokers, len(parts), rf,
                                     racks={b: racks[b] for b in brokers})
        except AssignmentError as e:
            raise ClientError(f"topic {topic}: {e}") from None
        proposed.update({(topic, p): placed[p] for p in parts})
    print("Current partition replica assignment")
    print(_document(current))
    print("\nProposed partition reassignment configuration")
    print(_document(proposed))
    return 0


def _broker_list(text: str) -> list[int]:
    try:
        ids = [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected broker ids like 1,2,3, got {text!r}") from None
    if not ids:
        raise argparse.ArgumentTypeError("expected at least one broker id")
    return ids


def main(argv) -> int:
    p = argparse.ArgumentParser(prog=PROG, description="Move partitions between brokers.")
    p.add_argument("--bootstrap-server", required=True)
    actions = p.add_mutually_exclusive_group(required=True)
    for flag in ("--execute", "--verify", "--cancel", "--list", "--generate"):
        actions.add_argument(flag, action="store_true")
    p.add_argument("--reassignment-json-file")
    p.add_argument("--topics-to-move-json-file")
    p.add_argument("--broker-list", type=_broker_list)
    _CLIENT_CONFIG.add_to(p, "admin client")
    args = p.parse_args(argv)
    client = _CLIENT_CONFIG.load(p, args)
    try:
        if args.list:
            action = _list
        elif args.generate:
            if not args.topics_to_move_json_file or not args.broker_list:
                raise UsageError("--generate needs --topics-to-move-json-file and --broker-list")
            doc, brokers = _read_json(args.topics_to_move_json_file), args.broker_list
            action = lambda cluster: _generate(cluster, doc, brokers)
        else:
            if not args.reassignment_json_file:
                raise UsageError("--execute, --verify and --cancel need --reassignment-json-file")
            wanted = parse_reassignment(_read_json(args.reassignment_json_file))
            step = _execute if args.execute else _verify if args.verify else _cancel
            action = lambda cluster: step(cluster, wanted)
    except UsageError as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    return run_cluster_tool(PROG, args.bootstrap_server, action, sasl=client.sasl, tls=client.tls)
