"""Kafka's small metadata files, byte for byte: offset checkpoints, leader epochs,
``meta.properties`` and ``partition.metadata``.

All writes go to ``<name>.tmp``, are fsynced and renamed over the old file, like
Kafka's CheckpointFile, so a crash leaves either the old or the new content.
A malformed checkpoint is logged and read as empty: that only makes the next
start recover more than it had to, never lose data.

Inside ``durable_batch()`` (creating a topic of many partitions) the same steps
run once for every file the batch wrote instead of once per file: all the
temporary files are made durable, then renamed, then the renames made durable,
before the batch returns. A crash still leaves each file old or new, never torn;
what the batch saves is thousands of sequential fsyncs. A batched write has a
temporary file of its own (``<name>.<n>.tmp``) and its rename at the batch's end is
skipped when another thread has written the same file since (``_pending``): the
later write holds the newer content, and the batch must not put the older back.
The one exception is a
file that has no old content to keep: the first file of its name in a partition
directory the same batch made (``write_new_file``) is written in place, and
until the barrier a crash may leave it cut short, which reads as malformed.
"""
from __future__ import annotations

import base64
import contextlib
import ctypes
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"   # high watermarks
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


# Batched writes not yet renamed: final path -> the write's number. A later write
# of the path (batched or not, any thread) replaces or drops the entry, and a batch
# renames only a file still named here: the newest write wins whatever the order
# of the renames. (Leader epochs: a partition's role pass writes its new epoch in a
# batch while a request's thread may already write a newer one.)
_pending: dict[str, int] = {}
_pending_lock = threading.Lock()
_write_numbers = iter(range(1, 1 << 62))


class _Batch:
    """Writes waiting for one durability barrier: renames to do, files and dirs to
    sync, and what may only happen once they are durable."""

    def __init__(self) -> None:
        self.renames: dict[str, tuple[str, int]] = {}   # final path -> (temporary file, write number)
        self.dirs: set[str] = set()
        self.files: set[str] = set()        # written in place (segments, indexes)
        self.after: list[Callable[[], None]] = []

    def commit(self) -> None:
        """Files and temporary files durable, then renamed, then the renames
        durable, then the ``after`` steps (a recovery point moved, say)."""
        if self.renames or self.dirs or self.files:
            _sync_all([*self.files, *(tmp for tmp, _ in self.renames.values())], self.dirs,
                      missing_ok=self.files)
            for path, (tmp, number) in self.renames.items():
                with _pending_lock:
                    superseded = _pending.get(path) != number
                    if not superseded:
                        del _pending[path]
                        try:
                            os.replace(tmp, path)
                        except OSError as e:
                            raise OSError(e.errno, e.strerror, path) from None
                if superseded:   # a newer write of the file is in place or on its way
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
            if self.renames:
                _sync_all([], self.dirs | {os.path.dirname(p) or "." for p in self.renames})
        for fn in self.after:
            fn()


_batches = threading.local()


@contextlib.contextmanager
def durable_batch() -> Iterator[None]:
    """This thread's atomic_write and fsync_dir calls inside the block are made
    durable together when it ends (nested blocks: when the outermost ends).
    Until then a written file's new content is not yet in place."""
    if getattr(_batches, "current", None) is not None:
        yield
        return
    batch = _Batch()
    _batches.current = batch
    try:
        yield
    finally:
        _batches.current = None
        batch.commit()


@contextlib.contextmanager
def joining(token: object | None) -> Iterator[None]:
    """This thread's writes inside the block join ``token``, another thread's
    outermost durable_batch() (its current_durable_batch(); None: no batch):
    the workers of a stop closing logs side by side. The batch's owner commits
    it once every worker is done, so nothing a worker wrote is renamed or
    vouched for before the barrier."""
    if token is None:
        yield
        return
    assert isinstance(token, _Batch), token
    before = getattr(_batches, "current", None)
    _batches.current = token
    try:
        yield
    finally:
        _batches.current = before


def _syncfs() -> Callable[[int], int] | None:
    """libc's syncfs(2) (Linux): every dirty file and directory of one file
    system durable in one call, which a batch of thousands of files wants."""
    try:
        # The process's own symbols, libc's among them: find_library("c") would
        # run ldconfig in a subprocess at every import
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.syncfs
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


