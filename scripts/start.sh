#!/usr/bin/env bash
# Sets up samsa and starts one broker on localhost:9092 with the embedded metadata
# store and data under ./data (see server.properties). Extra arguments go to
# `samsa server`, e.g. --override num.partitions=3.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
exec .venv/bin/samsa server server.properties "$@"
