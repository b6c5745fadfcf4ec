#!/bin/bash
# ctest driver (label gpu): `tbe-bench forward --dump-npy` on a mixed-D workload (prod-mixed at
# B = 16) writes the flat tables with their shapes, the layout bench/peer_tbe_forward.py reads:
# the seven arrays, meta.json with D null, and (numpy permitting) weights.npy holding
# sum(rows_t * D_t) values with the table arrays agreeing on the table count and T.
# Exit 77 (skipped) when tbe-bench finds no device.
# Usage: check_bench_dump.sh TBE_BENCH SCRATCH_DIR
set -u
bench=$1 dir=$2
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$bench" forward --workload prod-mixed --batch 16 --iters 1 --only fp32.nocheck --dump-npy "$dir" \
  > "$dir/run.log" 2>&1
rc=$?
if [ $rc -eq 77 ]; then echo "tbe-bench: no CUDA device (skipped)"; exit 77; fi
if [ $rc -ne 0 ]; then cat "$dir/run.log"; echo "tbe-bench exited $rc"; exit 1; fi
for f in indices offsets weights feature_row_offset table_rows table_dims feature_table_map; do
  [ -s "$dir/$f.npy" ] || { echo "missing or empty: $f.npy"; exit 1; }
done
grep -q '"D": null' "$dir/meta.json" || { cat "$dir/meta.json"; echo "meta.json: D is not null"; exit 1; }
if python3 -c "import numpy" 2>/dev/null; then
  python3 - "$dir" <<'PY' || exit 1
import json, sys
import numpy as np
d = sys.argv[1]
meta = json.load(open(d + "/meta.json"))
rows, dims = np.load(d + "/table_rows.npy"), np.load(d + "/table_dims.npy")
fmap, w = np.load(d + "/feature_table_map.npy"), np.load(d + "/weights.npy")
ok = (w.ndim == 1 and w.size == int((rows * dims).sum()) and len(rows) == len(dims)
      and len(fmap) == meta["T"] and fmap.min() >= 0 and fmap.max() < len(rows) and len(set(dims)) > 1)
print("dump:", len(rows), "tables, D", sorted(set(dims.tolist())), w.size, "values:", "ok" if ok else "MISMATCH")
sys.exit(0 if ok else 1)
PY
fi
echo "bench dump mixed D: ok"
