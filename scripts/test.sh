#!/usr/bin/env bash
# Sets up samsa with its test dependencies and runs the whole test suite.
# Extra arguments go to pytest (e.g. tests/storage -x).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --test
# The suite includes the linter and the type checker (ruff, mypy: tests/test_static_checks.py).
# Several workers (pytest-xdist): one test file at a time per worker, see tests/conftest.py.
# SAMSA_TEST_WORKERS=0 runs in this process; a later -n in the arguments wins.
exec .venv/bin/python -m pytest -n "${SAMSA_TEST_WORKERS:-3}" "$@"
