"""Case folders of the backward, ikbo-lce and ikbo-attention operators (docs/case-files.md):
write_case / read_case round trips from Python (arrays bitwise equal), the folders the C++ writer
wrote into the fuzz seed corpus (fuzz/make_corpus.cpp) read and judged from Python, and the
errors of a malformed folder."""
import json
import re

import numpy as np
import pytest

from conftest import REPO_ROOT, i64, int_table, to_bf16_bits, tv

CORPUS = REPO_ROOT / "fuzz" / "corpus" / "fuzz_case_reader"


def assert_bitwise(a, b):
    """Same dtype and the same bytes (NaN, -0 and bf16 raw bits compared exactly)."""
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    assert a.dtype == b.dtype and a.size == b.size
    assert a.tobytes() == b.tobytes()


def folder_files(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def unframe(corpus_file, folder):
    """A fuzz_case_reader corpus entry as its case folder: the bytes up to the first
    "\\n@file NAME\\n" line are case.json, each such line starts file NAME (fuzz/README.md)."""
    data = corpus_file.read_bytes()
    parts = data.split(b"\n@file ")
    folder.mkdir()
    (folder / "case.json").write_bytes(parts[0])
    for part in parts[1:]:
        name, _, body = part.partition(b"\n")
        (folder / name.decode()).write_bytes(body)
    return folder


def adagrad_case():
    # Two fp16 tables (E, D) = (3, 2), (2, 3) placed with a gap (write_case repacks them at the
    # prefix offsets of E*D), three features, B = 2, weighted, an SR write-back.
    t0, t1 = int_table(3, 2, np.float16), int_table(2, 3, np.float16, base=100)
    W = np.concatenate([t0.ravel(), np.full(4, 7, np.float16), t1.ravel()])
    psw = np.array([1, 0.5, 2, 1, -1], np.float32)
    fwd = tv.ForwardProblem(W, i64(0, 2, 1, 0, 1), i64(0, 2, 2, 3, 4, 5, 5), rows=[3, 2],
                            dims=[2, 3], table_offsets=[0, 10], feature_table_map=[0, 1, 0],
                            batch_size=2, per_sample_weights=psw, policy="fbgemm-cuda",
                            output_dtype="fp32")
    fwd_packed = np.concatenate([t0.ravel(), t1.ravel()])
    grad = (np.arange(2 * 7, dtype=np.float32).reshape(2, 7) - 6) / 4
    opt = tv.OptimizerConfig(kind="rowwise_adagrad", learning_rate=0.05, eps=1e-6,
                             weight_decay=0.01, weight_decay_mode="l2", max_gradient=2.5)
    bp = tv.BackwardProblem(fwd, grad, momentum=np.arange(5, dtype=np.float32) / 8,
                            optimizer=opt, sr_seed=77, sr_offset=2)
    return bp, fwd_packed


def test_backward_round_trip(tmp_path):
    bp, W_packed = adagrad_case()
    res = tv.backward_reference(bp)
    W_after = np.asarray(res.weights)
    after_packed = np.concatenate([W_after[:6], W_after[10:]])
    case = tv.BackwardCaseFile(
        bp, name="py-backward", provenance="python/tests", seed=5,
        strategy=tv.BackwardStrategy(long_run_threshold=1, chunk_size=32,
                                     long_runs=tv.LongRuns.CHUNKED, deterministic=False,
                                     hoisted=True),
        recorded=tv.BackwardRecordedOutputs(implementation="reference", weights=res.weights,
                                            momentum=res.momentum,
                                            per_sample_weight_grad=res.per_sample_weight_grad,
                                            warnings=res.stats.warnings),
        expect=tv.Expectation(verdict="pass"))
    tv.write_case(str(tmp_path / "b"), case)
    assert tv.read_case_operator(str(tmp_path / "b")) == "backward"
    back = tv.read_case(str(tmp_path / "b"))
    assert isinstance(back, tv.BackwardCaseFile) and back.operator == "backward"
    assert (back.name, back.provenance, back.seed) == ("py-backward", "python/tests", 5)
    q = back.problem
    assert q.forward.table_offsets == [0, 6] and q.forward.feature_table_map == [0, 1, 0]
    assert_bitwise(q.forward.weights, W_packed)
    assert_bitwise(q.forward.per_sample_weights, bp.forward.per_sample_weights)
    assert_bitwise(q.grad_output, bp.grad_output.ravel())
    assert_bitwise(q.momentum, bp.momentum)
    o = q.optimizer
    assert (o.kind, o.learning_rate, o.eps, o.weight_decay, o.weight_decay_mode, o.max_norm,
            o.max_gradient) == (tv.OptimizerKind.EXACT_ROWWISE_ADAGRAD, 0.05, 1e-6, 0.01,
                                tv.WeightDecayMode.L2, 0.0, 2.5)
    assert (q.sr_seed, q.sr_offset) == (77, 2)
    s = back.strategy
    assert (s.long_run_threshold, s.chunk_size, s.long_runs, s.deterministic, s.hoisted) == (
        1, 32, tv.LongRuns.CHUNKED, False, True)
    r = back.recorded
    assert (r.implementation, r.warnings, r.error) == ("reference", res.stats.warnings, None)
    assert_bitwise(r.weights, after_packed)
    assert_bitwise(r.momentum, res.momentum)
    assert_bitwise(r.per_sample_weight_grad, res.per_sample_weight_grad)
    assert back.expect.verdict == "pass"
    # Judged from Python in two lines; written again, the folder is the same byte for byte.
    assert tv.check_backward(q, r.weights, momentum=r.momentum,
                             per_sample_weight_grad=r.per_sample_weight_grad).passed
    tv.write_case(str(tmp_path / "again"), back)
    assert folder_files(tmp_path / "again") == folder_files(tmp_path / "b")


def test_backward_recorded_outputs_are_optional_and_checked(tmp_path):
    bp, _ = adagrad_case()
    tv.write_case(str(tmp_path / "e"), tv.BackwardCaseFile(
        bp, recorded=tv.BackwardRecordedOutputs(implementation="k", error="device_error"),
        expect=tv.Expectation(verdict="fail", rule="docs/backward.md")))
    back = tv.read_case(str(tmp_path / "e"))
    assert back.strategy is None and back.recorded.error == "device_error"
    assert (back.recorded.weights, back.recorded.momentum,
            back.recorded.per_sample_weight_grad) == (None, None, None)
    short = tv.BackwardRecordedOutputs(momentum=np.zeros(4, np.float32))
    with pytest.raises(tv.InvalidArgument, match=r"recorded.momentum: 4 elements .* needs 5"):
        tv.write_case(str(tmp_path / "m"), tv.BackwardCaseFile(bp, recorded=short))
    wrong = tv.BackwardRecordedOutputs(weights=np.zeros(16, np.float32))
    with pytest.raises(TypeError, match=r"recorded.weights: dtype fp32"):
        tv.write_case(str(tmp_path / "w"), tv.BackwardCaseFile(bp, recorded=wrong))
    with pytest.raises(TypeError, match=r"case.problem: ForwardProblem is not a tbe_verify.BackwardProblem"):
        tv.write_case(str(tmp_path / "f"), tv.BackwardCaseFile(bp.forward))
    with pytest.raises(TypeError, match=r"case: str is not a tbe_verify.CaseFile"):
        tv.write_case(str(tmp_path / "s"), "case")


def lce_case(map_dtype=np.int64):
    rng = np.random.default_rng(3)
    bf16 = lambda *shape: to_bf16_bits(rng.integers(-4, 5, shape).astype(np.float32))
    return tv.LceProblem(bf16(2, 3), bf16(2, 1), bf16(4, 3, 5), bf16(3, 1, 5),
                         np.array([2, 0, 2, 1], map_dtype),
                         policy=tv.IkboPolicy(storage="bf16", lce_rounding="user-rounded"))


def test_lce_round_trip(tmp_path):
    p = lce_case()
    out = tv.lce_reference(p)
    case = tv.LceCaseFile(p, name="py-lce", seed=3, map="sorted",
                          recorded=tv.IkboRecordedOutput(implementation="reference", output=out))
    tv.write_case(str(tmp_path / "l"), case)
    back = tv.read_case(str(tmp_path / "l"))
    assert isinstance(back, tv.LceCaseFile) and back.operator == "ikbo-lce"
    assert (back.name, back.seed, back.map, back.expect) == ("py-lce", 3, tv.MapKind.SORTED, None)
    q = back.problem
    assert (q.B, q.U, q.M, q.N, q.K_c, q.K_u) == (4, 3, 2, 5, 3, 1) and q.policy == p.policy
    for name in ("w_c", "w_u", "e_c", "e_u"):
        assert getattr(q, name).shape == getattr(p, name).shape
        assert_bitwise(getattr(q, name), getattr(p, name))
    assert_bitwise(q.cand_to_user, p.cand_to_user.astype(np.int32))  # stored as int32
    assert back.recorded.output.shape == (4, 2, 5) and back.recorded.error is None
    assert_bitwise(back.recorded.output, out)
    assert tv.check_lce(q, back.recorded.output).passed
    tv.write_case(str(tmp_path / "again"), back)
    assert folder_files(tmp_path / "again") == folder_files(tmp_path / "l")


def attention_case(jagged):
    rng = np.random.default_rng(4)
    half = lambda *shape: (rng.integers(-8, 9, shape) / 8).astype(np.float16)
    # B = 3 candidates, n_seed = 2, H = 2, Dh = 4; U = 3 users with 2 keys each (dense) or key
    # ranges [0, 0), [0, 3), [3, 4) (jagged: user 0 owns none).
    keys = 4 if jagged else 6
    kw = dict(k_offsets=i64(0, 0, 3, 4)) if jagged else dict(S=2)
    return tv.AttentionProblem(half(6, 2, 4), half(keys, 2, 4), half(keys, 2, 4),
                               np.array([1, 0, 2], np.int32), n_seed=2, scale=0.25,
                               policy=tv.IkboPolicy(storage="fp16"), **kw)


@pytest.mark.parametrize("jagged", [False, True], ids=["dense", "jagged"])
def test_attention_round_trip(tmp_path, jagged):
    p = attention_case(jagged)
    out = tv.attention_reference(p)
    case = tv.AttentionCaseFile(p, name="py-attention", map=tv.MapKind.UNSORTED,
                                recorded=tv.IkboRecordedOutput(implementation="ref", output=out),
                                expect=tv.Expectation(verdict="pass"))
    tv.write_case(str(tmp_path / "a"), case)
    assert tv.read_case_operator(str(tmp_path / "a")) == "ikbo-attention"
    back = tv.read_case(str(tmp_path / "a"))
    assert isinstance(back, tv.AttentionCaseFile) and back.operator == "ikbo-attention"
    q = back.problem
    assert (q.B, q.U, q.n_seed, q.H, q.Dh, q.jagged, q.scale) == (3, 3, 2, 2, 4, jagged, 0.25)
    if jagged:
        assert_bitwise(q.k_offsets, i64(0, 0, 3, 4))
    else:
        assert q.S == 2 and q.k_offsets is None
    for name in ("q", "k", "v", "cand_to_user"):
        assert_bitwise(getattr(q, name), getattr(p, name))
    assert_bitwise(back.recorded.output, out)
    assert tv.check_attention(q, back.recorded.output).passed
    tv.write_case(str(tmp_path / "again"), back)
    assert folder_files(tmp_path / "again") == folder_files(tmp_path / "a")


def test_ikbo_recorded_output_is_checked(tmp_path):
    p = lce_case()
    with pytest.raises(tv.InvalidArgument, match=r"recorded.output: 39 elements .* needs 40"):
        tv.write_case(str(tmp_path / "n"), tv.LceCaseFile(
            p, recorded=tv.IkboRecordedOutput(output=np.zeros(39, np.uint16))))
    with pytest.raises(TypeError, match=r"recorded.output: dtype fp32 but policy.storage needs bf16"):
        tv.write_case(str(tmp_path / "t"), tv.LceCaseFile(
            p, recorded=tv.IkboRecordedOutput(output=np.zeros(40, np.float32))))
    with pytest.raises(tv.InvalidArgument, match=r"map"):
        tv.LceCaseFile(p, map="shuffled")


# The folders fuzz/make_corpus.cpp wrote with the C++ writer (io::write_case); the recorded
# outputs there come from the C++ reference, so the oracle must accept them.
needs_corpus = pytest.mark.skipif(not CORPUS.is_dir(), reason="no fuzz/corpus/fuzz_case_reader")


@needs_corpus
def test_cpp_written_backward_case_judged(tmp_path):
    folder = unframe(CORPUS / "case_backward_adagrad_sr", tmp_path / "c")
    case = tv.read_case(str(folder))
    assert isinstance(case, tv.BackwardCaseFile)
    assert (case.name, case.seed, case.strategy.chunk_size, case.strategy.hoisted) == (
        "backward-adagrad-sr", 11, 32, True)
    assert case.problem.optimizer.kind == tv.OptimizerKind.EXACT_ROWWISE_ADAGRAD
    r = case.recorded
    assert r.weights.dtype == np.float16 and r.momentum.dtype == np.float32
    report = tv.check_backward(case.problem, r.weights, momentum=r.momentum,
                               per_sample_weight_grad=r.per_sample_weight_grad)
    assert report.passed, str(report)
    # The same outputs as the reference computes from the folder's inputs (SR stream included).
    ref = tv.backward_reference(case.problem)
    assert_bitwise(r.weights, ref.weights)
    assert_bitwise(r.momentum, ref.momentum)
    # Read and written again from Python: the C++ writer's folder, byte for byte.
    tv.write_case(str(tmp_path / "again"), case)
    assert folder_files(tmp_path / "again") == folder_files(folder)
    # A judged-wrong output: one updated element moved fails the oracle.
    bad = r.weights.copy()
    touched = np.flatnonzero(r.weights != case.problem.forward.weights)[0]
    bad[touched] = -bad[touched] - 1
    assert not tv.check_backward(case.problem, bad, momentum=r.momentum).passed


@needs_corpus
@pytest.mark.parametrize("entry,cls,check", [
    ("case_lce_fp16", tv.LceCaseFile, tv.check_lce),
    ("case_attention_dense_fp32", tv.AttentionCaseFile, tv.check_attention),
    ("case_attention_jagged_bf16", tv.AttentionCaseFile, tv.check_attention),
])
def test_cpp_written_ikbo_cases_judged(tmp_path, entry, cls, check):
    case = tv.read_case(str(unframe(CORPUS / entry, tmp_path / "c")))
    assert isinstance(case, cls) and case.recorded.error is None
    assert case.recorded.output.shape == tuple(case.problem.output_shape)
    assert check(case.problem, case.recorded.output).passed


@needs_corpus
def test_cpp_written_case_with_a_recorded_error(tmp_path):
    case = tv.read_case(str(unframe(CORPUS / "case_lce_bf16_no_user_part", tmp_path / "c")))
    assert case.problem.K_u == 0 and case.map == tv.MapKind.USERS_WITHOUT_CANDIDATES
    assert (case.recorded.implementation, case.recorded.output, case.recorded.error) == (
        "somebody else", None, "device_error")


def edit_json(folder, edit):
    j = json.loads((folder / "case.json").read_text())
    edit(j)
    (folder / "case.json").write_text(json.dumps(j))


MALFORMED = {
    "optimizer kind": (lambda j: j["options"]["optimizer"].update(kind="adam"),
                       "options.optimizer.kind"),
    "unknown key": (lambda j: j["options"]["optimizer"].update(momentum=0.9),
                    'options.optimizer["momentum"]'),
    "missing key": (lambda j: j["options"].pop("sr_seed"), "options.sr_seed"),
    "strategy": (lambda j: j["strategy"].update(chunk_size=33), "strategy.chunk_size"),
    "operator": (lambda j: j.update(operator="ikbo-gemm"), "operator"),
}


@pytest.mark.parametrize("edit,key", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_backward_folder_names_the_key(tmp_path, edit, key):
    bp, _ = adagrad_case()
    folder = tmp_path / "b"
    strategy = tv.BackwardStrategy() if key.startswith("strategy") else None
    tv.write_case(str(folder), tv.BackwardCaseFile(bp, strategy=strategy))
    edit_json(folder, edit)
    with pytest.raises(ValueError, match=r"case\.json: " + re.escape(key)) as err:
        tv.read_case(str(folder))
    assert isinstance(err.value, tv.InvalidArgument) and err.value.argument == key


def test_malformed_ikbo_folder_names_the_file(tmp_path):
    folder = tmp_path / "l"
    tv.write_case(str(folder), tv.LceCaseFile(lce_case()))
    np.save(folder / "e_u.npy", np.zeros((3, 1, 4), np.uint16))  # N = 4, not 5
    with pytest.raises(tv.InvalidArgument, match=r"e_u\.npy"):
        tv.read_case(str(folder))
    (folder / "case.json").unlink()
    with pytest.raises(tv.InvalidArgument, match=r"case\.json: missing"):
        tv.read_case(str(folder))
