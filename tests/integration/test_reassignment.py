"""Partition reassignment across a samsa cluster (real broker processes, a real
ZooKeeper): what an operator moving partitions with kafka-reassign-partitions
relies on.

- a partition moved from brokers (0,1,2) to (1,2,3), with a 4th broker started
  for it, while an idempotent acks=all producer writes: the new replica copies
  the leader byte for byte, the old one is dropped and its log deleted, and
  every acknowledged record is read back exactly once at its offset;
- the ZooKeeper-era way (the tool writes /admin/reassign_partitions): the
  controller carries it out and deletes the znode when done, also shrinking
  the replication factor;
- a reassignment that cannot finish (its new replica is paused) is listed
  with its adding/removing replicas, and cancelling it restores the original
  replicas; bad requests get Kafka's errors; only the controller answers.
"""
from __future__ import annotations

import json
import subprocess
import sys
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from samsa.client.blocking import SimpleClient
from samsa.protocol.errors import ErrorCode
from samsa.protocol.messages import (AlterPartitionReassignmentsRequest,
                               ListPartitionReassignmentsRequest)
from tests.integration.test_replication import _read_all, _wait_for_identical_replicas
from tests.support.acked_writer import AckedWriter
from tests.support.cluster import Cluster
from tests.support.waiting import wait_until

ALTER, LIST = 45, 46


def _topic(cluster: Cluster, replicas: list[int], min_isr: int = 2) -> str:
    name = f"moving-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=-1, replica_assignment=[replicas], config={
        "min.insync.replicas": str(min_isr)})], operation_timeout=30)[name].result(30)
    cluster.wait_for_leaders(name, 1)
    wait_until(lambda: sorted(cluster.partition_state(name, 0)["isr"]) == sorted(replicas), 60,
               f"every replica of {name}-0 in sync")
    return name


def _settled(cluster: Cluster, topic: str, replicas: list[int]) -> bool:
    """The reassignment is over: the replica list is ``replicas``, nothing is
    being added or removed, and the ISR is exactly those replicas."""
    a = cluster.assignment(topic)
    state = cluster.partition_state(topic, 0) or {}
    return (a["partitions"].get(0) == replicas and not a["adding_replicas"]
            and not a["removing_replicas"] and sorted(state.get("isr", ())) == sorted(replicas)
            and state.get("leader") in replicas)


def _check_read_back(cluster: Cluster, topic: str, writer: AckedWriter) -> None:
    got = _read_all(cluster, topic, 1, writer.acked)
    seen: dict[str, int] = {}
    for _, offset, value in got:
        assert value not in seen, f"{value} read twice (offsets {seen[value]} and {offset})"
        seen[value] = offset
    lost = [v for v in writer.acked if v not in seen]
    assert not lost, f"{len(lost)} acknowledged values not read back, e.g. {lost[:5]}"
    moved = [(v, o, seen[v]) for v, (_, o) in writer.acked.items() if seen[v] != o]
    assert not moved, f"values read at other offsets than acknowledged: {moved[:5]}"


def test_move_to_a_new_broker_under_load(cluster_factory, java_tools):
    cluster = cluster_factory(offsets_partitions=3,
                              overrides={"replica.lag.time.max.ms": "4000"})
    topic = _topic(cluster, [0, 1, 2])
    new = cluster.add_broker()
    assert new == 3
    writer = AckedWriter(cluster.bootstrap, topic)
    try:
        wait_until(lambda: len(writer.acked) >= 2000, 60, "records acknowledged before the move")
        # The controller learns of broker 3 through its own watch, a moment after
        # the registration: until then it refuses 3 as not alive, and is asked again.
        out = wait_until(lambda: (r := java_tools.run(
            "Reassign", "--bootstrap-server", cluster.bootstrap, "--reassign",
            f"{topic}:0=1,2,3")) and "InvalidReplicaAssignment" not in r.stdout and r, 60,
            "the controller to accept broker 3 as a target")
        assert out.check().lines == [f"{topic}-0: started"]
        wait_until(lambda: _settled(cluster, topic, [1, 2, 3]), 90,
                   f"{topic}-0 moved to brokers 1, 2, 3")
        # The removed replica deletes its copy; the new one holds the whole log.
        wait_until(lambda: not (cluster.broker(0).data_dir / f"{topic}-0").exists(), 30,
                   "broker 0's copy of the moved partition deleted")
        assert java_tools.run("Reassign", "--bootstrap-server", cluster.bootstrap,
                              "--list").check().lines == []
        during = len(writer.acked)
        wait_until(lambda: len(writer.acked) >= during + 1000, 60,
                   "records acknowledged after the move")
    finally:
        writer.stop()
    assert not writer.errors, writer.errors[:5]
    _check_read_back(cluster, topic, writer)
    _wait_for_identical_replicas(cluster, topic, 1, brokers=(1, 2, 3))


