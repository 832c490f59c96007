"""CPU seconds used by process trees, from Linux's /proc: a bench figure that other work on a
shared machine disturbs far less than wall time does.

``tree_cpu(pid)`` is the user+system time of ``pid`` and every live descendant, each including
the time of its children that have exited and been waited for (cutime/cstime): the Spark JVM
and its Python workers, say, under the bench's own process. Linux only; elsewhere ``None``.
"""
from __future__ import annotations

import os
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, utime+stime+cutime+cstime in seconds), or None once the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its last ')'.
    fields = text[text.rfind(")") + 2:].split()
    return int(fields[1]), sum(int(f) for f in fields[11:15]) / _TICKS


def tree_cpu(root: int) -> float | None:
    if not Path("/proc/self/stat").exists():
        return None
    stats = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                stats[int(entry.name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        if pid in stats:
            total += stats[pid][1]
        todo.extend(children.get(pid, ()))
    return total


def machine_busy_seconds() -> tuple[float, float] | None:
    """(busy, elapsed) CPU seconds of the whole machine so far, summed over its CPUs, from
    /proc/stat: the difference of two readings says how many cores were busy in between
    (everything: other benches and tests too), which a latency figure taken on a shared
    machine needs beside it. Linux only; elsewhere ``None``."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    # cpu user nice system idle iowait irq softirq steal ...: idle and iowait are not busy
    ticks = [int(t) for t in first[1:9]]
    idle = ticks[3] + ticks[4]
    return (sum(ticks) - idle) / _TICKS, sum(ticks) / _TICKS
