#!/bin/bash
# The IKBO cross attention on the GPU machine: what its correctness and speed claims rest on, in
# stages that fit the device's 10-minute calls (docs/ikbo.md, optimized/README.md "IKBO attention").
#
#   tests       test_optimized "[attention]" (the C20 large-memory tests included)
#   sanitizers  memcheck over "[attention]~[large]"; racecheck and synccheck over the persistent
#               multi-job test (more jobs than the wgmma grid, several per CTA), the C19 tail-tile
#               test and the C22 empty-range test (named exactly: the C19 private-copy test is too
#               slow under racecheck)
#   mainjob     tbe-verify --require-gpu on its default workload (the main job: forward matrix,
#               backward rows, IKBO rows with the attention path counters), --json $OUT/mainjob.json
#   bench       tbe-bench ikbo-fa, BF16 and FP16 (Dh 128), and BF16 at Dh 64, with cuBLAS's rate
#   peers       bench/peer_ikbo_fa.py (PyTorch SDPA pre-broadcast, broadcast + SDPA and the
#               stock-Triton IKBO FA when packed) on the same shapes for PEER_DTYPES (default
#               "bf16 fp16"), then tbe-bench ikbo-fa BF16 again (the peer's cold autotuning of
#               320 configurations takes ~3 minutes per dtype)
#   large       S = 4096 / 8192 / 16384 only, --iters 30, per dtype: tbe-bench ikbo-fa (wgmma rows),
#               the peers (the Triton kernel autotuned at S = 512 first, --tune-seq, as the full
#               sweep tunes it), tbe-bench again: the side-by-side where the board's power limit
#               bites (3–4.5 minutes per dtype: the Triton peer autotunes for 1.5–2.5 minutes)
#   cutlass     CUTLASS's Hopper FMHA example on the same FLOPs (bench/peer_cutlass_fmha.sh), when
#               packed
#   variants    the wgmma kernel of every packed tbe-bench variant (VARIANTS at pack time), BF16 and
#               FP16, interleaved with the packed tbe-bench in two rounds (same process order each
#               round): the side-by-side a kernel change is judged by
#
# Here (no GPU needed), after building build-cuda:
#   bench/ikbo_fa_gpu_run.sh pack [BUILD] [DIR]
#     xz-packs test_optimized, tbe-bench and tbe-verify of BUILD (default build-cuda) into
#     DIR/bin.tar.xz (default .gpu/ikbo-fa; git-ignored: name it in the device call's carry), with
#     the Triton peer file when TRITON_IKBO names it (FBGEMM's
#     fbgemm_gpu/experimental/ikbo/ikbo/ops/triton_ikbo_fa.py, into an ignored folder, e.g. from a
#     clone of pytorch/FBGEMM: git show 71d6f8b22:fbgemm_gpu/experimental/ikbo/ikbo/ops/
#     triton_ikbo_fa.py > .peers/triton_ikbo_fa.py, the commit measured so far) and the CUTLASS
#     binaries of .peers/cutlass when `bench/peer_cutlass_fmha.sh build` made them; with
#     VARIANTS="NAME=PATH ..." also each PATH (another build's tbe-bench, e.g. main's when BUILD
#     holds a branch) as DIR/tbe-bench-NAME.xz.
# On the GPU machine, from the repository root:
#   STAGES=tests,sanitizers,mainjob bench/ikbo_fa_gpu_run.sh run [DIR]           (~6 minutes)
#   STAGES=bench,cutlass,peers PEER_DTYPES=bf16 bench/ikbo_fa_gpu_run.sh run [DIR] (~6 minutes)
#   STAGES=peers PEER_DTYPES=fp16 bench/ikbo_fa_gpu_run.sh run [DIR]             (~5 minutes)
#   STAGES=large bench/ikbo_fa_gpu_run.sh run [DIR]                             (6–9 minutes)
# (one device call each: a command may run 10 minutes; the estimates include the Triton peer's
# cold autotuning). Every timed row, ours and the peers', first runs WARMUP_MS (default 300)
# milliseconds of untimed calls (--warmup-ms): at large S the board runs at its power limit, and
# without it a row is timed at the clock its predecessor left (bench/results/README.md, session 20).
# Logs and JSON in $OUT/ikbo-fa-logs.tar.xz (OUT default /tmp/out); a summary line per stage on
# stdout.
set -uo pipefail
. "$(dirname "$0")/gpu_run_common.sh"
cmd=${1:-}
case "$cmd" in
  pack)
    build=${2:-build-cuda}
    dir=${3:-.gpu/ikbo-fa}
    pack_bins "$build" "$dir" || exit 1
    if [ -n "${TRITON_IKBO:-}" ]; then cp "$TRITON_IKBO" "$dir/triton_ikbo_fa.py" || exit 1; fi
    for t in f16 bf16 f16_timed bf16_timed; do
      [ -x .peers/cutlass/88_hopper_fmha_$t ] && xz -T2 -3 -c .peers/cutlass/88_hopper_fmha_$t \
        > "$dir/88_hopper_fmha_$t.xz"
    done
    ls -la "$dir"; du -sh "$dir"
    exit 0
    ;;
  run) ;;
  *) usage "$0" ;;
esac

