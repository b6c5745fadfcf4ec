// Soundness of the forward enclosures: no conforming implementation is ever rejected.
// Conforming implementations are the CPU emulations of tbe/oracle/policy_emulation.h (every
// summation order x every MEAN scaling, in the policy's accumulation type), the FP64 reference,
// and emulations in a *wider* accumulation type than the policy asks for.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <filesystem>
#include <sstream>

#include "oracle_test_support.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/host_case.h"
#include "tbe/io/case_file.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/oracle/policy_emulation.h"

using namespace tbe;
using namespace tbe::oracle;
using namespace tbe::oracle::testing;

namespace {

/// The first conforming output the oracle rejected: what produced it, and its values.
struct Escape {
  std::string message;  ///< "" when nothing escaped
  std::string implementation;
  std::vector<double> values;
};

/// Every conforming emulation of `c` must be inside; returns the first escape (message "" if none).
Escape first_escape(ForwardCase& c, std::uint64_t seed, bool include_wider) {
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
        if (!rep.passed())
          return {"emulation " + to_string(o) + ": " + rep.summary(), "emulation " + to_string(o), v};
      }
    }
  }
  // The FP64 reference (index order, FP64, one rounding) is conforming under every policy.
  std::vector<double> ref = forward_reference_fp64(p);
  for (auto& x : ref) x = round_to(p.options.policy.output, x);
  const CheckReport rep = judge_forward(p, enc, ref);
  if (!rep.passed()) return {"reference: " + rep.summary(), "forward_reference", ref};
  return {};
}

/// Saves an escape as a case folder (tbe-failures/oracle-soundness/, overwritten by every failing
/// evaluation, so it ends up holding RapidCheck's shrunk counterexample) with the rejected output
/// recorded and `expect: pass` (a conforming output must pass): `tbe-verify check DIR` replays the
/// oracle's false alarm. Never throws.
void save_escape(const ForwardCase& c, std::uint64_t seed, const Escape& e) {
  const std::string dir = "tbe-failures/oracle-soundness";
  try {
    io::CaseFile cf;
    cf.name = "oracle-soundness";
    cf.provenance = "test_oracle soundness property: " + e.message;
    cf.seed = seed;
    cf.problem = c;
    io::RecordedOutputs r;
    r.implementation = e.implementation;
    r.output_dtype = c.options.policy.output;
    r.output.resize(e.values.size() * dtype_size(r.output_dtype));
    for (std::size_t i = 0; i < e.values.size(); ++i)
      store_from_double(r.output_dtype, r.output.data(), static_cast<std::int64_t>(i), e.values[i]);
    cf.recorded = std::move(r);
    cf.expect = io::Expectation{"pass", ""};
    io::write_case(dir, cf);
    RC_LOG() << "case written: tbe-verify check " << dir << "\n";
  } catch (const std::exception& ex) {
    RC_LOG() << "could not write the failing case to " << dir << ": " << ex.what() << "\n";
  }
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
    Escape e;
    try {
      e = first_escape(c, spec.seed, /*include_wider=*/true);
    } catch (const BoundsCheckError&) {
      RC_FAIL("unexpected BoundsCheckError (the generator makes FATAL inputs valid)");
    }
    RC_LOG() << e.message << "\n";
    if (!e.message.empty()) save_escape(c, spec.seed, e);
    RC_ASSERT(e.message.empty());
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
    CHECK(first_escape(c, s.seed, true).message == "");
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