def test_reassignment_written_to_zookeeper_by_an_old_tool(cluster_factory):
    cluster = cluster_factory(offsets_partitions=3)
    topic = _topic(cluster, [0, 1, 2])
    writer = AckedWriter(cluster.bootstrap, topic)
    try:
        wait_until(lambda: len(writer.acked) >= 500, 60, "records acknowledged")
        # kafka-reassign-partitions before 2.4 wrote this znode and waited for it to go;
        # here the replication factor also shrinks from 3 to 2.
        cluster.zk_client().create("/admin/reassign_partitions", json.dumps(
            {"version": 1, "partitions": [{"topic": topic, "partition": 0,
                                           "replicas": [2, 1]}]}).encode())
        wait_until(lambda: cluster.zk_client().exists("/admin/reassign_partitions") is None, 60,
                   "the controller to finish and delete /admin/reassign_partitions")
        assert _settled(cluster, topic, [2, 1])
        wait_until(lambda: not (cluster.broker(0).data_dir / f"{topic}-0").exists(), 30,
                   "broker 0's copy deleted")
        during = len(writer.acked)
        wait_until(lambda: len(writer.acked) >= during + 500, 60, "records acknowledged after")
    finally:
        writer.stop()
    assert not writer.errors, writer.errors[:5]
    _check_read_back(cluster, topic, writer)
    _wait_for_identical_replicas(cluster, topic, 1, brokers=(2, 1))


def _alter(bootstrap: str, partitions: dict[tuple[str, int], list[int] | None]):
    R = AlterPartitionReassignmentsRequest
    by_topic: dict[str, list] = {}
    for (t, p), replicas in partitions.items():
        by_topic.setdefault(t, []).append(R.ReassignablePartition(partition_index=p,
                                                                  replicas=replicas))
    with SimpleClient(bootstrap) as c:
        return c.call(ALTER, R(timeout_ms=10000, allow_replication_factor_change=True,
                               topics=[R.ReassignableTopic(name=t, partitions=ps)
                                       for t, ps in by_topic.items()]), highest=0)


def _codes(response) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code
            for t in response.responses for p in t.partitions}


def _listed(bootstrap: str) -> dict[tuple[str, int], tuple[list, list, list]]:
    with SimpleClient(bootstrap) as c:
        r = c.call(LIST, ListPartitionReassignmentsRequest(timeout_ms=10000, topics=None),
                   highest=0)
    assert r.error_code == 0, r
    return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas),
                                          list(p.removing_replicas))
            for t in r.topics for p in t.partitions}


