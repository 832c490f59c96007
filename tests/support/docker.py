"""Docker for the container tests, on a machine with no image registry and no
bridge network (see docs: the tests build everything from Debian's mirror).

- ``Dockerd``: a private dockerd (own socket, data-root, exec-root, pidfile
  under a temp dir; ``--bridge=none --iptables=false``), so the tests neither
  need nor touch a system Docker. Every container runs with the host network.
- ``base_image``: Debian bookworm with python3 made by debootstrap from the
  mirror apt uses here, imported as an image. The rootfs tarball is cached
  under $SAMSA_TEST_CACHE (default ~/.cache/samsa-tests): about a minute the
  first time, seconds after.
- ``build_context``: a copy of the repository's image inputs plus a
  wheelhouse made by ``pip wheel`` on the host, because pip inside a build
  cannot reach the index here. A copy, so the tests never write into the
  working tree.
- ``cached_image``: an image built once and kept as ``docker save`` output in
  the cache (ZooKeeper's image takes a minute and a half of apt-get).
"""
from __future__ import annotations

import atexit
import glob
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from .broker_process import REPO_ROOT
from .java_client import cache_root

SUITE = "bookworm"
PACKAGES = "python3,python3-venv,python3-pip,ca-certificates"
# The tools the container tests drive, and the Debian package of each
# (scripts/setup.sh --test installs them).
TOOLS = {"dockerd": "docker.io", "docker": "docker.io", "debootstrap": "debootstrap",
         "docker-compose": "docker-compose", "prometheus": "prometheus",
         "promtool": "prometheus"}


def tool(name: str) -> str | None:
    # Debian's own docker client first: it matches docker.io's daemon, where a
    # newer client elsewhere on PATH may use features the daemon lacks.
    for d in ("/usr/sbin", "/usr/bin"):
        if os.access(f"{d}/{name}", os.X_OK):
            return f"{d}/{name}"
    return shutil.which(name)


def require_container_tools() -> None:
    """Skip where the container tests cannot run; on CI (CI=true), where a
    skip would hide a broken set-up, fail instead."""
    import pytest
    missing = missing_requirements()
    if missing:
        msg = ("the container tests need: " + ", ".join(missing)
               + " (scripts/setup.sh --test installs the packages)")
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)


def missing_requirements() -> list[str]:
    """What the container tests need and this machine lacks, as messages."""
    missing = [f"{name} (Debian package {pkg})" for name, pkg in TOOLS.items() if not tool(name)]
    if os.geteuid() != 0:
        missing.append("root (dockerd and debootstrap run as root)")
    return missing


