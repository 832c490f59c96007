"""What file system a bench writes to, said next to its figures.

Creating files is most of what a 10,000-partition topic costs, and on ext4 it
costs far more when the file system has no journal: ext4 then does not reuse an
inode freed in the last minute (six while its inode table block is still
dirty), and finds each new inode by walking past every recently freed one
(``find_inode_bit``/``recently_deleted`` in fs/ext4/ialloc.c). A bench run right
after another run deleted its 40,000 files then makes each file in 0.5-1 ms of
kernel time instead of 0.03 ms. This VM's root file system is such an ext4, so
the benches that create or delete many files (bench_topic_scale,
bench_storage_stop) print this line and take ``--dir`` to write elsewhere (a
journalled ext4 on a loop device: see the README's benchmarks section).

Linux only; elsewhere the description says so.
"""
from __future__ import annotations

import os
import re
from pathlib import Path


def _unescape(field: str) -> str:
    """A /proc/self/mounts field: space, tab, newline and backslash are written
    as octal escapes (\\040, \\011, \\012, \\134)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _mount_of(path: str) -> tuple[str, str, str] | None:
    """(device, mount point, type) of the mount holding ``path``: the longest
    mount point that is a prefix of it in /proc/self/mounts."""
    try:
        lines = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    real = os.path.realpath(path)
    best: tuple[str, str, str] | None = None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        device, point, fstype = fields[0], _unescape(fields[1]), fields[2]
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best[1])):
            best = (device, point, fstype)
    return best


def _has_journal(path: str) -> bool | None:
    """Whether the ext4 holding ``path`` has a journal: jbd2 lists each journal
    it runs under /proc/fs/jbd2/<block device>-<inode>."""
    try:
        st = os.stat(path)
        # (strict: without /sys, or for a device it does not list, say nothing
        # rather than "no journal")
        block = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}").resolve(
            strict=True).name
        journals = os.listdir("/proc/fs/jbd2")
    except OSError:
        return None
    return any(j.rsplit("-", 1)[0] == block for j in journals)


def describe(path: str) -> str:
    """One line: the file system ``path`` is on, and for ext4 whether it has a
    journal (without one, figures taken soon after a mass delete are inflated)."""
    mount = _mount_of(path)
    if mount is None:
        return f"file system of {path}: unknown"
    device, point, fstype = mount
    line = f"file system of {path}: {fstype} on {device} (mounted at {point})"
    if fstype == "ext4":
        journal = _has_journal(path)
        if journal is False:
            line += (": NO JOURNAL, so files made within minutes of a large delete cost many "
                     "times more (see bench/filesystem.py); --dir can point elsewhere")
        elif journal:
            line += ", journalled"
    return line
