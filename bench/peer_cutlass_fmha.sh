#!/bin/bash
# CUTLASS's Hopper FMHA (example 88_hopper_fmha, shipped in the nvidia-cutlass wheel) on the
# ikbo-fa shape, to decide by measurement whether CUTLASS would serve the IKBO attention kernel
# better than our hand-written one (docs/ikbo.md, optimized/README.md "IKBO attention").
#
# With the sorted map (64 candidates per user) the candidates of one user are one query sequence
# of 64 · n_seed = 4096 rows against that user's S keys, so a plain FMHA with
#   batch = U = B / 64, heads = H = 2, q = 4096, k = S, d = Dh = 128
# computes exactly tbe-bench ikbo-fa's 4·B·H·n_seed·S·Dh FLOPs with the same per-user K/V reuse
# (the example reports TFLOP/s on 4·b·h·q·k·d). It cannot express other maps (unsorted, odd
# candidate counts), which our kernel groups on the device, nor jagged keys (no variable-length
# option in 4.2.0's example).
#
# Two timings: the example as shipped times `--iterations` back-to-back launches with one event
# pair and reports their mean (no L2 flush); the `_timed` builds replace that loop with
# tbe-bench's (3 warm-ups, 256 MiB L2 flush before every iteration, the median, min and max
# printed). tbe-bench's time also covers AttentionOp's map check and grouping launches, which
# the example has no counterpart of. Storage type: FP16 as shipped, BF16 from a copy of the example
# with its Element type switched (the `bf16` build); compare with `tbe-bench ikbo-fa --dtype ...`
# in the same GPU session.
#
# Usage:
#   bench/peer_cutlass_fmha.sh build [DIR]   download the wheel with pip, build the four binaries
#                                             (f16, bf16, each as shipped and _timed) into DIR
#                                             (default .peers/cutlass; git-ignored), needs nvcc
#   bench/peer_cutlass_fmha.sh run [DIR]     run them on S = 512 .. 16384 (GPU machine;
#                                             env ITERS=20, VERIFY=1 adds the example's check)
set -euo pipefail
cmd=${1:-}
dir=${2:-.peers/cutlass}
case "$cmd" in
  build)
    mkdir -p "$dir"
    python3 -m pip download nvidia-cutlass==4.2.0.0 --no-deps -d "$dir/wheel" >/dev/null
    rm -rf "$dir/src" && mkdir -p "$dir/src"
    python3 -m zipfile -e "$dir"/wheel/nvidia_cutlass-*.whl "$dir/src"
    src="$dir/src/cutlass_library/source"
    ex="$src/examples/88_hopper_fmha"
    # Only the forward runner's storage type (the first `using Element = cutlass::half_t;`, in
    # FwdRunner); the backward runner keeps FP16.
    sed '0,/using Element = cutlass::half_t;/s//using Element = cutlass::bfloat16_t;/' \
      "$ex/88_hopper_fmha.cu" > "$ex/88_hopper_fmha_bf16.cu"
    if cmp -s "$ex/88_hopper_fmha.cu" "$ex/88_hopper_fmha_bf16.cu"; then
      echo "peer_cutlass_fmha.sh: the example's FwdRunner has no 'using Element = cutlass::half_t;'" \
           "line to switch to BF16 (CUTLASS version changed?)" >&2
      exit 1
    fi
    # The _timed copies time the forward runner as tbe-bench does (3 warm-ups, a 256 MiB L2
    # flush before every iteration, one event pair per iteration, the median; min and max
    # printed): the example's own loop is replaced, from its "Record an event" comment to the line
    # that averages the iterations.
    for t in f16 bf16; do
      file="$ex/88_hopper_fmha.cu"
      [ "$t" = bf16 ] && file="$ex/88_hopper_fmha_bf16.cu"
      python3 - "$file" "${file%.cu}_timed.cu" <<'PY' || exit 1
import sys
src = open(sys.argv[1]).read()
begin = src.find("    // Record an event at the start of a series of GEMMs")
end_marker = "    runtime_ms /= static_cast<float>(options.iterations);\n"
end = src.find(end_marker, begin)
if begin < 0 or end < 0:
    sys.exit("peer_cutlass_fmha.sh: the example's timing loop has changed (CUTLASS version?)")
timed = """    // (bench/peer_cutlass_fmha.sh: tbe-bench's timing)
    void* l2_flush = nullptr;
    const size_t kFlushBytes = size_t{256} << 20;
    if (cudaMalloc(&l2_flush, kFlushBytes) != cudaSuccess) return example_result;
    for (int w = 0; w < 3; ++w) status = op.run();
    std::vector<float> times;
    for (int i = 0; i < options.iterations; i++) {
      cudaMemsetAsync(l2_flush, i & 0xff, kFlushBytes);
      cudaEventRecord(events[0]);
      status = op.run();
      cudaEventRecord(events[1]);
      if (status != cutlass::Status::kSuccess || cudaEventSynchronize(events[1]) != cudaSuccess) {
        std::cerr << "CUTLASS kernel failed: " << cudaGetErrorString(cudaGetLastError()) << std::endl;
        return example_result;
      }
      float t = 0;
      cudaEventElapsedTime(&t, events[0], events[1]);
      times.push_back(t);
    }
    cudaFree(l2_flush);
    std::sort(times.begin(), times.end());
    const size_t n = times.size();
    float runtime_ms = n % 2 ? times[n / 2] : 0.5f * (times[n / 2 - 1] + times[n / 2]);
    std::cout << "     median / min / max ms: " << runtime_ms << " / " << times.front() << " / "
              << times.back() << std::endl;
"""
out = src[:begin] + timed + src[end + len(end_marker):]
out = "#include <algorithm>\n#include <vector>\n" + out
open(sys.argv[2], "w").write(out)
PY
    done
    # --use_fast_math: the peer's fastest build (our kernel uses ex2.approx explicitly as well)
    for t in f16 bf16 f16_timed bf16_timed; do
      case $t in
        f16) file="$ex/88_hopper_fmha.cu" ;;
        bf16) file="$ex/88_hopper_fmha_bf16.cu" ;;
        f16_timed) file="$ex/88_hopper_fmha_timed.cu" ;;
        bf16_timed) file="$ex/88_hopper_fmha_bf16_timed.cu" ;;
      esac
      nvcc -std=c++17 -O3 --use_fast_math -arch=sm_90a --expt-relaxed-constexpr -DNDEBUG \
        -I "$src/include" -I "$src/tools/util/include" -I "$ex" -I "$src/examples/common" \
        "$file" -o "$dir/88_hopper_fmha_$t"
    done
    ls -la "$dir"/88_hopper_fmha_*
    ;;
  run)
    # The example takes one --k per run and prints a line per kernel configuration it times
    # (for d = 128: cooperative and ping-pong, 128 x 128 tiles) with its TFLOP/s; --verify
    # checks each against the example's own reference.
    for t in f16 bf16 f16_timed bf16_timed; do
      [ -x "$dir/88_hopper_fmha_$t" ] || continue
      for s in 512 1024 2048 4096 8192 16384; do
        echo "# CUTLASS 88_hopper_fmha ($t): b = U = 32, h = 2, q = 64 candidates x n_seed 64," \
             "k = S = $s, d = 128"
        "$dir/88_hopper_fmha_$t" --b=32 --h=2 --q=4096 --k=$s --d=128 --iterations=${ITERS:-20} \
          ${VERIFY:+--verify}
      done
    done
    ;;
  *)
    awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"
    exit 2
    ;;
esac
