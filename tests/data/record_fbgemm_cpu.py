#!/usr/bin/env python3
"""Record FBGEMM's own TBE on the CPU as tbe case folders (forward and backward).

Run by hand (no GPU) with fbgemm_gpu's CPU wheel and torch, e.g.

    pip install fbgemm-gpu-cpu==1.6.0 torch==2.11.0 numpy     (a venv of its own)
    python3 tests/data/record_fbgemm_cpu.py --out tests/data/fbgemm-cpu

Implementation under test: `SplitTableBatchedEmbeddingBagsCodegen` with one
(E_t, D_t, EmbeddingLocation.HOST, ComputeDevice.CPU) spec per table, the case's
feature_table_map, weights FP32 or FP16, output FP32 or FP16, stochastic rounding off, optimizer
EXACT_SGD or EXACT_ROWWISE_ADAGRAD, in training mode. The forward is `emb(indices, offsets[,
per_sample_weights])`; its bounds-check warning count is the growth of `emb.bounds_check_warning`
over the call. The backward is `out.backward(grad_output)` after that forward: FBGEMM's fused
backward + optimizer updates the weights and the momentum in place; the recorded tensors are
`split_embedding_weights()` and `split_optimizer_states()` packed table after table, and the
per-sample weights' `.grad`. A call that raises is recorded as an error (`bounds_check` when the
message says an index or offset is out of bounds, else `invalid_argument`).

Policy: every case declares `fbgemm-cuda` (FP32 accumulation, FP32 optimizer state, RNE write
back), the policy FBGEMM's kernels implement, except the cases pinning FP32 accumulation against
`seed-default` (FP64 accumulation for FP32 weights). Each case's `expect` names the rule of
docs/semantics.md / docs/backward.md it expects the oracle to apply; where FBGEMM differs from
those semantics the case expects `fail` with that rule (see tests/data/fbgemm-cpu/README.md for the
list and what was observed). Inputs come from one seeded NumPy generator (--seed), so a rerun with
the same versions writes the same bytes.
"""
import argparse
import logging
import os
import sys

import numpy as np
import torch

logging.disable(logging.WARNING)  # fbgemm_gpu's "no compat table entry for torch" notice
from fbgemm_gpu.split_embedding_configs import EmbOptimType as OptimType  # noqa: E402
from fbgemm_gpu.split_embedding_configs import SparseType  # noqa: E402
from fbgemm_gpu.split_table_batched_embeddings_ops_common import (  # noqa: E402
    BoundsCheckMode, EmbeddingLocation, PoolingMode)
from fbgemm_gpu.split_table_batched_embeddings_ops_training import (  # noqa: E402
    ComputeDevice, SplitTableBatchedEmbeddingBagsCodegen, WeightDecayMode)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import case_writer as cw  # noqa: E402

FBGEMM_VERSION = getattr(__import__("fbgemm_gpu"), "__version__", "?")
IMPLEMENTATION = ("fbgemm_gpu %s SplitTableBatchedEmbeddingBagsCodegen (HOST / CPU), torch %s"
                  % (FBGEMM_VERSION, torch.__version__))

SPARSE = {"fp32": SparseType.FP32, "fp16": SparseType.FP16}
TORCH = {"fp32": torch.float32, "fp16": torch.float16}
POOLING = {"sum": PoolingMode.SUM, "mean": PoolingMode.MEAN}
BOUNDS = {"fatal": BoundsCheckMode.FATAL, "warning": BoundsCheckMode.WARNING}
OPTIM = {"sgd": OptimType.EXACT_SGD, "rowwise_adagrad": OptimType.EXACT_ROWWISE_ADAGRAD}
WD_MODE = {"none": WeightDecayMode.NONE, "l2": WeightDecayMode.L2,
           "decoupled": WeightDecayMode.DECOUPLE}

