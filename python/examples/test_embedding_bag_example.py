"""Judging an embedding-bag kernel with tbe_verify's enclosures instead of a fixed atol/rtol.

FBGEMM's TBE forward tests compare against a reference with one tolerance per dtype
(torch.testing.assert_close with atol = rtol = 1e-5 for FP32, 8e-3 for FP16). A fixed tolerance
cannot tell a kernel's legitimate rounding from a fault:

1. it PASSES a wrong kernel: FP16 weights accumulated in FP16 (every partial sum rounded to
   FP16) over a bag of 256 lookups stays within 8e-3 relative, yet FBGEMM's kernels accumulate
   in FP32 and the enclosure (which admits any FP32 summation order plus the one rounding to the
   FP16 output) rejects it;
2. it FALSE-ALARMS on a correct kernel: an FP32 kernel that accumulates a bag of 8192 lookups of
   mixed sign in FP32 (as FBGEMM's CUDA kernels and torch's CPU embedding_bag do) misses 1e-5 on
   elements whose sum nearly cancels, even against the exact answer; the enclosure of the
   'fbgemm-cuda' policy (FP32 accumulation in any order) accepts it.

Both demonstrations run twice: with NumPy emulations of the kernels (always; CI has no torch),
and with torch.nn.functional.embedding_bag on the CPU (skipped when torch is not installed).
Run: `python3 -m pytest python/examples` with the built module on PYTHONPATH (ctest does this).
"""
import numpy as np
import pytest

tv = pytest.importorskip("tbe_verify")

FBGEMM_FP16_TOLERANCE = dict(atol=8e-3, rtol=8e-3)
FBGEMM_FP32_TOLERANCE = dict(atol=1e-5, rtol=1e-5)


