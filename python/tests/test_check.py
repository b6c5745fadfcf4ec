"""check_forward judges outputs through the oracle: correct results pass, seeded faults fail with
the faulty element as the worst one (a flipped element, FP16 accumulation of a long bag, MEAN
without its 1/L)."""
import json

import numpy as np
import pytest

from conftest import i64, int_table, tv


def long_bag_problem(L=4096, seed=1, output_dtype="fp32", policy="seed-default"):
    """One fp16 table [L, 8] with random values in [0, 1) and one bag reading every row once."""
    rng = np.random.default_rng(seed)
    W = rng.random((L, 8)).astype(np.float16)
    p = tv.ForwardProblem(W, np.arange(L, dtype=np.int64), i64(0, L), policy=policy,
                          output_dtype=output_dtype)
    return p, W


def test_correct_output_passes_with_a_point_interval():
    W = int_table(4, 3)
    p = tv.ForwardProblem(W, i64(0, 1, 3), i64(0, 2, 3))
    r = tv.check_forward(p, tv.forward_reference(p))
    assert r.passed and bool(r) and r.failures == 0 and r.elements == 6
    assert r.worst.lo == r.worst.hi == r.worst.value == r.worst.reference  # exact integer sums
    assert "0/6 outside" in str(r) and str(r) == r.summary()
    assert json.loads(r.to_json())["passed"] is True


def test_flipped_element_is_the_worst_and_located():
    W0, W1 = int_table(3, 2), int_table(2, 3, base=100)
    weights = np.concatenate([W0.ravel(), W1.ravel()])
    p = tv.ForwardProblem(weights, i64(2, 0, 1, 1), i64(0, 1, 2, 3, 4), rows=[3, 2], dims=[2, 3])
    out = tv.forward_reference(p)
    out[1, 3] = -out[1, 3]  # sample 1, feature 1, column 1
    r = tv.check_forward(p, out)
    assert not r.passed and r.failures == 1
    w = r.worst
    assert (w.where.feature, w.where.sample, w.where.column, w.where.flat) == (1, 1, 1, 1 * 5 + 3)
    assert w.value == -111.0 and w.reference == 111.0 and (w.lo, w.hi) == (111.0, 111.0)
    assert w.position == -float("inf") and not w.inside  # below a point interval
    assert "1/10 outside" in str(r) and "feature 1, sample 1, column 1" in str(r)


def test_accepts_any_summation_order_of_a_long_bag():
    # fp16 weights accumulate in FP32 (seed-default): index order, reversed, pairwise all pass.
    p, W = long_bag_problem()
    w32 = W.astype(np.float32)
    sequential = np.zeros(8, np.float32)
    for row in w32:
        sequential = np.float32(sequential + row)
    reversed_order = np.zeros(8, np.float32)
    for row in w32[::-1]:
        reversed_order = np.float32(reversed_order + row)
    pairwise = np.sum(w32, axis=0, dtype=np.float32)  # NumPy's pairwise float32 reduction
    for out in (sequential, reversed_order, pairwise):
        r = tv.check_forward(p, out.reshape(1, 8))
        assert r.passed, str(r)


def test_rejects_fp16_accumulation_of_a_long_bag():
    p, W = long_bag_problem()
    acc = np.zeros(8, np.float16)
    for row in W:  # every partial sum rounded to fp16: spacing 2 near 2048
        acc = np.float16(acc + row)
    r = tv.check_forward(p, acc.astype(np.float32).reshape(1, 8))
    assert not r.passed and r.failures >= 7
    # fp16 sums stall at 2048 (adding a value < 1 rounds back): ~40 units below, tens of radii.
    assert r.worst.value == 2048.0 and r.worst.value < r.worst.lo and r.worst.position < -10


def test_rejects_a_missing_one_over_L_for_mean():
    W = int_table(4, 2)
    p = tv.ForwardProblem(W, i64(1, 3, 0, 2), i64(0, 2, 4), pooling="mean")
    as_sum = tv.forward_reference(tv.ForwardProblem(W, i64(1, 3, 0, 2), i64(0, 2, 4)))
    r = tv.check_forward(p, as_sum)
    assert not r.passed and r.failures == 4
    assert r.worst.reference == 20.0 and r.worst.value == 40.0  # bag 0 column 0: (10 + 30) / 2


def test_fp16_output_must_be_rounded_once():
    # A bag whose exact sum is not an fp16 value: a kernel that truncates instead of rounding to
    # nearest lands one fp16 ulp below the rounded enclosure.
    W = np.array([[1024.0], [0.75]], dtype=np.float32)
    p = tv.ForwardProblem(W, i64(0, 1), i64(0, 2), output_dtype="fp16")
    assert tv.forward_reference(p)[0, 0] == np.float16(1025.0)  # 1024.75 -> 1025 (RNE)
    assert tv.check_forward(p, np.array([[1025.0]], np.float16)).passed
    assert not tv.check_forward(p, np.array([[1024.0]], np.float16)).passed


def test_enclosures_and_probabilistic_bound():
    p, W = long_bag_problem()
    worst = tv.forward_enclosures(p)
    prob = tv.forward_enclosures(p, bound="probabilistic", false_alarm_probability=1e-9)
    assert np.all(worst.lo <= worst.reference) and np.all(worst.reference <= worst.hi)
    assert np.all(prob.hi - prob.lo <= worst.hi - worst.lo)
    np.testing.assert_array_equal(prob.reference, worst.reference)
    out = tv.forward_reference(p)
    assert tv.check_forward(p, out, bound="probabilistic").passed


def test_nan_output_fails():
    W = int_table(2, 2)
    p = tv.ForwardProblem(W, i64(0, 1), i64(0, 2))
    out = tv.forward_reference(p)
    out[0, 0] = np.nan
    r = tv.check_forward(p, out)
    assert not r.passed and r.worst.where.column == 0


def test_fatal_problem_with_a_bad_index_raises_in_check():
    W = int_table(2, 2)
    p = tv.ForwardProblem(W, i64(0, 5), i64(0, 2), bounds_check="fatal")
    with pytest.raises(tv.BoundsCheckError):
        tv.check_forward(p, np.zeros((1, 2), np.float32))
