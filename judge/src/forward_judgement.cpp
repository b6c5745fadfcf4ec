// Judging one forward call (forward_judgement.h).
#include "tbe/judge/forward_judgement.h"

#include <algorithm>

#include "tbe/forward.h"
#include "tbe/judge/poisoned_output.h"
#include "tbe/oracle/forward_oracle.h"

namespace tbe::judge {
namespace {

void fail(ForwardJudgement& j, const std::string& check, const std::string& detail) {
  if (j.failed) return;  // keep the first
  j.failed = true;
  j.check = check;
  j.detail = detail;
}

}  // namespace

std::int64_t invalid_call_numel(const ForwardProblem& p) {
  std::int64_t cols = 0, maxd = 1;
  for (auto d : p.tables.dims) maxd = std::max<std::int64_t>(maxd, std::clamp(d, 1, 4096));
  const auto num_tables = static_cast<std::int32_t>(p.tables.dims.size());
  for (auto t : p.tables.feature_table_map)
    cols += (t >= 0 && t < num_tables) ? std::clamp(p.tables.dims[t], 1, 4096) : maxd;
  return std::min<std::int64_t>(
      (p.lookups.num_offsets + 1) * std::max<std::int64_t>(cols, 1) +
          (p.lookups.num_indices + 1) * maxd,
      std::int64_t{1} << 22);
}

ForwardExpectation expect_forward(const ForwardProblem& p) {
  ForwardExpectation e;
  const BoundsCheckMode mode = p.options.bounds_check;
  if (mode == BoundsCheckMode::Fatal) {
    e.violation = find_first_violation(p);
  } else if (mode == BoundsCheckMode::Warning || mode == BoundsCheckMode::Ignore) {
    e.repair = tbe::repair(p);
    e.warnings = e.repair->warnings;
  }
  return e;
}

ForwardJudgement judge_forward_call(Backend& dev, const ForwardProblem& p,
                                    const ForwardStrategy& strategy) {
  ForwardJudgement j;
  // nullopt on success, else the error as text.
  auto run_forward = [&](PoisonedOutput& out) -> std::optional<std::string> {
    j.call = call_forward(dev, p, strategy, out.data());
    if (j.call.outcome == ForwardCall::Outcome::DeviceError) j.device_lost = true;
    if (j.call.ok()) return std::nullopt;
    return j.call.error_text();
  };

  const Status st = validate(p);
  if (!st.ok()) {
    j.expected_invalid = true;
    PoisonedOutput out(DType::F32, invalid_call_numel(p));
    const auto err = run_forward(out);
    if (j.call.outcome != ForwardCall::Outcome::InvalidArgument) {
      fail(j, "invalid_argument",
           "expected InvalidArgument[" + st.argument + "]: " + st.message + "; got " +
               (err ? *err : std::string("no error")));
    } else if (j.call.argument != st.argument) {
      fail(j, "invalid_argument", "expected InvalidArgument[" + st.argument + "], got " + *err);
    } else if (!out.untouched()) {
      fail(j, "invalid_argument.untouched", "the output was written before InvalidArgument");
    }
    return j;
  }

  ForwardExpectation ex;
  try {
    ex = expect_forward(p);
  } catch (const std::exception& e) {
    fail(j, "reference", std::string("the reference threw: ") + e.what());
    return j;
  }
  j.expected_violation = ex.violation.has_value();
  j.expected_warnings = ex.warnings;
  if (ex.repair) {
    try {
      const RepairResult got = dev.repair(p);
      std::string why;
      if (!same_repair(*ex.repair, got, &why))
        fail(j, "repair", "backend repair vs tbe::repair: " + why);
    } catch (const DeviceError& e) {
      j.device_lost = true;
      fail(j, "device", std::string("repair: DeviceError: ") + e.what());
      return j;
    } catch (const std::exception& e) {
      fail(j, "repair", std::string("backend repair threw: ") + e.what());
    }
  }

  PoisonedOutput out(p.options.policy.output, make_output_layout(p).numel);
  const auto err = run_forward(out);
  if (ex.violation) {
    if (j.call.outcome != ForwardCall::Outcome::BoundsError) {
      fail(j, j.device_lost ? "device" : "fatal",
           "expected BoundsCheckError(" + to_string(*ex.violation) + "), got " +
               (err ? *err : std::string("no error")));
    } else if (!(j.call.violation == *ex.violation)) {
      fail(j, "fatal", "expected BoundsCheckError(" + to_string(*ex.violation) + "), got " + *err);
    } else if (!out.untouched()) {
      fail(j, "fatal.untouched", "output written under FATAL error");
    }
    return j;
  }
  if (err) {
    fail(j, j.device_lost ? "device" : "error", "forward: " + *err);
    return j;
  }
  j.output = out.output();
  if (!out.canary_intact()) fail(j, "canary", "the backend wrote past the end of the output");
  if (j.call.stats.warnings != j.expected_warnings)
    fail(j, "warnings", "expected " + std::to_string(j.expected_warnings) + " warnings, got " +
                            std::to_string(j.call.stats.warnings));
  try {
    const oracle::CheckReport rep = oracle::check_forward(p, j.output.data());
    if (!rep.passed()) fail(j, "oracle", rep.summary());
  } catch (const std::exception& e) {
    fail(j, "oracle", std::string("the oracle threw: ") + e.what());
  }
  return j;
}

}  // namespace tbe::judge
