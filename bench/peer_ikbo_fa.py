#!/usr/bin/env python3
"""Peer timing for `tbe-bench ikbo-fa`: IKBO cross attention in PyTorch and stock Triton.

Shape (ikbo-fa, docs/workloads.md): B candidates (default 2048), H = 2, n_seed = 64, Dh = 128 (or --dh 64),
64 candidates per user (U = B / 64, sorted map b -> floor(b * U / B) like tbe-bench's), S keys per
user; q [B, H, n_seed, Dh], k, v [U, H, S, Dh], values uniform in [-1, 1) rounded to the dtype.

Strategies (side by side, same inputs, same timing):
  sdpa-prebroadcast  F.scaled_dot_product_attention on K/V already broadcast to [B, H, S, Dh]
                     (broadcast once, untimed): a strong FA kernel that re-reads every
                     candidate's own copy of its user's K/V.
  broadcast+sdpa     k.index_select(0, map) and v.index_select(0, map), then SDPA (timed
                     together): what a model without IKBO runs.
  triton.<function>  the stock-Triton IKBO FA kernels of FBGEMM
                     (fbgemm_gpu/experimental/ikbo/ikbo/ops/triton_ikbo_fa.py, e.g.
                     triton_flash_attn_ikbo_tma), loaded from --triton-ikbo PATH (the file, or a
                     folder holding it): every public function named triton_flash_attn_ikbo*,
                     called as fn(q [B*n_seed, H, Dh], k, v [U*S, H, Dh], map, n_seed, S) (one
                     program per (block of one candidate's query rows, candidate, head); its
                     autotuning runs in the warm-up). Skipped when no path is given.
Timing: CUDA events after 3 warm-ups (and --warmup-ms MS more of untimed calls, as tbe-bench
ikbo-fa --warmup-ms), L2 flushed (256 MiB write) before each iteration, median / min / max over
--iters. The Triton kernel autotunes (320 configurations) on its first call; its autotune key is
(d_model, q_seq_len), not S, so the configuration chosen at the first S serves every S. --tune-seq S
makes that first call one at S (untimed, its own inputs) whatever S are timed, so that a run of a
few large S matches the full sweep (which tunes at S = 512); the chosen configuration is printed
and written to the JSON. TFLOP/s counted on 4*B*H*n_seed*S*Dh like tbe-bench. Prints one line per
row and, with --json FILE, the rows as JSON.
"""
import argparse
import importlib.util
import inspect
import json
import os
import sys

import torch
import torch.nn.functional as F

from peer_timing import l2_flush_buffer, time_cuda

H, N_SEED, CPU = 2, 64, 64