def test_stuck_reassignment_listed_and_cancelled_and_bad_requests(cluster_factory):
    # A long session keeps a paused broker registered (so it may be a target)
    # while it cannot copy anything.
    cluster = cluster_factory(offsets_partitions=3, session_timeout_ms=10000)
    topic = _topic(cluster, [0, 1, 2])
    controller = cluster.controller_id()
    other = next(b for b in range(3) if b != controller)
    to_controller = cluster.broker(controller).bootstrap

    # Only the controller handles them.
    r = _alter(cluster.broker(other).bootstrap, {(topic, 0): [0, 1]})
    assert r.error_code == ErrorCode.NOT_CONTROLLER
    # Kafka's answers for what cannot be done.
    r = _alter(to_controller, {(topic, 5): [0, 1], ("no-such-topic", 0): [0, 1],
                               (topic, 0): [0, 7]})
    assert r.error_code == 0
    assert _codes(r) == {(topic, 5): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                         (topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert _codes(_alter(to_controller, {(topic, 0): [1, 1]})) == {
        (topic, 0): ErrorCode.INVALID_REPLICA_ASSIGNMENT}
    assert _codes(_alter(to_controller, {(topic, 0): None})) == {
        (topic, 0): ErrorCode.NO_REASSIGNMENT_IN_PROGRESS}
    assert cluster.assignment(topic)["partitions"][0] == [0, 1, 2]

    new = cluster.add_broker()
    cluster.pause(new)
    try:
        # (the controller takes the new broker as alive once its watch fires)
        started = wait_until(lambda: (c := _codes(_alter(to_controller, {(topic, 0): [0, 1, new]})))
                             [(topic, 0)] != ErrorCode.INVALID_REPLICA_ASSIGNMENT and c, 30,
                             f"the controller to accept broker {new} as a target")
        assert started == {(topic, 0): ErrorCode.NONE}
        assert _listed(to_controller) == {(topic, 0): ([0, 1, new, 2], [new], [2])}
        a = cluster.assignment(topic)
        assert (a["partitions"][0], a["adding_replicas"], a["removing_replicas"]) == (
            [0, 1, new, 2], {0: [new]}, {0: [2]})
        assert _codes(_alter(to_controller, {(topic, 0): None})) == {(topic, 0): ErrorCode.NONE}
        assert _listed(to_controller) == {}
        assert _settled(cluster, topic, [0, 1, 2])
    finally:
        cluster.resume(new)


def _samsa(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "samsa", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_reassign_partitions_and_leader_election_tools(cluster_factory, tmp_path):
    cluster = cluster_factory(offsets_partitions=3)
    topic = _topic(cluster, [0, 1, 2])
    other = _topic(cluster, [1, 2, 0])  # for the leader elections
    boot = cluster.bootstrap
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [2, 1]}]}))

    out = _samsa("reassign-partitions", "--bootstrap-server", boot,
                 "--reassignment-json-file", plan, "--execute")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "Current partition replica assignment", "",
        '{"version":1,"partitions":[{"topic":"%s","partition":0,"replicas":[0,1,2],'
        '"log_dirs":["any","any","any"]}]}' % topic, "",
        "Save this to use as the --reassignment-json-file option during rollback",
        f"Successfully started partition reassignment for {topic}-0"]
    wait_until(lambda: _settled(cluster, topic, [2, 1]), 60, "the move to brokers 2, 1")
    out = _samsa("reassign-partitions", "--bootstrap-server", boot,
                 "--reassignment-json-file", plan, "--verify")
    assert (out.returncode, out.stdout.splitlines()) == (0, [
        "Status of partition reassignment:",
        f"Reassignment of partition {topic}-0 is completed."])
    out = _samsa("reassign-partitions", "--bootstrap-server", boot, "--list")
    assert (out.returncode, out.stdout) == (0, "No partition reassignments found.\n")

    # What cannot be done: one line each, a non-zero exit, no traceback.
    out = _samsa("reassign-partitions", "--bootstrap-server", boot,
                 "--reassignment-json-file", plan, "--cancel")
    assert (out.returncode, out.stdout) == (
        0, "None of the specified partition reassignments are active.\n")
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [0, 9]}]}))
    out = _samsa("reassign-partitions", "--bootstrap-server", boot,
                 "--reassignment-json-file", plan, "--execute")
    assert out.returncode == 1
    assert f"Error reassigning partition {topic}-0: INVALID_REPLICA_ASSIGNMENT" in out.stderr
    out = _samsa("reassign-partitions", "--bootstrap-server", boot, "--execute")
    assert out.returncode == 2 and "--reassignment-json-file" in out.stderr
    out = _samsa("reassign-partitions", "--bootstrap-server", "127.0.0.1:1", "--list")
    assert out.returncode == 1 and "cannot reach" in out.stderr
    assert "Traceback" not in out.stderr

    # --generate proposes Kafka's placement over the brokers given.
    moving = tmp_path / "topics.json"
    moving.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    out = _samsa("reassign-partitions", "--bootstrap-server", boot,
                 "--topics-to-move-json-file", moving, "--broker-list", "0,1", "--generate")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment"
    assert lines[3] == "Proposed partition reassignment configuration"
    proposed = json.loads(lines[4])["partitions"]
    assert [sorted(e["replicas"]) for e in proposed] == [[0, 1]]

    # Leadership away from the preferred replica (a controlled shutdown moves it),
    # then back with the election tool.
    cluster.terminate(1)
    wait_until(lambda: cluster.partition_state(other, 0)["leader"] != 1, 30,
               "leadership moved off the stopping broker")
    cluster.restart(1)
    wait_until(lambda: sorted(cluster.partition_state(other, 0)["isr"]) == [0, 1, 2], 60,
               "broker 1 back in sync")

    def elect() -> subprocess.CompletedProcess | None:
        out = _samsa("leader-election", "--bootstrap-server", boot, "--election-type",
                     "preferred", "--topic", other, "--partition", 0)
        # Broker 1's leader can take it back into the ISR before the controller
        # has seen it register: until then the controller answers that the
        # preferred leader is not available, as Kafka's does.
        return None if "PREFERRED_LEADER_NOT_AVAILABLE" in out.stderr else out
    out = wait_until(elect, 30, "the election once the controller knows broker 1 is back")
    assert (out.returncode, out.stdout) == (
        0, f"Successfully completed leader election (PREFERRED) for partitions {other}-0\n")
    assert cluster.partition_state(other, 0)["leader"] == 1
    out = _samsa("leader-election", "--bootstrap-server", boot, "--election-type", "PREFERRED",
                 "--topic", other, "--partition", 0)
    assert (out.returncode, out.stdout) == (
        0, f"Valid replica already elected for partitions {other}-0\n")
    out = _samsa("leader-election", "--bootstrap-server", boot, "--election-type", "PREFERRED",
                 "--topic", other, "--partition", 7)
    assert out.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in out.stderr
    out = _samsa("leader-election", "--bootstrap-server", boot, "--election-type", "sideways",
                 "--all-topic-partitions")
    assert out.returncode == 2 and "Traceback" not in out.stderr
