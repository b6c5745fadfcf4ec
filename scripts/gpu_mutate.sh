#!/bin/bash
# tbe-mutate on the GPU machine (docs/mutation.md): copy tbe-mutate, tbe-verify, test_optimized of the
# mutation build and this script into one folder; bash <folder>/gpu_mutate.sh [tbe-mutate options].
# Logs + JSON under $OUT/mutate, case folders in /tmp (a seed-large case folder is ~2 GB).
cd "$(dirname "$0")"
# cuBLAS is linked shared (the toolkit here ships no static cuBLAS): the toolkit's or PyTorch's.
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c "import nvidia, os; print(' '.join(os.path.join(p, s, 'lib') for p in nvidia.__path__ for s in ('cu13', 'cublas')))" 2>/dev/null); do
  [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT/mutate"
S=$(date +%s)
./tbe-mutate --verify ./tbe-verify --tests ./test_optimized --out "$OUT/mutate" \
  --cases /tmp/tbe-mutate-cases --json "$OUT/mutate/kill.json" "$@" > "$OUT/mutate.txt" 2>&1
rc=$?
cat "$OUT/mutate.txt" | cut -c1-400
echo "tbe-mutate rc=$rc ($(( $(date +%s)-S ))s)"
exit $rc
