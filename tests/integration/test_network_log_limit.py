"""The network layer's warnings are rate-limited (issue 15, item 7).

A client that opens connections in a loop and sends garbage, or a broker out
of descriptors refusing accepts, must not write a line per event: one line
per kind of event per interval, the next one saying how many were dropped.
"""
from __future__ import annotations

import logging
import os
import re
import resource
import socket
import struct

from samsa.broker.network.log_limit import RateLimitedLog
from tests.support.kafka_wire import probe_api_versions
from tests.support.waiting import wait_until


def _log_lines(broker, needle: str) -> list[str]:
    return [line for line in broker.log_path.read_text(errors="replace").splitlines()
            if needle in line]


def _closed_by_peer(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_malformed_frames_log_one_line_per_interval(broker):
    for _ in range(300):
        with socket.create_connection((broker.host, broker.port), timeout=10) as s:
            s.sendall(struct.pack(">i", -5))
            assert _closed_by_peer(s)
    assert probe_api_versions(broker.host, broker.port) >= 0
    assert 1 <= len(_log_lines(broker, "frame size -5 outside")) <= 2


def test_refused_accepts_log_one_line_per_interval(broker):
    """Out of descriptors, the acceptor keeps retrying; it says so once per
    interval, and serves again once descriptors are back."""
    pid = broker.pid
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    in_use = len(os.listdir(f"/proc/{pid}/fd"))
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (in_use + 2, hard))
    waiting = []
    try:
        for _ in range(20):
            # The kernel completes the handshake from the backlog; the broker's
            # accept() fails with EMFILE once its descriptors run out.
            waiting.append(socket.create_connection((broker.host, broker.port), timeout=10))
        # The acceptor retries every 50 ms and says so once per 10 s interval: the
        # line that opens the next interval counts the refusals it kept quiet, so
        # the first two lines prove that many refusals gave one line.
        def two_lines():
            lines = _log_lines(broker, "accept failed")
            return lines if len(lines) >= 2 else None
        lines = wait_until(two_lines, 60, "the acceptor's second 'accept failed' line")
        assert "suppressed" not in lines[0], lines
        suppressed = re.search(r"\((\d+) similar message\(s\) suppressed in the last 10 s\)", lines[1])
        assert suppressed and int(suppressed.group(1)) >= 10, lines
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        for s in waiting:
            s.close()
    assert probe_api_versions(broker.host, broker.port) >= 0


def test_suppressed_count_is_reported_with_the_next_line(caplog):
    now = [100.0]
    limited = RateLimitedLog(logging.getLogger("test.limit"), interval=10.0,
                             clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.limit"):
        assert limited.warning("k", "bad frame from %s", "a")
        for _ in range(5):
            assert not limited.warning("k", "bad frame from %s", "b")
        assert limited.warning("other", "another kind")  # kinds are limited apart
        now[0] += 10.0
        assert limited.warning("k", "bad frame from %s", "c")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["bad frame from a", "another kind",
                     "bad frame from c (5 similar message(s) suppressed in the last 10 s)"]
