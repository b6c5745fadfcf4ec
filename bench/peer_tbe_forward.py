# The TorchRec Triton TBE forward (table_batched_embedding_bag_forward_unweighted_kernel, the
# FBTriton kernel: one program of one warp per sample b, looping over the T features, rows summed
# in groups of 4) on the inputs `tbe-bench forward --dump-npy DIR` wrote, timed as tbe-bench times
# (bench/peer_timing.py: 3 warm-ups, a 256 MiB L2-flush write before every iteration, CUDA events,
# median/min/max). FP32 and FP16 weights, FP32 output, unweighted SUM, bounds check off. Any
# table shapes: mixed-D workloads (prod-mixed) too, with the dump's feature_table_map.
# Thin on purpose, so that a profiler sees only the forward kernels: `ncu -k regex:forward_unweighted
# -c 1 python3 bench/peer_tbe_forward.py DIR --iters 0 --weights fp32` profiles one call.
#
# Usage (device): python3 bench/peer_tbe_forward.py DIR [--iters N] [--weights fp32|fp16]...
#                 [--json FILE]
# Needs the unmodified TorchRec copies in .peers/ (git-ignored, never committed; PEER_COPIES
# overrides) and the shared stand-ins of peer_tbe_triton.py (PEER_TOOLS, default .peers/tools).
import argparse
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.environ.get("PEER_TOOLS", os.path.join(HERE, "..", ".peers", "tools")))
import peer_tbe_triton as P  # stand-in modules for what the TorchRec copies import
from peer_timing import l2_flush_buffer, time_cuda

dev = torch.device("cuda")


def table_specs(dump, meta, w32):
    """The peer's embedding specs [(rows_t, D_t)] and feature_table_map from a dump: the
    table_rows / table_dims / feature_table_map arrays tbe-bench writes (mixed D: weights flat, the
    tables concatenated as rows_t x D_t row-major, the peer's own layout), else (older dumps) T
    tables of weights.shape[0] // T rows and meta["D"]."""
    T = meta["T"]
    path = os.path.join(dump, "table_rows.npy")
    if not os.path.exists(path):
        return [(w32.shape[0] // T, meta["D"])] * T, None
    rows = np.load(path).tolist()
    dims = np.load(os.path.join(dump, "table_dims.npy")).tolist()
    table_map = np.load(os.path.join(dump, "feature_table_map.npy")).tolist()
    values = sum(r * d for r, d in zip(rows, dims))
    if w32.numel() != values:
        raise SystemExit(f"{dump}: weights.npy holds {w32.numel()} values, the tables {values}")
    return list(zip(rows, dims)), table_map


WEIGHT_DTYPES = {"fp32": torch.float32, "fp16": torch.float16}


def peer_arg_parser(iters_help):
    """The command line both peer TBE scripts take: DIR [--iters N] [--weights fp32|fp16]...
    [--json FILE]."""
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--iters", type=int, default=10, help=iters_help)
    ap.add_argument("--weights", action="append", choices=list(WEIGHT_DTYPES))
    ap.add_argument("--json", default="")
    return ap


def import_peer():
    """The TorchRec Triton TBE module (the unmodified copies in PEER_COPIES, default .peers/),
    imported behind the stand-ins of peer_tbe_triton.py."""
    P.PEERS = os.environ.get("PEER_COPIES", os.path.join(HERE, "..", ".peers"))
    P.install_stand_ins()
    import torchrec.distributed.triton_tbe.triton_table_batched_embeddings as tt
    return tt


class Dump:
    """A `tbe-bench forward --dump-npy` folder on the device: meta, indices `idx`, offsets `off`,
    FP32 weights `w32`, the peer's table specs and feature_table_map (table_specs)."""

    def __init__(self, path):
        self.meta = json.load(open(os.path.join(path, "meta.json")))
        self.idx = torch.from_numpy(np.load(os.path.join(path, "indices.npy"))).to(dev)
        self.off = torch.from_numpy(np.load(os.path.join(path, "offsets.npy"))).to(dev)
        self.w32 = torch.from_numpy(np.load(os.path.join(path, "weights.npy"))).to(dev)
        self.specs, self.table_map = table_specs(path, self.meta, self.w32)

    def results_header(self):
        """The JSON the scripts write, before their timings go under "results"."""
        return {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
                "workload": dict(self.meta, tables=len(self.specs),
                                 rows=sum(r for r, _ in self.specs)),
                "results": {}}

    def make_tbe(self, tt, wdtype, optimizer):
        """The peer's module over these tables (its own constructor), weights replaced by the
        dump's in `wdtype`, FP32 output."""
        tbe = tt.TritonTableBatchedEmbeddingBags(
            self.specs, feature_table_map=self.table_map, weights_precision=wdtype,
            output_dtype=torch.float32, stochastic_rounding=False, learning_rate=0.01, eps=1e-8,
            optimizer=optimizer, device=dev)
        tbe.weight.data.copy_(self.w32.to(wdtype).view(-1))
        return tbe


def write_json(path, res):
    if path:
        with open(path, "w") as f:
            json.dump(res, f, indent=1)


def main():
    args = peer_arg_parser("timed iterations (0: one untimed call)").parse_args()
    tt = import_peer()
    dump = Dump(args.dump)
    idx, off = dump.idx, dump.off
    res = dump.results_header()
    flush = l2_flush_buffer()
    for wname in args.weights or list(WEIGHT_DTYPES):
        tbe = dump.make_tbe(tt, WEIGHT_DTYPES[wname], P.EmbOptimType.EXACT_SGD)
        tbe.bounds_check_mode = type(tbe.bounds_check_mode).NONE  # tbe-bench's .nocheck rows
        with torch.no_grad():
            if args.iters <= 0:
                tbe(idx, off)
                torch.cuda.synchronize()
                print(wname, "one call", flush=True)
                continue
            med, lo, hi = time_cuda(lambda: tbe(idx, off), args.iters, flush)
        res["results"][wname] = {"median_ms": med, "min_ms": lo, "max_ms": hi, "iters": args.iters}
        print(f"peer triton fwd {wname}: median {med:.3f} ms (min {lo:.3f}, max {hi:.3f})", flush=True)
        del tbe
        torch.cuda.empty_cache()
    write_json(args.json, res)


if __name__ == "__main__":
    main()
