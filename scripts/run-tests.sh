#!/usr/bin/env bash
# Installs the dependencies, builds everything (CUDA targets too when nvcc is present: they are
# compiled even on machines without a GPU) and runs the whole ctest suite. GPU tests show as
# skipped when no device is visible; the pytest suite of the Python module (python/) is the ctest
# test `python_tests`. Then:
#  - the CPU tests again under AddressSanitizer + UndefinedBehaviorSanitizer (preset `sanitize`,
#    `ctest -L cpu -LE heavy`: `heavy` marks end-to-end runs of tbe-verify whose code the other
#    CPU tests already cover under the sanitizers, and that take minutes instrumented;
#    `python_tests` loads the instrumented module into python3 with the ASan runtime preloaded,
#    python/CMakeLists.txt);
#  - when clang with libFuzzer is available, the fuzz harnesses (preset `fuzz`), each run for
#    TBE_FUZZ_SECONDS (default 60) from its seed corpus; a crash fails the script and leaves the
#    input under build-fuzz/artifacts/ (replay: fuzz/README.md).
# TBE_SKIP_SANITIZE=1 / TBE_SKIP_FUZZ=1 skip those stages (local use; CI runs everything).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc 2>/dev/null || echo 2)
start=$SECONDS
stage() { echo "[run-tests] $1 (t = $((SECONDS - start)) s)"; }

stage "build + ctest (preset default)"
cmake --preset default
cmake --build --preset default -j "$jobs"
ctest --preset default -j "$jobs"

if [ "${TBE_SKIP_SANITIZE:-0}" != 1 ]; then
  stage "build + ctest -L cpu under ASan + UBSan (preset sanitize)"
  export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
  cmake --preset sanitize
  cmake --build --preset sanitize -j "$jobs"
  ctest --preset sanitize -L cpu -LE heavy -j "$jobs"
fi

# libFuzzer usable? (clang++ plus the compiler-rt fuzzer runtime, libclang-rt-14-dev on Debian 12)
have_libfuzzer() {
  command -v clang++ >/dev/null 2>&1 || return 1
  local tmp; tmp=$(mktemp -d)
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    > "$tmp/probe.cpp"
  clang++ -fsanitize=fuzzer,address,undefined "$tmp/probe.cpp" -o "$tmp/probe" >/dev/null 2>&1
  local rc=$?
  rm -rf "$tmp"
  return $rc
}

if [ "${TBE_SKIP_FUZZ:-0}" != 1 ]; then
  if have_libfuzzer; then
    stage "build the fuzzers (preset fuzz)"
    cmake --preset fuzz
    cmake --build --preset fuzz -j "$jobs"
    seconds="${TBE_FUZZ_SECONDS:-60}"
    failed=()
    for h in fuzz_case_reader fuzz_bounds_repair fuzz_forward_emulation; do
      if [ ! -x "build-fuzz/fuzz/${h}_fuzzer" ]; then
        stage "fuzz $h SKIPPED: not built (its library is absent)"; continue
      fi
      stage "fuzz $h for $seconds s"
      work="build-fuzz/corpus-work/$h"      # new units go here; the committed seeds stay as they are
      mkdir -p "$work" build-fuzz/artifacts
      dict=()
      [ -f "fuzz/$h.dict" ] && dict=("-dict=fuzz/$h.dict")
      if ! ./build-fuzz/fuzz/"${h}_fuzzer" "$work" "fuzz/corpus/$h" "${dict[@]}" \
             -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=30 -print_final_stats=1 \
             -artifact_prefix="build-fuzz/artifacts/$h-" > "build-fuzz/$h.log" 2>&1; then
        tail -n 60 "build-fuzz/$h.log"
        failed+=("$h")
      else
        grep -E '^(Done|stat::average_exec_per_sec|stat::number_of_executed_units)' "build-fuzz/$h.log" || true
      fi
    done
    if [ "${#failed[@]}" -gt 0 ]; then
      echo "[run-tests] FUZZ FAILURE in: ${failed[*]}; inputs:"; ls -l build-fuzz/artifacts/
      echo "replay: build/fuzz/<harness>_replay build-fuzz/artifacts/<file> (see fuzz/README.md)"
      exit 1
    fi
  else
    stage "fuzzers SKIPPED: clang++ with libFuzzer (libclang-rt-14-dev) not available"
  fi
fi
stage "all stages passed"