def run(argv: list[str], timeout: float, env: dict | None = None, cwd=None,
        input: bytes | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command to completion within ``timeout``; a non-zero exit (with
    ``check``) or the deadline is an AssertionError carrying the command and
    the end of its output."""
    try:
        p = subprocess.run(argv, env=env, cwd=cwd, input=input, capture_output=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"timed out after {timeout:g} s: {' '.join(argv)}\n"
                             f"{_tail(e.stdout)}{_tail(e.stderr)}") from None
    if check and p.returncode != 0:
        raise AssertionError(f"exit code {p.returncode}: {' '.join(argv)}\n"
                             f"{_tail(p.stdout)}{_tail(p.stderr)}")
    return p


def _tail(data: bytes | None, lines: int = 40) -> str:
    if not data:
        return ""
    return "\n".join(data.decode(errors="replace").splitlines()[-lines:]) + "\n"


class Dockerd:
    """A dockerd of the tests' own. ``docker(...)`` runs the client against it;
    ``env`` is the environment for other clients (docker-compose)."""

    def __init__(self) -> None:
        # Short paths: containerd's sockets live under exec-root and a unix
        # socket path must stay under 108 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="samsa-dockerd-"))
        self.socket = self.root / "docker.sock"
        self.log_path = self.root / "dockerd.log"
        self.env = {**os.environ, "DOCKER_HOST": f"unix://{self.socket}"}
        self.proc: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> "Dockerd":
        argv = [tool("dockerd"), "--bridge=none", "--iptables=false", "--ip6tables=false",
                "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
                "--pidfile", str(self.root / "docker.pid"), "--host", f"unix://{self.socket}"]
        with open(self.log_path, "wb") as log:
            # Its own session: stop() can signal dockerd and the containerd it forks.
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        # A run interrupted before its fixtures tore down leaves no daemon behind.
        atexit.register(self.stop)
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(f"dockerd exited with code {self.proc.returncode}:\n"
                                     f"{self.log_tail()}")
            ok = subprocess.run([tool("docker"), "version"], env=self.env,
                                capture_output=True, timeout=30).returncode == 0
            if ok:
                return self
            if time.monotonic() >= deadline:
                self.stop()
                raise AssertionError(f"dockerd did not answer within {timeout:g} s:\n"
                                     f"{self.log_tail()}")
            time.sleep(0.2)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return _tail(self.log_path.read_bytes(), lines)
        except FileNotFoundError:
            return "(no dockerd log)\n"

    def docker(self, *args: str, timeout: float = 120.0, input: bytes | None = None,
               cwd=None, check: bool = True) -> subprocess.CompletedProcess:
        return run([tool("docker"), *args], timeout, env=self.env, input=input, cwd=cwd,
                   check=check)

    def compose(self, *args: str, cwd: Path, env: dict, timeout: float = 300.0,
                check: bool = True) -> subprocess.CompletedProcess:
        """docker-compose against this dockerd, in ``cwd``, with extra ``env``."""
        return run([tool("docker-compose"), *args], timeout, env={**self.env, **env}, cwd=cwd,
                   check=check)

    def inspect(self, name: str, template: str) -> str:
        return self.docker("inspect", "-f", template, name, timeout=30).stdout.decode().strip()

    def logs(self, name: str) -> str:
        p = self.docker("logs", name, timeout=30)
        return (p.stdout + p.stderr).decode(errors="replace")

    def stop(self) -> None:
        """Remove every container, then stop dockerd (SIGTERM, then SIGKILL to
        its process group) and delete its directories."""
        if self.proc is None or not self.root.exists():
            return  # never started, or stopped already
        if self.proc.poll() is None:
            try:
                ids = self.docker("ps", "-aq", timeout=30).stdout.split()
                if ids:
                    self.docker("rm", "-f", "-v", *[i.decode() for i in ids], timeout=120)
            except AssertionError as e:
                print(f"docker cleanup failed: {e}", file=sys.stderr)
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        # Whatever is left in the group (a containerd that did not follow).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()
        # Overlay mounts dockerd left behind would keep rmtree from deleting.
        for mount in sorted(_mounts_under(self.root), reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root) + "/"
    with open("/proc/self/mounts") as f:
        return [line.split()[1] for line in f if line.split()[1].startswith(prefix)]


# ---------------------------------------------------------------- base image

def debian_mirror() -> str:
    """The Debian mirror apt uses on this machine (for SUITE, component main):
    deb822 files (*.sources) and one-line lists (sources.list, *.list).
    $SAMSA_TEST_DEBIAN_MIRROR wins."""
    if os.environ.get("SAMSA_TEST_DEBIAN_MIRROR"):
        return os.environ["SAMSA_TEST_DEBIAN_MIRROR"]
    files = ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list")),
             *sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))]
    for path in files:
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        if path.endswith(".sources"):
            for stanza in re.split(r"\n\s*\n", text):
                fields = dict(re.findall(r"^([A-Za-z-]+):\s*(.*)$", stanza, re.M))
                if ("deb" in fields.get("Types", "").split()
                        and SUITE in fields.get("Suites", "").split()
                        and "main" in fields.get("Components", "").split()
                        and fields.get("Enabled", "yes") != "no"):
                    return fields["URIs"].split()[0]
        else:
            for line in text.splitlines():
                words = re.sub(r"\[[^]]*\]", "", line.split("#")[0]).split()
                if len(words) >= 4 and words[0] == "deb" and words[2] == SUITE and "main" in words[3:]:
                    return words[1]
    raise AssertionError(f"no Debian mirror for {SUITE} main in /etc/apt/sources.list(.d); "
                         "set SAMSA_TEST_DEBIAN_MIRROR")


def text_key(*parts: str) -> str:
    """A short stable key for cache file names."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:12]


def base_image(dockerd: Dockerd, tag: str = "samsa-test-base:bookworm") -> str:
    """Debian SUITE with python3 and venv, as image ``tag`` in ``dockerd``."""
    mirror = debian_mirror()
    cache = cache_root()
    tarball = cache / f"debian-{SUITE}-{text_key(SUITE, PACKAGES, mirror)}.tar"
    if not tarball.exists():
        cache.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="debootstrap-", dir=cache))
        try:
            rootfs = work / "rootfs"
            run([tool("debootstrap"), "--variant=minbase", f"--include={PACKAGES}", SUITE,
                 str(rootfs), mirror], timeout=900)
            partial = work / "rootfs.tar"
            run(["tar", "-C", str(rootfs), "-cf", str(partial), "."], timeout=300)
            partial.rename(tarball)  # complete or absent: a cut-off run leaves no bad cache
        finally:
            shutil.rmtree(work, ignore_errors=True)
    with open(tarball, "rb") as f:
        p = subprocess.run([tool("docker"), "import", "-", tag], stdin=f, env=dockerd.env,
                           capture_output=True, timeout=300)
    if p.returncode != 0:
        raise AssertionError(f"docker import {tarball} failed:\n{_tail(p.stderr)}")
    return tag


