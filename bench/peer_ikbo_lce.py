#!/usr/bin/env python3
"""Peer timing for `tbe-bench ikbo-lce`: the IKBO linear compression in PyTorch on the same shapes.

out[b] = W_c @ E_c[b] + W_u @ E_u[u(b)]   (W_c [M, K_c], W_u [M, K_u], E_c [B, K_c, N],
E_u [U, K_u, N], out [B, M, N]); the map is sorted runs b -> floor(b * U / B) like tbe-bench's.

Strategies (side by side, same inputs):
  decomposed-padded  the published PyTorch decomposition with K padded to a multiple of 8: the
                     model keeps padded tensors, so W_c, W_u, E_c, E_u are padded once, untimed;
                     timed: user = W_u @ E_u ([U, M, N]), cand = W_c @ E_c ([B, M, N]),
                     out = cand + user.index_select(0, map).
  decomposed         the same on the unpadded tensors.
  broadcast          the baseline: E = cat([E_u.index_select(0, map), E_c], dim=1)
                     ([B, K_u + K_c, N]), out = [W_u | W_c] @ E (W concatenated once, untimed).
Timing: CUDA events after 3 warm-ups, L2 flushed (256 MiB write) before each iteration, median /
min / max over --iters. TFLOP/s counted on the decomposed work 2*M*N*(B*K_c + U*K_u), like
tbe-bench. Shapes: the ikbo-lce shape (FP16, BF16) and the two sweeps (FP16) unless --quick.
"""
import argparse
import json
import math

import torch

from peer_timing import l2_flush_buffer, time_cuda


def pad8(x):
    return (x + 7) // 8 * 8


def run_shape(name, B, U, dtype, iters, flush, M=433, N=256, K_c=866, K_u=1178):
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(1234)
    rnd = lambda *s: (torch.rand(*s, device=dev, generator=g) * 2 - 1).to(dtype)
    w_c, w_u = rnd(M, K_c), rnd(M, K_u)
    e_c, e_u = rnd(B, K_c, N), rnd(U, K_u, N)
    cmap = (torch.arange(B, device=dev) * U // B).to(torch.int64)
    # padded copies (untimed): zero columns of W, zero rows of E
    kcp, kup = pad8(K_c), pad8(K_u)
    w_cp = torch.nn.functional.pad(w_c, (0, kcp - K_c))
    w_up = torch.nn.functional.pad(w_u, (0, kup - K_u))
    e_cp = torch.nn.functional.pad(e_c, (0, 0, 0, kcp - K_c))
    e_up = torch.nn.functional.pad(e_u, (0, 0, 0, kup - K_u))
    w_cat = torch.cat([w_u, w_c], dim=1)

    def decomposed(wc, wu, ec, eu):
        user = torch.matmul(wu, eu)
        cand = torch.matmul(wc, ec)
        return cand + user.index_select(0, cmap)

    def broadcast():
        e = torch.cat([e_u.index_select(0, cmap), e_c], dim=1)
        return torch.matmul(w_cat, e)

    flops = 2.0 * M * N * (B * K_c + U * K_u)
    ref = decomposed(w_c, w_u, e_c, e_u).float()
    rows = []
    for strat, fn in (("decomposed-padded", lambda: decomposed(w_cp, w_up, e_cp, e_up)),
                      ("decomposed", lambda: decomposed(w_c, w_u, e_c, e_u)),
                      ("broadcast", broadcast)):
        med, lo, hi = time_cuda(fn, iters, flush)
        diff = ((fn().float() - ref).abs().max() / ref.abs().max()).item()
        tflops = flops / (med * 1e-3) / 1e12
        print(f"peer torch {name:10s} {str(dtype).replace('torch.', ''):9s} {strat:18s} "
              f"median {med:.3f} ms (min {lo:.3f}, max {hi:.3f}) {tflops:7.1f} TFLOP/s "
              f"rel_diff {diff:.1e}", flush=True)
        rows.append({"shape": name, "B": B, "U": U, "M": M, "N": N, "K_c": K_c, "K_u": K_u,
                     "dtype": str(dtype), "strategy": strat, "median_ms": med, "min_ms": lo,
                     "max_ms": hi, "tflops": tflops, "flops_decomposed": flops})
    del w_c, w_u, e_c, e_u, e_cp, e_up, w_cat, ref
    torch.cuda.empty_cache()
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default="")
    ap.add_argument("--quick", action="store_true", help="published shape only")
    args = ap.parse_args()
    flush = l2_flush_buffer("cuda")
    results = []
    for dt in (torch.float16, torch.bfloat16):
        results += run_shape("ikbo-lce", 1024, 15, dt, args.iters, flush)
    if not args.quick:
        for B in (512, 1024, 1536, 2048, 2560, 3072):
            results += run_shape(f"B={B}", B, math.ceil(B / 70), torch.float16, args.iters, flush)
        for c in (2, 5, 10, 50, 100, 1000):
            results += run_shape(f"cpu={c}", 1024, math.ceil(1024 / c), torch.float16, args.iters,
                                 flush)
    if args.json:
        json.dump({"peer": "pytorch", "torch": torch.__version__,
                   "device": torch.cuda.get_device_name(0), "results": results},
                  open(args.json, "w"), indent=2)


if __name__ == "__main__":
    main()
