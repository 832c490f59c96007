#!/usr/bin/env bash
# Sets up samsa with its test dependencies and runs the whole test suite.
# Extra arguments go to pytest (e.g. tests/storage -x).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test
exec .venv/bin/python -m pytest "$@"
