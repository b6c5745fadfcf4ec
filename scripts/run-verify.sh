#!/usr/bin/env bash
# Installs the dependencies, builds, and runs the main job: tbe-verify on its default workload
# (seed-large scaled to B = 8192). Extra arguments go to tbe-verify (e.g. --full, --json FILE).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset default
cmake --build --preset default -j "$jobs" --target tbe-verify
exec ./build/tools/tbe-verify "$@"
