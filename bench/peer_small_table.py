# Side-by-side peer of `tbe-bench small-table`: TorchRec's Triton TBE module with its small-table
# path (table_batched_embedding_bag_forward_small_table_kernel, chosen by bag_size_hints; for
# feature 0 with L <= 256 also the saved-histogram backward: counts^T x grad_output as FP16 hi/lo
# torch.mm, then triton_tbe_backward_histogram_apply_rowwise_adagrad), exact rowwise Adagrad, on
# the inputs `tbe-bench small-table --dump-npy DIR` wrote (DIR/<case>/), timed as tbe-bench times:
# 3 warm-ups, a 256 MiB L2-flush write before every iteration, CUDA events, median/min/max.
# Bounds checking off on both sides (tbe-bench small-table uses BoundsCheckMode::None).
# Forward = module(indices, offsets); forward + backward = the same then .backward(grad_output)
# (the module's optimizer runs inside backward, in place).
#
# Usage (device): python3 bench/peer_small_table.py DIR OUT.json
# Needs the unmodified TorchRec copies in .peers/ (git-ignored, never committed) and the shared
# stand-ins of peer_tbe_triton.py (PEER_TOOLS, default .peers/tools of this checkout).
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("PEER_TOOLS", os.path.join(HERE, "..", ".peers", "tools")))
import peer_tbe_triton as P  # stand-in modules for what the TorchRec copies import
from peer_timing import l2_flush_buffer, time_cuda

dev = torch.device("cuda")
T0 = time.time()


def timed(fn, iters, flush):
    med, lo, hi = time_cuda(fn, iters, flush)
    return {"median_ms": med, "min_ms": lo, "max_ms": hi, "iters": iters}


def run_case(tt, EOT, path, iters, flush):
    meta = json.load(open(os.path.join(path, "meta.json")))
    B, rows, dims, ftm = meta["B"], meta["rows"], meta["dims"], meta["feature_table_map"]
    T = len(ftm)
    idx = torch.from_numpy(np.load(os.path.join(path, "indices.npy"))).to(dev)
    off = torch.from_numpy(np.load(os.path.join(path, "offsets.npy"))).to(dev)
    w32 = torch.from_numpy(np.load(os.path.join(path, "weights.npy"))).to(dev)
    grad = torch.from_numpy(np.load(os.path.join(path, "grad_output.npy"))).to(dev)
    grad = grad.view(B, sum(dims[ftm[f]] for f in range(T)))
    offs = off.cpu().numpy()
    hints = [int(round((offs[(f + 1) * B] - offs[f * B]) / max(B, 1))) for f in range(T)]
    r = {"B": B, "T": T, "bag_size_hints": hints}
    for name, use_hints in [("small_table", True), ("generic", False)]:
        tbe = tt.TritonTableBatchedEmbeddingBags(
            list(zip(rows, dims)), feature_table_map=ftm, weights_precision=torch.float16,
            output_dtype=torch.float32, stochastic_rounding=False,
            learning_rate=meta["learning_rate"], eps=meta["eps"],
            optimizer=EOT.EXACT_ROWWISE_ADAGRAD, device=dev,
            bag_size_hints=hints if use_hints else None)
        # tbe-bench small-table runs BoundsCheckMode::None: the peer's check off too (its default,
        # V2_WARNING, calls fbgemm's bounds_check_indices, which the stand-ins do not provide)
        tbe.bounds_check_mode = type(tbe.bounds_check_mode).NONE
        tbe.weight.data.copy_(w32.to(torch.float16).view(-1))
        rr = r.setdefault(name, {})
        rr["histogram_feature"] = tbe._histogram_feature
        rr["saved_histogram_plans"] = len(tbe._saved_histogram_plans)
        with torch.no_grad():
            rr["fwd"] = timed(lambda: tbe(idx, off), iters, flush)
        rr["fwd_bwd"] = timed(lambda: tbe(idx, off).backward(grad), iters, flush)
        del tbe
        torch.cuda.empty_cache()
    return r


def main():
    dump, out_path = sys.argv[1], sys.argv[2]
    # the TorchRec copies: .peers/ of this checkout (PEER_COPIES overrides)
    P.PEERS = os.environ.get("PEER_COPIES", os.path.join(HERE, "..", ".peers"))
    P.install_stand_ins()
    import torchrec.distributed.triton_tbe.triton_table_batched_embeddings as tt
    ops = torch.ops.fbgemm
    setattr(ops, "get_infos_metadata", P.get_infos_metadata)
    setattr(ops, "transpose_embedding_input", P.transpose_embedding_input)
    res = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "cases": {}}
    flush = l2_flush_buffer()
    iters = int(os.environ.get("ITERS", "20"))
    print(f"{'case':12s} {'fwd tri-st':>10s} {'generic':>10s} | {'f+b tri-st':>10s} {'generic':>10s}"
          "  histogram feature / saved plans")
    for name in sorted(os.listdir(dump)):
        path = os.path.join(dump, name)
        if not os.path.isfile(os.path.join(path, "meta.json")):
            continue
        try:
            r = run_case(tt, P.EmbOptimType, path, iters, flush)
            s, g = r["small_table"], r["generic"]
            print(f"{name:12s} {s['fwd']['median_ms']:10.3f} {g['fwd']['median_ms']:10.3f} | "
                  f"{s['fwd_bwd']['median_ms']:10.3f} {g['fwd_bwd']['median_ms']:10.3f}  "
                  f"{s['histogram_feature']} / {s['saved_histogram_plans']}", flush=True)
        except Exception as e:  # a case the peer cannot run is reported, the others still run
            r = {"error": f"{type(e).__name__}: {e}"}
            print(f"{name:12s} error: {r['error']}", flush=True)
        res["cases"][name] = r
    res["elapsed_s"] = time.time() - T0
    with open(out_path, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
