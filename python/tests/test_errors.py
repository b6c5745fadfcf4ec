"""Bad arguments raise clear Python exceptions naming the argument, the value and the limit, never
a crash: TypeError for wrong types and element types, tv.InvalidArgument (a ValueError with
`.argument`) for shapes, sizes and limits, checked before any element is read."""
import numpy as np
import pytest

from conftest import i64, int_table, tv

W = int_table(4, 3)


def fwd(**kw):
    args = dict(weights=W, indices=i64(0, 1, 3), offsets=i64(0, 2, 3))
    args.update(kw)
    return tv.ForwardProblem(args.pop("weights"), args.pop("indices"), args.pop("offsets"), **args)


def invalid(argument, match, fn, *args, **kw):
    with pytest.raises(tv.InvalidArgument, match=match) as e:
        fn(*args, **kw)
    assert isinstance(e.value, ValueError) and e.value.argument == argument
    return e.value


def test_offsets_length_names_T_and_B():
    invalid("offsets", r"offsets: length 3 != T·B \+ 1 = 5 \(T=1, B=4\)", fwd, batch_size=4)
    invalid("offsets", r"offsets: length 4 is not T·B \+ 1 for T = 2", fwd,
            offsets=i64(0, 1, 2, 3), feature_table_map=[0, 0], rows=[4], dims=[3])


def test_dimension_limit_and_table_extent():
    big = np.zeros((2, 4096), np.float32)
    invalid("tables.dims[0]", r"tables.dims\[0\]: D = 4096 exceeds the limit 2048", fwd,
            weights=big)
    invalid("weights", r"weights: table 1 \(E=2, D=3\) spans elements \[12, 18\) but weights "
            r"has 14 elements", fwd, weights=np.zeros(14, np.float32), rows=[4, 2], dims=[3, 3])
    invalid("tables.feature_table_map[0]", r"table 5 is outside \[0, num_tables=1\)", fwd,
            feature_table_map=[5])
    invalid("tables.rows[0]", r"E = 0 is below the minimum 1", fwd,
            weights=np.zeros(3, np.float32), rows=[0], dims=[3])


def test_element_types():
    with pytest.raises(TypeError, match=r"weights: dtype fp64 but tables.dtype needs fp32, fp16 or bf16"):
        fwd(weights=W.astype(np.float64))
    with pytest.raises(TypeError, match=r"offsets: dtype int32 but lookups.index_dtype"):
        fwd(offsets=np.array([0, 2, 3], np.int32))
    with pytest.raises(TypeError, match=r"indices: dtype fp32 but lookups need int32 or int64"):
        fwd(indices=np.array([0, 1, 3], np.float32))
    with pytest.raises(TypeError, match=r"per_sample_weights: dtype fp64 but"):
        fwd(per_sample_weights=np.ones(3))
    with pytest.raises(TypeError, match=r"element format '\?'"):
        fwd(indices=np.array([True, False, True]))
    with pytest.raises(TypeError, match=r"indices: list is not a host array"):
        fwd(indices=[0, 1, 3])
    with pytest.raises(TypeError, match=r"weights: None"):
        fwd(weights=None)


def test_shapes_and_contiguity():
    with pytest.raises(ValueError, match=r"weights: not C-contiguous \(shape \[3, 4\]"):
        fwd(weights=np.asfortranarray(int_table(3, 4)))
    with pytest.raises(ValueError, match="not C-contiguous"):
        fwd(indices=np.arange(6, dtype=np.int64)[::2])
    invalid("indices", r"indices: 2-D array \(shape \[1, 3\]\) but a 1-D array is needed", fwd,
            indices=i64(0, 1, 3).reshape(1, 3))
    invalid("per_sample_weights", r"per_sample_weights: 2 elements .* needs 3", fwd,
            per_sample_weights=np.ones(2, np.float32))
    invalid("weights", r"without rows/dims", fwd, weights=np.zeros(12, np.float32))
    invalid("dims", r"give both", fwd, rows=[4])


def test_metadata_values():
    with pytest.raises(TypeError, match=r"dims\[0\]: float is not an int"):
        fwd(weights=np.zeros(12, np.float32), rows=[4], dims=[3.0])
    invalid("dims[0]", r"dims\[0\]: 4294967296 does not fit int32", fwd,
            weights=np.zeros(12, np.float32), rows=[4], dims=[2 ** 32])
    invalid("vbe_ranks", r"vbe_ranks: needed with vbe_batch_sizes", fwd, vbe_batch_sizes=[2])
    invalid("vbe_batch_sizes", r"vbe_batch_sizes: total bags 3 != len\(offsets\) - 1 = 2", fwd,
            vbe_batch_sizes=[1, 2], vbe_ranks=2)


def test_option_names():
    invalid("pooling", r"pooling: unknown pooling mode 'avg' \(known: sum, mean, none\)", fwd,
            pooling="avg")
    invalid("bounds_check", r"unknown bounds-check mode", fwd, bounds_check="strict")
    invalid("policy", r"policy: unknown policy 'fast' \(known: seed-default, fbgemm-cuda\)", fwd,
            policy="fast")
    invalid("output_dtype", r"output_dtype: unknown dtype 'half'", fwd, output_dtype="half")
    with pytest.raises(TypeError, match=r"pooling: int is neither a name \(str\) nor a tbe_verify.PoolingMode"):
        fwd(pooling=1)
    with pytest.raises(TypeError, match=r"policy: float is neither a tbe_verify.PrecisionPolicy nor a policy kind"):
        fwd(policy=1.0)
    invalid("policy.output", r"fp64 is not an output type", fwd, output_dtype="fp64")
    pol = tv.make_policy("seed-default", "fp16", "fp32")
    invalid("options.policy.weights", r"options.policy.weights: fp16 != tables.dtype fp32", fwd,
            policy=pol)
    invalid("output_dtype", r"output_dtype: fp16 != policy.output fp32", fwd,
            weights=W.astype(np.float16), policy=pol, output_dtype="fp16")
    invalid("options.pooling", r"NONE needs one D for every feature", fwd,
            weights=np.zeros(20, np.float32), rows=[4, 2], dims=[3, 4], feature_table_map=[0, 1],
            offsets=i64(0, 1, 3), pooling="none")


