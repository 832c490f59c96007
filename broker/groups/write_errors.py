"""How a failed write of the offsets partition is answered and logged, the same
for a group's metadata (coordinator.py) and its offsets (offset_manager.py)."""
from __future__ import annotations

import logging

from samsa.protocol.errors import ErrorCode

from ..coordinator_errors import coordinator_write_error
from ..network.log_limit import RateLimitedLog

log = logging.getLogger("samsa.broker.groups.coordinator")
_store_log = RateLimitedLog(log)  # expected write failures (log_store_failure)

E = ErrorCode


def store_error(exc: BaseException, *, too_large: int,
                 timed_out: int | None = None,
                 otherwise: int = int(E.COORDINATOR_NOT_AVAILABLE)) -> int:
    """The answer for a write of the offsets partition that failed (the
    write's ``error_code``), as Kafka's GroupMetadataManager maps it: a moved
    partition or a short ISR as every coordinator answers them (a client
    finds the new coordinator on NOT_COORDINATOR), a record too large as
    ``too_large``, a timed-out wait as ``timed_out`` where the request has its
    own answer for it."""
    code = getattr(exc, "error_code", None)
    if code in (E.MESSAGE_TOO_LARGE, E.RECORD_LIST_TOO_LARGE):
        return too_large
    if code == E.REQUEST_TIMED_OUT and timed_out is not None:
        return timed_out
    answer = coordinator_write_error(code) if code is not None else None
    return int(answer if answer is not None else otherwise)


def log_store_failure(what: str, group_id: str, exc: BaseException) -> None:
    """A write the partition layer refused (it names why) or the disk failed
    (full, read-only) is expected: one line, at most one per kind per interval
    however many groups commit; any other failure is a bug and keeps its
    traceback."""
    code = getattr(exc, "error_code", None)
    if code is not None or isinstance(exc, OSError):
        kind = f"{what}:{code if code is not None else getattr(exc, 'errno', None)}"
        _store_log.warning(kind, "group %s: %s failed: %s", group_id, what, exc)
    else:
        log.error("group %s: %s failed", group_id, what, exc_info=exc)
