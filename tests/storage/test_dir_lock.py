"""LogDirLocks: one holder per log dir, whoever asks (another process is in
tests/integration/test_log_dir_lock.py)."""
import pytest

from samsa.storage.dir_lock import LogDirLocks
from samsa.storage.errors import StorageError


def test_a_held_dir_is_refused_naming_it_until_released(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    first = LogDirLocks([str(a)])
    # flock belongs to the open file: a second holder in the same process is
    # refused too, and the dirs it did lock (b) are given back
    with pytest.raises(StorageError, match=f"log.dirs: {a} is in use by another broker"):
        LogDirLocks([str(b), str(a)])
    LogDirLocks([str(b)]).release()
    first.release()
    LogDirLocks([str(a), str(b)]).release()


def test_a_dir_listed_twice_is_refused(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "d")
    with pytest.raises(StorageError, match="listed twice"):
        LogDirLocks([str(tmp_path / "d"), str(tmp_path / "link")])
    LogDirLocks([str(tmp_path / "d")]).release()  # nothing was left locked