_SYNCFS = _syncfs()


# Below this many files and directories a batch fsyncs each: syncfs also flushes every
# other dirty page of the file system (a busy broker's segments), which a topic of a
# few partitions must not wait for.
_SYNCFS_FROM = 256


def _sync_all(files: list[str], dirs: set[str], missing_ok: set[str] | frozenset[str] = frozenset()
              ) -> None:
    """Make ``files`` and ``dirs`` durable: for a large batch one syncfs per file
    system they are on where the OS has it, else an fsync each (those of
    ``missing_ok`` that are gone, a segment deleted meanwhile, need none)."""
    if _SYNCFS is None or len(files) + len(dirs) < _SYNCFS_FROM:
        for f in files:
            try:
                _fsync_path(f, os.O_RDONLY)
            except FileNotFoundError:
                if f not in missing_ok:
                    raise
        for d in dirs:
            fsync_dir(d)
        return
    # (one stat per directory, not per file: a file's device is its directory's)
    _syncfs_of({*dirs, *(os.path.dirname(f) or "." for f in files)})


def _syncfs_of(paths: set[str]) -> None:
    """One syncfs for each file system ``paths`` are on (a missing path: none)."""
    assert _SYNCFS is not None
    by_device: dict[int, str] = {}
    for path in paths:
        try:
            by_device.setdefault(os.stat(path).st_dev, path)
        except FileNotFoundError:
            continue
    for path in by_device.values():
        fd = os.open(path, os.O_RDONLY)
        try:
            if _SYNCFS(fd) != 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err), path)
        finally:
            os.close(fd)


class WriteBack:
    """An early write-back running on a thread of its own (``start_write_back``)."""

    def __init__(self, dirs: list[str]) -> None:
        self.error: OSError | None = None
        self._thread = threading.Thread(target=self._run, args=(dirs,),
                                        name="samsa-write-back", daemon=True)
        self._thread.start()

    def _run(self, dirs: list[str]) -> None:
        try:
            _syncfs_of(set(dirs))
        except OSError as exc:
            self.error = exc

    def wait(self) -> OSError | None:
        """Its end; the error it met, if any. That error must fail the stop:
        the kernel reports a write-back error to the first syncfs that meets
        it, and a barrier after it, on descriptors opened later, returns 0
        for pages the failed write left marked clean."""
        self._thread.join()
        return self.error


def start_write_back(dirs: list[str]) -> WriteBack | None:
    """Start writing back the dirty pages of the file systems ``dirs`` are on,
    on a thread of its own (None: no syncfs here). Not a barrier: a stop calls
    it before closing thousands of logs, so the records written since their
    last flush (the bulk of what it makes durable) go to the disk while the
    closes run, and the batch's own syncfs at the end waits for little more
    than what the closes wrote. The stop waits for it before vouching for
    anything (``WriteBack.wait``)."""
    if _SYNCFS is None:
        return None
    return WriteBack(dirs)