def test_check_forward_output_arguments():
    p = fwd()
    with pytest.raises(TypeError, match=r"output: dtype fp16 but policy.output needs fp32"):
        tv.check_forward(p, np.zeros((2, 3), np.float16))
    invalid("output", r"output: 5 elements \(shape \[5\]\) but the forward output \(shape \[2, 3\]\) needs 6",
            tv.check_forward, p, np.zeros(5, np.float32))
    invalid("bound", r"unknown enclosure bound 'tight'", tv.check_forward, p,
            np.zeros((2, 3), np.float32), bound="tight")
    invalid("false_alarm_probability", r"outside \(0, 1\)", tv.check_forward, p,
            np.zeros((2, 3), np.float32), false_alarm_probability=0.0)
    # any shape with the right element count is accepted (e.g. torch's [B, sum D] or flat)
    assert tv.check_forward(p, tv.forward_reference(p).ravel()).passed


def test_backward_arguments():
    p = fwd()
    g = np.zeros((2, 3), np.float32)
    invalid("options.optimizer.learning_rate", r"learning_rate: -1 must be finite and > 0",
            tv.BackwardProblem, p, g, optimizer=tv.OptimizerConfig(learning_rate=-1))
    invalid("momentum", r"momentum: null pointer with optimizer rowwise_adagrad",
            tv.BackwardProblem, p, g, optimizer=tv.OptimizerConfig(kind="rowwise_adagrad"))
    invalid("momentum", r"momentum: 3 elements .* needs 4", tv.BackwardProblem, p, g,
            momentum=np.zeros(3, np.float32), optimizer=tv.OptimizerConfig(kind="rowwise_adagrad"))
    invalid("grad_output", r"grad_output: 5 elements", tv.BackwardProblem, p, np.zeros(5, np.float32))
    with pytest.raises(TypeError, match=r"grad_output: dtype fp16 but policy.output"):
        tv.BackwardProblem(p, g.astype(np.float16))
    with pytest.raises(TypeError, match=r"forward: dict is not a tbe_verify.ForwardProblem"):
        tv.BackwardProblem({}, g)
    invalid("kind", r"kind: unknown optimizer 'adam'", tv.OptimizerConfig, kind="adam")
    bp = tv.BackwardProblem(p, g)
    invalid("weights", r"weights: 11 elements .* needs 12", tv.check_backward, bp,
            np.zeros(11, np.float32))


def test_ikbo_arguments():
    w_c = np.ones((2, 3), np.float16)
    w_u = np.ones((2, 1), np.float16)
    e_c = np.ones((4, 3, 5), np.float16)
    e_u = np.ones((2, 1, 5), np.float16)
    cand = np.array([0, 1, 1, 0], np.int32)
    invalid("e_c", r"e_c: shape \[4, 2, 5\] has K_c = 2 but w_c has K_c = 3", tv.LceProblem,
            w_c, w_u, np.ones((4, 2, 5), np.float16), e_u, cand)
    invalid("cand_to_user[2]", r"cand_to_user\[2\]: 7 outside \[0, U=2\)", tv.LceProblem,
            w_c, w_u, e_c, e_u, np.array([0, 1, 7, 0], np.int32))
    invalid("cand_to_user", r"has B = 3 but e_c has B = 4", tv.LceProblem, w_c, w_u, e_c, e_u,
            cand[:3].copy())
    with pytest.raises(TypeError, match=r"e_u: dtype fp32 but policy.storage needs fp16"):
        tv.LceProblem(w_c, w_u, e_c, e_u.astype(np.float32), cand)
    p = tv.LceProblem(w_c, w_u, e_c, e_u, cand)
    invalid("output", r"output: 39 elements", tv.check_lce, p, np.zeros(39, np.float16))

    q = np.ones((4, 2, 8), np.float32)
    kv = np.ones((6, 2, 8), np.float32)
    invalid("S", r"S: needed without k_offsets", tv.AttentionProblem, q, kv, kv, cand)
    invalid("k", r"k: 6 keys are not a multiple of S = 4", tv.AttentionProblem, q, kv, kv, cand, S=4)
    invalid("k", r"k: 6 keys but k_offsets\[U\] = 5", tv.AttentionProblem, q, kv, kv, cand,
            k_offsets=[0, 2, 5])
    invalid("attention.k_offsets[2]", r"must be non-decreasing", tv.AttentionProblem, q, kv, kv,
            cand, k_offsets=[0, 6, 5])
    invalid("attention.scale", r"attention.scale: -1 must be finite and > 0", tv.AttentionProblem,
            q, kv, kv, cand, S=3, scale=-1.0)
    invalid("q", r"q: shape \[4, 2, 8\] has B·n_seed = 4 but cand_to_user \(B\) times n_seed has "
            r"B·n_seed = 8", tv.AttentionProblem, q, kv, kv, cand, S=3, n_seed=2)


def test_case_file_errors(tmp_path):
    invalid("dir", r"missing: not a case folder \(no such directory\)", tv.read_case,
            str(tmp_path / "missing"))
    with pytest.raises(TypeError, match=r"case.problem: int is not a tbe_verify.ForwardProblem"):
        tv.write_case(str(tmp_path / "c"), tv.CaseFile(3))
