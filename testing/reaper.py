"""Removes the test kit's directories once the process that made them is gone.

Run by lifetime.py as ``python -I reaper.py`` (standard library only). Reads lines
on stdin: ``+PATH`` to remove later, ``-PATH`` already removed. At end of input
(the kit's process exited, or was killed) it removes what is left. The children
that wrote there get SIGKILL at the same moment (their parent-death signal), so a
file one of them was still creating may appear after a first pass: it tries
again for a second, and until the directory stays gone.
"""
import os
import shutil
import sys
import time

SETTLE_S = 1.0   # passes go on this long after the first: a dying child's last mkdir
GIVE_UP_S = 10.0


def main() -> None:
    paths: set[str] = set()
    for raw in sys.stdin.buffer:
        line = raw.decode(errors="surrogateescape").rstrip("\n")
        if line.startswith("+"):
            paths.add(line[1:])
        elif line.startswith("-"):
            paths.discard(line[1:])
    started = time.monotonic()
    while paths and time.monotonic() < started + GIVE_UP_S:
        for path in paths:
            shutil.rmtree(path, ignore_errors=True)
        if time.monotonic() >= started + SETTLE_S and not any(os.path.lexists(p) for p in paths):
            return
        time.sleep(0.1)


if __name__ == "__main__":
    main()