def _fsync_path(path: str, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from None
    finally:
        os.close(fd)


def sync_file(fd: int, path: str) -> None:
    """fsync ``fd`` (open on ``path``); inside durable_batch() the file is made
    durable with the batch instead (by path: close it whenever)."""
    batch: _Batch | None = getattr(_batches, "current", None)
    if batch is not None:
        batch.files.add(path)
        return
    os.fsync(fd)


def sync_path(path: str) -> None:
    """fsync the file at ``path`` (gone: nothing to do); inside durable_batch()
    it is made durable with the batch, and not even opened here (a stop of
    10,000 partitions would open 20,000 index files just to name them)."""
    batch: _Batch | None = getattr(_batches, "current", None)
    if batch is not None:
        batch.files.add(path)   # (a missing file is fine: missing_ok)
        return
    with contextlib.suppress(FileNotFoundError):
        _fsync_path(path, os.O_RDONLY)


def current_durable_batch() -> object | None:
    """This thread's outermost durable_batch() (an opaque token), None outside one."""
    return getattr(_batches, "current", None)


def in_durable_batch() -> bool:
    """Whether this thread's writes wait for a durable_batch()'s end."""
    return getattr(_batches, "current", None) is not None


def when_durable(fn: Callable[[], None]) -> None:
    """Run ``fn`` once what this thread wrote so far is durable: now, or inside
    durable_batch() after the batch's barrier."""
    batch: _Batch | None = getattr(_batches, "current", None)
    if batch is not None:
        batch.after.append(fn)
        return
    fn()


def atomic_write(path: str, data: str | bytes) -> None:
    """Write ``path`` whole or not at all (temporary file, fsync, rename).
    A failure (a full disk above all) raises OSError naming ``path``: write()
    and fsync() errors carry no file name of their own. Inside durable_batch()
    the fsync, rename and directory fsync wait for the batch's end."""
    batch: _Batch | None = getattr(_batches, "current", None)
    with _pending_lock:
        number = next(_write_numbers)
        if batch is not None:
            _pending[path] = number
        else:
            _pending.pop(path, None)
    tmp = f"{path}.{number}.tmp" if batch is not None else path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data.encode("utf-8") if isinstance(data, str) else data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            if batch is None:
                os.fsync(fd)
        finally:
            os.close(fd)
        if batch is not None:
            earlier = batch.renames.get(path)
            if earlier is not None:   # this batch wrote it before: only the last counts
                with contextlib.suppress(OSError):
                    os.unlink(earlier[0])
            batch.renames[path] = (tmp, number)
            return
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise OSError(e.errno, e.strerror, path) from None
    fsync_dir(os.path.dirname(path) or ".")


def write_new_file(path: str, data: str) -> None:
    """Write ``path``, a file that does not exist yet in a directory made in this
    thread's durable_batch(), in place: no temporary file and no rename (with
    10,000 partitions created at once, 20,000 renames fewer). A crash before the
    batch's barrier may leave it missing, empty or cut short: the directory's
    creation was not answered yet, and its readers take a cut file for
    malformed (empty), never for other content (_checkpoint_entries; a cut
    partition.metadata lacks its topic_id). Outside a batch: atomic_write."""
    batch: _Batch | None = getattr(_batches, "current", None)
    if batch is None:
        atomic_write(path, data)
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_whole(fd, data.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from None
    _created_in(batch, path)


def _write_whole(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _created_in(batch: _Batch, path: str) -> None:
    """A file created in place: it and its directory entry are synced at the barrier."""
    batch.files.add(path)
    batch.dirs.add(os.path.dirname(path) or ".")


def write_checked_file(path: str, data: bytes) -> None:
    """Write ``path``, a file whose readers check it whole (a producer snapshot:
    CRC-32C over its body) and fall back to what else there is (an older
    snapshot, the segments) when it is cut short. Inside durable_batch(), if
    there is no file of that name yet, in place as Kafka writes snapshots
    (CREATE_NEW, write, force): no temporary file and no rename, so a stop of
    10,000 partitions neither renames 10,000 files nor writes 10,000 directory
    blocks twice. A crash before the batch's barrier may leave it missing,
    empty or cut short, which its reader skips; the clean-shutdown marker only
    follows the barrier. Otherwise (outside a batch, or a file there already,
    whose old content must stay until the new is whole): atomic_write."""
    batch: _Batch | None = getattr(_batches, "current", None)
    if batch is None:
        atomic_write(path, data)
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        atomic_write(path, data)
        return
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from None
    with _pending_lock:   # (a batched atomic_write of it before: this is newer)
        _pending.pop(path, None)
    try:
        try:
            _write_whole(fd, data)
        finally:
            os.close(fd)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise OSError(e.errno, e.strerror, path) from None
    _created_in(batch, path)


def fsync_dir(path: str) -> None:
    batch: _Batch | None = getattr(_batches, "current", None)
    if batch is not None:
        batch.dirs.add(path)
        return
    with contextlib.suppress(OSError):   # (a directory some file systems cannot fsync)
        _fsync_path(path, os.O_RDONLY)


def read_small_file(path: str) -> bytes | None:
    """The whole of a small file (a checkpoint, a snapshot), None if it is missing.
    A start reads several per partition: os.open and os.read skip the buffered and
    text layers of open(), which cost more than the read itself at 10,000 partitions."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        chunks: list[bytes] = []
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                return b"".join(chunks)
            chunks.append(chunk)
    finally:
        os.close(fd)


def _read_lines(path: str) -> list[str] | None:
    data = read_small_file(path)
    if data is None:
        return None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:  # garbage (a crash's zeros are valid UTF-8): malformed
        log.warning("ignoring undecodable %s: %s", path, exc)
        return []


def _checkpoint_entries(path: str) -> list[str] | None:
    """The entry lines of a Kafka checkpoint file (version 0, a count, then
    that many lines, each ended by a newline), None if there is no file. A
    file a crash cut short (one written in place: write_new_file) reads as
    malformed, not as fewer entries or a shortened last number: the count
    must match and the last line be whole. Raises ValueError or IndexError."""
    data = read_small_file(path)
    if data is None:
        return None
    text = data.decode("utf-8")
    if not text.endswith("\n"):
        raise ValueError("cut short: no newline at its end")
    lines = text.splitlines()
    if lines[0].strip() != "0":
        raise ValueError(f"unknown version {lines[0]!r}")
    count = int(lines[1])
    if len(lines) != 2 + count:
        raise ValueError(f"expected {count} entries, found {len(lines) - 2}")
    return lines[2:]


# -- per-log-dir offset checkpoints ---------------------------------------------

def write_offset_checkpoint(path: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    atomic_write(path, "\n".join(lines) + "\n")


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    try:
        lines = _checkpoint_entries(path)
        if lines is None:
            return {}
        out = {}
        for line in lines:
            topic, part, off = line.split()
            out[(topic, int(part))] = int(off)
        if len(out) != len(lines):
            raise ValueError(f"{len(lines) - len(out)} partitions named twice")
        return out
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return {}


# -- per-partition leader epoch checkpoint ------------------------------------------

def write_leader_epoch_checkpoint(path: str, entries: list[tuple[int, int]], *,
                                  new_dir: bool = False) -> None:
    """``new_dir``: the partition directory was made in this durable batch and
    holds no such file yet (see write_new_file)."""
    lines = ["0", str(len(entries))] + [f"{e} {o}" for e, o in entries]
    (write_new_file if new_dir else atomic_write)(path, "\n".join(lines) + "\n")


def read_leader_epoch_checkpoint(path: str) -> list[tuple[int, int]]:
    try:
        lines = _checkpoint_entries(path)
        if lines is None:
            return []
        out = []
        for line in lines:
            e, o = line.split()
            out.append((int(e), int(o)))
        return out
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed leader epoch checkpoint %s: %s", path, exc)
        return []


# -- topic ids ---------------------------------------------------------------

def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding (22 chars)."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def topic_id_from_str(text: str) -> uuid.UUID:
    text = text.strip()
    if len(text) == 36:  # tolerate the canonical UUID form
        return uuid.UUID(text)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def write_partition_metadata(partition_dir: str, topic_id: uuid.UUID, *,
                             new_dir: bool = False) -> None:
    """``new_dir``: ``partition_dir`` was made in this durable batch (write_new_file)."""
    (write_new_file if new_dir else atomic_write)(
        os.path.join(partition_dir, PARTITION_METADATA),
        f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}")


def read_partition_metadata(partition_dir: str) -> uuid.UUID | None:
    lines = _read_lines(os.path.join(partition_dir, PARTITION_METADATA))
    if not lines:
        return None
    try:
        fields = dict(line.split(":", 1) for line in lines if ":" in line)
        if fields.get("version", "").strip() != "0":
            raise ValueError(f"unknown version {fields.get('version')!r}")
        return topic_id_from_str(fields["topic_id"])
    except (ValueError, KeyError) as exc:
        log.warning("ignoring malformed %s in %s: %s", PARTITION_METADATA, partition_dir, exc)
        return None


# -- meta.properties ---------------------------------------------------------------

def read_properties(path: str) -> dict[str, str] | None:
    lines = _read_lines(path)
    if lines is None:
        return None
    out = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        k, v = line.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def write_meta_properties(log_dir: str, broker_id: int, cluster_id: str) -> None:
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime())
    atomic_write(os.path.join(log_dir, META_PROPERTIES),
                 f"#\n#{stamp}\ncluster.id={cluster_id}\nversion=0\nbroker.id={broker_id}\n")
