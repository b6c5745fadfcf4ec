// Soundness of the backward enclosures: no conforming implementation is ever rejected.
// Conforming implementations: the CPU emulations of tbe/oracle/backward_emulation.h (every
// summation order of a run, chunks of 255/256/257/32 then a second-level sum, every term form,
// random column orders, FP32 and FP64 optimizer arithmetic, FP64 accumulation under FP32
// policies, stochastic rounding with random draws) and the FP64 reference.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <sstream>

#include "../reference/backward_test_support.h"
#include "backward_oracle_test_support.h"
#include "tbe/errors.h"

using namespace tbe;
using namespace tbe::oracle;
using namespace tbe::oracle::testing;

namespace {

/// The first conforming result the oracle rejects ("" if none).
std::string first_escape(BackwardCase& c, std::uint64_t seed) {
  const BackwardProblem p = c.view();
  const BackwardEnclosures enc = compute_backward_enclosures(p);
  for (const BackwardEmulationOptions& o : conforming_emulations(p, seed)) {
    const BackwardEmulationResult r = emulate_backward(p, o);
    const BackwardCheckReport rep = judge_backward(p, enc, r.view());
    if (!rep.passed()) return "emulation " + to_string(o) + ":\n" + rep.summary();
  }
  const ReferenceRun ref = run_reference(c);
  const BackwardCheckReport rep = judge_backward(p, enc, ref.view());
  if (!rep.passed()) return "reference:\n" + rep.summary();
  return "";
}

}  // namespace

TEST_CASE("backward enclosures are sound for random problems under every conforming choice",
          "[oracle][backward][soundness]") {
  prop_n("zero escapes", 500, [] {
    const BackwardSpec spec = *gen_backward_spec();
    BackwardCase c = build_backward_case(spec);
    std::string escape;
    try {
      const BackwardEnclosures enc = compute_backward_enclosures(c.view());
      RC_TAG(to_string(spec.optimizer.kind), max_sl_bucket(enc));
      escape = first_escape(c, spec.forward.seed);
    } catch (const BoundsCheckError&) {
      RC_FAIL("unexpected BoundsCheckError (the generator makes FATAL inputs valid)");
    }
    RC_LOG() << escape << "\n";
    RC_ASSERT(escape.empty());
  });
}

TEST_CASE("backward enclosures are sound for every routing SL (1, 2, 255 ... 512, 4096)",
          "[oracle][backward][soundness]") {
  // The reference tests' generator: one run forced to each SL where the GPU routing changes.
  prop_n("zero escapes at the routing SLs", 200, [] {
    const tbe_test::GenBackward g = *tbe_test::gen_backward();
    BackwardCase c = g.c;
    RC_TAG(tbe_test::sl_bucket(g.forced_sl));
    const std::string escape = first_escape(c, g.content_seed);
    RC_LOG() << escape << "\n";
    RC_ASSERT(escape.empty());
  });
}

TEST_CASE("backward enclosures are sound on one run of ~125K lookups",
          "[oracle][backward][soundness][long]") {
  // Row 2 of an FP16 table (D = 4) looked up 125000 times in bags of 5 (MEAN, weighted), FP32
  // accumulation, Adagrad with L2, SR: chunks of 256 (the long-run paths), random and sorted
  // orders, and the reference all land inside.
  BackwardCase c;
  ForwardCase& fc = c.forward;
  fc.set_tables(DType::F16, {5}, {4});
  tbe::Rng rng(125000, 3);
  for (int r = 0; r < 5; ++r)
    for (int d = 0; d < 4; ++d) fc.set_weight(0, r, d, 2 * rng.uniform() - 1);
  fc.feature_table_map = {0};
  fc.batch_size = 25000;
  fc.offsets = {0};
  for (std::int64_t b = 0; b < fc.batch_size; ++b) {
    for (int i = 0; i < 5; ++i) fc.indices.push_back(2);
    fc.offsets.push_back(static_cast<std::int64_t>(fc.indices.size()));
  }
  fc.per_sample_weights.resize(fc.indices.size());
  for (auto& w : fc.per_sample_weights) w = static_cast<float>(0.5 + rng.uniform());
  fc.options.pooling = PoolingMode::Mean;
  fc.options.bounds_check = BoundsCheckMode::Fatal;
  fc.options.policy =
      make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32, RoundingMode::Stochastic);
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.learning_rate = 0.01;
  c.options.optimizer.weight_decay_mode = WeightDecayMode::L2;
  c.options.optimizer.weight_decay = 0.01;
  c.reset_momentum();
  c.resize_grad_output();
  for (std::int64_t i = 0; i < fc.batch_size * 4; ++i) c.set_grad(i, 2 * rng.uniform() - 1);
  const BackwardProblem p = c.view();
  const BackwardEnclosures enc = compute_backward_enclosures(p);
  REQUIRE(enc.reference.transpose.run_lengths == std::vector<std::int64_t>{125000});
  for (SummationOrder order : {SummationOrder::Chunked256, SummationOrder::RandomPermutation,
                               SummationOrder::SortedDescending, SummationOrder::PairwiseTree}) {
    BackwardEmulationOptions o;
    o.order = order;
    o.seed = 17;
    const BackwardCheckReport rep = judge_backward(p, enc, emulate_backward(p, o).view());
    INFO(to_string(o) << "\n" << rep.summary());
    CHECK(rep.passed());
  }
  const ReferenceRun ref = run_reference(c);
  CHECK(judge_backward(p, enc, ref.view()).passed());
}

