#!/bin/bash
# The small-table histogram path on the GPU machine (docs/small-table.md): what its correctness
# and speed claims rest on, in stages that fit the device's 10-minute calls.
#
#   tests       test_optimized "[small_table]" (forward, backward, no sort, both split-K kernels)
#   gpulabel    the whole GPU label: test_optimized with every test
#   sanitizers  memcheck over "[small_table]~[large]"; racecheck and synccheck over the split-K and
#               no-sort backward tests
#   mainjob     tbe-verify --require-gpu on its default workload, --json $OUT/mainjob.json
#   bench       tbe-bench small-table (the path with the defaults, block split-K, sorted, generic) of the
#               packed build and of every packed variant (VARIANTS at pack time, e.g. main's
#               build), interleaved in two rounds; the first run dumps its inputs for `peer`
#   ncu         Nsight Compute on E64.L64 (tbe-bench small-table --only E64.L64): the forward
#               histogram kernel, both split-K kernels and the apply kernel, one launch each
#               (SpeedOfLight, Occupancy, WarpStateStats, LaunchStats)
#   peer        bench/peer_small_table.py (TorchRec's Triton TBE with its small-table path) on
#               those inputs, when the TorchRec copies were packed (needs `bench` in the same call)
#
# Here (no GPU needed), after `cmake --preset cuda && cmake --build --preset cuda -j` (build-cuda/):
#   bench/small_table_gpu_run.sh pack [BUILD] [DIR]
#     xz-packs test_optimized, tbe-bench and tbe-verify of BUILD (default build-cuda) into
#     DIR/bin.tar.xz (default .gpu/small-table; git-ignored: name it in the device call's carry);
#     with VARIANTS="NAME=PATH ..." also each PATH (another build's tbe-bench) as
#     DIR/tbe-bench-NAME.xz; and the TorchRec copies of .peers/ (git-ignored: the unmodified
#     torchrec/distributed/triton_tbe/triton_*.py of meta-pytorch/torchrec 376cac6a, and the
#     stand-in module peer_tbe_triton.py of the team's peer harness, not in this repository, in
#     .peers/tools/, as bench/peer_small_table.py's header says) into DIR/peers/.
# On the GPU machine, from the repository root, e.g. (session 17 on an H100, one device call each:
# 133 s, 19 s and 166 s):
#   STAGES=tests,bench,peer bench/small_table_gpu_run.sh run [DIR]
#   STAGES=sanitizers bench/small_table_gpu_run.sh run [DIR]
#   STAGES=tests,gpulabel,mainjob,bench,ncu bench/small_table_gpu_run.sh run [DIR]
# Logs and JSON in $OUT/small-table-logs.tar.xz (OUT default /tmp/out); a summary per stage on
# stdout. Time limits per step: T_LABEL (gpulabel, 420 s), T_MAIN (mainjob, 300), T_NCU (each ncu
# run, 120).
set -uo pipefail
. "$(dirname "$0")/gpu_run_common.sh"
cmd=${1:-}
case "$cmd" in
  pack)
    build=${2:-build-cuda}
    dir=${3:-.gpu/small-table}
    pack_bins "$build" "$dir" || exit 1
    if [ -f .peers/triton_table_batched_embeddings.py ] && [ -f .peers/tools/peer_tbe_triton.py ]; then
      mkdir -p "$dir/peers"
      cp .peers/triton_*.py .peers/tools/peer_tbe_triton.py "$dir/peers/" || exit 1
    fi
    ls -la "$dir"; du -sh "$dir"
    exit 0
    ;;
  run) ;;
  *) usage "$0" ;;
esac

# (logs archived after every stage too: a call cut at its time limit still returns what ran)
start_run small-table "${2:-.gpu/small-table}" tests,sanitizers,bench,peer
# racecheck / synccheck: both split-K kernels (block barriers; warp-private tiles) and the apply
# kernel's exact sums (named exactly: racecheck is slow)
race_tests="small-table backward: split-K blocks of several k-tiles*,small-table backward without the sort: rare rows*,small-table backward without the sort: a histogram that is not representable"
if want tests; then
  RC_PARAMS="max_success=${RC_N:-100}" step tests 240 $T "[small_table]" -r compact
fi
save
if want gpulabel; then
  RC_PARAMS="max_success=${RC_N:-100}" step gpulabel ${T_LABEL:-420} $T -r compact
fi
save
if want sanitizers; then
  RC_PARAMS="max_success=8" step memcheck 200 \
    compute-sanitizer --tool memcheck --error-exitcode 9 $T "[small_table]~[large]" -r compact
  RC_PARAMS="max_success=4" step racecheck 200 \
    compute-sanitizer --tool racecheck --error-exitcode 9 $T "$race_tests" -r compact
  RC_PARAMS="max_success=4" step synccheck 120 \
    compute-sanitizer --tool synccheck --error-exitcode 9 $T "$race_tests" -r compact
fi
save
if want mainjob; then
  step mainjob ${T_MAIN:-300} $V --require-gpu --json "$OUT/mainjob.json"
  grep -E "rows:|paths\.|^time" "$OUT/mainjob.log" | tail -8
fi
save
if want bench; then
  names=()
  for x in "$dir"/tbe-bench-*.xz; do
    [ -f "$x" ] || continue
    name=$(basename "$x" .xz); name=${name#tbe-bench-}
    xz -dc "$x" > "$bin/tbe-bench-$name" && chmod +x "$bin/tbe-bench-$name" && names+=("$name")
  done
  dump=(--dump-npy /tmp/small-table-npy)
  for r in 1 2; do
    for v in packed "${names[@]}"; do
      exe=$B
      [ "$v" = packed ] || exe=$bin/tbe-bench-$v
      step st_${v}_r$r 150 "$exe" small-table --iters 10 --json "$OUT/st_${v}_r$r.json" "${dump[@]}"
      grep -E "^(case|small-table|E[0-9])" "$OUT/st_${v}_r$r.log" | cut -c1-150
      dump=()
    done
  done
fi
save
if want ncu; then
  ncu=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  # (mangled names: a template's name is followed by I, so split_kI is the block kernel alone)
  for k in small_table_forward_histogramI small_table_grad_split_k_warpI small_table_grad_split_kI \
           small_table_apply_block_per_rowI; do
    step ncu_${k%I} ${T_NCU:-120} "$ncu" --kernel-name-base mangled --kernel-name "regex:$k" \
      --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
      "$B" small-table --only E64.L64 --iters 1
    grep -E "Duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Memory Throughput|Compute \(SM\)|Warp Cycles Per Issued|Block Size|Grid Size" \
      "$OUT/ncu_${k%I}.log" | sort -u | head -14
  done
fi
save
if want peer; then
  if [ -d "$dir/peers" ] && [ -d /tmp/small-table-npy ]; then
    PEER_TOOLS="$dir/peers" PEER_COPIES="$dir/peers" PYTHONUNBUFFERED=1 step peer 300 \
      python3 "$root/bench/peer_small_table.py" /tmp/small-table-npy "$OUT/peer.json"
    tail -14 "$OUT/peer.log"
  else
    echo "## peer: needs the TorchRec copies packed and the bench stage's dump in the same call"
  fi
fi
save
