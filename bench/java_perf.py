"""The Java client's produce load: bench/java/PerfProducer.java, compiled on demand.

Compiled the same way as the test tools (tests/support/java_client.py): the same
verified kafka-clients jars from the shared cache, javac --release 17, output in
the cache under a hash of the sources, so a rebuild happens only when they change.
The JVM runs with full JIT here (the test tools' C1-only flags favour start-up).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.java_client import JavaToolsError, cache_lock, cache_root, ensure_jars

SOURCES = Path(__file__).resolve().parent / "java"
JVM_FLAGS = ["-Xmx512m", "-Dslf4j.internal.verbosity=ERROR"]


def ensure_perf_classpath() -> str:
    jars = ensure_jars()
    sources = sorted(SOURCES.glob("*.java"))
    h = hashlib.sha256()
    for src in sources:
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    for jar in jars:
        h.update(jar.name.encode())
    root = cache_root() / "java" / "bench-classes"
    target = root / h.hexdigest()[:16]
    with cache_lock(cache_root() / "java"):
        if not target.is_dir():
            root.mkdir(parents=True, exist_ok=True)
            tmp = Path(tempfile.mkdtemp(dir=root, prefix="build-"))
            try:
                cmd = ["javac", "--release", "17", "-Xlint:-options", "-encoding", "UTF-8",
                       "-cp", os.pathsep.join(map(str, jars)), "-d", str(tmp), *map(str, sources)]
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
                if proc.returncode != 0:
                    raise JavaToolsError(f"javac failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
                os.chmod(tmp, 0o755)
                os.rename(tmp, target)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    return os.pathsep.join([str(target), *map(str, jars)])


def java_produce(bootstrap: str, topic: str, value_size: int, acks: str, seconds: float) -> dict:
    """Run PerfProducer; returns records, bytes, seconds, mb_s (JVM start-up excluded)."""
    cmd = ["java", *JVM_FLAGS, "-cp", ensure_perf_classpath(), "PerfProducer",
           bootstrap, topic, str(value_size), acks, str(seconds)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    line = next((l for l in proc.stdout.splitlines() if l.startswith("records=")), None)
    if proc.returncode != 0 or line is None:
        raise JavaToolsError(f"PerfProducer exited {proc.returncode}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    f = dict(kv.split("=") for kv in line.split())
    secs = float(f["seconds"])
    return {"records": int(f["records"]), "bytes": int(f["bytes"]), "seconds": secs,
            "mb_s": int(f["bytes"]) / secs / 1e6, "rec_s": int(f["records"]) / secs}
