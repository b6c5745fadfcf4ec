#!/usr/bin/env python3
"""Peer timing for `tbe-bench cpu`: FBGEMM's CPU TBE (fbgemm_gpu, e.g. the `fbgemm-gpu-cpu` wheel)
on the same inputs.

Inputs: the files written by `tbe-bench cpu --dump-npy DIR` (indices.npy, offsets.npy, weights.npy
FP32 [sum E_t*D_t], grad_output.npy FP32 [B, sum D_f], meta.json with rows, dims, table_offsets,
feature_table_map, pooling, learning_rate, eps). Non-VBE SUM / MEAN workloads only.

Module: SplitTableBatchedEmbeddingBagsCodegen, one (E_t, D_t, EmbeddingLocation.HOST,
ComputeDevice.CPU) spec per table, the dump's feature_table_map, weights_precision FP32 or FP16
(the FP32 values rounded by torch, RNE, as tbe-bench does), output FP32, bounds check WARNING,
stochastic rounding off, optimizer EXACT_SGD or EXACT_ROWWISE_ADAGRAD (lr, eps from meta.json, no
weight decay; the update is in place, as tbe-bench's).
Timed (wall clock, 1 warm-up call, median / min / max over --iters), with the variant names of
tbe-bench cpu:
  fwd.fp32, fwd.fp16                   module(indices, offsets) (autograd on, as in training)
  bwd.{fp32,fp16}.{sgd,adagrad}        out.backward(grad_output) after an untimed forward: FBGEMM's
                                       fused backward + optimizer
With --ours FILE (tbe-bench cpu --json FILE on the same dump), prints our throughput relative to
FBGEMM's per variant (FBGEMM ms / our ms: > 1 means the CPU fallback is faster).
Threads: --threads N (torch.set_num_threads); run tbe-bench with the same OMP_NUM_THREADS.
"""
import argparse
import json
import os
import statistics
import time

import numpy as np
import torch

from fbgemm_gpu.split_embedding_configs import EmbOptimType as OptimType
from fbgemm_gpu.split_embedding_configs import SparseType
from fbgemm_gpu.split_table_batched_embeddings_ops_common import (
    BoundsCheckMode,
    EmbeddingLocation,
    PoolingMode,
)
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (
    ComputeDevice,
    SplitTableBatchedEmbeddingBagsCodegen,
)


def time_host(fn, iters):
    fn()  # warm-up
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times), max(times)


def make_module(meta, weights, precision, optimizer):
    specs = [(E, D, EmbeddingLocation.HOST, ComputeDevice.CPU)
             for E, D in zip(meta["rows"], meta["dims"])]
    pooling = {"sum": PoolingMode.SUM, "mean": PoolingMode.MEAN}[meta["pooling"]]
    emb = SplitTableBatchedEmbeddingBagsCodegen(
        specs, feature_table_map=meta["feature_table_map"], weights_precision=precision,
        output_dtype=SparseType.FP32, optimizer=optimizer, learning_rate=meta["learning_rate"],
        eps=meta["eps"], pooling_mode=pooling, bounds_check_mode=BoundsCheckMode.WARNING,
        stochastic_rounding=False, device="cpu")
    with torch.no_grad():
        for t, w in enumerate(emb.split_embedding_weights()):
            E, D, o = meta["rows"][t], meta["dims"][t], meta["table_offsets"][t]
            w.copy_(torch.from_numpy(np.asarray(weights[o:o + E * D])).view(E, D))
    return emb


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="tbe-bench cpu --dump-npy DIR")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (default: torch's)")
    ap.add_argument("--ours", default="", help="tbe-bench cpu --json FILE of the same dump")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    if args.threads > 0:
        torch.set_num_threads(args.threads)

    meta = json.load(open(os.path.join(args.dir, "meta.json")))
    if meta["vbe"] or meta["weighted"] or meta["pooling"] not in ("sum", "mean"):
        raise SystemExit("peer_fbgemm_cpu.py: only non-VBE, unweighted SUM/MEAN dumps")
    indices = torch.from_numpy(np.load(os.path.join(args.dir, "indices.npy")))
    offsets = torch.from_numpy(np.load(os.path.join(args.dir, "offsets.npy")))
    weights = np.load(os.path.join(args.dir, "weights.npy"), mmap_mode="r")
    grad = torch.from_numpy(np.load(os.path.join(args.dir, "grad_output.npy")))
    B, N = meta["B"], meta["N"]
    grad = grad.view(B, -1)
    print(f"peer fbgemm_gpu {getattr(__import__('fbgemm_gpu'), '__version__', '?')} CPU, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads: {meta['workload']} "
          f"T={meta['T']} B={B} N={N}")

    results = []
    for prec_name, precision in (("fp32", SparseType.FP32), ("fp16", SparseType.FP16)):
        for opt_name, optimizer in (("sgd", OptimType.EXACT_SGD),
                                    ("adagrad", OptimType.EXACT_ROWWISE_ADAGRAD)):
            emb = make_module(meta, weights, precision, optimizer)
            timed = []
            if opt_name == "sgd":  # the forward does not depend on the optimizer: time it once
                timed.append((f"fwd.{prec_name}", lambda: emb(indices, offsets)))

            def backward():
                out = emb(indices, offsets)
                t0 = time.perf_counter()
                out.backward(grad)
                return (time.perf_counter() - t0) * 1e3

            for name, fn in timed:
                med, lo, hi = time_host(fn, args.iters)
                results.append({"variant": name, "median_ms": med, "min_ms": lo, "max_ms": hi})
            backward()  # warm-up
            ms = [backward() for _ in range(args.iters)]
            results.append({"variant": f"bwd.{prec_name}.{opt_name}",
                            "median_ms": statistics.median(ms), "min_ms": min(ms),
                            "max_ms": max(ms)})
            del emb

    ours = {}
    if args.ours:
        ours = {r["variant"]: r for r in json.load(open(args.ours))["results"]}
    order = ["fwd.fp32", "fwd.fp16", "bwd.fp32.sgd", "bwd.fp32.adagrad", "bwd.fp16.sgd",
             "bwd.fp16.adagrad"]
    results.sort(key=lambda r: order.index(r["variant"]))
    print(f"\n{'variant':<18} {'fbgemm_ms':>10} {'min_ms':>9} {'max_ms':>9} {'Mlookups/s':>11}"
          + (f" {'ours_ms':>9} {'ours/fbgemm throughput':>23}" if ours else ""))
    for r in results:
        r["lookups_per_s"] = N / (r["median_ms"] * 1e-3)
        line = (f"{r['variant']:<18} {r['median_ms']:>10.1f} {r['min_ms']:>9.1f} "
                f"{r['max_ms']:>9.1f} {r['lookups_per_s'] / 1e6:>11.2f}")
        if r["variant"] in ours:
            o = ours[r["variant"]]["median_ms"]
            r["ours_median_ms"] = o
            r["ours_throughput_ratio"] = r["median_ms"] / o
            line += f" {o:>9.1f} {r['ours_throughput_ratio']:>22.2f}x"
        print(line)
    if args.json:
        json.dump({"peer": "fbgemm_gpu SplitTableBatchedEmbeddingBagsCodegen, HOST / CPU",
                   "fbgemm_gpu": getattr(__import__("fbgemm_gpu"), "__version__", "?"),
                   "torch": torch.__version__, "threads": torch.get_num_threads(),
                   "workload": meta["workload"], "B": B, "N": N, "results": results},
                  open(args.json, "w"), indent=2)


if __name__ == "__main__":
    main()
