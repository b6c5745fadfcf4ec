"""The reference forward (tv.forward_reference / forward_reference_fp64 / repair) on hand-computed
small cases: every expected value is written out, small integers make them exact."""
import numpy as np
import pytest

from conftest import from_bf16_bits, i64, int_table, to_bf16_bits, tv


def test_sum_one_table():
    W = int_table(4, 3)  # W[r] = [10r, 10r+1, 10r+2]
    p = tv.ForwardProblem(W, i64(0, 1, 3), i64(0, 2, 3))  # bags {0, 1}, {3}
    assert p.batch_size == 2 and p.num_features == 1 and p.output_shape == [2, 3]
    assert repr(p) == ("<ForwardProblem T=1 tables=1 N=3 output [2, 3] sum bounds_check=warning "
                       "seed-default[w=fp32,out=fp32,acc=fp64,state=fp32,rne]>")
    out = tv.forward_reference(p)
    assert out.dtype == np.float32 and out.shape == (2, 3)
    np.testing.assert_array_equal(out, [[10, 12, 14], [30, 31, 32]])
    np.testing.assert_array_equal(tv.forward_reference_fp64(p), out.astype(np.float64))


def test_mean_and_empty_bag():
    W = int_table(4, 2)
    # bags: {1, 3} -> mean of [10, 11] and [30, 31]; {} -> 0; {0, 0, 2, 2} -> [10, 11]
    p = tv.ForwardProblem(W, i64(1, 3, 0, 0, 2, 2), i64(0, 2, 2, 6), pooling="mean")
    np.testing.assert_array_equal(tv.forward_reference(p), [[20, 21], [0, 0], [10, 11]])


def test_none_pooling_returns_one_row_per_lookup():
    W = int_table(5, 2)
    p = tv.ForwardProblem(W, i64(4, 0, 2), i64(0, 1, 3), pooling="none")
    assert p.output_shape == [3, 2]
    np.testing.assert_array_equal(tv.forward_reference(p), [[40, 41], [0, 1], [20, 21]])


def test_weighted_sum():
    W = int_table(3, 2)
    psw = np.array([0.5, 2.0, -1.0], dtype=np.float32)
    p = tv.ForwardProblem(W, i64(1, 2, 1), i64(0, 2, 3), per_sample_weights=psw)
    # bag 0: 0.5*[10, 11] + 2*[20, 21] = [45, 47.5]; bag 1: -[10, 11]
    np.testing.assert_array_equal(tv.forward_reference(p), [[45, 47.5], [-10, -11]])


def test_shared_tables_mixed_dims_feature_major_offsets():
    W0 = int_table(3, 2)             # table 0: E=3, D=2
    W1 = int_table(2, 3, base=100)   # table 1: E=2, D=3
    weights = np.concatenate([W0.ravel(), W1.ravel()])
    # T = 3 features (tables 0, 1, 0), B = 2: offsets feature-major, T*B + 1 = 7 entries.
    indices = i64(2, 0, 1, 1, 0, 1, 2)
    offsets = i64(0, 1, 2, 3, 4, 6, 7)  # f0: {2} {0}; f1: {1} {1}; f2: {0, 1} {2}
    p = tv.ForwardProblem(weights, indices, offsets, rows=[3, 2], dims=[2, 3],
                          feature_table_map=[0, 1, 0])
    assert p.table_offsets == [0, 6] and p.output_shape == [2, 7]
    expected = [[20, 21, 110, 111, 112, 10, 12],
                [0, 1, 110, 111, 112, 20, 21]]
    np.testing.assert_array_equal(tv.forward_reference(p), expected)


def test_int32_indices():
    W = int_table(3, 2)
    p = tv.ForwardProblem(W, np.array([2, 2], np.int32), np.array([0, 1, 2], np.int32))
    assert p.index_dtype == tv.DType.I32
    np.testing.assert_array_equal(tv.forward_reference(p), [[20, 21], [20, 21]])


def test_vbe_output_is_rank_major():
    W = int_table(4, 2)
    # T = 2 features on table 0, R = 2 ranks, batch sizes [f0: r0=1, r1=2; f1: r0=1, r1=0].
    # Bags feature-major, rank-major inside a feature: f0 {0} | {1} {2} ; f1 {3}.
    p = tv.ForwardProblem(W, i64(0, 1, 2, 3), i64(0, 1, 2, 3, 4), feature_table_map=[0, 0],
                          rows=[4], dims=[2], vbe_batch_sizes=[1, 2, 1, 0], vbe_ranks=2)
    assert p.output_shape == [8]
    # Output rank-major: r0: f0 [1 x 2], f1 [1 x 2]; r1: f0 [2 x 2], f1 [0 x 2].
    np.testing.assert_array_equal(tv.forward_reference(p), [0, 1, 30, 31, 10, 11, 20, 21])


