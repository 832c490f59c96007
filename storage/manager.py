"""LogManager: every partition log under ``log.dirs``, and the background work on them.

Start-up lists each log dir and reads its checkpoints: each ``<topic>-<partition>``
directory becomes a log that reads its directory on first use (storage/lazy_log.py),
or when the background pass (``start_background_load``) gets to it. Without the
``.kafka_cleanshutdown`` marker (written last by a clean shutdown, removed as
soon as start-up has read it) that load checks the segments past the partition's
recovery point batch by batch and cuts them at the first invalid byte; a stop
before every such log is loaded writes no marker, so the next start recovers
the rest.

Background threads (daemons, stopped by ``shutdown``):

- loader: loads the logs nobody has used since the start, one at a time;

- scheduler: runs timed tasks - retention every ``retention_check_interval_ms``,
  checkpoint files every ``checkpoint_interval_ms``, the ``flush.ms`` check,
  and delayed deletions (segments renamed ``*.deleted``, topic directories
  renamed ``<topic>-<p>.<uuid-hex>-delete``, both removed after
  ``file.delete.delay.ms`` so in-flight reads of them stay valid);
- flusher: fsyncs logs on request (``flush.messages`` reached, segment rolled,
  ``flush.ms`` elapsed), so appends never wait for the disk;
- log cleaner (storage/cleaner.py): compacts ``cleanup.policy=compact`` logs
  every ``log_cleaner_backoff_ms`` (log.cleaner.backoff.ms); its own thread,
  because a pass can take long and must not delay the scheduler's tasks.

Per log dir it keeps Kafka's ``meta.properties``, ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint``, ``replication-offset-checkpoint`` (each log's high
watermark, which its owner moves with ``Log.update_high_watermark``; a log without
an entry starts with its high watermark at its log end offset) and
``cleaner-offset-checkpoint``; per partition ``partition.metadata``. A log
truncation asks for the checkpoints to be written at once (as Kafka's
LogManager.truncateTo does), so no checkpoint names an offset above a log's end
for longer than that takes.
"""
from __future__ import annotations

import collections
import heapq
import functools
import logging
import os
import resource
import shutil
import threading
import time
import uuid
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Sequence, TypedDict

from samsa.protocol.model import TopicPartition

from samsa.storage.checkpoints import (CLEAN_SHUTDOWN_MARKER, LOG_START_OFFSET_CHECKPOINT,
                                 META_PROPERTIES, RECOVERY_POINT_CHECKPOINT,
                                 REPLICATION_OFFSET_CHECKPOINT, atomic_write,
                                 current_durable_batch, durable_batch, fsync_dir, joining,
                                 read_offset_checkpoint, read_partition_metadata,
                                 read_properties, start_write_back, write_meta_properties,
                                 write_offset_checkpoint, write_partition_metadata)
from samsa.storage.cleaner import DEFAULT_MAX_MAP_ENTRIES, CleanerStats, LogCleaner
from samsa.storage.fd_cache import DESCRIPTORS
from samsa.storage.errors import (InvalidTopicError, LogDirNotFoundError, OffsetOutOfRangeError,
                            StorageError)
from samsa.storage.gc_pause import gc_paused
from samsa.storage.lazy_log import BackgroundLoader, UnloadedLog
from samsa.storage.loader import parse_partition_dir
from samsa.storage.log import AppendOrigin, Log

if TYPE_CHECKING:
    from samsa.config.topic import TopicConfig

log = logging.getLogger(__name__)

LONG_MAX = 9223372036854775807
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
FUTURE_DIR_SUFFIX = "-future"
# A move to another log dir copies this much per scheduler turn, so the
# scheduler's other tasks (retention, checkpoints, deletions) are not held up
# behind a large partition; reads from the current log are this large.
MOVE_STEP_BYTES = 8 << 20
MOVE_READ_BYTES = 1 << 20
MOVE_RETRY_MS = 1000
MAX_DIR_NAME = 255
# A stop of this many logs starts writing their dirty pages back at once, while it
# closes them (storage/checkpoints.py start_write_back); a close worker (beyond the
# first of a dir) gets at least _CLOSES_PER_WORKER logs.
_WRITE_BACK_FROM = 256
_CLOSES_PER_WORKER = 256


class _Scheduler(threading.Thread):
    """A tiny timer wheel: run callables at given times on one daemon thread."""

    def __init__(self) -> None:
        super().__init__(name="samsa-log-scheduler", daemon=True)
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], object]]] = []   # (when, seq, fn)
        self._seq = 0
        self._stopped = False

    def schedule(self, fn: Callable[[], object], delay_ms: float) -> None:
        with self._cond:
            self._seq += 1
            heapq.heappush(self._heap, (time.monotonic() + max(0, delay_ms) / 1000.0,
                                        self._seq, fn))
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    if self._heap:
                        wait = self._heap[0][0] - time.monotonic()
                        if wait <= 0:
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
                if self._stopped:
                    return
                _, _, fn = heapq.heappop(self._heap)
            try:
                fn()
            except Exception:
                log.exception("log scheduler task failed")


