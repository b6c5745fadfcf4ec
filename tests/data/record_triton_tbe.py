#!/usr/bin/env python3
"""Record TorchRec's Triton TBE (forward, and backward fused with EXACT_SGD / rowwise Adagrad) as
tbe case folders.

Run on the GPU machine (torch with CUDA, triton, numpy; the three TorchRec files in PEERS_DIR,
see tests/data/triton_tbe_loader.py):

    python3 tests/data/record_triton_tbe.py PEERS_DIR --out tests/data/triton-tbe

Implementation under test: `TritonTableBatchedEmbeddingBags(specs, feature_table_map,
weights_precision, output_dtype, stochastic_rounding=False, learning_rate, eps, optimizer)`, SUM
pooling (its only mode), bounds check NONE (FBGEMM's bounds-check op is not available; every
input is valid), in training mode: `out = tbe(indices, offsets[, per_sample_weights])`, and for
the backward `out.backward(grad_output)`, after which the module's `weight` and `momentum` hold
the update and the per-sample weights' `.grad` their gradient. The transpose the backward needs
is the loader's torch stand-in of FBGEMM's `transpose_embedding_input` (a stable sort: the same
runs in the same position order).

Policy `fbgemm-cuda` (FP32 accumulation, RNE write-back) unless named: the forward cases of FP32
weights with long bags are also judged under `seed-default` (FP64 accumulation for FP32
weights), which the Triton TBE does not meet: it sums FP32 partial sums (groups of rows) into its
accumulator, so those expect `fail` with that rule. Every other case expects `pass`.
RECORD_TRACEBACK=1 raises instead of logging a call that raised.
"""
import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import case_writer as cw  # noqa: E402
import triton_tbe_loader  # noqa: E402

TORCH = {"fp32": torch.float32, "fp16": torch.float16}
RULE_SEED_POLICY = ("docs/semantics.md 'Precision policies': seed-default accumulates FP32 "
                    "weights in FP64; the Triton TBE adds FP32 partial sums of groups of rows "
                    "(it passes under fbgemm-cuda, case ...-fbgemm-cuda)")


