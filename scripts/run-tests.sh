#!/usr/bin/env bash
# Installs the dependencies, builds everything (CUDA targets too when nvcc is present: they are
# compiled even on machines without a GPU) and runs the whole ctest suite. GPU tests show as
# skipped when no device is visible.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset default
cmake --build --preset default -j "$jobs"
ctest --preset default -j "$jobs"
