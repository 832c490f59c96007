"""The cyclic garbage collector paused while thousands of partition logs are
opened or created at once.

Loading 10,000 partition logs allocates some 300,000 objects that all stay
alive; the collector, run every few hundred allocations, walks the growing heap
again and again for nothing: a quarter of a restart's CPU time. Reference
counting still frees everything acyclic meanwhile, and a collection runs as
usual once the last pause ends.

The switch is process-wide (gc.disable), so pauses from several threads are
counted: the collector comes back when the last one ends, and only if it was
on before the first began.
"""
from __future__ import annotations

import contextlib
import gc
import threading
from typing import Iterator

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
