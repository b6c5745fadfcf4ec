"""Writes tbe case folders (docs/case-files.md) with NumPy and json only.

The recorders under tests/data/ run outside implementations (FBGEMM's CPU TBE, PyTorch, the
TorchRec Triton TBE) on machines where the project's Python module is not built, so they write
the folders with this module: `case.json` plus the fixed `.npy` tensor names of each operator,
exactly as io/src/*case_file.cpp reads them. Tensors may be NumPy arrays or torch tensors (any
device: they are copied to the host); bf16 is stored as its raw bits ('<u2'), fp16 as '<f2',
fp32 as '<f4'. Nothing here checks the case against the semantics: the readers (`tbe-verify
check`, `tbe_verify.read_case`) validate every folder, and the recorders are tested by reading
what they wrote.

Folders are written from scratch (an existing folder is removed first), so no stale tensor of an
earlier recording survives.
"""
import json
import os
import shutil

import numpy as np

FORMAT = "tbe-case"
VERSION = 1

_NUMPY_DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": np.uint16,
                 "int32": np.int32, "int64": np.int64}


def to_storage(x, dtype):
    """A contiguous host NumPy array of `x` in the case-file encoding of `dtype` ('fp32', 'fp16',
    'bf16', 'int32', 'int64'). A torch tensor must already have that dtype (bf16: torch.bfloat16,
    stored as its raw bits); a NumPy array must have the encoding's dtype (bf16: uint16 bits).
    Raises TypeError on a dtype mismatch (nothing is converted silently)."""
    want = _NUMPY_DTYPES[dtype]
    if hasattr(x, "detach"):  # torch tensor
        import torch
        t = x.detach().cpu().contiguous()
        torch_want = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16,
                      "int32": torch.int32, "int64": torch.int64}[dtype]
        if t.dtype != torch_want:
            raise TypeError("tensor of %s where %s is required" % (t.dtype, dtype))
        if dtype == "bf16":
            return t.view(torch.int16).numpy().view(np.uint16)
        return t.numpy()
    a = np.ascontiguousarray(x)
    if a.dtype != want:
        raise TypeError("array of %s where %s (%s) is required" % (a.dtype, dtype,
                                                                   np.dtype(want).str))
    return a


def policy(kind, weights, output, accumulation, write_back="rne"):
    """The `options.policy` object of a TBE case (docs/semantics.md "Precision policies")."""
    return {"kind": kind, "weights": weights, "output": output, "accumulation": accumulation,
            "optimizer_state": "fp32", "write_back": write_back}


def expect(verdict="pass", rule=""):
    """The `expect` block: `fail` needs the rule (docs/semantics.md, backward.md, ikbo.md) on
    which the implementation legitimately differs."""
    if verdict not in ("pass", "fail"):
        raise ValueError("expect verdict %r is not pass or fail" % verdict)
    if verdict == "fail" and not rule:
        raise ValueError("expect verdict fail needs the rule it breaks")
    return {"verdict": verdict, "rule": rule}


def _header(name, provenance, seed, operator):
    return {"format": FORMAT, "version": VERSION, "name": name, "provenance": provenance,
            "seed": int(seed), "operator": operator}


def _fresh(folder):
    if os.path.isdir(folder):
        shutil.rmtree(folder)
    os.makedirs(folder)


def _save(folder, file_name, x, dtype):
    np.save(os.path.join(folder, file_name), to_storage(x, dtype))


def _write_json(folder, meta):
    with open(os.path.join(folder, "case.json"), "w") as fh:
        json.dump(meta, fh, indent=1, sort_keys=True)
        fh.write("\n")


def _tbe_keys(dtype, rows, dims, feature_table_map, index_dtype, batch_size, weighted, pooling,
              bounds_check, pol):
    rows, dims = [int(r) for r in rows], [int(d) for d in dims]
    table_offsets, acc = [], 0
    for E, D in zip(rows, dims):
        table_offsets.append(acc)
        acc += E * D
    tables = {"dtype": dtype, "rows": rows, "dims": dims, "table_offsets": table_offsets,
              "feature_table_map": [int(t) for t in feature_table_map]}
    lookups = {"index_dtype": index_dtype, "batch_size": int(batch_size), "vbe_ranks": 0,
               "vbe_batch_sizes": [], "weighted": bool(weighted)}
    options = {"pooling": pooling, "bounds_check": bounds_check, "policy": pol}
    return tables, lookups, options


def _save_tbe_inputs(folder, dtype, weights, index_dtype, indices, offsets, per_sample_weights):
    _save(folder, "weights.npy", weights, dtype)          # flat [Σ E_t·D_t], tables packed
    _save(folder, "indices.npy", indices, index_dtype)
    _save(folder, "offsets.npy", offsets, index_dtype)
    if per_sample_weights is not None:
        _save(folder, "per_sample_weights.npy", per_sample_weights, "fp32")


def write_forward(folder, *, name, provenance, seed, dtype, rows, dims, feature_table_map,
                  weights, indices, offsets, batch_size, pooling, bounds_check, policy,
                  implementation, output=None, warnings=None, error=None,
                  per_sample_weights=None, index_dtype="int64", expectation=None):
    """A non-VBE forward case (`operator: "forward"`). `weights`: the tables packed at the
    exclusive prefix of E_t·D_t (flat, `dtype`); `indices`/`offsets`: [N] / [T·B + 1] of
    `index_dtype`; `per_sample_weights`: [N] float32 or None; `output`: what the implementation
    returned ([B, Σ D_f] of policy['output']) or None with `error` one of 'bounds_check',
    'invalid_argument', 'device_error'; `warnings`: its bounds-check warning count or None."""
    if (output is None) == (error is None):
        raise ValueError("%s: exactly one of output and error" % name)
    _fresh(folder)
    tables, lookups, options = _tbe_keys(dtype, rows, dims, feature_table_map, index_dtype,
                                         batch_size, per_sample_weights is not None, pooling,
                                         bounds_check, policy)
    _save_tbe_inputs(folder, dtype, weights, index_dtype, indices, offsets, per_sample_weights)
    if output is not None:
        _save(folder, "output.npy", output, policy["output"])
    meta = _header(name, provenance, seed, "forward")
    meta.update(tables=tables, lookups=lookups, options=options,
                recorded={"implementation": implementation, "output_dtype": policy["output"],
                          "output": "output.npy" if output is not None else None,
                          "warnings": None if warnings is None else int(warnings),
                          "error": error},
                expect=expectation or expect())
    _write_json(folder, meta)


