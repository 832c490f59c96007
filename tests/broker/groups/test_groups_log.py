"""ConsumerOffsetsLog over real storage.Log partitions (via log_adapter): a
coordinator's state survives a full LogManager restart."""
from __future__ import annotations

import uuid

from samsa.broker.groups import ConsumerOffsetsLog, GroupCoordinator, GroupCoordinatorConfig
from samsa.broker.groups.log_adapter import offsets_log_functions
from samsa.broker.groups.store import OFFSETS_TOPIC
from samsa.config.topic import TopicConfig
from samsa.protocol.errors import ErrorCode as E
from samsa.storage import LogManager

PARTITIONS = 3


def open_store(tmp_path):
    lm = LogManager([str(tmp_path / "logs")], TopicConfig(), broker_id=0, cluster_id="c")
    lm.startup()
    topic_id = uuid.uuid4()
    for p in range(PARTITIONS):
        lm.create_log(OFFSETS_TOPIC, p, config=TopicConfig(), topic_id=topic_id)
    append, read_all = offsets_log_functions(lambda p: lm.get_log(OFFSETS_TOPIC, p), PARTITIONS)
    return lm, ConsumerOffsetsLog(append, read_all, num_partitions=PARTITIONS)


async def test_state_survives_restart_on_real_logs(tmp_path):
    cfg = GroupCoordinatorConfig(group_min_session_timeout_ms=10,
                                 group_initial_rebalance_delay_ms=0)
    lm, store = open_store(tmp_path)
    c = GroupCoordinator(store, cfg)
    await c.start()
    r = await c.join_group("g", "", None, "cli", "h", 30000, 30000, "consumer",
                           [("range", b"\x00sub")], False)
    s = await c.sync_group("g", 1, r.member_id, None, None, None, [(r.member_id, b"\x01as")])
    assert s.error_code == E.NONE
    for i in range(50):  # many small batches, several reads on replay
        await c.commit_offsets("g", 1, r.member_id, None, [("t", i % 4, i, -1, f"m{i}")])
    await c.commit_offsets("simple", -1, "", None, [("x", 0, 9, 1, "")])
    await c.commit_offsets("tmp", -1, "", None, [("x", 0, 1, -1, "")])
    assert (await c.delete_groups(["tmp"])) == [("tmp", E.NONE)]
    await c.shutdown()
    lm.shutdown()

    lm, store = open_store(tmp_path)
    c = GroupCoordinator(store, cfg)
    await c.start()
    try:
        f = await c.fetch_offsets("g", None)
        assert [(x.partition, x.offset, x.metadata) for x in f.partitions] == [
            (0, 48, "m48"), (1, 49, "m49"), (2, 46, "m46"), (3, 47, "m47")]
        assert [tuple(x) for x in (await c.fetch_offsets("simple", None)).partitions] == [
            ("x", 0, 9, 1, "", 0)]
        assert "tmp" not in c.groups
        [d] = await c.describe_groups(["g"])
        assert d.state == "Stable"
        assert [(m.member_id, m.metadata, m.assignment) for m in d.members] == [
            (r.member_id, b"\x00sub", b"\x01as")]
    finally:
        await c.shutdown()
        lm.shutdown()