start_run ikbo-fa "${2:-.gpu/ikbo-fa}" tests,sanitizers,mainjob,bench,peers,cutlass
WARMUP_MS=${WARMUP_MS:-300}
tail_tests="ikbo attention: more jobs than the persistent wgmma grid*,ikbo attention C19: exact tail tiles and S = 1,ikbo attention C22: empty key ranges give exact zeros"
if want tests; then
  RC_PARAMS="max_success=${RC_N:-100}" step tests 240 $T "[attention]" -r compact
fi
if want sanitizers; then
  RC_PARAMS="max_success=8" step memcheck 200 \
    compute-sanitizer --tool memcheck --error-exitcode 9 $T "[attention]~[large]" -r compact
  RC_PARAMS="max_success=4" step racecheck 240 \
    compute-sanitizer --tool racecheck --error-exitcode 9 $T "$tail_tests" -r compact
  RC_PARAMS="max_success=4" step synccheck 120 \
    compute-sanitizer --tool synccheck --error-exitcode 9 $T "$tail_tests" -r compact
fi
if want mainjob; then
  step mainjob 300 $V --require-gpu --json "$OUT/mainjob.json"
  grep -E "rows:|paths\.|^time" "$OUT/mainjob.log" | tail -8
fi
# fa NAME ARGS...: tbe-bench ikbo-fa (the binary FA_BIN, default the packed one) with the rows of
# its table that match FA_ROWS printed
fa() {
  step "$1" 90 "${FA_BIN:-$B}" ikbo-fa --warmup-ms "$WARMUP_MS" --json "$OUT/$1.json" "${@:2}"
  cut -c1-120 "$OUT/$1.log" | grep -E "${FA_ROWS:-^(bf16|fp16|device|dtype)}"
}
if want bench; then
  fa fa_bf16 --dtype bf16
  fa fa_fp16 --dtype fp16
  fa fa_bf16_dh64 --dtype bf16 --dh 64
fi
if want peers; then
  triton=()
  [ -f "$dir/triton_ikbo_fa.py" ] && triton=(--triton-ikbo "$dir/triton_ikbo_fa.py")
  for t in ${PEER_DTYPES:-bf16 fp16}; do
    PYTHONUNBUFFERED=1 step peer_$t 330 python3 "$root/bench/peer_ikbo_fa.py" --dtype $t \
      --warmup-ms "$WARMUP_MS" "${triton[@]}" --json "$OUT/peer_$t.json"
    grep -E "^(bf16|fp16)|config" "$OUT/peer_$t.log"
  done
  fa fa_bf16_after_peers --dtype bf16
fi
if want large; then
  triton=()
  [ -f "$dir/triton_ikbo_fa.py" ] && triton=(--triton-ikbo "$dir/triton_ikbo_fa.py" --tune-seq 512)
  for t in ${PEER_DTYPES:-bf16 fp16}; do
    FA_ROWS="^$t .*wgmma.kb128 "
    fa fa_large_${t}_a --dtype $t --seq 4096 --seq 8192 --seq 16384 --kernel wgmma --iters 30
    PYTHONUNBUFFERED=1 step peer_large_$t 240 python3 "$root/bench/peer_ikbo_fa.py" --dtype $t \
      --seq 4096 --seq 8192 --seq 16384 --iters 30 --warmup-ms "$WARMUP_MS" "${triton[@]}" \
      --json "$OUT/peer_large_$t.json"
    grep -E "^(bf16|fp16)|config" "$OUT/peer_large_$t.log"
    fa fa_large_${t}_b --dtype $t --seq 4096 --seq 8192 --seq 16384 --kernel wgmma --iters 30
    unset FA_ROWS
  done
fi
if want cutlass; then
  if [ -f "$dir/88_hopper_fmha_f16.xz" ]; then
    mkdir -p /tmp/ikbo-fa-cutlass
    for t in f16 bf16 f16_timed bf16_timed; do
      [ -f "$dir/88_hopper_fmha_$t.xz" ] || continue
      xz -dc "$dir/88_hopper_fmha_$t.xz" > /tmp/ikbo-fa-cutlass/88_hopper_fmha_$t
      chmod +x /tmp/ikbo-fa-cutlass/88_hopper_fmha_$t
    done
    step cutlass 200 bash "$root/bench/peer_cutlass_fmha.sh" run /tmp/ikbo-fa-cutlass
    grep -E "^#|TFLOPS|median" "$OUT/cutlass.log"
  else
    echo "## cutlass: not packed (bench/peer_cutlass_fmha.sh build, then pack)"
  fi
fi
if want variants; then
  names=()
  for x in "$dir"/tbe-bench-*.xz; do
    [ -f "$x" ] || continue
    name=$(basename "$x" .xz); name=${name#tbe-bench-}
    xz -dc "$x" > "$bin/tbe-bench-$name" && chmod +x "$bin/tbe-bench-$name" && names+=("$name")
  done
  if [ ${#names[@]} -eq 0 ]; then
    echo "## variants: none packed (VARIANTS=NAME=PATH at pack time)"
  fi
  for r in 1 2; do
    for v in packed "${names[@]}"; do
      FA_BIN=$B FA_ROWS="wgmma.kb128  "
      [ "$v" = packed ] || FA_BIN=$bin/tbe-bench-$v
      for t in bf16 fp16; do
        fa fa_var_${v}_${t}_r$r --dtype $t --kernel wgmma
      done
      unset FA_BIN FA_ROWS
    done
  done
fi
