#!/usr/bin/env python3
"""Record PyTorch on the GPU as tbe case folders: embedding-bag backward + optimizer, and SDPA.

Run on the GPU machine (needs torch with CUDA and numpy; nothing of this project but
tests/data/case_writer.py beside this file):

    python3 tests/data/record_torch_gpu.py --out DIR            # DIR/torch-autograd, DIR/torch-sdpa
    python3 tests/data/record_torch_gpu.py --out DIR --device cpu   # a dry run (no cuDNN cases)

Backward (`DIR/torch-autograd/`, operator "backward"): a kernel engineer's torch-only training
step. Per feature f, `F.embedding_bag(indices_f, W_t, offsets_f, mode, per_sample_weights_f,
include_last_offset=True, sparse=...)` on the feature's table W_t (features may share a table),
the outputs concatenated to [B, Σ_f D_f] (the TBE layout), `out.backward(grad_output)`; then the
optimizer composed of torch ops on the autograd gradient (`W_t.grad`, dense, or a sparse COO
tensor coalesced), in FP32:
  EXACT_SGD:              W ← (W.float() − lr·g.float()).to(W.dtype)
  EXACT_ROWWISE_ADAGRAD:  m ← m + mean_d(g.float()²);
                          W ← (W.float() − lr/(√m + eps)·g.float()).to(W.dtype)
(dense: on the whole table, where rows without lookups have g = 0 and stay bitwise unchanged;
sparse: on the coalesced rows only). Recorded: the weights after the step, the momentum, the
per-sample weights' `.grad`. Policy `fbgemm-cuda` with output = the weight dtype (torch returns
the weight dtype, so grad_output has it too).

Attention (`DIR/torch-sdpa/`, operator "ikbo-attention"): `F.scaled_dot_product_attention` under
`torch.nn.attention.sdpa_kernel(backend)` for the MATH and CUDNN_ATTENTION backends on
**pre-broadcast** K/V: candidate b's keys are its user's keys gathered by `cand_to_user` (the
unfused baseline IKBO replaces). Dense: one call on [B, H, S, Dh]. Jagged: candidates are grouped
by their user's key count n and each group is one call on [B_n, H, n, Dh] (no mask). BF16 and FP16
storage, FP32 accumulation, maps sorted / unsorted / one-user / u-eq-b / users-without-candidates.
A backend that refuses a shape is logged and the case is not written.

Expectations (each case's `expect`, see the README.md written next to the folders):
  - FP32 weights: pass (torch's CUDA embedding-bag backward accumulates in FP32).
  - FP16 weights: fail, rule docs/backward.md "The computation": G_r is the FP32-accumulated sum
    used unrounded; torch's autograd hands the gradient back in the weight dtype, i.e. rounded to
    FP16 before the optimizer sees it (on the CPU the dense step equals w - lr·RN16(G_r) bit for
    bit).
  - SDPA: pass (both backends are in the oracle's kernel model, docs/ikbo.md "Attention"), except
    an empty key range, which must give zeros: the case's expectation is decided by that rule
    from the output (all zeros: pass; anything else, e.g. NaN: fail).
"""
import argparse
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import case_writer as cw  # noqa: E402

TORCH = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

RULE_GRAD_DTYPE = ("docs/backward.md 'The computation' 3: G_r is accumulated (FP32 under "
                   "fbgemm-cuda) and used unrounded by the optimizer; torch's autograd returns "
                   "the gradient of FP16 weights as an FP16 tensor (dense: RN16(G_r); sparse: "
                   "FP16 rows summed by coalesce), so the update starts from a rounded G_r")
RULE_EMPTY_RANGE = ("docs/ikbo.md 'Attention': an empty key range gives zeros (never 0/0 = NaN)")


def device_name(dev):
    return torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"


# ------------------------------------------------------------------------------------------------
# backward: F.embedding_bag autograd + torch-op optimizers
# ------------------------------------------------------------------------------------------------

