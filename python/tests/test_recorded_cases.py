"""The recorded outside implementations (tests/data/<source>/<case>/, written by the recorders
tests/data/record_*.py): every folder reads through the io reader (read_case validates the
untrusted folder), and every backward and ikbo-attention case is judged through the Python
module against its `expect` block, as `tbe-verify check` judges the forward ones (ctest
tbe_verify_recorded_cases): a recorded error is right only where the reference raises
BoundsCheckError and the error is `bounds_check`; a recorded output must pass the oracle and its
warning count, if recorded, must equal the reference's.
"""
import pytest

from conftest import REPO_ROOT, tv

DATA = REPO_ROOT / "tests" / "data"
FOLDERS = sorted(p.parent for p in DATA.glob("*/*/case.json"))


def judge_backward(case):
    """(verdict, why) of a backward case's recorded outputs."""
    p, r = case.problem, case.recorded
    try:
        ref = tv.backward_reference(p)
    except tv.BoundsCheckError as e:
        ok = r.error == "bounds_check"
        return ("pass" if ok else "fail"), "the reference raises %s" % e
    if r.error is not None:
        return "fail", "recorded error %r, the reference computes an update" % r.error
    if r.warnings is not None and r.warnings != ref.stats.warnings:
        return "fail", "warnings %d != %d" % (r.warnings, ref.stats.warnings)
    assert r.weights is not None, "the recorders always record the weights"
    report = tv.check_backward(p, r.weights, momentum=r.momentum,
                               per_sample_weight_grad=r.per_sample_weight_grad)
    return ("pass" if report.passed else "fail"), str(report)


def judge_attention(case):
    if case.recorded.error is not None:
        return "fail", "recorded error %r on a valid call" % case.recorded.error
    report = tv.check_attention(case.problem, case.recorded.output)
    return ("pass" if report.passed else "fail"), str(report)


@pytest.mark.parametrize("folder", FOLDERS, ids=[f"{p.parent.name}/{p.name}" for p in FOLDERS])
def test_recorded_case(folder):
    case = tv.read_case(str(folder))
    judge = {"backward": judge_backward, "ikbo-attention": judge_attention}.get(case.operator)
    if judge is None:
        return  # forward: judged by tbe-verify check (ctest tbe_verify_recorded_cases)
    verdict, why = judge(case)
    assert verdict == case.expect.verdict, "%s: expected %s (%s), got %s: %s" % (
        folder, case.expect.verdict, case.expect.rule, verdict, why)
