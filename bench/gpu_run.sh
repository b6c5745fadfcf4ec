#!/bin/bash
# Final GPU run: tests (all tuning knobs drawn at random), memcheck + synccheck subsets, benchmark
# (B=8192 and full seed-large), PyTorch peer side by side. Logs under $OUT.
# Usage: copy test_optimized and tbe-bench into .gpu/ (ignored), copy this script and gpu_env.sh
# there, then on the GPU machine: DUMP=1 RC_N=400 bash .gpu/gpu_run.sh (logs and JSON under $OUT).
cd "$(dirname "$0")"
. ./gpu_env.sh   # LD_LIBRARY_PATH for cuBLAS (linked shared), the device line
S=$(date +%s)
export RC_PARAMS="max_success=${RC_N:-100}"
timeout ${T_TEST:-170} ./test_optimized -r compact > $OUT/tests.log 2>&1; echo "tests rc=$? ($(( $(date +%s)-S ))s)"
grep -E "passed|failed|FAILED|error|Falsifiable" $OUT/tests.log | tail -25
S=$(date +%s)
RC_PARAMS="max_success=15" timeout ${T_MC:-70} compute-sanitizer --tool memcheck --error-exitcode 9 ./test_optimized "~[large]" -r compact > $OUT/memcheck.log 2>&1; echo "memcheck rc=$? ($(( $(date +%s)-S ))s)"
grep -E "ERROR SUMMARY|passed|failed" $OUT/memcheck.log | tail -4
S=$(date +%s)
RC_PARAMS="max_success=10" timeout 40 compute-sanitizer --tool synccheck --error-exitcode 9 ./test_optimized "[cases]~[large],forward on valid input*" -r compact > $OUT/synccheck.log 2>&1; echo "synccheck rc=$? ($(( $(date +%s)-S ))s)"
grep -E "ERROR SUMMARY|passed|failed" $OUT/synccheck.log | tail -3
S=$(date +%s)
timeout ${T_B1:-40} ./tbe-bench forward --workload seed-large --batch 8192 --iters 10 --json $OUT/bench_8192.json > $OUT/bench_8192.log 2>&1; echo "bench8192 rc=$? ($(( $(date +%s)-S ))s)"
grep -E "variant|nocheck|fused|separate" $OUT/bench_8192.log | cut -c1-24,60-100
S=$(date +%s)
mkdir -p /tmp/npy; timeout ${T_B2:-150} ./tbe-bench forward --workload seed-large --iters 20 --json $OUT/bench.json ${DUMP:+--dump-npy /tmp/npy} > $OUT/bench.log 2>&1; echo "bench rc=$? ($(( $(date +%s)-S ))s)"
grep -v "^fp" $OUT/bench.log; grep "^fp" $OUT/bench.log | cut -c1-24,60-145
if [ -n "$DUMP" ]; then S=$(date +%s); timeout ${T_P:-60} python3 ../bench/peer_embedding_bag.py /tmp/npy --iters 10 --json $OUT/peer.json 2>&1 | tail -3; echo "peer ($(( $(date +%s)-S ))s)"; fi
# Backward + exact optimizer (tbe-bench backward): B=8192 quick run, then full seed-large with the
# PyTorch composite peer on the same index stream (DUMP=1).
S=$(date +%s)
timeout ${T_BB1:-60} ./tbe-bench backward --batch 8192 --iters 10 --json $OUT/bwd_8192.json > $OUT/bwd_8192.log 2>&1; echo "bwd8192 rc=$? ($(( $(date +%s)-S ))s)"
cut -c1-160 $OUT/bwd_8192.log | grep -v paths
S=$(date +%s)
mkdir -p /tmp/npyb; timeout ${T_BB2:-150} ./tbe-bench backward --iters 10 --json $OUT/bwd.json ${DUMP:+--dump-npy /tmp/npyb} > $OUT/bwd.log 2>&1; echo "bwd rc=$? ($(( $(date +%s)-S ))s)"
cut -c1-200 $OUT/bwd.log
if [ -n "$DUMP" ]; then S=$(date +%s); timeout ${T_PB:-90} python3 ../bench/peer_backward.py /tmp/npyb --iters 5 --json $OUT/peer_bwd.json 2>&1 | tail -4; echo "peer bwd ($(( $(date +%s)-S ))s)"; fi
