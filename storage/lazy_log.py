"""A partition log opened without reading its directory: loaded on first use.

Loading a partition directory (storage/loader.py) reads its listing,
partition.metadata, the leader-epoch-checkpoint, the newest producer snapshot,
the active segment's indexes and last batch, and after an unclean stop checks
every segment past the recovery point. No one of these costs much, but a broker
restarted with 10,000 partitions paid them all before it served anything.

``UnloadedLog`` is a ``Log`` that holds only what its log dir's checkpoint files
say of it. The first use of anything else (an append, a read, the producer
state, the leader epochs, ...) loads the directory exactly as a start would
have (``load_log`` with the same offsets and clean-shutdown flag, so after an
unclean stop the recovery runs then, before anything is read or written), and
the object becomes a plain ``Log``: its class is swapped, so a loaded log pays
nothing for having been lazy, and everything holding it keeps holding it. The
LogManager loads the logs nobody has used in a background pass.

Answered without a load, where the checkpoints say enough:

- after a clean stop, with all three checkpoint entries: the log end offset (a
  clean stop flushes every log, then checkpoints its recovery point, which is
  then its end), the log start offset and high watermark as the load computes
  them from the same entries; so are ``update_high_watermark`` (clamped to that
  end) and ``begin_leader_epoch`` (the epoch is assigned by the load: nothing
  can be appended before it, so the log end is the same then). A leader takes
  its role up at start-up with these alone;
- the topic id: partition.metadata alone is read; one the metadata claims
  (``claim_topic_id``) is compared with the file by the load;
- ``close``, ``flush``, ``unflushed_messages``: nothing was written since the start;
- the offsets the LogManager checkpoints (``offset_to_checkpoint``): those read.

A load that fails (an unreadable directory) leaves the log failed: every later
use raises ``StorageError``, as a log that failed to open at start-up is offline.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterable

from samsa.storage.checkpoints import read_partition_metadata, write_partition_metadata
from samsa.storage.errors import StorageError
from samsa.storage.gc_pause import gc_paused
from samsa.storage.loader import load_log
from samsa.storage.log import Log

if TYPE_CHECKING:
    from samsa.config.topic import TopicConfig

log = logging.getLogger(__name__)

# the Log attributes that the checkpoint files hold
CHECKPOINTED = ("recovery_point", "log_start_offset", "high_watermark")
# logs the background pass loads with the cyclic collector paused (storage/gc_pause.py)
_CHUNK = 500


class UnloadedLog(Log):
    """A ``Log`` whose directory is read on first use (see the module doc)."""

    loaded = False   # (True once its class is Log)

    def __init__(self, directory: str, topic: str, partition: int, config: TopicConfig, *,
                 offsets: dict[str, int], clean_shutdown: bool,
                 scheduler: Callable[[Callable[[], None], int], None] | None = None,
                 flush_requester: Callable[[Log], None] | None = None,
                 checkpoint_requester: Callable[[Log], None] | None = None):
        """``offsets``: what the log dir's checkpoints hold of the log, by
        attribute name (CHECKPOINTED; a missing entry is left out)."""
        self._load_lock = threading.RLock()
        self._loading = False
        self._setup(directory, topic, partition, config, scheduler, flush_requester,
                    checkpoint_requester)
        self._offsets_read = offsets
        self._clean = clean_shutdown
        self._load_error: str | None = None
        self._pending_epoch = -1
        self._claimed_id: uuid.UUID | None = None
        self._end_if_clean: int | None = None
        rp, lso, hw = (offsets.get(name) for name in CHECKPOINTED)
        if clean_shutdown and rp is not None and lso is not None and hw is not None:
            # (load_log's arithmetic, with the end a clean stop left: the recovery point)
            self._end_if_clean = rp
            lso = min(lso, rp)
            self.recovery_point = rp
            self.log_start_offset = lso
            self.high_watermark = max(lso, min(hw, rp))

    def load(self) -> None:
        """Read the directory now (a no-op once loaded). Raises StorageError if it cannot be."""
        with self._load_lock:
            if self.loaded:
                return
            if self._loading:   # a use of the log from inside its own load: a bug
                raise RuntimeError(f"{self.dir}: used while it is being loaded")
            if self._load_error is not None:
                raise StorageError(self._load_error)
            if self.closed:
                raise StorageError(f"{self.dir} was closed before it was loaded")
            self._loading = True
            try:
                self._load_locked()
            finally:
                self._loading = False

    def _load_locked(self) -> None:
        known = self.__dict__
        read = self._offsets_read
        offsets = {name: known.get(name, read.get(name)) for name in CHECKPOINTED}
        try:
            loaded = load_log(self.dir, self.config, recovery_point=offsets["recovery_point"] or 0,
                              log_start_offset=offsets["log_start_offset"],
                              high_watermark=offsets["high_watermark"],
                              clean_shutdown=self._clean)
            if "topic_id" not in known:
                known["topic_id"] = read_partition_metadata(self.dir)
            elif self._claimed_id is not None:
                on_disk = read_partition_metadata(self.dir)
                if on_disk != self._claimed_id:
                    if on_disk is not None:
                        log.warning("%s-%d: topic id changes from %s to %s", self.topic,
                                    self.partition, on_disk, self._claimed_id)
                    write_partition_metadata(self.dir, self._claimed_id)
            if self._pending_epoch >= 0:
                loaded.leader_epochs.assign(self._pending_epoch, loaded.log_end_offset)
        except (OSError, StorageError) as exc:
            self._load_error = f"cannot load partition directory {self.dir}: {exc}"
            log.error("%s; the partition stays offline", self._load_error)
            raise StorageError(self._load_error) from exc
        expected = self._end_if_clean
        if expected is not None and loaded.log_end_offset != expected:
            log.warning("%s: the log ends at %d, not at its recovery point %d as a clean stop "
                        "leaves it", self.dir, loaded.log_end_offset, expected)
        self._run_on(loaded)
        self.__class__ = Log   # type: ignore[assignment]  # (see the module doc)

    def __getattr__(self, name: str) -> Any:
        # Only attributes a Log has once loaded get here: load, then look again.
        if name.startswith("__") or name in ("_load_lock", "_loading"):
            raise AttributeError(name)
        self.load()
        return object.__getattribute__(self, name)

    # ------------------------------------------------------------ answered unloaded
    # Each override below calls ``Log.<method>(self, ...)``, never ``super()``:
    # another thread may load the log (and swap its class to Log) between the
    # call's lookup of the method and its fall-through, and zero-argument
    # super() then fails, since the object is no longer an UnloadedLog.
    def knows_end(self) -> bool:
        return self.loaded or self._end_if_clean is not None

    @property
    def log_end_offset(self) -> int:
        end = self.__dict__.get("_end")
        if end is None:
            leo = self._end_if_clean
            if leo is not None:
                return leo
            self.load()
            end = self._end
        return int(end[0])

    @property   # (read-write, as Log's attribute)
    def topic_id(self) -> uuid.UUID | None:
        known = self.__dict__
        if "topic_id" not in known:
            with self._load_lock:
                if "topic_id" not in known:
                    known["topic_id"] = read_partition_metadata(self.dir)
        tid: uuid.UUID | None = known["topic_id"]
        return tid

    @topic_id.setter
    def topic_id(self, value: uuid.UUID | None) -> None:
        self.__dict__["topic_id"] = value

    def claim_topic_id(self, topic_id: uuid.UUID) -> None:
        with self._load_lock:
            if not self.loaded and (self._claimed_id is not None
                                    or "topic_id" not in self.__dict__):
                # compared with partition.metadata (and written if it differs) by the load
                if self._claimed_id not in (None, topic_id):
                    log.warning("%s-%d: topic id changes from %s to %s", self.topic,
                                self.partition, self._claimed_id, topic_id)
                self.__dict__["topic_id"] = self._claimed_id = topic_id
                return
        Log.claim_topic_id(self, topic_id)

    def begin_leader_epoch(self, epoch: int, *, defer_flush: bool = False) -> None:
        with self._load_lock:
            if not self.loaded and self._end_if_clean is not None:
                self._pending_epoch = max(self._pending_epoch, epoch)
                return
        Log.begin_leader_epoch(self, epoch, defer_flush=defer_flush)

    def flush_leader_epochs(self) -> None:
        with self._load_lock:
            if not self.loaded:
                return   # (a pending epoch is assigned, and written, by the load)
        Log.flush_leader_epochs(self)

    def update_high_watermark(self, offset: int) -> bool:
        with self._load_lock:
            if not self.loaded and self._end_if_clean is not None:
                hw = min(max(offset, self.log_start_offset), self._end_if_clean)
                if hw > self.high_watermark:
                    self.high_watermark = hw
                    return True
                return False
        return Log.update_high_watermark(self, offset)

    def offset_to_checkpoint(self, name: str) -> int | None:
        with self._load_lock:
            if self.loaded:
                value: int | None = getattr(self, name)
                return value
            known: int | None = self.__dict__.get(name)
            return known if known is not None else self._offsets_read.get(name)

    def unflushed_messages(self) -> int:
        with self._load_lock:
            if not self.loaded:
                return 0
        return Log.unflushed_messages(self)

    def flush(self) -> None:
        with self._load_lock:
            if not self.loaded:
                return
        Log.flush(self)

    def close(self) -> None:
        with self._load_lock:
            if not self.loaded:
                self.closed = True
                return
        Log.close(self)

    def close_handles(self, trim: bool = True) -> None:
        with self._load_lock:
            if not self.loaded:
                self.closed = True
                return
        Log.close_handles(self, trim)

    def __repr__(self) -> str:
        if not self.loaded:
            return f"Log({self.topic}-{self.partition}, not loaded)"
        return Log.__repr__(self)


class BackgroundLoader(threading.Thread):
    """Loads the logs nobody has used yet, one at a time, oldest name first.

    A thread rather than the event loops: a load is file reads, during which
    the GIL is free for the loops, and between two loads the thread gives the
    GIL up (``time.sleep(0)``), so a request waits for at most one load. A log
    used meanwhile has been loaded by its user (or is being: its load lock
    makes the two wait for one load)."""

    def __init__(self, logs: Callable[[], Iterable[Log]],
                 on_loaded: Callable[[Log], None] | None = None,
                 on_done: Callable[[], None] | None = None,
                 after_chunk: Callable[[], None] | None = None):
        """``on_loaded``: called with each log that was not loaded when the pass
        began, once it is (by the pass or by a user), in the pass's order;
        ``on_done``: once, when the pass has been over every one (not if stopped);
        ``after_chunk``: after each chunk of up to ``_CHUNK`` of them, the
        collector's pause over (the broker freezes what they hold then:
        broker/gc_tuning.py)."""
        super().__init__(name="samsa-log-loader", daemon=True)
        self._logs = logs
        self._on_loaded = on_loaded
        self._on_done = on_done
        self._after_chunk = after_chunk
        self._stopped = False

    def stop(self) -> None:
        self._stopped = True

    def run(self) -> None:
        started = time.monotonic()
        pending = [lg for lg in self._logs() if not lg.loaded]
        loaded = 0
        for i in range(0, len(pending), _CHUNK):
            with gc_paused():
                for lg in pending[i:i + _CHUNK]:
                    if self._stopped:
                        return
                    if lg.closed:
                        continue
                    try:
                        if not lg.loaded:
                            lg.load()
                            loaded += 1
                        if self._on_loaded is not None:
                            self._on_loaded(lg)
                    except StorageError:
                        pass   # (the load said why, and the log stays offline)
                    except Exception:  # noqa: BLE001 - our bug: keep the others loading
                        log.exception("loading %r failed", lg)
                    time.sleep(0)   # the loops' turn
            if self._after_chunk is not None:
                self._after_chunk()
        if loaded:
            log.info("loaded %d partition logs in the background in %.1f s", loaded,
                     time.monotonic() - started)
        if self._on_done is not None:
            self._on_done()
