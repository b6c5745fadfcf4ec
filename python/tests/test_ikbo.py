"""IKBO LCE and attention (docs/ikbo.md) on hand-computed cases, and check_lce / check_attention
accepting the reference and rejecting seeded faults."""
import numpy as np
import pytest

from conftest import tv


def lce_problem(dtype=np.float16, rounding="round-once"):
    # M = 2, K_c = 2, K_u = 1, N = 3, B = 3 candidates of U = 2 users, map [1, 0, 1].
    w_c = np.array([[1, 2], [0, -1]], dtype)
    w_u = np.array([[3], [1]], dtype)
    e_c = np.arange(3 * 2 * 3, dtype=np.float64).reshape(3, 2, 3).astype(dtype)
    e_u = np.array([[[1, 0, 2]], [[-1, 1, 0]]], dtype)
    cand = np.array([1, 0, 1], np.int32)
    policy = tv.IkboPolicy(storage="fp16" if dtype == np.float16 else "fp32",
                           lce_rounding=rounding)
    return tv.LceProblem(w_c, w_u, e_c, e_u, cand, policy=policy), (w_c, w_u, e_c, e_u, cand)


def lce_by_hand(w_c, w_u, e_c, e_u, cand):
    f = np.float64
    return np.stack([w_c.astype(f) @ e_c[b].astype(f) + w_u.astype(f) @ e_u[cand[b]].astype(f)
                     for b in range(len(cand))])


def test_lce_hand_computed():
    p, arrays = lce_problem()
    assert (p.B, p.U, p.M, p.N, p.K_c, p.K_u) == (3, 2, 2, 3, 2, 1)
    expected = lce_by_hand(*arrays)
    # candidate 0: w_c @ [[0,1,2],[3,4,5]] = [[6, 9, 12], [-3, -4, -5]]; user 1: [[-3, 3, 0], [-1, 1, 0]]
    np.testing.assert_array_equal(expected[0], [[3, 12, 12], [-4, -3, -5]])
    out = tv.lce_reference(p)
    assert out.dtype == np.float16 and out.shape == (3, 2, 3)
    np.testing.assert_array_equal(out, expected)
    ref = tv.lce_reference_fp64(p)
    np.testing.assert_array_equal(ref["out"], expected)
    np.testing.assert_array_equal(ref["candidate_part"] + ref["user_part"], expected)
    assert tv.check_lce(p, out).passed


def test_lce_rejects_a_wrong_user_and_a_flipped_element():
    p, (w_c, w_u, e_c, e_u, cand) = lce_problem()
    wrong_user = lce_by_hand(w_c, w_u, e_c, e_u, np.array([0, 0, 1])).astype(np.float16)
    r = tv.check_lce(p, wrong_user)
    assert not r.passed and r.worst.where.sample == 0 and r.worst.where.space == r.worst.where.Space.IKBO_LCE
    out = tv.lce_reference(p)
    out[2, 1, 0] = -out[2, 1, 0] - 1
    r = tv.check_lce(p, out)
    assert not r.passed and (r.worst.where.sample, r.worst.where.row, r.worst.where.column) == (2, 1, 0)


def test_lce_without_a_user_part():
    w_c = np.array([[2.0]], np.float32)
    e_c = np.array([[[1.0, 3.0]]], np.float32)
    p = tv.LceProblem(w_c, np.zeros((1, 0), np.float32), e_c, np.zeros((1, 0, 2), np.float32),
                      np.array([0], np.int64))
    assert p.K_u == 0 and str(p.policy) == "ikbo[storage=fp32,acc=fp32,lce=round-once]"
    np.testing.assert_array_equal(tv.lce_reference(p), [[[2.0, 6.0]]])


def attention_problem():
    # B = 2 candidates, n_seed = 1, H = 1, Dh = 2; jagged keys: user 0 owns keys [0, 2),
    # user 1 owns [2, 3). Equal keys -> equal softmax weights.
    q = np.array([[[1, 0]], [[0, 1]]], np.float32)
    k = np.array([[[1, 1]], [[1, 1]], [[5, -2]]], np.float32)
    v = np.array([[[2, 4]], [[6, 8]], [[-1, 3]]], np.float32)
    cand = np.array([0, 1], np.int32)
    return tv.AttentionProblem(q, k, v, cand, k_offsets=[0, 2, 3]), v


def test_attention_hand_computed():
    p, v = attention_problem()
    assert (p.B, p.U, p.H, p.Dh, p.jagged) == (2, 2, 1, 2, True)
    assert p.scale == pytest.approx(1 / np.sqrt(2))
    out = tv.attention_reference(p)
    # candidate 0: two equal scores -> mean of v[0], v[1]; candidate 1: one key -> v[2].
    np.testing.assert_array_equal(out, [[[4, 6]], [[-1, 3]]])
    np.testing.assert_array_equal(tv.attention_reference_fp64(p), out.astype(np.float64))
    assert tv.check_attention(p, out).passed


def test_attention_rejects_an_unnormalised_softmax():
    p, v = attention_problem()
    out = tv.attention_reference(p)
    out[0, 0] = v[0, 0] + v[1, 0]  # sum of P·V without dividing by l = sum P
    r = tv.check_attention(p, out)
    assert not r.passed and r.worst.where.sample == 0 and r.worst.where.head == 0


def test_attention_dense_and_empty_user():
    q = np.ones((2, 1, 1), np.float32)
    k = np.zeros((2, 1, 1), np.float32)
    v = np.array([[[3]], [[5]]], np.float32)
    dense = tv.AttentionProblem(q, k, v, np.array([0, 1], np.int32), S=1)
    assert dense.U == 2 and not dense.jagged
    np.testing.assert_array_equal(tv.attention_reference(dense), [[[3]], [[5]]])
    # jagged with user 1 owning no key: its candidate's output is exactly 0
    jag = tv.AttentionProblem(q, k, v, np.array([0, 1], np.int32), k_offsets=[0, 2, 2])
    np.testing.assert_array_equal(tv.attention_reference(jag), [[[4]], [[0]]])