class BackwardCase:
    def __init__(self, name, rng, *, rows, dims, ftm, B, dtype="fp32", pooling="sum",
                 weighted=False, sparse=False, opt="sgd", Lmax=8, expectation=None):
        self.name, self.rows, self.dims, self.ftm, self.B = name, rows, dims, ftm, B
        self.dtype, self.pooling, self.weighted, self.sparse = dtype, pooling, weighted, sparse
        self.expectation = expectation
        T = len(ftm)
        lengths = rng.integers(0, Lmax + 1, size=T * B)
        lengths[rng.integers(0, T * B)] = 0                    # one empty bag at least
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.indices = np.concatenate(
            [rng.integers(0, rows[ftm[k // B]], size=L) for k, L in enumerate(lengths)]
            + [np.zeros(0, np.int64)]).astype(np.int64)
        N = len(self.indices)
        # weights uniform [-1, 1) rounded once to the storage type; per-sample weights exact in it
        self.weights = torch.from_numpy(np.concatenate(
            [rng.uniform(-1, 1, size=E * D) for E, D in zip(rows, dims)])).to(TORCH[dtype])
        self.psw = (np.floor(rng.uniform(0.5, 1.5, size=N) * 64) / 64).astype(np.float32) \
            if weighted else None
        self.grad = torch.from_numpy(rng.uniform(-1, 1, size=(B, sum(dims[t] for t in ftm)))) \
            .to(TORCH[dtype])
        if opt == "sgd":
            self.optimizer = cw.optimizer("sgd", 0.05)
            self.momentum = None
        else:
            self.optimizer = cw.optimizer("rowwise_adagrad", 0.05, eps=1e-4)
            self.momentum = rng.uniform(0, 2, size=sum(rows)).astype(np.float32)
        if self.expectation is None:
            self.expectation = (cw.expect() if dtype == "fp32"
                                else cw.expect("fail", RULE_GRAD_DTYPE))


def run_backward(c, dev):
    """One training step as described in the module docstring; returns the recorded tensors."""
    tables, offset = [], 0
    for E, D in zip(c.rows, c.dims):
        tables.append(c.weights[offset:offset + E * D].view(E, D).to(dev).clone()
                      .requires_grad_(True))
        offset += E * D
    psw = (torch.from_numpy(c.psw).to(dev).to(TORCH[c.dtype]).requires_grad_(True)
           if c.psw is not None else None)
    idx = torch.from_numpy(c.indices).to(dev)
    off = torch.from_numpy(c.offsets).to(dev)
    outs = []
    for f, t in enumerate(c.ftm):
        lo, hi = f * c.B, (f + 1) * c.B                        # bags of feature f
        s, e = int(c.offsets[lo]), int(c.offsets[hi])
        outs.append(F.embedding_bag(idx[s:e], tables[t], off[lo:hi + 1] - s, mode=c.pooling,
                                    per_sample_weights=None if psw is None else psw[s:e],
                                    include_last_offset=True, sparse=c.sparse))
    out = torch.cat(outs, dim=1)                               # [B, Σ_f D_f]
    out.backward(c.grad.to(dev))
    lr, eps = c.optimizer["learning_rate"], c.optimizer["eps"]
    momenta, offset = [], 0
    with torch.no_grad():
        for t, W in enumerate(tables):
            E = c.rows[t]
            m = (torch.from_numpy(c.momentum[offset:offset + E]).to(dev).clone()
                 if c.momentum is not None else None)
            g = W.grad
            if c.sparse:
                g = g.coalesce()
                rows, vals = g.indices()[0], g.values().float()
                if m is not None:
                    m[rows] += vals.pow(2).mean(dim=1)
                    step = (lr / (m[rows].sqrt() + eps))[:, None] * vals
                else:
                    step = lr * vals
                W[rows] = (W[rows].float() - step).to(W.dtype)
            else:
                g = g.float()
                if m is not None:
                    m += g.pow(2).mean(dim=1)
                    step = (lr / (m.sqrt() + eps))[:, None] * g
                else:
                    step = lr * g
                W.copy_((W.float() - step).to(W.dtype))
            if m is not None:
                momenta.append(m)
            offset += E
    rec = {"weights": torch.cat([W.detach().reshape(-1) for W in tables]).cpu()}
    if momenta:
        rec["momentum"] = torch.cat(momenta).cpu()
    if psw is not None:
        rec["psw_grad"] = psw.grad.detach().float().cpu()
    return rec


def backward_cases(rng):
    out = []
    R, D = [30, 20], [8, 5]
    for dtype in ("fp32", "fp16"):
        for sparse in (False, True):
            for opt in ("sgd", "adagrad"):
                out.append(BackwardCase("bwd-%s-%s-%s" % (opt, dtype, "sparse" if sparse
                                                           else "dense"), rng, rows=R, dims=D,
                                        ftm=[0, 1], B=8, dtype=dtype, sparse=sparse, opt=opt))
        out.append(BackwardCase("bwd-adagrad-%s-mean" % dtype, rng, rows=R, dims=D, ftm=[0, 1],
                                B=8, dtype=dtype, pooling="mean", opt="adagrad"))
        out.append(BackwardCase("bwd-sgd-%s-weighted" % dtype, rng, rows=R, dims=D, ftm=[0, 1],
                                B=8, dtype=dtype, weighted=True))
        out.append(BackwardCase("bwd-adagrad-%s-shared-table" % dtype, rng, rows=[6, 20],
                                dims=D, ftm=[0, 1, 0], B=6, dtype=dtype, opt="adagrad"))
    return out


def record_backward(c, dev, out_dir):
    rec = run_backward(c, dev)
    impl = "torch %s F.embedding_bag autograd (%s gradient) + %s of torch ops (%s)" % (
        torch.__version__, "sparse" if c.sparse else "dense", c.optimizer["kind"],
        device_name(dev))
    cw.write_backward(
        os.path.join(out_dir, c.name), name=c.name,
        provenance="tests/data/record_torch_gpu.py --seed %d on %s" % (ARGS.seed,
                                                                        device_name(dev)),
        seed=ARGS.seed, dtype=c.dtype, rows=c.rows, dims=c.dims, feature_table_map=c.ftm,
        weights=c.weights, indices=c.indices, offsets=c.offsets, batch_size=c.B,
        pooling=c.pooling, bounds_check="none",
        policy=cw.policy("fbgemm-cuda", c.dtype, c.dtype, "fp32"), optimizer=c.optimizer,
        grad_output=c.grad, momentum=c.momentum, implementation=impl,
        recorded_weights=rec["weights"], recorded_momentum=rec.get("momentum"),
        recorded_psw_grad=rec.get("psw_grad"), per_sample_weights=c.psw,
        expectation=c.expectation)
    print("%-40s backward  -> recorded (expect %s)" % (c.name, c.expectation["verdict"]))


# ------------------------------------------------------------------------------------------------
# attention: SDPA on pre-broadcast K/V
# ------------------------------------------------------------------------------------------------

def make_map(kind, B, U, rng):
    if kind == "sorted":
        m = np.sort(rng.integers(0, U, size=B))
    elif kind == "unsorted":
        m = rng.integers(0, U, size=B)
    elif kind == "one-user":
        m = np.zeros(B, np.int64)
    elif kind == "u-eq-b":
        m = rng.permutation(B)
    elif kind == "users-without-candidates":   # only the even users have candidates
        m = 2 * rng.integers(0, (U + 1) // 2, size=B)
    return m.astype(np.int32)


def sdpa_pre_broadcast(q, k, v, k_offsets, c2u, n_seed, scale, backend):
    """out [B·n_seed, H, Dh]: SDPA per group of candidates whose user has n keys, K/V gathered."""
    from torch.nn.attention import sdpa_kernel
    B = len(c2u)
    H, Dh = q.shape[1], q.shape[2]
    qb = q.view(B, n_seed, H, Dh)
    out = torch.zeros_like(qb)
    lengths = (k_offsets[1:] - k_offsets[:-1])[c2u]            # [B] keys of each candidate
    for n in sorted(set(lengths.tolist())):
        cands = np.flatnonzero(lengths == n)
        # [B_n, n] key rows of each candidate's user (the broadcast IKBO avoids)
        key_rows = torch.from_numpy(k_offsets[c2u[cands]][:, None] + np.arange(n)[None, :]) \
            .to(q.device)
        kb, vb = k[key_rows], v[key_rows]                      # [B_n, n, H, Dh]
        sel = torch.from_numpy(cands).to(q.device)
        with sdpa_kernel(backend):
            o = F.scaled_dot_product_attention(qb[sel].transpose(1, 2), kb.transpose(1, 2),
                                               vb.transpose(1, 2), scale=scale)
        out[sel] = o.transpose(1, 2)
    return out.reshape(B * n_seed, H, Dh)


def attention_cases(rng):
    """(name, storage, map kind, B, U, n_seed, H, Dh, S, jagged lengths or None, scale)."""
    out = []
    for storage in ("bf16", "fp16"):
        out.append(("dense-sorted-%s" % storage, storage, "sorted", 6, 3, 2, 2, 64, 16, None, 0.0))
        out.append(("dense-unsorted-%s" % storage, storage, "unsorted", 8, 4, 1, 4, 32, 40, None,
                    0.0))
        out.append(("dense-one-user-%s" % storage, storage, "one-user", 5, 1, 3, 2, 64, 128, None,
                    0.125))
        out.append(("jagged-u-eq-b-%s" % storage, storage, "u-eq-b", 6, 6, 2, 2, 64, 20,
                    [1, 7, 20, 33, 64, 100], 0.0))
        out.append(("jagged-users-without-candidates-%s" % storage, storage,
                    "users-without-candidates", 6, 5, 2, 2, 32, 12, [3, 9, 12, 0, 30], 0.0))
        out.append(("jagged-empty-range-%s" % storage, storage, "unsorted", 4, 2, 2, 2, 64, 8,
                    [0, 8], 0.0))
    return out


def record_attention(spec, backend_name, dev, out_dir, rng):
    from torch.nn.attention import SDPBackend
    name, storage, map_kind, B, U, n_seed, H, Dh, S, lengths, scale = spec
    dt = TORCH[storage]
    c2u = make_map(map_kind, B, U, rng)
    if lengths is None:
        k_offsets = np.arange(U + 1, dtype=np.int64) * S
    else:
        k_offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        if map_kind == "unsorted" and 0 in lengths:            # make sure the empty user is used
            c2u[0] = lengths.index(0)
    keys = int(k_offsets[-1])
    q = torch.from_numpy(rng.uniform(-1, 1, size=(B * n_seed, H, Dh))).to(dt).to(dev)
    k = torch.from_numpy(rng.uniform(-1, 1, size=(keys, H, Dh))).to(dt).to(dev)
    v = torch.from_numpy(rng.uniform(-1, 1, size=(keys, H, Dh))).to(dt).to(dev)
    backend = {"math": SDPBackend.MATH, "cudnn": SDPBackend.CUDNN_ATTENTION}[backend_name]
    case_name = "%s-%s" % (name, backend_name)
    try:
        o = sdpa_pre_broadcast(q, k, v, k_offsets, c2u, n_seed, scale or None, backend)
        if dev.type == "cuda":
            torch.cuda.synchronize()
    except RuntimeError as ex:
        print("%-40s attention -> not written: %s refused it (%s)" % (
            case_name, backend_name, (str(ex).splitlines() or [""])[0][:160]))
        return
    expectation = cw.expect()
    if lengths is not None and 0 in lengths:
        empty = torch.from_numpy(np.repeat((k_offsets[1:] - k_offsets[:-1])[c2u] == 0, n_seed))
        ok = bool((o.cpu()[empty] == 0).all())
        expectation = cw.expect() if ok else cw.expect("fail", RULE_EMPTY_RANGE)
    cw.write_attention(
        os.path.join(out_dir, case_name), name=case_name,
        provenance="tests/data/record_torch_gpu.py --seed %d on %s: SDPA %s backend on "
                   "pre-broadcast K/V" % (ARGS.seed, device_name(dev), backend_name),
        seed=ARGS.seed, storage=storage, accumulation="fp32", map_kind=map_kind, B=B, U=U,
        n_seed=n_seed, H=H, Dh=Dh, S=S, scale=scale, q=q, k=k, v=v, cand_to_user=c2u,
        k_offsets=k_offsets if lengths is not None else None, output=o,
        implementation="torch %s F.scaled_dot_product_attention, sdpa_kernel(%s) (%s)" % (
            torch.__version__, backend.name, device_name(dev)),
        expectation=expectation)
    print("%-40s attention -> recorded (expect %s)" % (case_name, expectation["verdict"]))


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="writes OUT/torch-autograd and OUT/torch-sdpa")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--seed", type=int, default=2026)
    ARGS = ap.parse_args()
    dev = torch.device(ARGS.device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        print("record_torch_gpu.py: no CUDA device visible to torch", file=sys.stderr)
        return 3
    print("torch %s on %s -> %s" % (torch.__version__, device_name(dev), ARGS.out))
    rng = np.random.default_rng(ARGS.seed)
    bwd_dir = os.path.join(ARGS.out, "torch-autograd")
    os.makedirs(bwd_dir, exist_ok=True)
    for c in backward_cases(rng):
        record_backward(c, dev, bwd_dir)
    att_dir = os.path.join(ARGS.out, "torch-sdpa")
    os.makedirs(att_dir, exist_ok=True)
    backends = ["math", "cudnn"] if dev.type == "cuda" else ["math"]
    for i, spec in enumerate(attention_cases(rng)):
        for backend in backends:  # the same inputs for every backend
            record_attention(spec, backend, dev, att_dir, np.random.default_rng([ARGS.seed, i]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