class Case:
    def __init__(self, name, description, rng, *, rows, dims, ftm, B, lengths=None, Lmax=10,
                 dtype="fp32", out="fp32", weighted=False, policy_kind="fbgemm-cuda",
                 optimizer=None, hot_row=None, expectation=None):
        self.name, self.description = name, description
        self.rows, self.dims, self.ftm, self.B = rows, dims, ftm, B
        self.dtype, self.out, self.policy_kind = dtype, out, policy_kind
        self.optimizer = optimizer                     # None: forward case
        self.expectation = expectation or cw.expect()
        T = len(ftm)
        if lengths is None:
            lengths = rng.integers(0, Lmax + 1, size=T * B)
            lengths[rng.integers(0, T * B)] = 0        # one empty bag at least
        lengths = np.asarray(lengths)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.indices = np.concatenate(
            [rng.integers(0, rows[ftm[k // B]], size=L) for k, L in enumerate(lengths)]
            + [np.zeros(0, np.int64)]).astype(np.int64)
        if hot_row is not None:        # ~70% of feature 0's lookups read hot_row: one long run
            f0 = slice(int(self.offsets[0]), int(self.offsets[B]))
            self.indices[f0] = np.where(rng.random(f0.stop - f0.start) < 0.7, hot_row,
                                        self.indices[f0])
        N = len(self.indices)
        self.weights = torch.from_numpy(np.concatenate(
            [rng.uniform(-1, 1, size=E * D) for E, D in zip(rows, dims)])).to(TORCH[dtype])
        self.psw = rng.uniform(0.25, 2.0, size=N).astype(np.float32) if weighted else None
        if optimizer is not None:
            self.grad = rng.uniform(-1, 1, size=(B, sum(dims[t] for t in ftm))).astype(np.float32)
            self.momentum = (rng.uniform(0, 2, size=sum(rows)).astype(np.float32)
                             if optimizer["kind"] == "rowwise_adagrad" else None)

    def policy(self):
        acc = "fp64" if self.policy_kind == "seed-default" and self.dtype == "fp32" else "fp32"
        return cw.policy(self.policy_kind, self.dtype, self.out, acc)


def run(tt, c, dev):
    EOT = triton_tbe_loader.EmbOptimType
    opt = c.optimizer or cw.optimizer("sgd", 0.01)
    tbe = tt.TritonTableBatchedEmbeddingBags(
        [(E, D) for E, D in zip(c.rows, c.dims)], feature_table_map=c.ftm,
        weights_precision=TORCH[c.dtype], output_dtype=TORCH[c.out], stochastic_rounding=False,
        learning_rate=opt["learning_rate"], eps=opt["eps"],
        optimizer=EOT.EXACT_SGD if opt["kind"] == "sgd" else EOT.EXACT_ROWWISE_ADAGRAD,
        device=dev)
    tbe.bounds_check_mode = triton_tbe_loader.BoundsCheckMode.NONE
    with torch.no_grad():
        tbe.weight.copy_(c.weights.to(dev))
        if c.optimizer is not None and c.momentum is not None:
            tbe.momentum.copy_(torch.from_numpy(c.momentum).to(dev))
    psw = None
    if c.psw is not None:
        psw = torch.from_numpy(c.psw).to(dev).clone().requires_grad_(c.optimizer is not None)
    idx = torch.from_numpy(c.indices).to(dev)
    off = torch.from_numpy(c.offsets).to(dev)
    out = tbe(idx, off, psw)
    if c.optimizer is None:
        return {"output": out.detach().cpu()}
    out.backward(torch.from_numpy(c.grad).to(dev).to(out.dtype))
    rec = {"weights": tbe.weight.detach().cpu()}
    if c.momentum is not None:
        rec["momentum"] = tbe.momentum.detach().cpu()
    if psw is not None:
        rec["psw_grad"] = psw.grad.detach().float().cpu()
    return rec


def write(c, rec, impl, out_dir, seed):
    """Writes case `c` with the recorded tensors `rec` (run()'s result) under out_dir."""
    common = dict(name=c.name, seed=seed, dtype=c.dtype, rows=c.rows, dims=c.dims,
                  feature_table_map=c.ftm, weights=c.weights, indices=c.indices,
                  offsets=c.offsets, batch_size=c.B, pooling="sum", bounds_check="none",
                  policy=c.policy(), implementation=impl, per_sample_weights=c.psw,
                  expectation=c.expectation,
                  provenance="tests/data/record_triton_tbe.py --seed %d: %s" % (
                      seed, c.description))
    folder = os.path.join(out_dir, c.name)
    if c.optimizer is None:
        cw.write_forward(folder, output=rec["output"], **common)
    else:
        cw.write_backward(folder, optimizer=c.optimizer, grad_output=c.grad,
                          momentum=c.momentum, recorded_weights=rec["weights"],
                          recorded_momentum=rec.get("momentum"),
                          recorded_psw_grad=rec.get("psw_grad"), **common)
    print("%-36s %-8s -> recorded (expect %s)" % (
        c.name, "backward" if c.optimizer else "forward", c.expectation["verdict"]))


def cases(rng):
    out = []
    R, D = [50, 30, 64], [16, 12, 32]
    for dtype in ("fp32", "fp16"):
        for weighted in (False, True):
            out.append(Case("fwd-%s-%s" % (dtype, "weighted" if weighted else "unweighted"),
                            "forward, %s weights, FP32 output, three tables" % dtype, rng,
                            rows=R, dims=D, ftm=[0, 1, 2], B=8, dtype=dtype, weighted=weighted))
        out.append(Case("fwd-%s-map-010" % dtype, "forward, map [0, 1, 0]", rng, rows=R[:2],
                        dims=D[:2], ftm=[0, 1, 0], B=6, dtype=dtype))
    out.append(Case("fwd-fp16-out-fp16", "forward, FP16 weights and output", rng, rows=R, dims=D,
                    ftm=[0, 1, 2], B=8, dtype="fp16", out="fp16"))
    for dtype, kinds in (("fp32", ("seed-default", "fbgemm-cuda")), ("fp16", ("fbgemm-cuda",))):
        for kind in kinds:
            out.append(Case("fwd-%s-long-bags-%s" % (dtype, kind), "forward, %s weights, bags "
                            "of 300..600 lookups, judged under %s" % (dtype, kind), rng,
                            rows=[1000], dims=[64], ftm=[0], B=4,
                            lengths=rng.integers(300, 601, size=4), dtype=dtype,
                            policy_kind=kind, expectation=cw.expect("fail", RULE_SEED_POLICY)
                            if kind == "seed-default" else None))
    sgd = cw.optimizer("sgd", 0.05)
    ada = cw.optimizer("rowwise_adagrad", 0.05, eps=1e-4)
    for dtype in ("fp32", "fp16"):
        for oname, opt in (("sgd", sgd), ("adagrad", ada)):
            out.append(Case("bwd-%s-%s" % (oname, dtype), "backward %s, %s weights"
                            % (opt["kind"], dtype), rng, rows=R, dims=D, ftm=[0, 1, 2], B=8,
                            dtype=dtype, optimizer=opt))
            out.append(Case("bwd-%s-%s-weighted" % (oname, dtype), "backward %s, %s weights, "
                            "per-sample weights (their gradient recorded)" % (opt["kind"], dtype),
                            rng, rows=R, dims=D, ftm=[0, 1, 2], B=8, dtype=dtype, weighted=True,
                            optimizer=opt))
        out.append(Case("bwd-adagrad-%s-map-010" % dtype, "backward rowwise Adagrad, map "
                        "[0, 1, 0]: rows of table 0 looked up by features 0 and 2", rng,
                        rows=[6, 30], dims=D[:2], ftm=[0, 1, 0], B=6, dtype=dtype,
                        optimizer=ada))
        out.append(Case("bwd-adagrad-%s-long-run" % dtype, "backward rowwise Adagrad, row 3 of "
                        "table 0 looked up ~0.7·N0 times (one run past the long-run threshold)",
                        rng, rows=[200, 30], dims=[32, 16], ftm=[0, 1], B=4,
                        lengths=[150, 200, 180, 170, 3, 0, 5, 2], dtype=dtype, optimizer=ada,
                        hot_row=3))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("peers", help="folder holding the three TorchRec triton_tbe copies")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "triton-tbe"))
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--only", default="", help="record only the cases whose name contains this")
    args = ap.parse_args()
    dev = torch.device("cuda")
    if not torch.cuda.is_available():
        print("record_triton_tbe.py: no CUDA device visible to torch", file=sys.stderr)
        return 3
    tt = triton_tbe_loader.load(args.peers)
    where = torch.cuda.get_device_name(dev)
    impl = "torchrec TritonTableBatchedEmbeddingBags (copies in %s), torch %s, triton %s, %s" % (
        os.path.basename(os.path.abspath(args.peers)), torch.__version__,
        __import__("triton").__version__, where)
    print(impl, "->", args.out)
    os.makedirs(args.out, exist_ok=True)
    failures = 0
    for c in cases(np.random.default_rng(args.seed)):
        if args.only not in c.name:
            continue
        try:
            rec = run(tt, c, dev)
            torch.cuda.synchronize()
        except Exception as ex:  # noqa: BLE001 - a valid call that raises is a finding: report
            if os.environ.get("RECORD_TRACEBACK"):
                raise
            failures += 1
            print("%-36s raised %s: %s (not written)" % (c.name, type(ex).__name__,
                                                        (str(ex).splitlines() or [""])[0][:200]))
            continue
        write(c, rec, impl, args.out, args.seed)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