def within_tolerance(actual, expected, atol, rtol):
    """torch.testing.assert_close's rule, |actual - expected| <= atol + rtol * |expected|."""
    actual = np.asarray(actual, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    return bool(np.all(np.abs(actual - expected) <= atol + rtol * np.abs(expected)))


def single_table_bags(W, L, B, seed):
    """B bags of L lookups each, every bag a random permutation of W's rows (so L = E)."""
    rng = np.random.default_rng(seed)
    indices = np.concatenate([rng.permutation(W.shape[0]) for _ in range(B)]).astype(np.int64)
    offsets = (np.arange(B + 1) * L).astype(np.int64)  # include_last_offset form: [B + 1]
    return indices, offsets


def fp16_problem():
    """FP16 weights [256, 16] in [0, 1), FP16 output, 4 bags of L = 256 (seed-default policy:
    FP16 weights accumulate in FP32, like FBGEMM's kernels)."""
    W = np.random.default_rng(0).random((256, 16)).astype(np.float16)
    indices, offsets = single_table_bags(W, L=256, B=4, seed=0)
    problem = tv.ForwardProblem(W, indices, offsets, output_dtype="fp16")
    return problem, W, indices, offsets


def fp32_problem():
    """FP32 weights [8192, 32] uniform in [-1, 1), FP32 output, 8 bags of L = 8192, policy
    'fbgemm-cuda' (FP32 accumulation, as FBGEMM's CUDA kernels)."""
    W = np.random.default_rng(1).uniform(-1, 1, (8192, 32)).astype(np.float32)
    indices, offsets = single_table_bags(W, L=8192, B=8, seed=1)
    problem = tv.ForwardProblem(W, indices, offsets, policy="fbgemm-cuda", output_dtype="fp32")
    return problem, W, indices, offsets


# ---- NumPy emulations of kernels (the implementations under test) -----------------------------

def embedding_bag_sequential(W, indices, offsets, accumulate):
    """SUM pooling, each bag added row by row in index order; every partial sum is rounded to
    `accumulate` (np.float16: the faulty kernel; np.float32: an FP32 kernel). Output W.dtype."""
    out = np.zeros((len(offsets) - 1, W.shape[1]), dtype=W.dtype)
    for b in range(len(offsets) - 1):
        acc = np.zeros(W.shape[1], dtype=accumulate)
        for i in indices[offsets[b]:offsets[b + 1]]:
            acc = (acc + W[i].astype(accumulate)).astype(accumulate)
        out[b] = acc.astype(W.dtype)
    return out


def embedding_bag_pairwise_fp32(W, indices, offsets):
    """SUM pooling accumulated in FP32 with NumPy's pairwise summation (a tree reduction, the
    other common kernel order), rounded once to W.dtype."""
    out = np.zeros((len(offsets) - 1, W.shape[1]), dtype=W.dtype)
    for b in range(len(offsets) - 1):
        rows = np.ascontiguousarray(W[indices[offsets[b]:offsets[b + 1]]].astype(np.float32).T)
        out[b] = np.sum(rows, axis=1, dtype=np.float32).astype(W.dtype)
    return out


def test_numpy_fp16_accumulation_passes_atol_rtol_but_not_the_enclosure():
    problem, W, indices, offsets = fp16_problem()
    reference = tv.forward_reference(problem)  # exact sums rounded once to FP16
    faulty = embedding_bag_sequential(W, indices, offsets, accumulate=np.float16)
    correct = embedding_bag_pairwise_fp32(W, indices, offsets)

    assert within_tolerance(faulty, reference, **FBGEMM_FP16_TOLERANCE)  # the fault goes unseen
    report = tv.check_forward(problem, faulty)
    print("FP16 accumulation:", report)
    assert not report.passed and abs(report.worst.position) > 1
    assert tv.check_forward(problem, correct).passed


def test_numpy_fp32_long_bag_false_alarm_of_atol_rtol():
    problem, W, indices, offsets = fp32_problem()
    exact = tv.forward_reference(problem)  # FP64 sums rounded once to FP32
    sequential = embedding_bag_sequential(W, indices, offsets, accumulate=np.float32)
    pairwise = embedding_bag_pairwise_fp32(W, indices, offsets)

    assert not within_tolerance(sequential, exact, **FBGEMM_FP32_TOLERANCE)  # false alarm
    for output in (sequential, pairwise):
        report = tv.check_forward(problem, output)
        print("FP32 accumulation:", report)
        assert report.passed, str(report)
        # The worst-case enclosure is rigorous for any order; on random data the opt-in
        # probabilistic bound (docs/oracle.md) is about sqrt(L) times tighter and still passes.
        assert tv.check_forward(problem, output, bound="probabilistic").passed


# ---- The same with torch.nn.functional.embedding_bag on the CPU -------------------------------

def torch_embedding_bag(torch, W, indices, offsets):
    """F.embedding_bag(mode='sum') with FBGEMM-style offsets [B + 1] (include_last_offset)."""
    import torch.nn.functional as F
    return F.embedding_bag(torch.from_numpy(indices), torch.from_numpy(W),
                           torch.from_numpy(offsets), mode="sum", include_last_offset=True)


def test_torch_fp16_accumulation_passes_atol_rtol_but_not_the_enclosure():
    torch = pytest.importorskip("torch")
    problem, W, indices, offsets = fp16_problem()
    reference = torch.from_numpy(tv.forward_reference(problem))

    # A faulty kernel written in torch: the bag accumulated in an FP16 tensor (each add rounded
    # to FP16). torch's own embedding_bag (FP32 accumulation) is the correct implementation.
    weights = torch.from_numpy(W)
    faulty = torch.zeros((len(offsets) - 1, W.shape[1]), dtype=torch.float16)
    for b in range(len(offsets) - 1):
        for i in indices[offsets[b]:offsets[b + 1]]:
            faulty[b] += weights[int(i)]
    torch.testing.assert_close(faulty, reference, **FBGEMM_FP16_TOLERANCE)  # unseen
    report = tv.check_forward(problem, faulty)  # a CPU tensor is read through DLPack
    print("torch FP16 accumulation:", report)
    assert not report.passed

    correct = torch_embedding_bag(torch, W, indices, offsets)
    assert correct.dtype == torch.float16
    assert tv.check_forward(problem, correct).passed


def test_torch_fp32_long_bag_false_alarm_of_atol_rtol():
    torch = pytest.importorskip("torch")
    problem, W, indices, offsets = fp32_problem()
    exact = torch.from_numpy(tv.forward_reference(problem))
    output = torch_embedding_bag(torch, W, indices, offsets)  # FP32 accumulation in index order

    with pytest.raises(AssertionError):
        torch.testing.assert_close(output, exact, **FBGEMM_FP32_TOLERANCE)  # false alarm
    report = tv.check_forward(problem, output)
    print("torch FP32 embedding_bag:", report)
    assert report.passed, str(report)