# The rules the deviating cases break (docs/semantics.md, docs/backward.md, docs/oracle.md).
RULE_PRUNED = ("docs/semantics.md 'Bounds check': -1 is a bad index (training has no pruned-row "
               "sentinel) and WARNING repairs it to row 0 with one warning; FBGEMM's CPU bounds "
               "check passes -1 through as a pruned row and its training forward then raises")
RULE_MEAN_PSW = ("docs/semantics.md 'Pooling': MEAN is (1/L)·Σ s_p·W[i_p], per-sample weights "
                 "included; FBGEMM's CPU forward with FP16 output drops the 1/L when weighted")
RULE_FEATURE_MAP = ("docs/semantics.md 'Symbols': feature_table_map may be any many-to-one map; "
                    "FBGEMM's CPU TBE raises on valid input when the features of one table are "
                    "not contiguous (map [0, 1, 0])")
RULE_SHARED_UPDATE = ("docs/backward.md 'Shared tables': features sharing a table add into one "
                      "G_r and the row gets one update (C09); FBGEMM's CPU FP16 rowwise Adagrad "
                      "with map [0, 1, 0] updates a row both features look up twice")
RULE_SGD_FP16 = ("docs/backward.md 'The computation' 4: the updated row x = w - lr·G is rounded "
                 "once to the weights type; FBGEMM's CPU EXACT_SGD with FP16 weights rounds lr·G "
                 "to FP16 first and then w - RN16(lr·G) (two roundings; its outputs equal that "
                 "emulation bit for bit)")
RULE_WEIGHT_DECAY = ("docs/backward.md 'The computation' 3: rowwise Adagrad with weight decay L2 "
                     "(g' = G + wd·w) or DECOUPLE (corr = 1 - lr·wd); FBGEMM's CPU rowwise Adagrad "
                     "ignores weight_decay (weights and momentum equal the update without it)")
RULE_ACCUMULATION = ("docs/semantics.md 'Precision policies': seed-default accumulates FP32 "
                     "weights in FP64; FBGEMM's CPU TBE accumulates in FP32 (it passes under "
                     "fbgemm-cuda)")


