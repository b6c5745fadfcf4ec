#!/usr/bin/env python3
"""Dump PyTorch torch.nn.functional.embedding_bag results on CUDA as tbe case folders.

Run on the GPU machine (needs torch with CUDA, and numpy; nothing else):

    python3 tests/data/dump_torch_cases.py --out tests/data/torch

Each case is a single-table forward (T = 1, feature_table_map [0], batch size B, offsets of length
B + 1, i.e. F.embedding_bag(..., include_last_offset=True)) written in the case-file format of
io/src/case_file.cpp (docs/case-files.md): case.json plus weights.npy, indices.npy, offsets.npy,
per_sample_weights.npy (weighted cases) and output.npy (torch's output, recorded) -- or a recorded
error when torch raised.

Cases: the edge cases of docs/edge-cases.md that map to one F.embedding_bag call
(C01, C02, C03, C10, C11, C14) and seeded random ones (SUM / MEAN, weighted SUM, int32 / int64,
FP32 / FP16 / BF16 weights; bag lengths 0, 1, 255, 256, 257, D = 1, odd, 2048).

Policy: every case declares the fbgemm-cuda policy with output = weight dtype. torch's CUDA kernel
accumulates in at::acc_type<scalar_t, /*is_cuda=*/true> = FP32 for FP32/FP16/BF16 and returns the
weight dtype; per_sample_weights must have the weight dtype, so they are drawn on that dtype's grid
and stored as their exact FP32 values.

Expectations (`expect`): "pass" where torch's semantics are ours; "fail" with the rule of
docs/semantics.md where they differ:
  - torch has no bounds-check repair: out-of-range indices raise (CPU checks, CUDA device assert)
    or read out of bounds; bad offsets and a last offset != N are used as given. Under
    bounds_check WARNING our output is the repaired one (rule "bounds-check repair").
  - a last offset != N is a FATAL error here; torch uses it as the end of the last bag.
  - MEAN with per-sample weights is defined here ((1/L)·Σ w_p W[i_p]); torch rejects it.
  - C10 (a bag of 3000 lookups of a row of ones, FP16/BF16 weights): the expectation is decided
    from what torch returned: 3000 exactly means FP32 accumulation (expect pass); anything else
    means a narrower accumulation (expect fail, rule "accumulation type").
Cases that may fault the device (bad indices on CUDA trigger a device-side assert, which poisons
the CUDA context) run in a child process, so one fault does not end the dump.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import traceback

import numpy as np
import torch
import torch.nn.functional as F

FORMAT = "tbe-case"
VERSION = 1

TORCH_DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
INDEX_DTYPES = {"int32": (torch.int32, np.int32), "int64": (torch.int64, np.int64)}

RULE_REPAIR = ("bounds-check repair (docs/semantics.md 'Bounds check': WARNING/IGNORE repair bad "
               "bags and indices and count warnings; torch has no repair: it raises or reads the "
               "offsets/indices as given)")
RULE_LAST_OFFSET = ("last-offset rule (docs/semantics.md 'Bounds check': a last offset != N is "
                    "repaired to N under WARNING and is an error under FATAL; torch uses it as the "
                    "end of the last bag)")
RULE_FATAL = ("FATAL bounds check (docs/semantics.md 'Bounds check': a bad index or bag is a "
              "BoundsCheckError; torch returned an output)")
RULE_MEAN_PSW = ("MEAN with per-sample weights (docs/semantics.md 'Pooling': defined as "
                 "(1/L)·Σ s_p·W[i_p]; torch rejects per_sample_weights unless mode='sum')")
RULE_ACCUMULATION = ("accumulation type per policy (docs/semantics.md 'Rounding', fbgemm-cuda "
                     "policy: FP32 accumulation for FP16/BF16 weights; torch's sum differs)")


# ------------------------------------------------------------------------------------------------
# torch <-> numpy in the case-file encodings
# ------------------------------------------------------------------------------------------------

def to_numpy_storage(t):
    """A CPU numpy array with the case-file encoding: fp32 <f4, fp16 <f2, bf16 raw bits <u2."""
    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def make_weights(rows, dim, dtype, values=None, rng=None):
    """[rows, dim] weights in `dtype` (values rounded once from FP32/FP64 by torch, RNE)."""
    if values is None:
        values = rng.uniform(-1.0, 1.0, size=(rows, dim))
    return torch.tensor(np.asarray(values, dtype=np.float64), dtype=torch.float64).to(
        TORCH_DTYPES[dtype])


def psw_grid(n, dtype, rng):
    """Per-sample weights exactly representable in `dtype` (torch needs them in the weight dtype;
    the case file stores FP32): multiples of 1/64 in [0.5, 1.5) fit FP16 and BF16."""
    vals = np.floor(rng.uniform(0.5, 1.5, size=n) * 64.0) / 64.0
    t = torch.tensor(vals, dtype=torch.float32).to(TORCH_DTYPES[dtype])
    assert torch.equal(t.float(), torch.tensor(vals, dtype=torch.float32)), "psw not exact"
    return t


class Case:
    """Inputs of one single-table forward and what torch did with them."""

    def __init__(self, name, description, weights, indices, offsets, mode="sum",
                 index_dtype="int64", psw=None, bounds_check="warning", expect=None, unsafe=False,
                 seed=0, decide=None):
        self.name = name
        self.description = description
        self.weights = weights              # torch [E, D] in the weight dtype (CPU)
        self.indices = list(indices)
        self.offsets = list(offsets)
        self.mode = mode                    # "sum" | "mean"
        self.index_dtype = index_dtype
        self.psw = psw                      # torch [N] in the weight dtype, or None
        self.bounds_check = bounds_check
        self.expect = expect                # ("pass", "") or ("fail", rule)
        self.unsafe = unsafe                # may fault the device: run in a child process
        self.seed = seed
        self.decide = decide                # fn(output numpy float64) -> (verdict, rule)

    @property
    def wdtype(self):
        return {v: k for k, v in TORCH_DTYPES.items()}[self.weights.dtype]


def write_inputs(case, folder):
    os.makedirs(folder, exist_ok=True)
    E, D = case.weights.shape
    np.save(os.path.join(folder, "weights.npy"), to_numpy_storage(case.weights.reshape(-1)))
    npdt = INDEX_DTYPES[case.index_dtype][1]
    np.save(os.path.join(folder, "indices.npy"), np.asarray(case.indices, dtype=npdt))
    np.save(os.path.join(folder, "offsets.npy"), np.asarray(case.offsets, dtype=npdt))
    if case.psw is not None:
        np.save(os.path.join(folder, "per_sample_weights.npy"),
                case.psw.float().cpu().numpy().astype(np.float32))


def case_json(case, recorded):
    E, D = case.weights.shape
    wd = case.wdtype
    B = len(case.offsets) - 1
    j = {
        "format": FORMAT,
        "version": VERSION,
        "name": case.name,
        "provenance": ("tests/data/dump_torch_cases.py: torch %s F.embedding_bag(mode=%r, "
                       "include_last_offset=True%s) on %s; %s"
                       % (torch.__version__, case.mode,
                          ", per_sample_weights" if case.psw is not None else "",
                          torch.cuda.get_device_name(0), case.description)),
        "seed": int(case.seed),
        "operator": "forward",
        "tables": {"dtype": wd, "rows": [int(E)], "dims": [int(D)], "table_offsets": [0],
                   "feature_table_map": [0]},
        "lookups": {"index_dtype": case.index_dtype, "batch_size": int(B), "vbe_ranks": 0,
                    "vbe_batch_sizes": [], "weighted": case.psw is not None},
        "options": {
            "pooling": case.mode,
            "bounds_check": case.bounds_check,
            # torch: FP32 accumulation for every weight type, output in the weight dtype
            "policy": {"kind": "fbgemm-cuda", "weights": wd, "output": wd,
                       "accumulation": "fp32", "optimizer_state": "fp32", "write_back": "rne"},
        },
        "recorded": recorded,
    }
    verdict, rule = case.expect if case.expect else ("pass", "")
    j["expect"] = {"verdict": verdict, "rule": rule}
    return j


# ------------------------------------------------------------------------------------------------
# running torch
# ------------------------------------------------------------------------------------------------

def run_torch(folder, meta):
    """Runs F.embedding_bag on the inputs saved in `folder`; returns (output_tensor, None) or
    (None, (error_kind, message))."""
    dev = torch.device("cuda")
    wnp = np.load(os.path.join(folder, "weights.npy"))
    E, D = meta["E"], meta["D"]
    if meta["wdtype"] == "bf16":
        w = torch.from_numpy(wnp.view(np.int16).copy()).view(torch.bfloat16)
    else:
        w = torch.from_numpy(wnp.copy())
    w = w.reshape(E, D).to(dev)
    idx = torch.from_numpy(np.load(os.path.join(folder, "indices.npy"))).to(dev)
    off = torch.from_numpy(np.load(os.path.join(folder, "offsets.npy"))).to(dev)
    psw = None
    if meta["weighted"]:
        psw = torch.from_numpy(np.load(os.path.join(folder, "per_sample_weights.npy"))).to(
            dev).to(w.dtype)
    try:
        out = F.embedding_bag(idx, w, off, mode=meta["mode"], per_sample_weights=psw,
                              include_last_offset=True)
        torch.cuda.synchronize()
        return out.cpu(), None
    except (IndexError, RuntimeError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        kind = "bounds_check"
        if isinstance(e, RuntimeError) and ("per_sample_weights" in str(e) or
                                            "mode" in str(e) and "sum" in str(e)):
            kind = "invalid_argument"
        return None, (kind, "%s: %s" % (type(e).__name__, msg))
    except (ValueError, NotImplementedError, TypeError) as e:
        return None, ("invalid_argument", "%s: %s" % (type(e).__name__, str(e).splitlines()[0]))


def child_main(folder):
    """--child FOLDER: run one case, write output.npy or error.json in FOLDER."""
    meta = json.load(open(os.path.join(folder, "meta.json")))
    try:
        out, err = run_torch(folder, meta)
    except Exception as e:  # noqa: BLE001 - any torch failure is recorded
        out, err = None, ("bounds_check", "%s: %s" % (type(e).__name__, str(e).splitlines()[0]
                                                      if str(e) else ""))
    if err is None:
        np.save(os.path.join(folder, "output.npy"), to_numpy_storage(out))
    else:
        json.dump({"error": err[0], "message": err[1]},
                  open(os.path.join(folder, "error.json"), "w"))
    return 0


def record_case(case, folder):
    """Writes the inputs, runs torch (in a child process when unsafe), writes case.json."""
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    write_inputs(case, folder)
    E, D = case.weights.shape
    meta = {"E": int(E), "D": int(D), "wdtype": case.wdtype, "mode": case.mode,
            "weighted": case.psw is not None}
    json.dump(meta, open(os.path.join(folder, "meta.json"), "w"))
    out_np, err = None, None
    if case.unsafe:
        try:
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", folder],
                                  capture_output=True, text=True, timeout=45)
        except subprocess.TimeoutExpired:
            proc = subprocess.CompletedProcess([], -1, "", "timed out after 45 s")
        if os.path.exists(os.path.join(folder, "output.npy")):
            out_np = np.load(os.path.join(folder, "output.npy"))
        elif os.path.exists(os.path.join(folder, "error.json")):
            e = json.load(open(os.path.join(folder, "error.json")))
            err = (e["error"], e["message"])
        else:  # the child died (device assert abort, ...)
            tail = (proc.stderr or "").strip().splitlines()[-1:] or ["exit %d" % proc.returncode]
            err = ("bounds_check", "child process failed: " + tail[0])
    else:
        out, err = run_torch(folder, meta)
        if err is None:
            out_np = to_numpy_storage(out)
            np.save(os.path.join(folder, "output.npy"), out_np)
    for f in ("meta.json", "error.json"):
        if os.path.exists(os.path.join(folder, f)):
            os.remove(os.path.join(folder, f))

    implementation = "torch %s F.embedding_bag (cuda, %s)" % (torch.__version__,
                                                              torch.cuda.get_device_name(0))
    recorded = {"implementation": implementation, "output_dtype": case.wdtype,
                "output": None, "warnings": None, "error": None}
    if err is None:
        recorded["output"] = "output.npy"
    else:
        recorded["error"] = err[0]
        case.description += "; torch raised " + err[1]
    if case.decide is not None:
        vals = None
        if out_np is not None:
            vals = (torch.from_numpy(out_np.view(np.int16).copy()).view(torch.bfloat16).double()
                    .numpy() if case.wdtype == "bf16" else out_np.astype(np.float64))
        case.expect = case.decide(vals, err)
    with open(os.path.join(folder, "case.json"), "w") as fh:
        json.dump(case_json(case, recorded), fh, indent=2, sort_keys=True)
        fh.write("\n")
    verdict = case.expect[0] if case.expect else "pass"
    print("%-40s %-5s %-5s %-7s -> %s (expect %s)" % (
        case.name, case.wdtype, case.mode, case.bounds_check,
        "error " + err[0] if err else "output %s" % (tuple(out_np.shape),), verdict))


# ------------------------------------------------------------------------------------------------
# the cases
# ------------------------------------------------------------------------------------------------

def edge_cases():
    cases = []
    # C01: bad indices. WARNING: ours repairs them to row 0 (2 warnings); torch has no repair.
    w = make_weights(10, 4, "fp32", values=np.arange(40).reshape(10, 4) / 8.0)
    for mode in ("warning", "fatal"):
        exp = ("fail", RULE_REPAIR) if mode == "warning" else None
        cases.append(Case("c01-bad-indices-" + mode, "C01 indices [3, 12, -5, 7] E=10",
                          w, [3, 12, -5, 7], [0, 2, 4], bounds_check=mode, unsafe=True,
                          expect=exp,
                          decide=None if mode == "warning" else
                          (lambda vals, err: ("pass", "") if err else ("fail", RULE_FATAL))))
    # C02: decreasing offsets [0, 3, 2, 4]: ours repairs to [0, 3, 3, 4].
    w = make_weights(10, 2, "fp32", values=np.arange(20).reshape(10, 2) + 1.0)
    cases.append(Case("c02-bad-offsets-warning", "C02 offsets [0, 3, 2, 4]", w, [1, 2, 3, 4],
                      [0, 3, 2, 4], bounds_check="warning", unsafe=True,
                      expect=("fail", RULE_REPAIR)))
    # C03: no lookups (single-table form): zeros [2, 8].
    for wd in ("fp32", "fp16"):
        w = make_weights(16, 8, wd, rng=np.random.default_rng(3))
        cases.append(Case("c03-no-lookups-" + wd, "C03 no lookups, B=2", w, [], [0, 0, 0],
                          index_dtype="int32", expect=("pass", "")))
    # C10: FP16/BF16 accumulation. Row 0 = 1, row 1 = 2^-11 (FP16) / 2^-8 (BF16); bag [0, 1];
    # row 2 = ones, a bag of 3000 lookups of it: exactly 3000 with FP32 accumulation.
    for wd, tiny in (("fp16", 2.0 ** -11), ("bf16", 2.0 ** -8)):
        vals = np.stack([np.ones(4), np.full(4, tiny), np.ones(4)])
        w = make_weights(3, 4, wd, values=vals)

        # 3000 rounded once to the output (= weight) type: 3000 in FP16, 3008 in BF16
        want = float(torch.tensor(3000.0, dtype=torch.float64).to(TORCH_DTYPES[wd]).double())

        def decide(v, err, want=want):
            if err is not None or v is None:
                return ("fail", RULE_ACCUMULATION + " (torch raised)")
            return ("pass", "") if np.all(v[1] == want) else ("fail", RULE_ACCUMULATION)
        cases.append(Case("c10-accumulation-" + wd,
                          "C10 bag [0, 1] and 3000 lookups of a row of ones",
                          w, [0, 1] + [2] * 3000, [0, 2, 3002], decide=decide))
    # C11: MEAN (and SUM) with empty bags: never NaN.
    vals = np.array([[3 * r, 3 * r + 1, 3 * r + 2] for r in range(5)], dtype=np.float64)
    for mode in ("sum", "mean"):
        for wd in ("fp32", "bf16"):
            w = make_weights(5, 3, wd, values=vals)
            cases.append(Case("c11-empty-bags-%s-%s" % (mode, wd), "C11 offsets [0,1,1,3,3,5]",
                              w, [0, 1, 2, 3, 4], [0, 1, 1, 3, 3, 5], mode=mode,
                              expect=("pass", "")))
    # C14: trailing indices, last offset 3 != N = 6.
    w = make_weights(32, 4, "fp32", values=np.arange(128).reshape(32, 4) / 4.0)
    for mode in ("warning", "fatal"):
        cases.append(Case("c14-trailing-indices-" + mode, "C14 indices [10,11,20,5,5,5] offsets "
                          "[0, 2, 3]", w, [10, 11, 20, 5, 5, 5], [0, 2, 3], bounds_check=mode,
                          # WARNING: torch 2.11 on CUDA (H200) ends the last bag at N although
                          # include_last_offset=True names 3: that equals our last-offset repair.
                          unsafe=True, expect=("pass", "") if mode == "warning" else None,
                          decide=None if mode == "warning" else
                          (lambda vals, err: ("pass", "") if err else ("fail", RULE_LAST_OFFSET))))
    # MEAN with per-sample weights: torch rejects it, ours defines it.
    rng = np.random.default_rng(77)
    w = make_weights(6, 4, "fp32", rng=rng)
    cases.append(Case("mean-per-sample-weights", "MEAN with per_sample_weights", w,
                      [0, 1, 5, 2], [0, 2, 4], mode="mean", psw=psw_grid(4, "fp32", rng),
                      expect=("fail", RULE_MEAN_PSW)))
    return cases


def random_cases(count, seed):
    cases = []
    rng = np.random.default_rng(seed)
    dims = [1, 3, 4, 7, 8, 33, 64, 127, 128, 129, 1000, 2048]
    for i in range(count):
        wd = ("fp32", "fp16", "bf16")[i % 3]
        idt = ("int32", "int64")[(i // 3) % 2]
        weighted = (i // 6) % 2 == 1
        mode = "sum" if weighted else ("sum", "mean")[(i // 12) % 2]
        D = int(dims[rng.integers(len(dims))])
        E = int(rng.choice([1, 2, 7, 100, 1000]))
        B = int(rng.choice([1, 3, 16, 64]))
        lengths = [int(rng.choice([0, 1, 2, 5, 17, 255, 256, 257], p=[.1, .15, .15, .2, .2,
                                                                     .07, .06, .07]))
                   for _ in range(B)]
        if D >= 1000:  # keep the folder small
            lengths = [min(L, 20) for L in lengths]
            E = min(E, 16)
        N = sum(lengths)
        offsets = [0] + list(np.cumsum(lengths).astype(int))
        indices = rng.integers(0, E, size=N).tolist()
        w = make_weights(E, D, wd, rng=rng)
        psw = psw_grid(N, wd, rng) if weighted else None
        name = "random-%02d-%s-%s-%s%s" % (i, wd, idt, mode, "-weighted" if weighted else "")
        cases.append(Case(name, "random case %d (seed %d): E=%d D=%d B=%d N=%d" % (
            i, seed, E, D, B, N), w, indices, offsets, mode=mode, index_dtype=idt, psw=psw,
            bounds_check=("warning", "fatal", "none")[i % 3], seed=seed, expect=("pass", "")))
    return cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "torch"))
    ap.add_argument("--random", type=int, default=24, help="number of random cases (default 24)")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child_main(args.child)
    if not torch.cuda.is_available():
        print("dump_torch_cases.py: no CUDA device visible to torch", file=sys.stderr)
        return 3
    os.makedirs(args.out, exist_ok=True)
    print("torch %s on %s -> %s" % (torch.__version__, torch.cuda.get_device_name(0), args.out))
    failures = 0
    for case in edge_cases() + random_cases(args.random, args.seed):
        try:
            record_case(case, os.path.join(args.out, case.name))
        except Exception:  # noqa: BLE001 - report and continue with the next case
            failures += 1
            print("%s: could not record:\n%s" % (case.name, traceback.format_exc()),
                  file=sys.stderr)
    print("%d case folders under %s (%d not recorded)" % (
        len([d for d in os.listdir(args.out) if os.path.isdir(os.path.join(args.out, d))]),
        args.out, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