def optimizer(kind, learning_rate, eps=1e-8, weight_decay=0.0, weight_decay_mode="none",
              max_norm=0.0, max_gradient=0.0):
    """The `options.optimizer` object of a backward case (docs/case-files.md "Backward")."""
    return {"kind": kind, "learning_rate": float(learning_rate), "eps": float(eps),
            "weight_decay": float(weight_decay), "weight_decay_mode": weight_decay_mode,
            "max_norm": float(max_norm), "max_gradient": float(max_gradient)}


def write_backward(folder, *, name, provenance, seed, dtype, rows, dims, feature_table_map,
                   weights, indices, offsets, batch_size, pooling, bounds_check, policy,
                   optimizer, grad_output, implementation, momentum=None,
                   recorded_weights=None, recorded_momentum=None, recorded_psw_grad=None,
                   warnings=None, error=None, per_sample_weights=None, index_dtype="int64",
                   sr_seed=0, sr_offset=0, expectation=None):
    """A backward case (`operator: "backward"`): the forward inputs (weights **before** the
    update), `grad_output` (the forward output's layout, policy['output']), `momentum` [Σ E_t]
    float32 (rowwise Adagrad only) and what the implementation left: `recorded_weights` (the whole
    flat buffer after the update, `dtype`), `recorded_momentum` [Σ E_t] float32,
    `recorded_psw_grad` [N] float32 -- each may be None -- or `error`."""
    has_output = any(x is not None for x in (recorded_weights, recorded_momentum,
                                             recorded_psw_grad))
    if has_output == (error is not None):
        raise ValueError("%s: recorded outputs or an error, not both or neither" % name)
    _fresh(folder)
    tables, lookups, options = _tbe_keys(dtype, rows, dims, feature_table_map, index_dtype,
                                         batch_size, per_sample_weights is not None, pooling,
                                         bounds_check, policy)
    options.update(optimizer=optimizer, sr_seed=int(sr_seed), sr_offset=int(sr_offset))
    _save_tbe_inputs(folder, dtype, weights, index_dtype, indices, offsets, per_sample_weights)
    _save(folder, "grad_output.npy", grad_output, policy["output"])
    if momentum is not None:
        _save(folder, "momentum.npy", momentum, "fp32")
    files = {}
    for key, file_name, x, dt in (("weights", "recorded_weights.npy", recorded_weights, dtype),
                                  ("momentum", "recorded_momentum.npy", recorded_momentum, "fp32"),
                                  ("per_sample_weight_grad", "recorded_psw_grad.npy",
                                   recorded_psw_grad, "fp32")):
        files[key] = None
        if x is not None:
            _save(folder, file_name, x, dt)
            files[key] = file_name
    meta = _header(name, provenance, seed, "backward")
    recorded = {"implementation": implementation, "warnings": None if warnings is None
                else int(warnings), "error": error}
    recorded.update(files)
    meta.update(tables=tables, lookups=lookups, options=options, recorded=recorded,
                expect=expectation or expect())
    _write_json(folder, meta)


def write_attention(folder, *, name, provenance, seed, storage, accumulation, map_kind, B, U,
                    n_seed, H, Dh, S, scale, q, k, v, cand_to_user, implementation,
                    k_offsets=None, output=None, error=None, expectation=None):
    """An IKBO attention case (`operator: "ikbo-attention"`, docs/ikbo.md "Attention"): `q`
    [B·n_seed, H, Dh], `k`/`v` [keys, H, Dh] of `storage` (user u's keys are rows
    [u·S, (u+1)·S) when `k_offsets` is None, else [k_offsets[u], k_offsets[u+1])),
    `cand_to_user` [B] int32, `output` [B·n_seed, H, Dh] of `storage` or None with `error`
    ('invalid_argument' or 'device_error'); `scale` 0 means 1/sqrt(Dh)."""
    if (output is None) == (error is None):
        raise ValueError("%s: exactly one of output and error" % name)
    _fresh(folder)
    for file_name, x in (("q.npy", q), ("k.npy", k), ("v.npy", v)):
        _save(folder, file_name, x, storage)
    _save(folder, "cand_to_user.npy", cand_to_user, "int32")
    if k_offsets is not None:
        _save(folder, "k_offsets.npy", k_offsets, "int64")
    if output is not None:
        _save(folder, "output.npy", output, storage)
    meta = _header(name, provenance, seed, "ikbo-attention")
    meta.update(shape={"B": int(B), "U": int(U), "n_seed": int(n_seed), "H": int(H),
                       "Dh": int(Dh), "S": int(S), "jagged": k_offsets is not None,
                       "scale": float(scale)},
                map=map_kind,
                policy={"storage": storage, "accumulation": accumulation,
                        "lce_rounding": "round-once"},
                recorded={"implementation": implementation,
                          "output": "output.npy" if output is not None else None,
                          "error": error},
                expect=expectation or expect())
    _write_json(folder, meta)
