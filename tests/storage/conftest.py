from __future__ import annotations

import os

import pytest

from samsa.config.topic import TopicConfig
from samsa.storage.log import Log


@pytest.fixture
def make_log(tmp_path):
    """Open (or reopen) a Log in a fresh ``t-0`` directory; closes what it opened."""
    opened: list[Log] = []

    def factory(config: TopicConfig | None = None, name: str = "t-0", **kw) -> Log:
        cfg = config or TopicConfig(file_delete_delay_ms=0)
        topic, _, part = name.rpartition("-")
        lg = Log(os.path.join(tmp_path, name), topic, int(part), cfg, **kw)
        opened.append(lg)
        return lg

    yield factory
    for lg in opened:
        try:
            lg.close()
        except Exception:
            pass
