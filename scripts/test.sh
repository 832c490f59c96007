#!/usr/bin/env bash
# Sets up samsa with its test dependencies and runs the whole test suite.
# Extra arguments go to pytest (e.g. tests/storage -x).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test
# The suite includes the linter and the type checker (ruff, mypy: tests/test_static_checks.py).
exec .venv/bin/python -m pytest "$@"