TEST_CASE("backward enclosures are sound on long runs split into chunks of 255/256/257",
          "[oracle][backward][soundness]") {
  // One hot row per table looked up 600..5000 times with cancelling grads, FP32 accumulation
  // (the tightest conforming policy), both optimizers, FP16 and FP32 weights, SR and RNE.
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    BackwardSpec s;
    s.forward.seed = seed * 104729;
    s.forward.policy = PolicyKind::FbgemmCuda;
    s.forward.weights = seed % 2 ? DType::F16 : DType::F32;
    s.forward.output = seed % 3 == 0 ? DType::BF16 : DType::F32;
    s.forward.pooling = seed % 4 == 0 ? PoolingMode::Mean : PoolingMode::Sum;
    s.forward.num_tables = 2;
    s.forward.num_features = 3;
    s.forward.dims = {4, 9};
    s.forward.rows = {3, 2};
    s.forward.batch = 5;
    s.forward.bag_length_mode = 2;
    s.forward.values = ValueMode::Binades;
    s.forward.sample_weights = seed % 3 == 1 ? SampleWeightMode::NearOne : SampleWeightMode::None;
    s.forward.bounds_check = BoundsCheckMode::Fatal;
    s.write_back = seed % 2 ? RoundingMode::Stochastic : RoundingMode::Nearest;
    s.grads = ValueMode::Cancellation;
    s.optimizer.kind = seed % 2 ? OptimizerKind::ExactRowwiseAdagrad : OptimizerKind::ExactSgd;
    s.optimizer.learning_rate = 0.05;
    if (seed % 4 == 1) {
      s.optimizer.weight_decay_mode = WeightDecayMode::L2;
      s.optimizer.weight_decay = 0.1;
    }
    s.optimizer.max_norm = seed % 3 == 2 ? 2.0 : 0.0;
    s.sr_seed = seed;
    BackwardCase c = build_backward_case(s);
    std::ostringstream os;
    os << s;
    INFO(os.str());
    const BackwardEnclosures enc = compute_backward_enclosures(c.view());
    std::int64_t max_sl = 0;
    for (auto sl : enc.reference.transpose.run_lengths) max_sl = std::max(max_sl, sl);
    CHECK(max_sl > 512);
    CHECK(first_escape(c, s.forward.seed) == "");
  }
}

TEST_CASE("the emulations differ from each other (the soundness test is not vacuous)",
          "[oracle][backward][soundness]") {
  BackwardSpec s;
  s.forward.seed = 99;
  s.forward.policy = PolicyKind::FbgemmCuda;
  s.forward.weights = DType::F32;
  s.forward.output = DType::F32;
  s.forward.dims = {8};
  s.forward.rows = {3};
  s.forward.batch = 4;
  s.forward.bag_length_mode = 2;
  s.forward.values = ValueMode::Binades;
  s.forward.bounds_check = BoundsCheckMode::Fatal;
  s.grads = ValueMode::Binades;
  s.grad_spread = 25;
  s.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  s.optimizer.learning_rate = 0.5;
  BackwardCase c = build_backward_case(s);
  const BackwardProblem p = c.view();
  std::vector<std::vector<std::byte>> results;
  for (const auto& o : conforming_emulations(p, 5)) results.push_back(emulate_backward(p, o).weights);
  int distinct = 0;
  for (std::size_t i = 0; i < results.size(); ++i)
    for (std::size_t j = i + 1; j < results.size(); ++j) distinct += results[i] != results[j];
  CHECK(distinct >= 20);
}

TEST_CASE("FP64 emulation in index order equals the reference bit for bit",
          "[oracle][backward][emulation]") {
  prop_n("emulate(F64, F64, index, divide) == backward_reference", 100, [] {
    BackwardSpec spec = *gen_backward_spec();
    spec.write_back = RoundingMode::Nearest;
    BackwardCase c = build_backward_case(spec);
    BackwardEmulationOptions o;
    o.order = SummationOrder::IndexOrder;
    o.column_order = SummationOrder::IndexOrder;
    o.term_form = TermForm::Divide;
    o.accumulation = DType::F64;
    o.optimizer_arithmetic = DType::F64;
    const BackwardEmulationResult e = emulate_backward(c.view(), o);
    const ReferenceRun r = run_reference(c);
    RC_ASSERT(e.weights == r.weights);
    RC_ASSERT(e.momentum == r.momentum);
    RC_ASSERT(e.per_sample_weight_grad == r.psw_grad);
  });
}