def cached_image(dockerd: Dockerd, tag: str, key: str, build: Callable[[], None]) -> None:
    """Image ``tag`` from the cache when a saved copy for ``key`` is there,
    else ``build()`` it and save it for next time."""
    prefix = f"image-{tag.replace(':', '-').replace('/', '-')}-"
    saved = cache_root() / f"{prefix}{key}.tar"
    if saved.exists():
        try:
            dockerd.docker("load", "-i", str(saved), timeout=300)
            return
        except AssertionError:
            saved.unlink(missing_ok=True)  # unreadable: build afresh
    build()
    cache_root().mkdir(parents=True, exist_ok=True)
    for stale in cache_root().glob(f"{prefix}*"):  # other keys: an older Dockerfile
        stale.unlink(missing_ok=True)
    partial = saved.with_suffix(".partial")
    dockerd.docker("save", "-o", str(partial), tag, timeout=300)
    partial.rename(saved)


def tree_key(*paths: Path) -> str:
    """A key for the contents of these files and directories."""
    h = hashlib.sha256()
    for path in paths:
        for f in sorted(p for p in [path, *path.rglob("*")] if p.is_file()):
            h.update(str(f.relative_to(REPO_ROOT)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:12]


# ---------------------------------------------------------------- build context

# Left out of the copy: at the top level only (broker/cluster is a package).
_NOT_COPIED = {".git", ".venv", "tests", "bench", "data", "cluster", "build", ".pytest_cache",
               ".hypothesis", "wheelhouse"}


def _ignore(directory: str, names: list[str]) -> list[str]:
    top = Path(directory) == REPO_ROOT
    return [n for n in names if (top and n in _NOT_COPIED) or n == "__pycache__"
            or n.endswith((".pyc", ".egg-info"))]


def build_context(dest: Path) -> Path:
    """``dest`` filled with the repository's files (Dockerfile, compose files,
    deploy/, the packages) and wheelhouse/ made by pip wheel on the host."""
    shutil.copytree(REPO_ROOT, dest, ignore=_ignore)
    (dest / "wheelhouse").mkdir()
    # the images' install step (the wheels of the repository's wheelhouse/ stay out)
    shutil.copy2(REPO_ROOT / "wheelhouse" / "pip-install", dest / "wheelhouse")
    # The compiled wheels (uvloop, crc32c, ...) must fit the image's Python.
    if sys.version_info[:2] != (3, 11):
        raise AssertionError(f"the wheelhouse needs Python 3.11 (bookworm's), this is "
                             f"{sys.version.split()[0]}")
    # With the pipeline's extra: deploy/pipeline/Dockerfile installs from here too.
    run([sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check",
         "--wheel-dir", str(dest / "wheelhouse"), f"{dest}[pipeline]", "setuptools>=77",
         "wheel"], timeout=900)
    return dest
