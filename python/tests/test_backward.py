"""backward_reference / backward_reference_fp64 / check_backward on hand-computed cases
(EXACT_SGD and EXACT_ROWWISE_ADAGRAD, docs/backward.md "The computation"), and seeded faults the
oracle must reject (a flipped row element, eps inside the square root, a written untouched row)."""
import numpy as np
import pytest

from conftest import i64, int_table, tv


def sgd_problem(lr=0.5, weighted=False):
    W = int_table(3, 2)  # rows [0, 1], [10, 11], [20, 21]
    psw = np.array([1.0, 2.0, 1.0], np.float32) if weighted else None
    fwd = tv.ForwardProblem(W, i64(0, 2, 0), i64(0, 2, 3), per_sample_weights=psw)  # {0, 2} {0}
    grad = np.array([[1, 2], [3, 4]], np.float32)
    opt = tv.OptimizerConfig(kind="sgd", learning_rate=lr)
    return tv.BackwardProblem(fwd, grad, optimizer=opt), W


def test_sgd_hand_computed():
    bp, W = sgd_problem()
    res = tv.backward_reference(bp)
    # G_0 = g(bag 0) + g(bag 1) = [4, 6]; G_2 = g(bag 0) = [1, 2]; row 1 untouched.
    expected = W.copy()
    expected[0] -= 0.5 * np.array([4, 6], np.float32)
    expected[2] -= 0.5 * np.array([1, 2], np.float32)
    np.testing.assert_array_equal(res.weights, expected)
    assert res.weights.shape == W.shape and res.momentum is None
    assert res.per_sample_weight_grad is None
    assert (res.stats.runs, res.stats.lookups, res.stats.warnings) == (2, 3, 0)
    np.testing.assert_array_equal(W, int_table(3, 2))  # the inputs are not modified

    ref = tv.backward_reference_fp64(bp)
    np.testing.assert_array_equal(ref.linear_ids, [0, 2])
    np.testing.assert_array_equal(ref.run_lengths, [2, 1])
    np.testing.assert_array_equal(ref.sorted_positions, [0, 2, 1])
    np.testing.assert_array_equal(ref.row_grad, [4, 6, 1, 2])
    np.testing.assert_array_equal(ref.updated, [-2, -2, 19.5, 20])

    assert tv.check_backward(bp, res.weights).passed


def test_weighted_per_sample_weight_gradient():
    bp, W = sgd_problem(weighted=True)
    res = tv.backward_reference(bp)
    # dL/dw_p = <g(bag of p), W[i_p]>: p0 -> <[1,2],[0,1]> = 2; p1 -> <[1,2],[20,21]> = 62;
    # p2 -> <[3,4],[0,1]> = 4. G_0 = 1*[1,2] + 1*[3,4]; G_2 = 2*[1,2].
    np.testing.assert_array_equal(res.per_sample_weight_grad, [2, 62, 4])
    np.testing.assert_array_equal(res.weights[2], [20 - 0.5 * 2, 21 - 0.5 * 4])
    report = tv.check_backward(bp, res.weights, per_sample_weight_grad=res.per_sample_weight_grad)
    assert report.passed, str(report)
    wrong = res.per_sample_weight_grad.copy()
    wrong[1] = 63
    assert not tv.check_backward(bp, res.weights, per_sample_weight_grad=wrong).passed


def adagrad_problem(eps=0.25):
    W = np.array([[10, 20], [5, 5]], np.float32)
    fwd = tv.ForwardProblem(W, i64(0), i64(0, 1))  # one bag {row 0}
    grad = np.array([[3, 4]], np.float32)
    momentum = np.array([3.5, 7.0], np.float32)
    opt = tv.OptimizerConfig(kind="rowwise_adagrad", learning_rate=1.0, eps=eps)
    return tv.BackwardProblem(fwd, grad, momentum=momentum, optimizer=opt), W


def test_rowwise_adagrad_hand_computed():
    bp, W = adagrad_problem()
    res = tv.backward_reference(bp)
    # m = 3.5 + (3^2 + 4^2) / 2 = 16; mult = lr / (sqrt(16) + 0.25) = 1 / 4.25;
    # x = w - mult * G = [10 - 3/4.25, 20 - 4/4.25]. Row 1 and its momentum untouched.
    np.testing.assert_array_equal(res.momentum, [16.0, 7.0])
    np.testing.assert_array_equal(res.weights[0], np.float32([10 - 3 / 4.25, 20 - 4 / 4.25]))
    np.testing.assert_array_equal(res.weights[1], [5, 5])
    report = tv.check_backward(bp, res.weights, momentum=res.momentum)
    assert report.passed and report["momentum"].passed, str(report)
    assert {"weights", "weights.untouched", "momentum"} <= {r.check for r in report.reports}


def adagrad_with(**options):
    W = np.array([[10, 20], [5, 5]], np.float32)
    fwd = tv.ForwardProblem(W, i64(0), i64(0, 1))
    opt = tv.OptimizerConfig(kind="rowwise_adagrad", learning_rate=1.0, eps=0.25, **options)
    return tv.BackwardProblem(fwd, np.array([[3, 4]], np.float32),
                              momentum=np.array([3.5, 7.0], np.float32), optimizer=opt)


