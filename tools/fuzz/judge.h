// Judging one fuzz case: build it and judge the forward call through tbe_judge
// (tbe/judge/forward_judgement.h) with the case's bounds-check strategy.
#pragma once

#include "fuzz/fuzz_case.h"
#include "fuzz/verdict.h"
#include "tbe/backend.h"
#include "tbe/judge/forward_judgement.h"

namespace tbe::fuzz {

/// judge_forward_call(dev, build(fc).p, {fused_bounds_check = fc.fused}); a case that cannot be
/// built fails check "generator".
judge::ForwardJudgement judge_case(Backend& dev, const FuzzCase& fc);

/// The verdict part of a forward judgement (what the shrinker preserves).
Verdict verdict_of(const judge::ForwardJudgement& j);

}  // namespace tbe::fuzz