def test_fp16_weights_and_output():
    W = int_table(3, 2, dtype=np.float16)
    p = tv.ForwardProblem(W, i64(0, 2), i64(0, 2), output_dtype="fp16")
    assert str(p.policy) == "seed-default[w=fp16,out=fp16,acc=fp32,state=fp32,rne]"
    out = tv.forward_reference(p)
    assert out.dtype == np.float16
    np.testing.assert_array_equal(out, [[20, 22]])


def test_bf16_weights_as_uint16_bits():
    W = to_bf16_bits(int_table(3, 2))
    p = tv.ForwardProblem(W, i64(1, 2), i64(0, 2), policy="fbgemm-cuda", output_dtype="bf16")
    assert p.weights_dtype == tv.DType.BF16
    out = tv.forward_reference(p)
    assert out.dtype == np.uint16
    np.testing.assert_array_equal(from_bf16_bits(out), [[30, 32]])


def test_output_rounded_once_to_fp16():
    # 2049 + 0.5 + 0.5: index order in FP64 is exact (2050); fp16 output holds 2050 exactly.
    W = np.array([[2049.0], [0.5]], dtype=np.float32)
    p = tv.ForwardProblem(W, i64(0, 1, 1), i64(0, 3), output_dtype="fp16")
    assert tv.forward_reference_fp64(p)[0, 0] == 2050.0
    assert tv.forward_reference(p)[0, 0] == np.float16(2050)


def test_bounds_check_warning_repairs_and_counts():
    W = int_table(3, 2)
    # index 7 is out of range for E = 3 -> repaired to row 0 (weight kept), one warning.
    p = tv.ForwardProblem(W, i64(1, 7), i64(0, 2), bounds_check="warning")
    np.testing.assert_array_equal(tv.forward_reference(p), [[10, 12]])
    r = tv.repair(p)
    assert (r.warnings, r.bad_indices, r.bad_bags, r.bad_last_offset) == (1, 1, 0, 0)
    np.testing.assert_array_equal(r.indices, [1, 0])
    v = tv.find_first_violation(p)
    assert (v.kind, v.position, v.value, v.limit) == (tv.BoundsViolation.Kind.INDEX, 1, 7, 3)


def test_bounds_check_fatal_raises_the_first_offender():
    W = int_table(3, 2)
    p = tv.ForwardProblem(W, i64(1, 7, -1), i64(0, 3), bounds_check="fatal")
    with pytest.raises(tv.BoundsCheckError) as e:
        tv.forward_reference(p)
    assert isinstance(e.value, IndexError) and isinstance(e.value, tv.Error)
    assert e.value.violation.position == 1 and e.value.violation.value == 7
    assert "7" in str(e.value)


def test_bad_last_offset_is_repaired_under_warning():
    W = int_table(3, 1)
    p = tv.ForwardProblem(W, i64(0, 1, 2), i64(0, 2), bounds_check="warning")  # last 2 != N = 3
    r = tv.repair(p)
    assert r.bad_last_offset == 1 and r.warnings == 1
    np.testing.assert_array_equal(tv.forward_reference(p), [[0 + 10 + 20]])


def test_zero_batch():
    W = int_table(3, 2)
    p = tv.ForwardProblem(W, i64(), i64(0), batch_size=0)
    out = tv.forward_reference(p)
    assert out.shape == (0, 2)
    assert tv.check_forward(p, out).passed


def test_round_to_and_policies():
    assert tv.round_to("fp16", 2049.0) == 2048.0
    pol = tv.make_policy("fbgemm-cuda", "fp32", "fp16")
    assert pol.accumulation == tv.DType.F32 and str(pol.kind) == "fbgemm-cuda"
    assert tv.make_policy("seed-default", "fp32", "fp32").accumulation == tv.DType.F64
    assert tv.parse_policy_kind("seed-default") == tv.PolicyKind.SEED_DEFAULT
    assert tv.POLICY_KINDS == ("seed-default", "fbgemm-cuda")
    assert [str(tv.parse_dtype(n)) for n in tv.DTYPE_NAMES] == list(tv.DTYPE_NAMES)
    custom = tv.PrecisionPolicy(weights="fp16", output="fp32", accumulation="fp16")
    custom.accumulation = "fp32"
    assert custom == tv.make_policy("seed-default", "fp16", "fp32")
