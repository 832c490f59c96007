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

# What was installed, and from which pyproject.toml: nothing to do when both match.
stamp=".venv/.samsa-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1) ${extras:-[base]}"
have="$(cat "$stamp" 2>/dev/null || true)"
if [ "$have" != "$want" ] && ! { [ "$want_test" = 0 ] && [ "$have" = "${want%% *} [test]" ]; }; then
    [ -e "$stamp" ] && echo "setup: reinstalling samsa${extras:+ with its test dependencies} into .venv..." >&2
    .venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
    # (the build backend's warnings about editable installs are not for users)
    PYTHONWARNINGS=ignore .venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".${extras}"
    echo "$want" > "$stamp"
fi

if [ "$want_test" = 1 ]; then
    # Debian packages the tests use as real peers. Root installs directly; others via sudo.
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
    if [ "${#need[@]}" -gt 0 ]; then
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
    fi
fi
