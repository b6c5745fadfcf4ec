#!/usr/bin/env python3
"""Peer timing for tbe-bench: PyTorch torch.nn.functional.embedding_bag on the same inputs.

Inputs: the .npy files written by `tbe-bench forward --dump-npy DIR` (indices.npy, offsets.npy,
weights.npy [total_rows, D] FP32, feature_row_offset.npy [T], meta.json).

Strategy (--strategy):
  big-table   (default) one call over all tables stacked into one [Σ E, D] weight, indices shifted
              by their feature's row offset (computed once, untimed); output [T·B, D] bag-major
              (feature-major), not TBE's [B, Σ D] layout (a transpose would add traffic).
  per-feature one embedding_bag call per feature on a view of its table (T launches).
Timing: CUDA events after warm-up, L2 flushed (256 MiB write) before every iteration, median /
min / max over --iters. FP32 weights (FP32 accumulation in PyTorch) and FP16 weights (FP16 output).
"""
import argparse
import json
import os

import numpy as np
import torch
import torch.nn.functional as F

from peer_timing import l2_flush_buffer, time_cuda


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--strategy", choices=["big-table", "per-feature"], default="big-table")
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    meta = json.load(open(os.path.join(args.dir, "meta.json")))
    T, B, D = meta["T"], meta["B"], meta["D"]
    dev = torch.device("cuda")
    indices = torch.from_numpy(np.load(os.path.join(args.dir, "indices.npy"))).to(dev)
    offsets = torch.from_numpy(np.load(os.path.join(args.dir, "offsets.npy"))).to(dev)
    weights = torch.from_numpy(np.load(os.path.join(args.dir, "weights.npy"))).to(dev)
    row_off = torch.from_numpy(np.load(os.path.join(args.dir, "feature_row_offset.npy"))).to(dev)
    num_bags = offsets.numel() - 1
    lengths = offsets[1:] - offsets[:-1]
    feature_of_bag = torch.arange(num_bags, device=dev) // B
    feature_of_index = torch.repeat_interleave(feature_of_bag, lengths)
    # indices before offsets[0] belong to no bag: keep them in range of the big table
    lead = int(offsets[0].item())
    shift = torch.zeros_like(indices)
    shift[lead:lead + feature_of_index.numel()] = row_off[feature_of_index]
    global_indices = indices + shift
    flush = l2_flush_buffer(dev)

    results = []
    for name, w in (("fp32", weights), ("fp16", weights.half())):
        if args.strategy == "big-table":
            fn = lambda w=w: F.embedding_bag(global_indices, w, offsets, mode="sum",
                                             include_last_offset=True)
        else:
            E = [int(row_off[f + 1] - row_off[f]) if f + 1 < T else w.shape[0] - int(row_off[f])
                 for f in range(T)]
            views = [w[int(row_off[f]):int(row_off[f]) + E[f]] for f in range(T)]
            offs = [offsets[f * B:(f + 1) * B + 1] - offsets[f * B] for f in range(T)]
            idx = [indices[int(offsets[f * B]):int(offsets[(f + 1) * B])] for f in range(T)]
            fn = lambda: [F.embedding_bag(idx[f], views[f], offs[f], mode="sum",
                                          include_last_offset=True) for f in range(T)]
        med, lo, hi = time_cuda(fn, args.iters, flush)
        print(f"peer torch.embedding_bag [{args.strategy}] {name}: median {med:.3f} ms "
              f"(min {lo:.3f}, max {hi:.3f}) T={T} B={B} D={D} N={indices.numel()}")
        results.append({"weights": name, "strategy": args.strategy, "median_ms": med,
                        "min_ms": lo, "max_ms": hi})
    if args.json:
        json.dump({"peer": "torch.nn.functional.embedding_bag", "torch": torch.__version__,
                   "device": torch.cuda.get_device_name(0), "results": results},
                  open(args.json, "w"), indent=2)


if __name__ == "__main__":
    main()
