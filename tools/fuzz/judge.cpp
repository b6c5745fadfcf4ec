// Judging one fuzz case (judge.h).
#include "fuzz/judge.h"

#include <exception>
#include <string>

namespace tbe::fuzz {

using judge::ForwardJudgement;

ForwardJudgement judge_case(Backend& dev, const FuzzCase& fc) {
  Built bt;
  try {
    build(fc, bt);
  } catch (const std::exception& e) {
    ForwardJudgement j;
    j.failed = true;
    j.check = "generator";
    j.detail = std::string("could not build the case: ") + e.what();
    return j;
  }
  ForwardStrategy strategy;
  strategy.fused_bounds_check = fc.fused;
  return judge::judge_forward_call(dev, bt.p, strategy);
}

Verdict verdict_of(const ForwardJudgement& j) {
  return {j.failed, j.check, j.detail, j.device_lost};
}

}  // namespace tbe::fuzz
