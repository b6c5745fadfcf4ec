# Sourced by the GPU-machine run scripts (bench/*_gpu_run.sh, scripts/gpu_mutate.sh).
# cuBLAS / cuBLASLt are linked shared (the toolkit ships no static cuBLAS): put the toolkit's or
# PyTorch's copy (nvidia/cu13/lib) on LD_LIBRARY_PATH, then print the device. Defines step().
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
         $(python3 -c "import nvidia, os; print(' '.join(os.path.join(p, s, 'lib') for p in nvidia.__path__ for s in ('cu13', 'cublas')))" 2>/dev/null); do
  [ -e "$d/libcublasLt.so.13" ] && export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
done
nvidia-smi --query-gpu=name,memory.used,memory.total,clocks.max.sm,power.limit --format=csv,noheader

# step NAME TIMEOUT CMD...: runs CMD with its output in $OUT/NAME.log; prints rc, seconds and the
# log's summary lines.
step() {
  local name=$1 limit=$2; shift 2
  local s=$(date +%s)
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "## $name rc=$rc ($(( $(date +%s) - s )) s)"
  grep -E "passed|failed|FAILED|Falsifiable|ERROR SUMMARY|RACECHECK SUMMARY|^paths|^time:" \
    "$OUT/$name.log" | tail -12
  return $rc
}
