// Soundness of the forward enclosures: no conforming implementation is ever rejected.
// Conforming implementations are the CPU emulations of tbe/oracle/policy_emulation.h (every
// summation order x every MEAN scaling, in the policy's accumulation type), the FP64 reference,
// and emulations in a *wider* accumulation type than the policy asks for.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <sstream>

#include "oracle_test_support.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/oracle/policy_emulation.h"

using namespace tbe;
using namespace tbe::oracle;
using namespace tbe::oracle::testing;

namespace {

/// Every conforming emulation of `c` must be inside; returns the first failure message or "".
std::string first_escape(ForwardCase& c, std::uint64_t seed, bool include_wider) {
  const ForwardProblem p = c.view();
  const ForwardEnclosures enc = compute_forward_enclosures(p);
  std::vector<MeanScaling> scalings = {MeanScaling::AtEnd};
  if (p.options.pooling == PoolingMode::Mean)
    scalings.assign(std::begin(kAllMeanScalings), std::end(kAllMeanScalings));
  std::vector<std::optional<DType>> accs = {std::nullopt};
  if (include_wider && p.options.policy.accumulation == DType::F32) accs.push_back(DType::F64);
  for (auto acc : accs) {
    for (SummationOrder order : kAllSummationOrders) {
      for (MeanScaling ms : scalings) {
        EmulationOptions o;
        o.order = order;
        o.mean_scaling = ms;
        o.seed = seed;
        o.accumulation = acc;
        const std::vector<double> v = emulate_forward(p, o);
        const CheckReport rep = judge_forward(p, enc, v);
        if (!rep.passed()) return "emulation " + to_string(o) + ": " + rep.summary();
      }
    }
  }
  // The FP64 reference (index order, FP64, one rounding) is conforming under every policy.
  std::vector<double> ref = forward_reference_fp64(p);
  for (auto& x : ref) x = round_to(p.options.policy.output, x);
  const CheckReport rep = judge_forward(p, enc, ref);
  if (!rep.passed()) return "reference: " + rep.summary();
  return "";
}

}  // namespace

TEST_CASE("forward enclosures are sound for random problems under every summation order",
          "[oracle][soundness]") {
  prop_n("zero escapes", 500, [] {
    const CaseSpec spec = *gen_case_spec();
    ForwardCase c = build_case(spec);
    // distribution printed on success: pooling x number of lookups N
    const std::size_t N = c.indices.size();
    RC_TAG(to_string(spec.pooling), N < 50 ? "N<50" : N < 1000 ? "N<1000" : "N>=1000");
    std::string msg;
    try {
      msg = first_escape(c, spec.seed, /*include_wider=*/true);
    } catch (const BoundsCheckError&) {
      RC_FAIL("unexpected BoundsCheckError (the generator makes FATAL inputs valid)");
    }
    RC_LOG() << msg << "\n";
    RC_ASSERT(msg.empty());
  });
}

TEST_CASE("forward enclosures are sound on long cancelling bags (seeded loop)",
          "[oracle][soundness]") {
  // Longer bags than the property test, FP32 accumulation (the tightest conforming policy).
  for (std::uint64_t seed = 1; seed <= 6; ++seed) {
    CaseSpec s;
    s.seed = seed * 7919;
    s.policy = PolicyKind::FbgemmCuda;
    s.weights = seed % 2 ? DType::F32 : DType::F16;
    s.output = seed % 3 == 0 ? DType::F16 : DType::F32;
    s.pooling = seed % 2 ? PoolingMode::Sum : PoolingMode::Mean;
    s.num_tables = 2;
    s.num_features = 2;
    s.dims = {3, 5};
    s.rows = {3, 4};
    s.batch = 2;
    s.bag_length_mode = 2;
    s.values = ValueMode::Cancellation;
    s.sample_weights = seed % 3 == 1 ? SampleWeightMode::NearOne : SampleWeightMode::None;
    ForwardCase c = build_case(s);
    // stretch one bag to ~3000 lookups of alternating-sign rows
    const std::int64_t pos = c.offsets[1];  // bag 0 grows by 3000 lookups at its end
    std::vector<std::int64_t> extra(3000);
    for (std::size_t i = 0; i < extra.size(); ++i) extra[i] = static_cast<std::int64_t>(i % 3);
    c.indices.insert(c.indices.begin() + pos, extra.begin(), extra.end());
    for (std::size_t k = 1; k < c.offsets.size(); ++k) c.offsets[k] += 3000;
    if (!c.per_sample_weights.empty())
      c.per_sample_weights.insert(c.per_sample_weights.begin() + pos, 3000, 1.0f);
    std::ostringstream os;
    os << s;
    INFO("seed " << s.seed << " " << os.str());
    CHECK(first_escape(c, s.seed, true) == "");
  }
}

TEST_CASE("every summation order and MEAN scaling is exercised and they differ",
          "[oracle][soundness]") {
  // Guards the soundness test against vacuity: on a cancelling FP32-accumulated bag the orders
  // must not all agree (otherwise the emulations would test nothing).
  CaseSpec s;
  s.seed = 42;
  s.policy = PolicyKind::FbgemmCuda;
  s.weights = DType::F32;
  s.output = DType::F32;
  s.pooling = PoolingMode::Sum;
  s.dims = {8};
  s.rows = {9};
  s.batch = 4;
  s.bag_length_mode = 2;
  s.values = ValueMode::Binades;
  s.exponent_spread = 30;
  ForwardCase c = build_case(s);
  const ForwardProblem p = c.view();
  std::vector<std::vector<double>> results;
  for (SummationOrder o : kAllSummationOrders) results.push_back(emulate_forward(p, o, 3));
  int distinct_pairs = 0;
  for (std::size_t i = 0; i < results.size(); ++i)
    for (std::size_t j = i + 1; j < results.size(); ++j) distinct_pairs += results[i] != results[j];
  CHECK(distinct_pairs >= 10);
}
