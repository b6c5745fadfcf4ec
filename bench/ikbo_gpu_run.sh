#!/bin/bash
# IKBO LCE GPU run: [ikbo] tests, memcheck + racecheck on a small [ikbo] subset, tbe-bench ikbo-lce,
# the PyTorch peer, and a smoke run of tbe-bench forward. Logs and JSON under $OUT.
# Usage: copy test_optimized, tbe-bench, this script, gpu_env.sh and peer_ikbo_lce.py into
# .gpu/<name>/, then on the GPU machine: bash .gpu/<name>/ikbo_gpu_run.sh
# (env: RC_N, BENCH_ARGS, PEER_ARGS, SKIP_*)
cd "$(dirname "$0")"
. ./gpu_env.sh   # LD_LIBRARY_PATH for cuBLAS, the device line
ldd ./test_optimized | grep -E "cublas" || true
S=$(date +%s)
if [ -z "$SKIP_TESTS" ]; then
  RC_PARAMS="max_success=${RC_N:-100}" timeout ${T_TEST:-120} ./test_optimized "[ikbo]" -r compact > $OUT/ikbo_tests.log 2>&1
  echo "tests rc=$? ($(( $(date +%s)-S ))s)"; grep -E "passed|failed|FAILED|Falsifiable|error" $OUT/ikbo_tests.log | tail -30
fi
if [ -z "$SKIP_SAN" ]; then
  S=$(date +%s)
  RC_PARAMS="max_success=8" timeout ${T_MC:-60} compute-sanitizer --tool memcheck --error-exitcode 9 ./test_optimized "[ikbo]~[large]" -r compact > $OUT/ikbo_memcheck.log 2>&1
  echo "memcheck rc=$? ($(( $(date +%s)-S ))s)"; grep -E "ERROR SUMMARY|passed|failed" $OUT/ikbo_memcheck.log | tail -3
  S=$(date +%s)
  timeout ${T_RC:-60} compute-sanitizer --tool racecheck --error-exitcode 9 ./test_optimized "ikbo lce: every stage*" -r compact > $OUT/ikbo_racecheck.log 2>&1
  echo "racecheck rc=$? ($(( $(date +%s)-S ))s)"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|passed|failed" $OUT/ikbo_racecheck.log | tail -3
fi
if [ -z "$SKIP_BENCH" ]; then
  S=$(date +%s)
  timeout ${T_B:-150} ./tbe-bench ikbo-lce --json $OUT/ikbo_bench.json ${BENCH_ARGS} > $OUT/ikbo_bench.log 2>&1
  echo "bench rc=$? ($(( $(date +%s)-S ))s)"; cut -c1-120 $OUT/ikbo_bench.log
fi
if [ -z "$SKIP_PEER" ]; then
  S=$(date +%s)
  PYTHONUNBUFFERED=1 timeout ${T_P:-120} python3 peer_ikbo_lce.py --json $OUT/ikbo_peer.json ${PEER_ARGS} > $OUT/ikbo_peer.log 2>&1
  echo "peer rc=$? ($(( $(date +%s)-S ))s)"; cat $OUT/ikbo_peer.log | tail -50
fi
if [ -n "$FORWARD_SMOKE" ]; then
  timeout 60 ./tbe-bench forward --batch 1024 --iters 2 > $OUT/forward_smoke.log 2>&1; echo "forward smoke rc=$?"; tail -3 $OUT/forward_smoke.log | cut -c1-100
fi
