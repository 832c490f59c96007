"""Descriptors a log holds (issue 15, item 7): none while idle, one per
segment in use, and none left behind by a deleted topic."""
from __future__ import annotations

import os

from samsa.config.topic import TopicConfig
from samsa.storage.log import Log
from samsa.storage.manager import LogManager
from tests.storage.helpers import batch_of, open_under
from tests.support.waiting import wait_until



def test_an_opened_log_holds_no_descriptor_until_used(tmp_path):
    cfg = TopicConfig(segment_bytes=2000)
    lg = Log.open(str(tmp_path / "t-0"), cfg)
    for _ in range(30):
        lg.append(batch_of(10))
    assert len(lg.segments) > 3
    lg.close()
    again = Log.open(str(tmp_path / "t-0"), cfg)
    assert open_under(tmp_path) == []  # loaded: nothing open, not even the active .log
    again.append(batch_of(1))
    assert [os.path.basename(p) for p in open_under(tmp_path)] == [
        os.path.basename(again.active_segment.log_path)]  # the .log written to; indexes none
    again.close()
    assert open_under(tmp_path) == []


def test_a_deleted_topic_leaves_no_descriptor_and_no_directory(tmp_path):
    data = tmp_path / "data"
    cfg = TopicConfig(file_delete_delay_ms=0)
    lm = LogManager([str(data)], cfg, 0, "c1")
    lm.startup()
    lg = lm.create_log("gone", 0, cfg)
    for _ in range(200):  # enough for index entries still waiting to be written
        lg.append(batch_of(10, size=100))
    lm.delete_topic("gone")
    wait_until(lambda: not any(n.startswith("gone-") for n in os.listdir(data)),
               what="the deleted partition's directory to go")
    assert open_under(data) == []
    lm.shutdown()