def load_triton_ikbo(path):
    if os.path.isdir(path):
        path = os.path.join(path, "triton_ikbo_fa.py")
    spec = importlib.util.spec_from_file_location("triton_ikbo_fa", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["triton_ikbo_fa"] = mod
    spec.loader.exec_module(mod)
    fns = []
    for name, fn in inspect.getmembers(mod, inspect.isfunction):
        if fn.__module__ == mod.__name__ and name.startswith("triton_flash_attn_ikbo"):
            fns.append((name, fn))
    return fns


def best_configs(path):
    """The configuration each autotuned kernel of the loaded Triton module chose (str per kernel)."""
    mod = sys.modules.get("triton_ikbo_fa")
    if mod is None or not path:
        return {}
    out = {}
    for name, obj in vars(mod).items():
        cfg = getattr(obj, "best_config", None)
        if cfg is not None:
            out[name] = str(cfg)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch", type=int, default=2048)
    ap.add_argument("--seq", type=int, action="append", help="S (repeatable; default 512..16384)")
    ap.add_argument("--dtype", action="append", choices=["bf16", "fp16"])
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--dh", type=int, default=128, choices=[64, 128], help="head dimension Dh (default 128)")
    ap.add_argument("--triton-ikbo", default="", help="path of FBGEMM's triton_ikbo_fa.py (or its folder)")
    ap.add_argument("--warmup-ms", type=float, default=0.0,
                    help="untimed calls per row after the 3 warm-ups, in ms (default 0)")
    ap.add_argument("--tune-seq", type=int, default=0,
                    help="autotune the Triton kernels on a call at this S first (default: the first timed S)")
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    DH = args.dh
    seqs = args.seq or [512, 1024, 2048, 4096, 8192, 16384]
    dtypes = args.dtype or ["bf16", "fp16"]
    B = args.batch
    U = max(1, B // CPU)
    dev = torch.device("cuda")
    flush = l2_flush_buffer(dev)
    triton_fns = load_triton_ikbo(args.triton_ikbo) if args.triton_ikbo else []
    gen = torch.Generator(device=dev)
    rows = []
    if triton_fns and args.tune_seq > 0:
        for dt_name in dtypes:
            dt = torch.bfloat16 if dt_name == "bf16" else torch.float16
            S = args.tune_seq
            q3 = (torch.rand(B * N_SEED, H, DH, device=dev, generator=gen) * 2 - 1).to(dt)
            k3 = (torch.rand(U * S, H, DH, device=dev, generator=gen) * 2 - 1).to(dt)
            v3 = (torch.rand(U * S, H, DH, device=dev, generator=gen) * 2 - 1).to(dt)
            cmap = (torch.arange(B, device=dev) * U // B).to(torch.int64)
            for name, fn in triton_fns:
                try:
                    fn(q3, k3, v3, cmap, N_SEED, S)
                except Exception as e:  # an entry point with another signature: skipped when timed too
                    print(f"tuning {name} at S={S} ({dt_name}) skipped: {type(e).__name__}: {str(e)[:80]}")
            torch.cuda.synchronize()
            print(f"tuned at S={S} ({dt_name}): {best_configs(args.triton_ikbo)}")
            del q3, k3, v3
    print(f"device {torch.cuda.get_device_name()}; torch {torch.__version__}; B={B} U={U} H={H} "
          f"n_seed={N_SEED} Dh={DH}; FLOPs 4*B*H*n_seed*S*Dh")
    print(f"{'dtype':6} {'S':>6} {'variant':34} {'med_ms':>8} {'min_ms':>8} {'max_ms':>8} {'TFLOP/s':>8}")
    for dt_name in dtypes:
        dt = torch.bfloat16 if dt_name == "bf16" else torch.float16
        for S in seqs:
            gen.manual_seed(S)
            q = (torch.rand(B, H, N_SEED, DH, device=dev, generator=gen) * 2 - 1).to(dt)
            k = (torch.rand(U, H, S, DH, device=dev, generator=gen) * 2 - 1).to(dt)
            v = (torch.rand(U, H, S, DH, device=dev, generator=gen) * 2 - 1).to(dt)
            cmap = (torch.arange(B, device=dev) * U // B).to(torch.int64)
            flops = 4.0 * B * H * N_SEED * S * DH
            variants = []
            kb, vb = k.index_select(0, cmap), v.index_select(0, cmap)  # untimed pre-broadcast
            variants.append(("sdpa-prebroadcast", lambda: F.scaled_dot_product_attention(q, kb, vb)))
            variants.append(("broadcast+sdpa", lambda: F.scaled_dot_product_attention(
                q, k.index_select(0, cmap), v.index_select(0, cmap))))
            # the Triton kernels' layouts (untimed): q [B*n_seed, H, Dh], k, v [U*S, H, Dh]
            q3 = q.transpose(1, 2).reshape(B * N_SEED, H, DH).contiguous()
            k3 = k.transpose(1, 2).reshape(U * S, H, DH).contiguous()
            v3 = v.transpose(1, 2).reshape(U * S, H, DH).contiguous()
            for name, fn in triton_fns:
                variants.append((f"triton.{name}",
                                 lambda fn=fn, S=S: fn(q3, k3, v3, cmap, N_SEED, S)))
            for name, fn in variants:
                try:
                    med, lo, hi = time_cuda(fn, args.iters, flush, args.warmup_ms)
                except Exception as e:  # a Triton entry point with another signature
                    print(f"{dt_name:6} {S:6d} {name:34} skipped: {type(e).__name__}: {str(e)[:80]}")
                    continue
                tf = flops / (med * 1e-3) / 1e12
                print(f"{dt_name:6} {S:6d} {name:34} {med:8.3f} {lo:8.3f} {hi:8.3f} {tf:8.1f}")
                row = {"dtype": dt_name, "S": S, "B": B, "U": U, "Dh": DH, "variant": name,
                       "median_ms": med, "min_ms": lo, "max_ms": hi, "tflops": tf,
                       "iters": args.iters, "warmup_ms": args.warmup_ms}
                if name.startswith("triton."):
                    row["autotuned"] = best_configs(args.triton_ikbo)
                    print(f"{'':6} {'':6} {'':34} config {row['autotuned']}")
                rows.append(row)
            del kb, vb, q3, k3, v3
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "benchmark": "ikbo-fa peers",
                       "flops_model": "4*B*H*n_seed*S*Dh", "rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