class Case:
    """One TBE call: the tables, the lookups, the options and (backward) the optimizer."""

    def __init__(self, name, description, rows, dims, feature_table_map, B, lengths, rng, *,
                 dtype="fp32", out="fp32", pooling="sum", bounds_check="warning",
                 policy_kind="fbgemm-cuda", weighted=False, index_dtype="int64",
                 indices=None, offsets=None, expectation=None, backward=None):
        self.name, self.description = name, description
        self.rows, self.dims, self.ftm = list(rows), list(dims), list(feature_table_map)
        self.T, self.B = len(self.ftm), B
        self.dtype, self.out, self.pooling, self.bounds_check = dtype, out, pooling, bounds_check
        self.policy_kind, self.index_dtype = policy_kind, index_dtype
        self.expectation = expectation or cw.expect()
        self.backward = backward  # None (forward case) or dict(optimizer=..., momentum=bool)
        # weights: uniform [-1, 1) rounded once (RNE) to the weight type, packed table after table
        flat = np.concatenate([rng.uniform(-1, 1, size=E * D) for E, D in zip(rows, dims)])
        self.weights = torch.from_numpy(flat).to(TORCH[dtype])
        if offsets is None:
            offsets = np.concatenate([[0], np.cumsum(lengths)])
        self.offsets = np.asarray(offsets, dtype=np.int64)
        if indices is None:
            # feature-major bags: bag k = f·B + b reads table ftm[f]
            indices = np.concatenate(
                [rng.integers(0, rows[self.ftm[k // B]], size=L) for k, L in enumerate(lengths)]
                + [np.zeros(0, np.int64)]).astype(np.int64)
        self.indices = np.asarray(indices, dtype=np.int64)
        N = len(self.indices)
        self.psw = rng.uniform(0.25, 2.0, size=N).astype(np.float32) if weighted else None
        if backward is not None:
            sum_d = sum(dims[t] for t in self.ftm)
            self.grad = rng.uniform(-1, 1, size=(B, sum_d)).astype(np.float32)
            self.momentum = (rng.uniform(0, 2, size=sum(rows)).astype(np.float32)
                             if backward["optimizer"]["kind"] == "rowwise_adagrad" else None)

    def policy(self):
        acc = "fp64" if self.policy_kind == "seed-default" and self.dtype == "fp32" else "fp32"
        return cw.policy(self.policy_kind, self.dtype, self.out, acc)


def make_module(c):
    specs = [(E, D, EmbeddingLocation.HOST, ComputeDevice.CPU) for E, D in zip(c.rows, c.dims)]
    kw = {}
    opt = c.backward["optimizer"] if c.backward else cw.optimizer("rowwise_adagrad", 0.01, 1e-8)
    if opt["kind"] == "rowwise_adagrad":
        kw.update(eps=opt["eps"], weight_decay=opt["weight_decay"],
                  weight_decay_mode=WD_MODE[opt["weight_decay_mode"]])
    emb = SplitTableBatchedEmbeddingBagsCodegen(
        specs, feature_table_map=c.ftm, weights_precision=SPARSE[c.dtype],
        output_dtype=SPARSE[c.out], optimizer=OPTIM[opt["kind"]],
        learning_rate=opt["learning_rate"], pooling_mode=POOLING[c.pooling],
        bounds_check_mode=BOUNDS[c.bounds_check], stochastic_rounding=False, device="cpu", **kw)
    with torch.no_grad():
        offset = 0
        for t, w in enumerate(emb.split_embedding_weights()):
            n = c.rows[t] * c.dims[t]
            w.copy_(c.weights[offset:offset + n].view(c.rows[t], c.dims[t]))
            offset += n
        if c.backward is not None and c.momentum is not None:
            offset = 0
            for t, (m,) in enumerate(emb.split_optimizer_states()):
                m.copy_(torch.from_numpy(c.momentum[offset:offset + c.rows[t]]))
                offset += c.rows[t]
    return emb


def error_kind(ex):
    """bounds_check for the messages of FBGEMM's index checks (the FATAL bounds check's
    `idx < num_rows`, the lookup's `Index i is out of bounds`), else invalid_argument."""
    msg = str(ex)
    return ("bounds_check" if "out of bounds" in msg or "idx < num_rows" in msg
            else "invalid_argument")


def first_line(ex):
    return "%s: %s" % (type(ex).__name__, (str(ex).splitlines() or [""])[0][:200])


def record(c, out_dir):
    emb = make_module(c)
    idx_t = {"int64": torch.int64, "int32": torch.int32}[c.index_dtype]
    # copies: FBGEMM's bounds check repairs indices and offsets in place
    indices = torch.from_numpy(c.indices.copy()).to(idx_t)
    offsets = torch.from_numpy(c.offsets.copy()).to(idx_t)
    psw = torch.from_numpy(c.psw.copy()).requires_grad_(c.backward is not None) \
        if c.psw is not None else None
    emb.bounds_check_warning.zero_()
    result = {}
    note = ""
    try:
        out = emb(indices, offsets, per_sample_weights=psw)
        result["warnings"] = int(emb.bounds_check_warning.item())
        if c.backward is not None:
            out.backward(torch.from_numpy(c.grad).to(out.dtype))
            result["weights"] = torch.cat([w.detach().reshape(-1)
                                           for w in emb.split_embedding_weights()])
            if c.momentum is not None:
                result["momentum"] = torch.cat([m.detach().reshape(-1)
                                                for (m,) in emb.split_optimizer_states()])
            if psw is not None:
                result["psw_grad"] = psw.grad.detach().clone()
        else:
            result["output"] = out.detach()
    except RuntimeError as ex:
        result = {"error": error_kind(ex)}
        note = "; FBGEMM raised " + first_line(ex)
    common = dict(name=c.name, seed=ARGS.seed, dtype=c.dtype, rows=c.rows, dims=c.dims,
                  feature_table_map=c.ftm, weights=c.weights, indices=c.indices.astype(
                      np.int32 if c.index_dtype == "int32" else np.int64),
                  offsets=c.offsets.astype(np.int32 if c.index_dtype == "int32" else np.int64),
                  batch_size=c.B, pooling=c.pooling, bounds_check=c.bounds_check,
                  policy=c.policy(), implementation=IMPLEMENTATION,
                  per_sample_weights=c.psw, index_dtype=c.index_dtype,
                  warnings=result.get("warnings"), error=result.get("error"),
                  expectation=c.expectation,
                  provenance="tests/data/record_fbgemm_cpu.py --seed %d: %s%s" % (
                      ARGS.seed, c.description, note))
    folder = os.path.join(out_dir, c.name)
    if c.backward is None:
        cw.write_forward(folder, output=result.get("output"), **common)
    else:
        cw.write_backward(folder, optimizer=c.backward["optimizer"], grad_output=c.grad,
                          momentum=c.momentum, recorded_weights=result.get("weights"),
                          recorded_momentum=result.get("momentum"),
                          recorded_psw_grad=result.get("psw_grad"), **common)
    print("%-44s %-8s %s -> %s (expect %s)" % (
        c.name, "backward" if c.backward else "forward", c.dtype,
        "error " + result["error"] if "error" in result else "recorded",
        c.expectation["verdict"]))


def lengths_with_empty(rng, T, B, Lmax):
    """T·B bag lengths in [0, Lmax] with at least one empty bag."""
    lengths = rng.integers(0, Lmax + 1, size=T * B)
    lengths[rng.integers(0, T * B)] = 0
    return lengths


def cases(rng):
    out = []
    R2, D2 = [40, 25], [8, 12]          # two tables (FBGEMM needs D % 4 == 0)
    # ---- forward: the basic rules, expect pass under fbgemm-cuda
    for dtype, outdt in (("fp32", "fp32"), ("fp16", "fp32"), ("fp16", "fp16")):
        for pooling in ("sum", "mean"):
            out.append(Case("fwd-%s-%s-out-%s" % (pooling, dtype, outdt),
                            "%s pooling, %s weights, %s output, two tables, B=6"
                            % (pooling.upper(), dtype, outdt), R2, D2, [0, 1], 6,
                            lengths_with_empty(rng, 2, 6, 12), rng, dtype=dtype, out=outdt,
                            pooling=pooling))
    for pooling in ("sum", "mean"):
        out.append(Case("fwd-weighted-%s-fp32" % pooling, "per-sample weights, %s, FP32 output"
                        % pooling.upper(), R2, D2, [0, 1], 6, lengths_with_empty(rng, 2, 6, 12),
                        rng, pooling=pooling, weighted=True))
    out.append(Case("fwd-weighted-sum-fp16-out-fp16", "per-sample weights, SUM, FP16 output",
                    R2, D2, [0, 1], 6, lengths_with_empty(rng, 2, 6, 12), rng, dtype="fp16",
                    out="fp16", weighted=True))
    out.append(Case("fwd-int32-indices", "int32 indices and offsets", R2, D2, [0, 1], 6,
                    lengths_with_empty(rng, 2, 6, 12), rng, index_dtype="int32"))
    for pooling in ("sum", "mean"):
        out.append(Case("fwd-all-bags-empty-%s" % pooling, "every bag empty (N = 0), %s"
                        % pooling.upper(), R2, D2, [0, 1], 4, [0] * 8, rng, pooling=pooling))
    for dtype in ("fp32", "fp16"):
        out.append(Case("fwd-shared-table-%s" % dtype, "features 0 and 1 share table 0 (map "
                        "[0, 0, 1], contiguous)", R2, D2, [0, 0, 1], 5,
                        lengths_with_empty(rng, 3, 5, 10), rng, dtype=dtype))
    # WARNING repair: a bad index (repaired to row 0) and decreasing offsets (repaired bag)
    out.append(Case("fwd-warning-bad-index", "WARNING: indices 40 and 99 past E=40 of table 0 "
                    "(two warnings)", [40], [4], [0], 2, None, rng,
                    indices=[3, 40, 7, 99, 5], offsets=[0, 2, 5]))
    out.append(Case("fwd-warning-bad-offsets", "WARNING: offsets [0, 3, 2, 5] (bag 1 repaired, "
                    "one warning)", [10], [4], [0], 3, None, rng, indices=[1, 2, 3, 4, 5],
                    offsets=[0, 3, 2, 5]))
    out.append(Case("fwd-fatal-bad-index", "FATAL: index 12 past E=10 raises", [10], [4], [0], 2,
                    None, rng, indices=[1, 12, 3], offsets=[0, 1, 3], bounds_check="fatal"))
    # ---- forward: where FBGEMM differs
    out.append(Case("fwd-warning-minus-one", "WARNING: index -1 (ours: row 0, one warning)", [10],
                    [4], [0], 2, None, rng, indices=[1, -1, 3], offsets=[0, 2, 3],
                    expectation=cw.expect("fail", RULE_PRUNED)))
    out.append(Case("fwd-fatal-minus-one", "FATAL: index -1 raises (ours: a bad index)", [10],
                    [4], [0], 2, None, rng, indices=[1, -1, 3], offsets=[0, 2, 3],
                    bounds_check="fatal"))
    out.append(Case("fwd-weighted-mean-fp16-out-fp16", "per-sample weights, MEAN, FP16 output",
                    R2, D2, [0, 1], 6, [3, 1, 4, 0, 2, 5, 1, 2, 6, 3, 0, 4], rng, dtype="fp16",
                    out="fp16", pooling="mean", weighted=True,
                    expectation=cw.expect("fail", RULE_MEAN_PSW)))
    for dtype in ("fp32", "fp16"):
        out.append(Case("fwd-map-010-%s-out-fp16" % dtype, "map [0, 1, 0], FP16 output", R2, D2,
                        [0, 1, 0], 4, lengths_with_empty(rng, 3, 4, 6), rng, dtype=dtype,
                        out="fp16", expectation=cw.expect("fail", RULE_FEATURE_MAP)))
        out.append(Case("fwd-map-010-%s-out-fp32" % dtype, "map [0, 1, 0], FP32 output", R2, D2,
                        [0, 1, 0], 4, lengths_with_empty(rng, 3, 4, 6), rng, dtype=dtype))
    # FP32 accumulation: long bags of FP32 weights judged under seed-default and fbgemm-cuda
    for kind in ("seed-default", "fbgemm-cuda"):
        out.append(Case("fwd-accumulation-fp32-%s" % kind, "FP32 weights, bags of 300..600 "
                        "lookups, judged under %s" % kind, [1000], [16], [0], 4,
                        rng.integers(300, 601, size=4), rng, policy_kind=kind,
                        expectation=cw.expect("fail", RULE_ACCUMULATION)
                        if kind == "seed-default" else None))
    # ---- backward + optimizer, expect pass under fbgemm-cuda
    sgd = cw.optimizer("sgd", 0.05)
    ada = cw.optimizer("rowwise_adagrad", 0.05, eps=1e-4)
    sgd_fp16 = cw.expect("fail", RULE_SGD_FP16)
    for dtype in ("fp32", "fp16"):
        for oname, opt in (("sgd", sgd), ("adagrad", ada)):
            for pooling in ("sum", "mean"):
                out.append(Case("bwd-%s-%s-%s" % (oname, dtype, pooling),
                                "backward %s, %s weights, %s" % (opt["kind"], dtype, pooling),
                                R2, D2, [0, 1], 6, lengths_with_empty(rng, 2, 6, 10), rng,
                                dtype=dtype, pooling=pooling, backward={"optimizer": opt},
                                expectation=sgd_fp16 if (oname, dtype) == ("sgd", "fp16")
                                else None))
            out.append(Case("bwd-%s-%s-weighted" % (oname, dtype), "backward %s, %s weights, "
                            "SUM with per-sample weights (their gradient recorded)"
                            % (opt["kind"], dtype), R2, D2, [0, 1], 6,
                            lengths_with_empty(rng, 2, 6, 10), rng, dtype=dtype, weighted=True,
                            backward={"optimizer": opt},
                            expectation=sgd_fp16 if (oname, dtype) == ("sgd", "fp16") else None))
            out.append(Case("bwd-%s-%s-shared-table" % (oname, dtype), "backward %s, %s "
                            "weights, map [0, 0, 1] (contiguous), rows of table 0 hit by both "
                            "features" % (opt["kind"], dtype), [8, 25], D2, [0, 0, 1], 6,
                            lengths_with_empty(rng, 3, 6, 6), rng, dtype=dtype,
                            backward={"optimizer": opt},
                            expectation=sgd_fp16 if (oname, dtype) == ("sgd", "fp16") else None))
    for mode in ("l2", "decoupled"):
        opt = cw.optimizer("rowwise_adagrad", 0.05, eps=1e-4, weight_decay=0.01,
                           weight_decay_mode=mode)
        out.append(Case("bwd-adagrad-fp32-wd-%s" % mode, "backward rowwise Adagrad, weight "
                        "decay %s 0.01" % mode, R2, D2, [0, 1], 6,
                        lengths_with_empty(rng, 2, 6, 10), rng, backward={"optimizer": opt},
                        expectation=cw.expect("fail", RULE_WEIGHT_DECAY)))
    out.append(Case("bwd-adagrad-fp32-warning-bad-index", "backward rowwise Adagrad, WARNING: "
                    "index 50 past E=40 goes to row 0", [40], [4], [0], 2, None, rng,
                    indices=[3, 50, 7, 3, 5], offsets=[0, 2, 5], backward={"optimizer": ada}))
    # ---- backward: where FBGEMM differs (map [0, 1, 0])
    for dtype, rule in (("fp32", RULE_FEATURE_MAP), ("fp16", RULE_SHARED_UPDATE)):
        out.append(Case("bwd-adagrad-%s-map-010" % dtype, "backward rowwise Adagrad, %s weights, "
                        "map [0, 1, 0]: features 0 and 2 both look up rows 1 and 2 of table 0"
                        % dtype, [8, 5], [4, 8], [0, 1, 0], 2, None, rng,
                        indices=[1, 2, 0, 4, 3, 1, 2, 6], offsets=[0, 2, 3, 4, 5, 7, 8],
                        dtype=dtype, backward={"optimizer": ada},
                        expectation=cw.expect("fail", rule)))
    out.append(Case("bwd-sgd-fp32-map-010", "backward EXACT_SGD, map [0, 1, 0]", [8, 5], [4, 8],
                    [0, 1, 0], 2, None, rng, indices=[1, 2, 0, 4, 3, 1, 2, 6],
                    offsets=[0, 2, 3, 4, 5, 7, 8], backward={"optimizer": sgd}))
    return out


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "fbgemm-cpu"))
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--only", default="", help="record only the cases whose name contains this")
    ARGS = ap.parse_args()
    torch.set_num_threads(1)
    os.makedirs(ARGS.out, exist_ok=True)
    print("%s -> %s" % (IMPLEMENTATION, ARGS.out))
    n = 0
    for c in cases(np.random.default_rng(ARGS.seed)):
        if ARGS.only in c.name:
            record(c, ARGS.out)
            n += 1
    print("%d case folders written" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
