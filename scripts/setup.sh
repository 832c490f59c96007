#!/usr/bin/env bash
# Creates ./.venv and installs samsa into it (editable). With --test also the test
# dependencies: Python packages and the Debian packages the integration tests run
# against (kcat, a JDK for the Java clients, ZooKeeper; for the container tests
# docker.io, debootstrap, docker-compose, prometheus). Idempotent: a second run
# only checks (pip runs again only when pyproject.toml changed), and apt-get
# runs only when a package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[ "${1:-}" = "--test" ] && want_test=1
extras=""
[ "$want_test" = 1 ] && extras="[test]"

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    # The first run is quiet for a minute otherwise (later runs only check).
    echo "setup: creating .venv and installing samsa${extras:+ with its test dependencies} (first run, a minute or more)..." >&2
    if ! "$PY" -m venv .venv >/dev/null; then
        echo "setup: could not create .venv with $PY; on Debian: apt-get install python3-venv" >&2
        exit 1
    fi
fi

# Debian packages, when missing: root installs directly, others via sudo.
apt_install() {
    local SUDO=""
    [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
}

# The C record walker (setup.py: protocol/records/_walker.c) needs a compiler
# and the headers of the venv's Python (Debian's python3 has them in
# python3-dev; a pyenv or python.org build ships its own). Without them samsa
# still installs and validates records in Python, slower.
build_need=()
command -v gcc >/dev/null 2>&1 || build_need+=(gcc libc6-dev)
py_include=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
[ -e "$py_include/Python.h" ] || build_need+=(python3-dev)
if [ "${#build_need[@]}" -gt 0 ]; then
    if apt_install "${build_need[@]}"; then
        build_need=()
    else
        echo "setup: could not install ${build_need[*]}: records will be validated in Python (slower)" >&2
    fi
fi

# What was installed, and from which sources: nothing to do when they match
# (and the C walker was built, when it can be).
stamp=".venv/.samsa-installed"
want="$(cat pyproject.toml setup.py protocol/records/_walker.c protocol/records/_columns.c protocol/records/_framing.h | sha256sum | cut -d' ' -f1) ${extras:-[base]}"
have="$(cat "$stamp" 2>/dev/null || true)"
# (asked from / so that it finds what is installed, not the sources beside it)
# (the record walker and the column decoder the Spark source reads with: both or rebuild)
# (a build older than its C source, as after a pull, is rebuilt too)
walker_built() {
    local c so
    for c in protocol/records/_walker.c protocol/records/_columns.c; do
        so=$(ls "${c%.c}".*.so 2>/dev/null | head -n 1)
        if [ -n "$so" ] && [ "$c" -nt "$so" ]; then return 1; fi
    done
    (cd / && "$OLDPWD/.venv/bin/python" -c 'import samsa.protocol.records._walker, samsa.protocol.records._columns' 2>/dev/null)
}
# installed before a compiler or the headers were there: build it now
[ "${#build_need[@]}" -gt 0 ] || walker_built || have=""
if [ "$have" != "$want" ] && ! { [ "$want_test" = 0 ] && [ "$have" = "${want%% *} [test]" ]; }; then
    [ -e "$stamp" ] && echo "setup: reinstalling samsa${extras:+ with its test dependencies} into .venv..." >&2
    .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
    # (the build backend's warnings about editable installs are not for users)
    PYTHONWARNINGS=ignore .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${extras}"
    echo "$want" > "$stamp"
fi
# Bytecode for the source tree: an editable install compiles none, and Python writes
# none where it may not (PYTHONDONTWRITEBYTECODE, a read-only checkout), so every broker
# start and tool run would compile each module again (about 1 s of a broker's start on
# 2 cores). compileall skips what is current, so a second run costs little.
.venv/bin/python -m compileall -q -j 0 broker client config pipeline protocol storage testing tools \
    samsa/__init__.py samsa/__main__.py >/dev/null || true
if ! walker_built; then
    echo "setup: the C record walker and column decoder are not built (needs gcc and Python.h):" \
         "records will be validated, and read by the Spark source, in Python, slower" >&2
fi

if [ "$want_test" = 1 ]; then
    # Debian packages the tests use as real peers.
    need=()
    command -v kcat >/dev/null 2>&1 || need+=(kcat)
    command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
    # A real ZooKeeper server for the cluster tests (started from its jars by the tests)
    [ -e /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
    # The container tests (tests/integration/containers): a Docker daemon of
    # their own, debootstrap for a base image (no registry needed), Compose,
    # and a real Prometheus (with promtool) to scrape the brokers.
    [ -x /usr/sbin/dockerd ] || need+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || need+=(debootstrap)
    command -v docker-compose >/dev/null 2>&1 || need+=(docker-compose)
    command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
    # The network-partition tests (tests/support/netns.py): namespaces, veths and
    # a bridge (iproute2), fault rules (nftables; iptables for hand debugging).
    command -v ip >/dev/null 2>&1 || need+=(iproute2)
    command -v nft >/dev/null 2>&1 || need+=(nftables)
    command -v iptables >/dev/null 2>&1 || need+=(iptables)
    if [ "${#need[@]}" -gt 0 ]; then
        apt_install "${need[@]}"
    fi
fi
