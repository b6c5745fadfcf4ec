#!/usr/bin/env python3
"""Peer timing for `tbe-bench backward`: the same backward + exact optimizer composed from PyTorch ops.

Inputs: the .npy files written by `tbe-bench backward --dump-npy DIR` (indices.npy, offsets.npy,
feature_row_offset.npy, meta.json): the same index stream as the bench. Weights (uniform in
[-1, 1)) and grad_output (uniform in [-1, 1), shape [B, T*D]) are drawn here on the device: the
timing does not depend on their values.

Composite (one big table [sum E, D], indices shifted by their feature's row offset, untimed):
  grad rows   = grad_output viewed [B, T, D] -> [T*B, D] bag-major (feature-major bags)
  weight grad = autograd of F.embedding_bag(mode="sum", include_last_offset=True) (PyTorch's
                sort-based embedding_bag backward -> dense [sum E, D] gradient)
  unique rows = torch.unique(global indices)
  SGD:          w[u] -= lr * G[u]
  rowwise Adagrad: m[u] += mean(G[u]^2, 1); w[u] -= lr * G[u] / (sqrt(m[u]) + eps)
Timed: the forward is not; the backward (autograd of the embedding_bag) + unique + optimizer is,
with CUDA events after warm-up, L2 flushed (256 MiB write) before every iteration; median, min,
max over --iters. FP32 weights (SGD, Adagrad) and FP16 weights (Adagrad; PyTorch accumulates the
FP16 gradient in FP16 storage).
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
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    meta = json.load(open(os.path.join(args.dir, "meta.json")))
    T, B, D, K = meta["T"], meta["B"], meta["D"], meta["total_rows"]
    dev = torch.device("cuda")
    indices = torch.from_numpy(np.load(os.path.join(args.dir, "indices.npy"))).to(dev)
    offsets = torch.from_numpy(np.load(os.path.join(args.dir, "offsets.npy"))).to(dev)
    row_off = torch.from_numpy(np.load(os.path.join(args.dir, "feature_row_offset.npy"))).to(dev)
    num_bags = offsets.numel() - 1
    lengths = offsets[1:] - offsets[:-1]
    feature_of_bag = torch.arange(num_bags, device=dev) // B
    feature_of_index = torch.repeat_interleave(feature_of_bag, lengths)
    lead = int(offsets[0].item())
    shift = torch.zeros_like(indices)
    shift[lead:lead + feature_of_index.numel()] = row_off[feature_of_index]
    gidx = indices + shift
    g = torch.Generator(device=dev)
    g.manual_seed(1)
    grad_output = torch.rand((B, T * D), device=dev, generator=g) * 2 - 1
    grad_rows = grad_output.view(B, T, D).permute(1, 0, 2).reshape(T * B, D).contiguous()
    flush = l2_flush_buffer(dev)
    lr, eps = 0.01, 1e-8

    results = []
    for name, dtype, opt in (("fp32.sgd", torch.float32, "sgd"),
                             ("fp32.adagrad", torch.float32, "adagrad"),
                             ("fp16.adagrad", torch.float16, "adagrad")):
        # the graph's leaf (sum-mode gradients do not depend on its values) and the updated weights
        leaf = torch.zeros((K, D), device=dev, dtype=dtype, requires_grad=True)
        w = (torch.rand((K, D), device=dev, generator=g) * 2 - 1).to(dtype)
        m = torch.zeros(K, device=dev)
        gr = grad_rows.to(dtype)
        out = F.embedding_bag(gidx, leaf, offsets, mode="sum", include_last_offset=True)

        def step():
            (gw,) = torch.autograd.grad(out, leaf, gr, retain_graph=True)
            u = torch.unique(gidx)
            gu = gw[u].float()
            with torch.no_grad():
                if opt == "sgd":
                    w[u] = (w[u].float() - lr * gu).to(dtype)
                else:
                    m[u] += (gu * gu).mean(1)
                    w[u] = (w[u].float() - lr * gu / (m[u].sqrt() + eps)[:, None]).to(dtype)

        med, lo, hi = time_cuda(step, args.iters, flush)
        print(f"peer torch composite backward {name}: median {med:.3f} ms (min {lo:.3f}, max {hi:.3f}) "
              f"T={T} B={B} D={D} N={indices.numel()}")
        results.append({"variant": name, "median_ms": med, "min_ms": lo, "max_ms": hi})
        del w, m, gr, out, leaf
        torch.cuda.empty_cache()
    if args.json:
        json.dump({"peer": "torch composite: autograd(F.embedding_bag) + unique + optimizer",
                   "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                   "results": results}, open(args.json, "w"), indent=2)


if __name__ == "__main__":
    main()
