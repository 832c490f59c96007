#!/usr/bin/env bash
# Creates ./.venv and installs samsa into it (editable). With --test also the test
# dependencies: Python packages and the Debian packages the integration tests run
# against (kcat). Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

want_test=0
[ "${1:-}" = "--test" ] && want_test=1

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null 2>&1 || true
if [ "$want_test" = 1 ]; then
    .venv/bin/python -m pip install --quiet -e '.[test]'
else
    .venv/bin/python -m pip install --quiet -e .
fi

if [ "$want_test" = 1 ]; then
    # Debian packages the tests use as real peers. Root installs directly; others via sudo.
    need=()
    command -v kcat >/dev/null 2>&1 || need+=(kcat)
    command -v javac >/dev/null 2>&1 || need+=(openjdk-17-jdk-headless)
    # A real ZooKeeper server for the cluster tests (started from its jars by the tests)
    [ -e /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
    if [ "${#need[@]}" -gt 0 ]; then
        SUDO=""
        [ "$(id -u)" = 0 ] || SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
    fi
fi
