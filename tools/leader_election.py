"""`samsa leader-election`: kafka-leader-election over the wire.

    samsa leader-election --bootstrap-server H:P --election-type PREFERRED|UNCLEAN
        (--topic T --partition P | --all-topic-partitions | --path-to-json-file F)
        [--admin.config client.properties]   (SSL, SASL: Kafka's admin client properties;
                                              --command-config is its Kafka 4.2 name)

The JSON file is Kafka's: ``{"partitions":[{"topic":"t","partition":0}]}``.
The controller carries the elections out (ElectLeaders); the output and the
exit code follow Kafka's tool: 1 when any partition could not be elected.
"""
from __future__ import annotations

import argparse
import json
import sys

from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import ElectLeadersRequest
from samsa.protocol.model import ApiKey

from samsa.client.blocking import ClientError, Cluster, error_text, run_cluster_tool
from samsa.client.properties import ClientConfigFlags

PROG = "samsa leader-election"
TYPES = {"PREFERRED": 0, "UNCLEAN": 1}
_CLIENT_CONFIG = ClientConfigFlags(files=("--admin.config", "--command-config"))


def _partitions_file(path: str) -> list[tuple[str, int]]:
    try:
        with open(path, encoding="utf-8") as f:
            value = json.load(f)
        return sorted({(str(e["topic"]), int(e["partition"])) for e in value["partitions"]})
    except OSError as e:
        raise SystemExit(f"{PROG}: cannot read {path}: {e.strerror or e}") from None
    except (ValueError, KeyError, TypeError):
        raise SystemExit(f"{PROG}: {path}: expected {{\"partitions\": [{{\"topic\": ..., "
                         f"\"partition\": ...}}]}}") from None


def _elect(cluster: Cluster, election: str, wanted: list[tuple[str, int]] | None) -> int:
    by_topic: dict[str, list[int]] = {}
    for t, p in wanted or ():
        by_topic.setdefault(t, []).append(p)
    R = ElectLeadersRequest
    resp = cluster.controller().call(ApiKey.ELECT_LEADERS, R(
        election_type=TYPES[election], timeout_ms=30000,
        topic_partitions=None if wanted is None else [
            R.TopicPartitions(topic=t, partitions=ps) for t, ps in sorted(by_topic.items())]))
    if resp.error_code:
        raise ClientError(error_text(resp.error_code))
    done, noop, failed = [], [], []
    for r in resp.replica_election_results:
        for p in r.partition_result:
            name = f"{r.topic}-{p.partition_id}"
            if p.error_code == ErrorCode.NONE:
                done.append(name)
            elif p.error_code == ErrorCode.ELECTION_NOT_NEEDED:
                noop.append(name)
            else:
                failed.append((name, error_text(p.error_code, p.error_message)))
    if done:
        print(f"Successfully completed leader election ({election}) for partitions "
              f"{', '.join(sorted(done))}")
    if noop:
        print(f"Valid replica already elected for partitions {', '.join(sorted(noop))}")
    for name, text in sorted(failed):
        print(f"Error completing leader election ({election}) for partition: {name}: {text}",
              file=sys.stderr)
    if failed:
        print(f"{PROG}: {len(failed)} replica(s) could not be elected", file=sys.stderr)
        return 1
    return 0


def main(argv) -> int:
    p = argparse.ArgumentParser(prog=PROG, description="Move leadership to preferred replicas, "
                                "or elect an out-of-sync replica (unclean).")
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--election-type", required=True, type=str.upper, choices=sorted(TYPES))
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic")
    which.add_argument("--all-topic-partitions", action="store_true")
    which.add_argument("--path-to-json-file")
    p.add_argument("--partition", type=int)
    _CLIENT_CONFIG.add_to(p, "admin client")
    args = p.parse_args(argv)
    if args.topic is not None and args.partition is None:
        p.error("--topic needs --partition")
    if args.partition is not None and args.topic is None:
        p.error("--partition needs --topic")
    if args.all_topic_partitions:
        wanted = None
    elif args.path_to_json_file:
        wanted = _partitions_file(args.path_to_json_file)
    else:
        wanted = [(args.topic, args.partition)]
    client = _CLIENT_CONFIG.load(p, args)
    return run_cluster_tool(PROG, args.bootstrap_server,
                            lambda cluster: _elect(cluster, args.election_type, wanted),
                            sasl=client.sasl, tls=client.tls)
