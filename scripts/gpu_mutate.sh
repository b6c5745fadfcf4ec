#!/bin/bash
# tbe-mutate on the GPU machine (docs/mutation.md): copy tbe-mutate, tbe-verify, test_optimized of the
# mutation build, this script and bench/gpu_env.sh into one folder; bash <folder>/gpu_mutate.sh [tbe-mutate options].
# Logs + JSON under $OUT/mutate, case folders in /tmp (a seed-large case folder is ~2 GB).
cd "$(dirname "$0")"
. ./gpu_env.sh   # LD_LIBRARY_PATH for cuBLAS, the device line
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/mutate"
S=$(date +%s)
./tbe-mutate --verify ./tbe-verify --tests ./test_optimized --out "$OUT/mutate" \
  --cases /tmp/tbe-mutate-cases --json "$OUT/mutate/kill.json" "$@" > "$OUT/mutate.txt" 2>&1
rc=$?
cat "$OUT/mutate.txt" | cut -c1-400
echo "tbe-mutate rc=$rc ($(( $(date +%s)-S ))s)"
exit $rc
