"""Kafka's small metadata files, byte for byte: offset checkpoints, leader epochs,
``meta.properties`` and ``partition.metadata``.

All writes go to ``<name>.tmp``, are fsynced and renamed over the old file, like
Kafka's CheckpointFile, so a crash leaves either the old or the new content.
A malformed checkpoint is logged and read as empty: that only makes the next
start recover more than it had to, never lose data.
"""
from __future__ import annotations

import base64
import logging
import os
import time
import uuid

log = logging.getLogger(__name__)

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"   # high watermarks
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"


def atomic_write(path: str, data: str) -> None:
    """Write ``path`` whole or not at all (temporary file, fsync, rename).
    A failure (a full disk above all) raises OSError naming ``path``: write()
    and fsync() errors carry no file name of their own."""
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data.encode("utf-8"))
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise OSError(e.errno, e.strerror, path) from None
    fsync_dir(os.path.dirname(path) or ".")


def fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _read_lines(path: str) -> list[str] | None:
    try:
        with open(path, "r", encoding="utf-8") as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return None


# -- per-log-dir offset checkpoints ---------------------------------------------

def write_offset_checkpoint(path: str, offsets: dict[tuple[str, int], int]) -> None:
    lines = ["0", str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    atomic_write(path, "\n".join(lines) + "\n")


def read_offset_checkpoint(path: str) -> dict[tuple[str, int], int]:
    lines = _read_lines(path)
    if lines is None:
        return {}
    try:
        if lines[0].strip() != "0":
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        out = {}
        for line in lines[2:2 + count]:
            topic, part, off = line.split()
            out[(topic, int(part))] = int(off)
        if len(out) != count:
            raise ValueError(f"expected {count} entries, found {len(out)}")
        return out
    except (ValueError, IndexError) as exc:
        log.warning("ignoring malformed checkpoint %s: %s", path, exc)
        return {}


# -- per-partition leader epoch checkpoint ------------------------------------------

def write_leader_epoch_checkpoint(path: str, entries: list[tuple[int, int]]) -> None:
    lines = ["0", str(len(entries))] + [f"{e} {o}" for e, o in entries]
    atomic_write(path, "\n".join(lines) + "\n")


def read_leader_epoch_checkpoint(path: str) -> list[tuple[int, int]]:
    lines = _read_lines(path)
    if lines is None:
        return []
    try:
        if lines[0].strip() != "0":
            raise ValueError(f"unknown version {lines[0]!r}")
        count = int(lines[1])
        out = []
        for line in lines[2:2 + count]:
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


def write_partition_metadata(partition_dir: str, topic_id: uuid.UUID) -> None:
    atomic_write(os.path.join(partition_dir, PARTITION_METADATA),
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