class _Flusher(threading.Thread):
    """fsyncs logs handed to it, one at a time, off the append path."""

    def __init__(self) -> None:
        super().__init__(name="samsa-log-flusher", daemon=True)
        self._cond = threading.Condition()
        self._pending: dict[int, Log] = {}
        self._stopped = False
        self._busy = False

    def request(self, lg: Log) -> None:
        with self._cond:
            self._pending[id(lg)] = lg
            self._cond.notify()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def wait_idle(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        with self._cond:
            while (self._pending or self._busy) and time.monotonic() < deadline:
                self._cond.wait(0.01)

    def run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                _, lg = self._pending.popitem()
                self._busy = True
            try:
                if not lg.closed:
                    lg.flush()
            except Exception:
                log.exception("flush of %r failed", lg)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()


class LogManager:
    # replica.alter.log.dirs.io.max.bytes.per.second (the broker sets it)
    move_bytes_per_second = LONG_MAX

    def __init__(self, log_dirs: str | Iterable[str], default_config: TopicConfig, broker_id: int,
                 cluster_id: str,
                 retention_check_interval_ms: int = 300000, *,
                 checkpoint_interval_ms: int = 60000,
                 start_offset_checkpoint_interval_ms: int = 60000,
                 high_watermark_checkpoint_interval_ms: int = 5000,
                 flush_check_interval_ms: int = 1000,
                 topic_config_provider: Callable[[str], TopicConfig | None] | None = None,
                 log_cleaner_enable: bool = True, log_cleaner_backoff_ms: int = 15000,
                 log_cleaner_max_map_entries: int = DEFAULT_MAX_MAP_ENTRIES,
                 producer_id_expiration_ms: int | Callable[[], int] = 86400000,
                 producer_id_expiration_check_interval_ms: int = 600000,
                 open_segment_files_max: int | None = None,
                 close_threads_per_dir: int = 1):
        if isinstance(log_dirs, str):
            log_dirs = [d for d in log_dirs.split(",") if d]
        self.log_dirs = [os.path.abspath(d) for d in log_dirs]
        if not self.log_dirs:
            raise StorageError("no log directories configured")
        self.default_config = default_config
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.retention_check_interval_ms = retention_check_interval_ms
        # Kafka's three intervals: log.flush.offset.checkpoint.interval.ms
        # (recovery points), log.flush.start.offset.checkpoint.interval.ms and
        # replica.high.watermark.checkpoint.interval.ms (5 s: a restarted
        # broker's consumers should not see its high watermark far behind).
        self.checkpoint_interval_ms = checkpoint_interval_ms
        self._checkpoint_intervals = {
            RECOVERY_POINT_CHECKPOINT: checkpoint_interval_ms,
            LOG_START_OFFSET_CHECKPOINT: start_offset_checkpoint_interval_ms,
            REPLICATION_OFFSET_CHECKPOINT: high_watermark_checkpoint_interval_ms,
        }
        self.flush_check_interval_ms = flush_check_interval_ms
        self._topic_config_provider = topic_config_provider
        # some log has been given a config with flush.ms (set once, for good)
        self._flush_ms_used = default_config.flush_ms < LONG_MAX
        self._topic_configs: dict[str, TopicConfig] = {}
        self._logs: dict[tuple[str, int], Log] = {}
        self._log_dir_of: dict[tuple[str, int], str] = {}
        self._lock = threading.RLock()
        self._scheduler = _Scheduler()
        self._flusher = _Flusher()
        self._started = False
        self._shut_down = False
        self.log_cleaner_enable = log_cleaner_enable
        self.log_cleaner_backoff_ms = log_cleaner_backoff_ms
        self.log_cleaner_max_map_entries = log_cleaner_max_map_entries
        self.cleaner: LogCleaner | None = None
        # a callable reads the live (dynamic) producer.id.expiration.ms
        self._producer_id_expiration_ms = (producer_id_expiration_ms
                                           if callable(producer_id_expiration_ms)
                                           else lambda: producer_id_expiration_ms)
        self.producer_id_expiration_check_interval_ms = producer_id_expiration_check_interval_ms
        # AlterReplicaLogDirs: partitions being copied to another log dir, and
        # where partitions not held here yet are to be created
        self._moves: dict[tuple[str, int], _Move] = {}
        self._preferred_dirs: dict[tuple[str, int], str] = {}
        self._found_futures: list[tuple[tuple[str, int], str, bool]] = []
        # log dirs taken out of service after an IO error left them in a state
        # only a restart sorts out (Kafka's LogDirFailureChannel)
        self._offline_dirs: set[str] = set()
        # log dirs started without the clean-shutdown marker: their logs are
        # recovered as they are loaded (storage/lazy_log.py)
        self._unclean_dirs: set[str] = set()
        # what each checkpoint file (by path) holds, as read at start-up or last
        # written: one that would not change is not written again
        self._checkpointed: dict[str, dict[TopicPartition, int]] = {}
        self._checkpoint_lock = threading.Lock()
        self._loader: BackgroundLoader | None = None
        # samsa.log.open.segment.files.max (None: derived from the limit the
        # start raises, storage/fd_cache.py)
        self.open_segment_files_max = open_segment_files_max
        # workers per log dir closing its logs at a clean stop
        # (num.recovery.threads.per.data.dir)
        self.close_threads_per_dir = close_threads_per_dir

    # ------------------------------------------------------------------ start-up
    def startup(self) -> None:
        _raise_fd_limit()
        DESCRIPTORS.configure(self.open_segment_files_max)
        for d in self.log_dirs:
            os.makedirs(d, exist_ok=True)
            self._check_meta_properties(d)
        with gc_paused():   # (300,000 objects that stay: see storage/gc_pause.py)
            for d in self.log_dirs:
                self._load_dir(d)
            self._load_futures()
        for d in self.log_dirs:
            marker = os.path.join(d, CLEAN_SHUTDOWN_MARKER)
            if os.path.exists(marker):
                os.unlink(marker)
                fsync_dir(d)
        self.cleaner = LogCleaner(self.log_dirs, self._logs_with_dirs, held=self._moving_logs,
                                  backoff_ms=self.log_cleaner_backoff_ms,
                                  max_map_entries=self.log_cleaner_max_map_entries)
        self._scheduler.start()
        self._flusher.start()
        if self.log_cleaner_enable:
            self.cleaner.start()
        self._started = True
        self._scheduler.schedule(self._retention_task, self.retention_check_interval_ms)
        for name, interval in self._checkpoint_intervals.items():
            self._scheduler.schedule(functools.partial(self._checkpoint_task, name), interval)
        self._scheduler.schedule(self._flush_ms_task, self.flush_check_interval_ms)
        self._scheduler.schedule(self._producer_expiration_task,
                                 self.producer_id_expiration_check_interval_ms)
        for key in list(self._moves):   # moves the last run did not finish go on
            self._scheduler.schedule(functools.partial(self._move_step, key), 0)

    def start_background_load(self, on_loaded: Callable[[Log], None] | None = None,
                              on_done: Callable[[], None] | None = None,
                              after_chunk: Callable[[], None] | None = None) -> None:
        """Load the logs start-up left for their first use (storage/lazy_log.py)
        on a thread of their own, from now on; a broker calls it once it serves.
        ``on_loaded``: called with each of them once loaded; ``on_done``: once
        the pass is over; ``after_chunk``: after each chunk of them (BackgroundLoader)."""
        if self._loader is None and not self._shut_down:
            self._loader = BackgroundLoader(lambda: self.all_logs().values(), on_loaded, on_done,
                                            after_chunk)
            self._loader.start()

    def _check_meta_properties(self, d: str) -> None:
        props = read_properties(os.path.join(d, META_PROPERTIES))
        if props is None:
            write_meta_properties(d, self.broker_id, self.cluster_id)
            return
        bid = props.get("broker.id") or props.get("node.id")
        if bid is not None and int(bid) != self.broker_id:
            raise StorageError(f"{d}/{META_PROPERTIES} has broker.id={bid}, "
                               f"but this broker is {self.broker_id}")
        cid = props.get("cluster.id")
        if cid and self.cluster_id and cid != self.cluster_id:
            raise StorageError(f"{d}/{META_PROPERTIES} has cluster.id={cid}, "
                               f"but this cluster is {self.cluster_id}")

    @staticmethod
    def _read_checkpoints(d: str) -> tuple[dict[TopicPartition, int], dict[TopicPartition, int],
                                           dict[TopicPartition, int]]:
        """Log dir ``d``'s recovery points, log start offsets and high watermarks."""
        return (read_offset_checkpoint(os.path.join(d, RECOVERY_POINT_CHECKPOINT)),
                read_offset_checkpoint(os.path.join(d, LOG_START_OFFSET_CHECKPOINT)),
                read_offset_checkpoint(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT)))

    def _load_dir(self, d: str) -> None:
        clean = os.path.exists(os.path.join(d, CLEAN_SHUTDOWN_MARKER))
        recovery, starts, high_watermarks = self._read_checkpoints(d)
        for name, read in ((RECOVERY_POINT_CHECKPOINT, recovery),
                           (LOG_START_OFFSET_CHECKPOINT, starts),
                           (REPLICATION_OFFSET_CHECKPOINT, high_watermarks)):
            if read:   # (none, or malformed: written at the first chance)
                self._checkpointed[os.path.join(d, name)] = read
        # (scandir: the entry types come with the listing, no stat per partition)
        names = sorted(e.name for e in os.scandir(d) if _is_dir(e))
        if not clean and names:
            # (A brand-new dir has nothing to recover: say nothing about it.)
            log.info("log dir %s was not shut down cleanly: recovering unflushed segments "
                     "as each log is loaded", d)
            self._unclean_dirs.add(d)
        configs: dict[str, TopicConfig] = {}
        for name in names:
            path = os.path.join(d, name)
            if name.endswith(DELETE_DIR_SUFFIX):
                # a topic deletion the last run did not finish
                self._scheduler.schedule(functools.partial(shutil.rmtree, path, ignore_errors=True), 0)
                continue
            if name.endswith(FUTURE_DIR_SUFFIX):
                try:
                    key = _parse_suffixed_dir(name, FUTURE_DIR_SUFFIX)
                except ValueError:
                    log.warning("ignoring directory %s: not a partition directory", path)
                else:
                    self._found_futures.append((key, path, clean))
                continue
            if name.endswith(STRAY_DIR_SUFFIX):
                log.warning("ignoring directory %s (not a partition this broker serves)", path)
                continue
            try:
                topic, partition = parse_partition_dir(name)
            except ValueError:
                log.warning("ignoring directory %s: not a partition directory", path)
                continue
            key = (topic, partition)
            if key in self._logs:
                log.warning("ignoring duplicate partition directory %s (already loaded from %s)",
                            path, self._log_dir_of[key])
                continue
            config = configs.get(topic)
            if config is None:
                config = configs[topic] = self._config_for(topic)
            offsets = {}
            for name, checkpoint in (("recovery_point", recovery), ("log_start_offset", starts),
                                     ("high_watermark", high_watermarks)):
                value = checkpoint.get(key)
                if value is not None:
                    offsets[name] = value
            # read on first use, or by the background pass (storage/lazy_log.py)
            self._logs[key] = UnloadedLog(path, topic, partition, config, offsets=offsets,
                                          clean_shutdown=clean, scheduler=self._schedule,
                                          flush_requester=self._request_flush,
                                          checkpoint_requester=self._request_checkpoint)
            self._log_dir_of[key] = d

    def _config_for(self, topic: str) -> TopicConfig:
        cfg = self._topic_configs.get(topic)
        if cfg is None and self._topic_config_provider is not None:
            cfg = self._topic_config_provider(topic)
        return self._noted(cfg or self.default_config)

    def _noted(self, config: TopicConfig) -> TopicConfig:
        """``config``, which a log is given: with a flush.ms, the flush.ms check has work."""
        if config.flush_ms < LONG_MAX:
            self._flush_ms_used = True
        return config

    def _schedule(self, fn: Callable[[], None], delay_ms: int) -> None:
        if self._started and not self._shut_down:
            self._scheduler.schedule(fn, delay_ms)
        else:
            fn()

    def _request_flush(self, lg: Log) -> None:
        if self._started and not self._shut_down:
            self._flusher.request(lg)

    def _request_checkpoint(self, lg: Log) -> None:
        """A log was truncated: write the checkpoints soon (on the scheduler)."""
        if self._started and not self._shut_down:
            self._scheduler.schedule(self.write_checkpoints, 0)

    # ------------------------------------------------------------------ partitions
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> dict[tuple[str, int], Log]:
        return dict(self._logs)

    def create_log(self, topic: str, partition: int, config: TopicConfig | None = None,
                   topic_id: uuid.UUID | None = None) -> Log:
        """Open or create ``<topic>-<partition>``; calling it again returns the same Log."""
        key = (topic, partition)
        with self._lock:
            if config is not None:
                self._noted(config)
            lg = self._logs.get(key)
            if lg is not None:
                if config is not None:
                    lg.config = config
                if topic_id is not None:
                    lg.claim_topic_id(topic_id)
                return lg
            if config is not None:
                self._topic_configs[topic] = config
            online = [x for x in self.log_dirs if x not in self._offline_dirs] or self.log_dirs
            preferred = self._preferred_dirs.pop(key, None)
            d = preferred or self._least_loaded(online)
            path = os.path.join(d, f"{topic}-{partition}")
            try:
                os.mkdir(path)
                new = True
            except FileExistsError:   # left by an earlier run: loaded as it is
                new = False
            except FileNotFoundError:  # the log dir itself went away
                os.makedirs(path)
                new = True
            if topic_id is not None:
                write_partition_metadata(path, topic_id, new_dir=new)
            fsync_dir(d)
            lg = Log(path, topic, partition, config or self._config_for(topic),
                     topic_id=topic_id or (None if new else read_partition_metadata(path)),
                     new=new, scheduler=self._schedule, flush_requester=self._request_flush,
                     checkpoint_requester=self._request_checkpoint)
            self._logs[key] = lg
            self._log_dir_of[key] = d
            return lg

    def _least_loaded(self, online: list[str]) -> str:
        """(Lock held.) The online dir holding fewest logs; with one dir no
        count is needed (a count per new log made creating a topic of 10,000
        partitions quadratic)."""
        if len(online) == 1:
            return online[0]
        counts = collections.Counter(self._log_dir_of.values())
        return min(online, key=lambda x: counts[x])

    def delete_topic(self, topic: str) -> int:
        """Remove every partition of ``topic``: rename the directories now, delete later."""
        return self._retire_topic(topic, DELETE_DIR_SUFFIX)

    def set_aside_topic(self, topic: str) -> int:
        """Take every partition of ``topic`` out of service without deleting it:
        the directories are renamed ``<topic>-<p>.<id>-stray`` (as Kafka names
        stray logs), which start-up ignores, so an operator can still recover them."""
        return self._retire_topic(topic, STRAY_DIR_SUFFIX)

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Remove one partition's log (a replica moved off this broker): renamed
        now, deleted after ``file.delete.delay.ms``, as a deleted topic's are."""
        with self._lock:
            if (topic, partition) not in self._logs:
                return False
            self._retire([(topic, partition)], DELETE_DIR_SUFFIX)
            return True

    def _retire_topic(self, topic: str, suffix: str) -> int:
        with self._lock:
            keys = [k for k in self._logs if k[0] == topic]
            self._topic_configs.pop(topic, None)
            for k in [k for k in self._preferred_dirs if k[0] == topic]:
                del self._preferred_dirs[k]
            return self._retire(keys, suffix)

    def _retire(self, keys: list[tuple[str, int]], suffix: str) -> int:
        with self._lock:
            for key in keys:
                if key in self._moves:   # its copy in another dir goes first
                    self._cancel_move(key)
                lg = self._logs.pop(key)
                d = self._log_dir_of.pop(key)
                if self.cleaner is not None:
                    self.cleaner.forget(*key)
                self._retire_dir(lg, d, key, suffix)
            return len(keys)

    def _retire_dir(self, lg: Log, d: str, key: TopicPartition, suffix: str) -> None:
        """Take ``lg`` (in log dir ``d``) out of service: its directory is
        renamed ``<topic>-<p>.<uuid><suffix>`` now; a deleted one is removed
        after file.delete.delay.ms (in-flight reads of it stay valid), a stray
        one only closed."""
        with lg._lock:
            lg.closed = True
        target = os.path.join(d, f"{key[0]}-{key[1]}.{uuid.uuid4().hex}{suffix}")
        try:
            os.rename(lg.dir, target)
            fsync_dir(d)
        except OSError as exc:
            log.warning("could not rename %s to %s: %s", lg.dir, target, exc)
            target = lg.dir
        if suffix != DELETE_DIR_SUFFIX:
            self._schedule(lg.close_handles, 0)
            return

        def remove() -> None:
            lg.close_handles()
            shutil.rmtree(target, ignore_errors=True)
        self._schedule(remove, lg.config.file_delete_delay_ms)

    def update_topic_config(self, topic: str, config: TopicConfig) -> None:
        self.update_topic_configs({topic: config})

    def update_topic_configs(self, configs: Mapping[str, TopicConfig]) -> None:
        """New configs for several topics at once (one pass over the logs)."""
        with self._lock:
            for given in configs.values():
                self._noted(given)
            self._topic_configs.update(configs)
            for (t, _), lg in self._logs.items():
                config = configs.get(t)
                if config is not None:
                    lg.config = config

    # ------------------------------------------------------------------ moves between log dirs
    # AlterReplicaLogDirs, as Kafka does it: a "future" replica
    # <dest>/<topic>-<p>.<uuid>-future is filled from the current log (batches
    # appended as a replica appends them, so its indexes, producer state and
    # leader epochs are its own) while the current log keeps serving; once it
    # has caught up, with the current log frozen for the last batches, the
    # current directory is renamed for deletion, the copy takes the name
    # <dest>/<topic>-<p>, and the Log object reopens from it.

    def log_dir_online(self, d: str) -> bool:
        """Whether log dir ``d`` can be used: not taken offline after an IO
        error, and it exists and can be listed and written."""
        if d in self._offline_dirs:
            return False
        try:
            os.statvfs(d)
        except OSError:
            return False
        return os.path.isdir(d) and os.access(d, os.R_OK | os.W_OK | os.X_OK)

    def alter_log_dir(self, topic: str, partition: int, destination: str) -> bool:
        """Move the partition's log to log dir ``destination`` (in the background).
        False when this broker holds no log of it: the destination is then
        remembered, and the log is created there if it comes here later (Kafka's
        preferred log dir). Moving to the dir it is in is a no-op, which also
        stops a move to another dir in progress. Raises LogDirNotFoundError (not
        one of log.dirs, given as an absolute path), StorageError (the dir is
        offline), InvalidTopicError (the copy's directory name would be too long)."""
        key = (topic, partition)
        future_name = f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
        if len(future_name) > MAX_DIR_NAME:
            raise InvalidTopicError(f"the topic name {topic!r} is too long to move its partitions")
        if destination not in self.log_dirs:
            raise LogDirNotFoundError(f"log dir {destination} is not one of log.dirs")
        if not self.log_dir_online(destination):
            raise StorageError(f"log dir {destination} is offline")
        with self._lock:
            move = self._moves.get(key)
            if move is not None and os.path.dirname(move.future.dir) != destination:
                self._cancel_move(key)
            cur = self._logs.get(key)
            if cur is None:
                self._preferred_dirs[key] = destination
                return False
            if self._log_dir_of[key] == destination or key in self._moves:
                return True
            path = os.path.join(destination, future_name)
            try:
                os.makedirs(path)
                if cur.topic_id is not None:
                    write_partition_metadata(path, cur.topic_id)
                fsync_dir(destination)
                future = Log(path, topic, partition, cur.config, topic_id=cur.topic_id,
                             log_start_offset=cur.log_start_offset, scheduler=self._schedule,
                             flush_requester=self._request_flush)
            except OSError as exc:
                # (a full disk) the client is told KAFKA_STORAGE_ERROR, so no
                # half-made copy may be left for the next start to resume
                shutil.rmtree(path, ignore_errors=True)
                raise StorageError(f"cannot create {path}: {exc}") from exc
            self._start_move(key, future)
        log.info("moving %s-%d from %s to %s", topic, partition, self._log_dir_of[key], destination)
        return True

    def _start_move(self, key: TopicPartition, future: Log) -> None:
        """(Manager lock held.)"""
        cleaned = self.cleaner.first_dirty_offset(*key) if self.cleaner is not None else None
        self._moves[key] = _Move(future, cleaned)
        if self._started and not self._shut_down:
            self._scheduler.schedule(functools.partial(self._move_step, key), 0)

    def _cancel_move(self, key: TopicPartition) -> None:
        """(Manager lock held.) Drop the copy: renamed now, deleted after file.delete.delay.ms."""
        future = self._moves.pop(key).future
        d = os.path.dirname(future.dir)
        self._retire_dir(future, d, key, DELETE_DIR_SUFFIX)
        log.info("stopped moving %s-%d to %s", key[0], key[1], d)

    def future_logs_by_dir(self) -> dict[str, list[Log]]:
        """The copies of moves in progress, by the log dir they are moving to."""
        out: dict[str, list[Log]] = {}
        with self._lock:
            for move in self._moves.values():
                out.setdefault(os.path.dirname(move.future.dir), []).append(move.future)
        return out

    def _move_step(self, key: TopicPartition) -> None:
        """One scheduler turn of a move: copy a slice, or finish when caught up."""
        with self._lock:
            move = self._moves.get(key)
            cur = self._logs.get(key)
        if move is None or cur is None or self._shut_down:
            return
        dst = os.path.dirname(move.future.dir)
        if not self.log_dir_online(dst):
            # the destination went away (a failed disk): Kafka drops the future
            # replica of an offline dir; the partition stays where it is
            log.error("stopping the move of %s-%d: log dir %s is offline", key[0], key[1], dst)
            with self._lock:
                if self._moves.get(key) is move:
                    self._cancel_move(key)
            return
        rate = self.move_bytes_per_second
        # a turn's share of replica.alter.log.dirs.io.max.bytes.per.second (a
        # tenth of a second's worth), and the pause that keeps to the rate after it
        budget = max(1, min(MOVE_STEP_BYTES, rate // 10))
        delay: float = 0
        try:
            start_size = move.future.size_in_bytes()
            if self._copy(cur, move, budget):
                # The copy's fsync now, while the log takes appends: the swap
                # closes the copy under the log's append lock, and what is left
                # to flush then (an active segment: up to segment.bytes) would
                # hold up every produce to the partition.
                move.future.flush()
                if self._finish_move(key, move):
                    return
                delay = 10   # appends raced the last check: next turn
            elif rate < LONG_MAX:
                delay = (move.future.size_in_bytes() - start_size) * 1000 / rate
        except Exception as exc:  # a disk error, a segment deleted under the read
            log.warning("moving %s-%d to %s: %s (retrying)", key[0], key[1], dst, exc)
            delay = MOVE_RETRY_MS
        if not self._shut_down and self._moves.get(key) is move:
            self._scheduler.schedule(functools.partial(self._move_step, key), delay)

    @staticmethod
    def _copy(cur: Log, move: "_Move", budget: int | None) -> bool:
        """Append what ``cur`` has beyond the copy's end to the copy, up to
        ``budget`` bytes (None: all); True when the copy has reached cur's end."""
        future = move.future
        if move.truncations != cur.truncations:
            # The current log was cut back (a follower's truncation) since the copy
            # was checked, or the copy was made by an earlier run: start over
            # unless it is still the start of the log.
            if move.truncations is not None or not _copy_matches(cur, future):
                log.info("%s-%d: restarting its copy in %s", cur.topic, cur.partition,
                         os.path.dirname(future.dir))
                future.truncate_fully_and_start_at(cur.log_start_offset)
            move.truncations = cur.truncations
        copied = 0
        while budget is None or copied < budget:
            start = future.log_end_offset
            if start >= cur.log_end_offset:
                return True
            try:
                if start < cur.log_start_offset:
                    raise OffsetOutOfRangeError("below the log start")
                want = MOVE_READ_BYTES if budget is None else min(MOVE_READ_BYTES, budget - copied)
                read = cur.read(start, want, True)
            except OffsetOutOfRangeError:
                # retention went past the copy's end: it starts where the log now does
                future.truncate_fully_and_start_at(cur.log_start_offset)
                continue
            if not read.regions:
                return False
            data = b"".join(r.read_bytes() for r in read.regions)
            future.append(data, origin=AppendOrigin.REPLICATION)
            copied += len(data)
        return False

    def _finish_move(self, key: TopicPartition, move: "_Move") -> bool:
        """Swap the caught-up copy in for the current log; False when it cannot
        now (appends came in, the log was truncated) or the move was dropped."""
        cleaner = self.cleaner
        # No compaction pass is half-way through the log while its files change.
        # A pass can take long: rather than hold up the scheduler's other tasks
        # behind it, the next turn tries again.
        if cleaner is not None and not cleaner.try_hold():
            return False
        try:
            return self._swap(key, move)
        finally:
            if cleaner is not None:
                cleaner.release()

    def _swap(self, key: TopicPartition, move: "_Move") -> bool:
        """(_finish_move, the cleaner's lock held.)"""
        cleaner = self.cleaner
        with self._lock:
            cur = self._logs.get(key)
            if self._moves.get(key) is not move or cur is None:
                return False
            future = move.future
            src, dst = self._log_dir_of[key], os.path.dirname(future.dir)
            name = f"{key[0]}-{key[1]}"
            retired = os.path.join(src, f"{name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
            final = os.path.join(dst, name)
            with cur.frozen():
                if cur.closed or move.truncations != cur.truncations:
                    return False
                if not self._copy(cur, move, None) or future.log_end_offset != cur.log_end_offset:
                    return False
                # epochs begun without records yet (a leader's newest) are the log's too
                for epoch, start in cur.leader_epochs.entries:
                    future.leader_epochs.assign(epoch, start)
                future.close()
                # The copy's offsets go into the destination's checkpoints
                # before any rename: a stop after the renames (before the
                # checkpoints are next written) must not load the moved log
                # with its high watermark at its end and its start at its first
                # segment (records deleted by DeleteRecords back).
                failed = self._write_checkpoint_files(
                    dst, {**self._logs_in(dst), key: cur}, tuple(self._CHECKPOINT_VALUES))
                if failed:
                    log.error("moving %s to %s failed: %s", name, dst, failed)
                    self._cancel_move(key)
                    return False
                # The old directory goes out of the way first: a stop between the
                # two renames leaves only the (complete) copy, which start-up
                # takes as the partition's log; never two logs of one partition.
                try:
                    os.rename(cur.dir, retired)
                    fsync_dir(src)
                except OSError as exc:
                    # the partition stays where it is; the closed copy is dropped
                    log.error("moving %s to %s failed: %s", name, dst, exc)
                    self._cancel_move(key)
                    return False
                try:
                    os.rename(future.dir, final)
                    fsync_dir(dst)
                except OSError as exc:
                    log.error("moving %s to %s failed: %s", name, dst, exc)
                    try:
                        os.rename(retired, cur.dir)
                        fsync_dir(src)
                    except OSError as exc2:
                        self._lose_dir_with_move(key, move, src, dst, retired, exc2)
                        return False
                    self._cancel_move(key)
                    return False
                old_segments = cur.reopen_at(final)
            del self._moves[key]
            self._hand_over(key, move, src, dst)

        def remove() -> None:
            for seg in old_segments:
                try:
                    seg.close(trim=False)
                except OSError:
                    pass
            shutil.rmtree(retired, ignore_errors=True)
        self._schedule(remove, cur.config.file_delete_delay_ms)
        self.write_checkpoints()
        if cleaner is not None:
            for d in (src, dst):
                cleaner.write_checkpoint(d)
        log.info("moved %s-%d from %s to %s", key[0], key[1], src, dst)
        return True

    def _hand_over(self, key: TopicPartition, move: "_Move", src: str, dst: str) -> None:
        """(Manager and cleaner locks held.) The partition's log is in ``dst`` now."""
        self._log_dir_of[key] = dst
        if self.cleaner is not None:
            self.cleaner.checkpoints.get(src, {}).pop(key, None)
            if move.first_dirty is not None:
                self.cleaner.checkpoints.setdefault(dst, {})[key] = move.first_dirty

    def _lose_dir_with_move(self, key: TopicPartition, move: "_Move", src: str, dst: str, retired: str,
                            exc: OSError) -> None:
        """(_swap: the manager's lock held, the log frozen.) Neither the copy
        could take the partition's name nor the old directory get its own back:
        the only complete directory left under a usable name is the copy, which
        the next start takes as the partition's log (the old one, named for
        deletion, goes then). So the copy stays as it is, and log dir ``src``
        goes offline as Kafka takes a dir offline on an IO error: its logs
        answer KAFKA_STORAGE_ERROR until a restart."""
        log.error("log dir %s goes offline: %s-%d cannot be renamed back from %s: %s",
                  src, key[0], key[1], retired, exc)
        self._moves.pop(key, None)
        self._offline_dirs.add(src)
        cur = self._logs[key]
        cur.closed = True   # (frozen: its lock is ours)
        # counted in dst, as the next start finds it: its checkpoints go there
        self._hand_over(key, move, src, dst)
        for k, lg in self._logs_in(src).items():
            if k != key:
                with lg._lock:
                    lg.closed = True
        for k in [k for k in self._moves if self._log_dir_of.get(k) == src]:
            self._cancel_move(k)

    def _load_futures(self) -> None:
        """(Start-up, after every dir is loaded.) Take up the copies of moves a
        stop interrupted: each goes on next to its current log, or, if a stop
        came between the two renames that finish a move (no current directory
        left anywhere), becomes the partition's log."""
        found, self._found_futures = self._found_futures, []
        for key, path, clean in found:
            d = os.path.dirname(path)
            name = f"{key[0]}-{key[1]}"
            offsets: _CheckpointedOffsets = {}
            if key in self._moves or self._log_dir_of.get(key) == d:
                log.warning("ignoring directory %s: a second copy of %s", path, name)
                continue
            if key not in self._logs:
                if any(os.path.isdir(os.path.join(x, name)) for x in self.log_dirs):
                    log.warning("ignoring directory %s: %s is offline", path, name)
                    continue
                final = os.path.join(d, name)
                log.warning("completing the move of %s to %s interrupted by a stop", name, d)
                os.rename(path, final)
                fsync_dir(d)
                path = final
                # the swap wrote the copy's offsets here before its renames
                recovery, starts, high_watermarks = self._read_checkpoints(d)
                offsets = _CheckpointedOffsets(recovery_point=recovery.get(key, 0),
                                               log_start_offset=starts.get(key),
                                               high_watermark=high_watermarks.get(key))
            try:
                lg = Log(path, key[0], key[1], self._config_for(key[0]),
                         topic_id=read_partition_metadata(path), clean_shutdown=clean, **offsets,
                         scheduler=self._schedule, flush_requester=self._request_flush,
                         checkpoint_requester=None if key in self._logs else self._request_checkpoint)
            except (OSError, StorageError) as exc:
                log.error("cannot open partition directory %s, leaving it offline: %s", path, exc)
                continue
            if key in self._logs:
                self._start_move(key, lg)
            else:
                self._logs[key] = lg
                self._log_dir_of[key] = d

    # ------------------------------------------------------------------ background
    def _retention_task(self) -> None:
        try:
            self.run_retention()
        finally:
            if not self._shut_down:
                self._scheduler.schedule(self._retention_task, self.retention_check_interval_ms)

    def run_retention(self, now_ms: int | None = None) -> int:
        deleted = 0
        for lg in list(self._logs.values()):
            try:
                deleted += lg.apply_retention(now_ms)
            except Exception:
                log.exception("retention failed for %r", lg)
        return deleted

    def _producer_expiration_task(self) -> None:
        try:
            self.expire_producers()
        finally:
            if not self._shut_down:
                self._scheduler.schedule(self._producer_expiration_task,
                                         self.producer_id_expiration_check_interval_ms)

    def expire_producers(self, now_ms: int | None = None) -> int:
        """Kafka's PeriodicProducerExpirationCheck: every log forgets producers
        idle for producer.id.expiration.ms without an open transaction."""
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        expiration_ms = self._producer_id_expiration_ms()
        removed = 0
        for lg in list(self._logs.values()):
            try:
                removed += lg.remove_expired_producers(now_ms, expiration_ms)
            except Exception:
                log.exception("producer expiration failed for %r", lg)
        return removed

    def logs_by_dir(self) -> dict[str, list[Log]]:
        """Every configured log dir (absolute) with the logs it holds."""
        out: dict[str, list[Log]] = {d: [] for d in self.log_dirs}
        with self._lock:
            for key, lg in self._logs.items():
                out.setdefault(self._log_dir_of[key], []).append(lg)
        return out

    def _logs_with_dirs(self) -> dict[TopicPartition, tuple[Log, str]]:
        # (The cleaner's view.) A log being moved is not cleaned until it has
        # moved, as Kafka pauses cleaning for it: the copy takes its batches as
        # they are, and a cleaned-away batch would stay in the copy.
        with self._lock:
            return {k: (lg, self._log_dir_of[k]) for k, lg in self._logs.items()
                    if k not in self._moves}

    def _moving_logs(self) -> dict[TopicPartition, str]:
        """(The cleaner's view.) The logs kept from it while they move, with their dirs."""
        with self._lock:
            return {k: self._log_dir_of[k] for k in self._moves}

    def run_cleaner(self, now_ms: int | None = None, *, force: bool = False
                    ) -> dict[TopicPartition, CleanerStats]:
        """One compaction pass over every compacted log that is due (``force``:
        whatever the dirty ratio); {(topic, partition): CleanerStats} of those cleaned."""
        if self.cleaner is None:
            raise StorageError("run_cleaner before startup")
        return self.cleaner.run_once(now_ms, force=force)

    def _checkpoint_task(self, name: str) -> None:
        try:
            self.write_checkpoints((name,))
        finally:
            if not self._shut_down:
                self._scheduler.schedule(functools.partial(self._checkpoint_task, name),
                                         self._checkpoint_intervals[name])

    # each checkpoint file's Log attribute
    _CHECKPOINT_VALUES: dict[str, str] = {
        RECOVERY_POINT_CHECKPOINT: "recovery_point",
        LOG_START_OFFSET_CHECKPOINT: "log_start_offset",
        REPLICATION_OFFSET_CHECKPOINT: "high_watermark",
    }

    def write_checkpoints(self, names: Sequence[str] = tuple(_CHECKPOINT_VALUES)) -> list[str]:
        """Write every dir's checkpoint files (``names``: those only); returns
        what failed (each naming the file)."""
        failures: list[str] = []
        with self._lock:
            by_dir = {d: self._logs_in(d) for d in self.log_dirs if d not in self._offline_dirs}
        for d, logs in by_dir.items():
            failures += self._write_checkpoint_files(d, logs, names)
        return failures

    def _logs_in(self, d: str) -> dict[TopicPartition, Log]:
        """(Manager lock held.) The logs log dir ``d`` holds, by key."""
        return {k: lg for k, lg in self._logs.items() if self._log_dir_of[k] == d}

    def _write_checkpoint_files(self, d: str, logs: Mapping[TopicPartition, Log],
                                names: Sequence[str]) -> list[str]:
        try:
            for name in names:
                attr = self._CHECKPOINT_VALUES[name]
                entries = {}
                for k, lg in logs.items():
                    # (a log not loaded yet: the entry read at start-up, if any)
                    value = lg.offset_to_checkpoint(attr)
                    if value is not None:
                        entries[k] = value
                path = os.path.join(d, name)
                with self._checkpoint_lock:
                    # An idle broker's files would be rewritten (10,000 lines,
                    # an fsync, a rename) every few seconds for nothing: Kafka
                    # writes them on a timer too, but what they hold is the same.
                    if self._checkpointed.get(path) == entries:
                        continue
                    write_offset_checkpoint(path, entries)
                    self._checkpointed[path] = entries
        except OSError as exc:
            log.error("writing checkpoints in %s failed: %s", d, exc)
            return [f"writing checkpoints: {exc}"]
        return []

    def _flush_ms_task(self) -> None:
        try:
            now = int(time.time() * 1000)
            # (Every second: with 10,000 logs and no flush.ms anywhere, as by
            # default, the loop alone was an idle broker's biggest cost.)
            for lg in list(self._logs.values()) if self._flush_ms_used else ():
                fms = lg.config.flush_ms
                if fms < LONG_MAX and lg.unflushed_messages() > 0 and now - lg.last_flush_ms >= fms:
                    self._flusher.request(lg)
        finally:
            if not self._shut_down:
                self._scheduler.schedule(self._flush_ms_task, self.flush_check_interval_ms)

    def flush_all(self) -> None:
        for lg in list(self._logs.values()):
            lg.flush()

    # ------------------------------------------------------------------ shutdown
    def _unrecovered_logs(self) -> dict[str, int]:
        """Per log dir started unclean: how many of its logs are not loaded (so
        not recovered) yet."""
        out: dict[str, int] = {}
        with self._lock:
            for key, lg in self._logs.items():
                d = self._log_dir_of[key]
                if d in self._unclean_dirs and not lg.loaded:
                    out[d] = out.get(d, 0) + 1
        return out

    def shutdown(self, clean: bool = True, withhold_marker: bool = False) -> list[str]:
        """Clean stop: flush and close every log, write checkpoints, then the marker.
        Returns the writes that failed (empty: a clean stop); a dir with a failure
        gets no clean-shutdown marker, so the next start recovers it.
        ``withhold_marker``: no dir gets the marker although every write here
        succeeded (something outside may still write into the logs).

        ``clean=False`` only stops the threads and closes file handles, leaving
        the directory as a crash would (tests of recovery use it).
        """
        if self._shut_down:
            return []
        self._shut_down = True
        if self._loader is not None:
            self._loader.stop()
            self._loader.join(timeout=30)
        if self._started:
            self._scheduler.stop()
            self._flusher.stop()
            self._scheduler.join(timeout=30)
            self._flusher.join(timeout=30)
        if self.cleaner is not None:
            self.cleaner.stop()   # aborts a pass between segment groups
        if not clean:
            with self._lock:
                for lg in self._logs.values():
                    lg.close_handles(trim=False)
                for move in self._moves.values():
                    move.future.close_handles(trim=False)
            return []
        failures: list[str] = []
        failed_dirs = set()
        t0 = t_closed = time.monotonic()
        with self._lock:
            # a move in progress stays as it is and goes on at the next start
            logs = [(k, m.future, os.path.dirname(m.future.dir)) for k, m in self._moves.items()]
            logs += [(k, lg, self._log_dir_of[k]) for k, lg in self._logs.items()]
            # Every log's flush and producer snapshot made durable together (with
            # thousands of partitions: one barrier, not several fsyncs each); the
            # recovery points move once they are, before the checkpoints are written.
            # Each dir's logs are closed by close_threads_per_dir workers (Kafka's
            # num.recovery.threads.per.data.dir), every one inside the same batch.
            write_back = (start_write_back(sorted({d for _, _, d in logs}))
                          if len(logs) >= _WRITE_BACK_FROM else None)
            try:
                with durable_batch():
                    batch = current_durable_batch()

                    def close_all(some: list[tuple[TopicPartition, Log, str]]) -> None:
                        with joining(batch):
                            for key, lg, d in some:
                                try:
                                    lg.close()
                                except OSError as exc:
                                    log.error("closing %s-%d failed: %s", key[0], key[1], exc)
                                    failures.append(f"closing {key[0]}-{key[1]}: {exc}")
                                    failed_dirs.add(d)
                                except Exception as exc:  # noqa: BLE001 - our bug: keep the traceback
                                    log.exception("closing %r failed", lg)
                                    failures.append(f"closing {key[0]}-{key[1]}: {exc}")
                                    failed_dirs.add(d)

                    *others, mine = _shares(logs, self._close_workers_per_dir(logs))
                    workers = [threading.Thread(target=close_all, args=(share,), daemon=True,
                                                name=f"samsa-log-close-{i}")
                               for i, share in enumerate(others)]
                    for w in workers:
                        w.start()
                    close_all(mine)
                    for w in workers:
                        w.join()
                    t_closed = time.monotonic()
            except OSError as exc:
                log.error("making the closed logs durable failed: %s", exc)
                failures.append(f"flushing the logs: {exc}")
            written_back = write_back.wait() if write_back is not None else None
            if written_back is not None:
                log.error("writing the logs back to disk failed: %s", written_back)
                failures.append(f"flushing the logs: {written_back}")
        t_durable = time.monotonic()
        failures += self.write_checkpoints()
        t_checkpoints = time.monotonic()
        for d, unloaded in self._unrecovered_logs().items():
            # not loaded since an unclean stop, so not recovered: the next start must
            log.info("log dir %s: %d logs not recovered since the unclean stop before "
                     "this run; the next start recovers them", d, unloaded)
            failed_dirs.add(d)
        for d in self.log_dirs:
            # the marker promises every log in the dir is flushed and consistent
            if (d not in failed_dirs and d not in self._offline_dirs and not failures
                    and not withhold_marker):
                try:
                    atomic_write(os.path.join(d, CLEAN_SHUTDOWN_MARKER), "")
                except OSError as exc:
                    failures.append(f"writing the clean-shutdown marker: {exc}")
        log.info("closed %d logs in %.3f s: closes %.3f s, their durable barrier %.3f s, "
                 "checkpoints %.3f s, markers %.3f s", len(logs), time.monotonic() - t0,
                 t_closed - t0, t_durable - t_closed,
                 t_checkpoints - t_durable, time.monotonic() - t_checkpoints)
        return failures

    def _close_workers_per_dir(self, logs: list[tuple[TopicPartition, Log, str]]) -> int:
        """close_threads_per_dir, or a CPU's worth of workers (shared among the
        dirs: one worker per CPU in all) if the closes owe at least
        _CLOSES_PER_WORKER index files: logs written just before the stop, whose
        files the scheduler had not made yet (their closes make them). A new file
        is mostly kernel time (a new inode: a millisecond of it on some file
        systems, where an open of an existing file takes microseconds), each in
        a partition directory of its own, so the closes go on side by side."""
        per_dir = self.close_threads_per_dir
        share = (os.cpu_count() or 1) // max(1, len({d for _, _, d in logs}))
        if share > per_dir:
            owing = sum(1 for _, lg, _ in logs if lg.owes_index_files)
            if owing >= _CLOSES_PER_WORKER:
                per_dir = share
        return per_dir


class _CheckpointedOffsets(TypedDict, total=False):
    """What a log dir's checkpoint files say of a log, as Log's keyword arguments."""
    recovery_point: int
    log_start_offset: int | None
    high_watermark: int | None


class _Move:
    """A partition being moved to another log dir."""
    __slots__ = ("future", "truncations", "first_dirty")

    def __init__(self, future: Log, first_dirty: int | None):
        self.future = future
        # the current log's truncation count when the copy was last checked
        # against it (None: not yet)
        self.truncations: int | None = None
        # the cleaner's checkpoint, carried over to the new dir (no cleaning
        # while the move goes on, so the copy is as clean as the log was)
        self.first_dirty = first_dirty


def _copy_matches(cur: Log, future: Log) -> bool:
    """Whether ``future`` (a copy an earlier run began) holds the start of
    ``cur``, checked as Kafka's replicas check a leader: the copy's newest
    leader epoch ends in the current log no earlier than the copy does."""
    end = future.log_end_offset
    if end > cur.log_end_offset:
        return False
    if end == future.log_start_offset:
        return True   # nothing copied yet
    epoch = future.leader_epochs.latest_epoch
    if epoch < 0:
        return False
    found, epoch_end = cur.end_offset_for_epoch(epoch)
    return found == epoch and epoch_end >= end


def _shares(logs: list[tuple[TopicPartition, Log, str]], per_dir: int
            ) -> list[list[tuple[TopicPartition, Log, str]]]:
    """``logs`` (key, log, its log dir) dealt out to ``per_dir`` workers per log
    dir (fewer where a dir has fewer logs than workers need: below
    _CLOSES_PER_WORKER each, a worker's start costs more than it saves)."""
    by_dir: dict[str, list[tuple[TopicPartition, Log, str]]] = {}
    for item in logs:
        by_dir.setdefault(item[2], []).append(item)
    out = []
    for items in by_dir.values():
        n = max(1, min(per_dir, len(items) // _CLOSES_PER_WORKER))
        out += [items[i::n] for i in range(n)]
    return out or [[]]


def _parse_suffixed_dir(name: str, suffix: str) -> tuple[str, int]:
    """``<topic>-<partition>.<uuid-hex><suffix>`` -> (topic, partition)."""
    stem, dot, unique = name[:-len(suffix)].rpartition(".")
    if not dot or len(unique) != 32:
        raise ValueError(f"not a {suffix} directory name: {name!r}")
    return parse_partition_dir(stem)


def _raise_fd_limit() -> None:
    """Connections and segment files (as many as storage/fd_cache.py keeps)
    hold descriptors: allow as many as the hard limit."""
    try:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != hard and hard != resource.RLIM_INFINITY:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError):
        pass


def _is_dir(entry: os.DirEntry[str]) -> bool:
    """An entry to load as a partition: a directory, or a link to one. One
    whose type cannot be read (a link into a place we may not see) is not
    one, as os.path.isdir says, instead of stopping the start."""
    try:
        return entry.is_dir()
    except OSError:
        return False