def test_rowwise_adagrad_options():
    # DECOUPLED: x = (1 - lr*wd) * w - mult * G with the same m = 16, mult = 1 / 4.25.
    bp = adagrad_with(weight_decay=0.5, weight_decay_mode="decoupled")
    res = tv.backward_reference(bp)
    np.testing.assert_array_equal(res.weights[0], np.float32([5 - 3 / 4.25, 10 - 4 / 4.25]))
    assert tv.check_backward(bp, res.weights, momentum=res.momentum).passed
    # L2: g' = G + wd*w = [8, 14] enters the momentum: m = 3.5 + (64 + 196) / 2 = 133.5.
    bp = adagrad_with(weight_decay=0.5, weight_decay_mode="l2")
    res = tv.backward_reference(bp)
    assert res.momentum[0] == 133.5
    assert tv.check_backward(bp, res.weights, momentum=res.momentum).passed
    # max_gradient = 2 clamps grad_output to [-2, 2] first: G = [2, 2], m = 3.5 + 4 = 7.5.
    bp = adagrad_with(max_gradient=2.0)
    res = tv.backward_reference(bp)
    assert res.momentum[0] == 7.5
    # max_norm: the updated row is renormalised to norm <= max_norm.
    bp = adagrad_with(max_norm=1.0)
    res = tv.backward_reference(bp)
    assert np.linalg.norm(res.weights[0].astype(np.float64)) <= 1.0 + 1e-6
    assert tv.check_backward(bp, res.weights, momentum=res.momentum).passed
    assert bp.optimizer.max_norm == 1.0 and bp.optimizer.kind == tv.OptimizerKind.EXACT_ROWWISE_ADAGRAD


def test_rejects_eps_inside_the_square_root():
    bp, W = adagrad_problem()
    res = tv.backward_reference(bp)
    wrong = res.weights.copy()
    # x = w - lr * G / sqrt(m + eps): [10 - 3/sqrt(16.25), ...]
    wrong[0] = np.float32(np.array([10, 20]) - np.array([3, 4]) / np.sqrt(16.25))
    report = tv.check_backward(bp, wrong, momentum=res.momentum)
    assert not report.passed and not report["weights"].passed
    w = report["weights"].worst
    assert w.where.table_row and (w.where.feature, w.where.row) == (0, 0)


def test_rejects_a_flipped_element_and_a_written_untouched_row():
    bp, W = sgd_problem()
    res = tv.backward_reference(bp)
    flipped = res.weights.copy()
    flipped[2, 1] = -flipped[2, 1]
    r = tv.check_backward(bp, flipped)
    assert not r.passed and r["weights"].worst.where.row == 2 and r["weights"].worst.where.column == 1
    untouched = res.weights.copy()
    untouched[1, 0] += 1
    r = tv.check_backward(bp, untouched)
    assert r["weights"].passed and not r["weights.untouched"].passed
    assert r.failures == 1 and not r


def test_adagrad_check_needs_the_momentum():
    bp, W = adagrad_problem()
    res = tv.backward_reference(bp)
    with pytest.raises(tv.InvalidArgument, match="momentum"):
        tv.check_backward(bp, res.weights)


def test_fatal_bounds_check_raises_before_any_update():
    W = int_table(3, 2)
    fwd = tv.ForwardProblem(W, i64(0, 9), i64(0, 2), bounds_check="fatal")
    bp = tv.BackwardProblem(fwd, np.ones((1, 2), np.float32))
    with pytest.raises(tv.BoundsCheckError) as e:
        tv.backward_reference(bp)
    assert e.value.violation.value == 9


def test_stochastic_rounding_fp16_is_unbiased():
    # fp16 weights of 1.0, SGD updates of 0.3 fp16 ulps (ulp(1) = 2^-10) on 4096 rows: SR rounds
    # each up with probability 0.3; the z-test passes for the reference and fails for RNE.
    E, D = 4096, 4
    W = np.ones((E, D), np.float16)
    policy = tv.make_policy("seed-default", "fp16", "fp32", write_back="sr")
    fwd = tv.ForwardProblem(W, np.arange(E, dtype=np.int64), np.arange(E + 1, dtype=np.int64),
                            policy=policy)
    grad = np.full((E, D), -0.3 * 2.0 ** -10, np.float32)
    bp = tv.BackwardProblem(fwd, grad, optimizer=tv.OptimizerConfig(learning_rate=1.0),
                            sr_seed=7)
    res = tv.backward_reference(bp)
    assert tv.check_backward(bp, res.weights).passed
    sr = tv.stochastic_rounding_test(bp, res.weights)
    assert sr.passed and sr.samples == E * D, str(sr)
    rne = tv.backward_reference(tv.BackwardProblem(
        tv.ForwardProblem(W, np.arange(E, dtype=np.int64), np.arange(E + 1, dtype=np.int64),
                          policy=tv.make_policy("seed-default", "fp16", "fp32")),
        grad, optimizer=tv.OptimizerConfig(learning_rate=1.0))).weights
    assert not tv.stochastic_rounding_test(bp, rne).passed
