#!/bin/bash
# The GPU-machine run scripts, checked here without a GPU (ctest gpu_run_scripts): every bench/*.sh
# and scripts/*.sh parses; bench/ikbo_fa_gpu_run.sh, bench/small_table_gpu_run.sh and
# bench/peer_cutlass_fmha.sh print their usage and exit 2 without a command; the tbe-bench
# ikbo-fa command lines ikbo_fa_gpu_run.sh runs parse (tbe-bench exits 0 with a GPU, 77 without;
# 2 would mean a flag the script passes is gone).
# Usage: check_gpu_scripts.sh SOURCE_DIR TBE_BENCH
set -u
src=$1 bench=$2
fail=0
for f in "$src"/bench/*.sh "$src"/scripts/*.sh; do
  bash -n "$f" || { echo "FAILED: $f does not parse"; fail=1; }
done
for f in bench/ikbo_fa_gpu_run.sh:pack bench/small_table_gpu_run.sh:pack bench/peer_cutlass_fmha.sh:build; do
  script=${f%%:*} word=${f##*:}
  out=$(bash "$src/$script" 2>&1); rc=$?
  [ $rc -eq 2 ] || { echo "FAILED: $script without a command exited $rc, not 2"; fail=1; }
  grep -q "$script $word" <<< "$out" || { echo "FAILED: $script's usage does not name '$word'"; fail=1; }
done
# the ikbo-fa command lines of ikbo_fa_gpu_run.sh's fa() calls ("  fa NAME ARGS..."), as it writes them
# (a loop's storage type $t taken as bf16)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
sed -n 's/^ *fa fa_[a-z0-9_${}]* //p' "$src/bench/ikbo_fa_gpu_run.sh" | sed 's/\$t\b/bf16/g' > "$tmp/calls"
[ -s "$tmp/calls" ] || { echo "FAILED: no fa() call found in ikbo_fa_gpu_run.sh"; fail=1; }
# (a build without CUDA has no ikbo-fa subcommand: nothing to parse against)
"$bench" --help 2>&1 | grep -q "ikbo-fa" || : > "$tmp/calls"
while read -r args; do
  "$bench" ikbo-fa --json "$tmp/fa.json" --seq 512 --iters 1 $args > "$tmp/log" 2>&1; rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
    echo "FAILED: tbe-bench ikbo-fa $args exited $rc:"; cat "$tmp/log"; fail=1
  fi
done < "$tmp/calls"
[ $fail -eq 0 ] && echo "gpu run scripts: ok"
exit $fail
