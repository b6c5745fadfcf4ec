// The shrinker of tbe-fuzz: greedy passes over a failing case (drop features, drop unused tables,
// halve B, drop samples/bags, drop lookups, drop the leading indices and the offset faults, shrink
// D and E, drop the per-sample weights), keeping a step only when the candidate still fails the
// same check, until a pass keeps nothing or the budget is spent.
#pragma once

#include <functional>

#include "fuzz/fuzz_case.h"
#include "fuzz/verdict.h"

namespace tbe::fuzz {

/// Judges one candidate (tbe-fuzz: the forward or backward judge of the case's operator on the
/// backend under test, with the rest of the case fixed).
using CaseJudge = std::function<Verdict(const FuzzCase&)>;

/// The shrinker's budget: judged candidates and wall-clock seconds. The result is deterministic in
/// the failing case and the judge as long as max_seconds is not what stops it.
struct ShrinkLimits {
  int max_runs = 400;
  double max_seconds = 60.0;
};

struct ShrinkResult {
  FuzzCase shrunk;             ///< the smallest case found (the input when no step was kept)
  Verdict verdict;             ///< the verdict of `shrunk`
  int steps = 0;               ///< steps kept
  int runs = 0;                ///< candidates judged
};

/// Shrinks `failing`, whose judgement is `first` (first.failed). A candidate is kept only when
/// judge(candidate) fails the same check (first.check) without losing the device, so `shrunk`
/// always fails that check. Candidates are tried in a fixed order.
ShrinkResult shrink(const FuzzCase& failing, const Verdict& first,
                    const CaseJudge& judge, const ShrinkLimits& limits = {});

}  // namespace tbe::fuzz
