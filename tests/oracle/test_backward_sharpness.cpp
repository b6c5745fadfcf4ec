// Sharpness of the backward enclosures: each seeded fault of tbe/oracle/backward_emulation.h is
// rejected, on an input built so that the fault provably matters, while the same emulation
// without the fault passes (the control of every case).
#include <catch2/catch.hpp>

#include <cmath>
#include <utility>

#include <omp.h>

#include "backward_oracle_test_support.h"

using namespace tbe;
using namespace tbe::oracle;
using namespace tbe::oracle::testing;

namespace {

/// One table E x D of `wdt` (W[r][d] = fill(r, d)), one feature, bags as given, SUM, FATAL,
/// FP32 grad_output; grads set by the caller; SGD lr 2^-4.
template <class Fill>
BackwardCase table_case(DType wdt, PolicyKind kind, std::int64_t E, std::int32_t D,
                        const std::vector<std::vector<std::int64_t>>& bags, Fill fill) {
  BackwardCase c;
  c.forward = single_table_case(wdt, DType::F32, kind, PoolingMode::Sum, E, D, bags, fill);
  c.options.optimizer.kind = OptimizerKind::ExactSgd;
  c.options.optimizer.learning_rate = 0x1p-4;
  c.resize_grad_output();
  return c;
}

/// `sl` bags of one lookup of row 1 (E = 3, D = 2, FP32 weights 1 + d), grads 1 + (b mod 7)/8:
/// every G_r is exact, so the enclosures of the stored row are a few ulps wide.
BackwardCase long_run_case(std::int64_t sl, PolicyKind kind = PolicyKind::FbgemmCuda) {
  std::vector<std::vector<std::int64_t>> bags(static_cast<std::size_t>(sl), std::vector<std::int64_t>{1});
  BackwardCase c = table_case(DType::F32, kind, 3, 2, bags, [](auto, auto d) { return 1.0 + d; });
  c.options.optimizer.learning_rate = 0x1p-10;
  for (std::int64_t b = 0; b < sl; ++b)
    for (int d = 0; d < 2; ++d) c.set_grad(2 * b + d, 1.0 + static_cast<double>(b % 7) / 8 + d);
  return c;
}

/// Judges the emulation with `o` of c; REQUIREs the same options without the fault to pass.
BackwardCheckReport judge_fault(BackwardCase& c, BackwardEmulationOptions o) {
  const BackwardProblem p = c.view();
  const BackwardEnclosures enc = compute_backward_enclosures(p);
  BackwardEmulationOptions control = o;
  control.fault = BackwardFault::None;
  control.accumulation.reset();
  const BackwardCheckReport ok = judge_backward(p, enc, emulate_backward(p, control).view());
  INFO("control " << to_string(control) << ":\n" << ok.summary());
  REQUIRE(ok.passed());
  return judge_backward(p, enc, emulate_backward(p, o).view());
}

void check_caught(const BackwardCheckReport& r, const std::string& report = "weights") {
  INFO(r.summary());
  CHECK_FALSE(r.passed());
  bool named = false;
  for (const auto& rep : r.reports) named = named || (rep.check == report && !rep.passed());
  CHECK(named);
}

}  // namespace

TEST_CASE("sharpness: eps inside the square root is rejected", "[oracle][backward][sharpness]") {
  // m = 0 + G² = 0.01 (D = 1), eps = 0.01: lr/(0.1 + 0.01) vs lr/sqrt(0.02), 29% apart.
  for (DType wdt : {DType::F32, DType::F16, DType::BF16}) {
    INFO(to_string(wdt));
    BackwardCase c = table_case(wdt, PolicyKind::SeedDefault, 2, 1, {{1}}, [](auto, auto) { return 1.0; });
    c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
    c.options.optimizer.learning_rate = 0.5;
    c.options.optimizer.eps = 0.01;
    c.reset_momentum();
    c.set_grad(0, 0.1);
    BackwardEmulationOptions o;
    o.fault = BackwardFault::EpsInsideSqrt;
    check_caught(judge_fault(c, o));
  }
}

TEST_CASE("sharpness: a lookup lost or duplicated at a 255/257 chunk boundary is rejected",
          "[oracle][backward][sharpness]") {
  for (std::int32_t cs : {255, 256, 257}) {
    for (BackwardFault f : {BackwardFault::ChunkBoundaryLost, BackwardFault::ChunkBoundaryDuplicated}) {
      INFO("chunk " << cs << " " << to_string(f));
      BackwardCase c = long_run_case(600);  // 3 chunks
      BackwardEmulationOptions o;
      o.order = SummationOrder::Chunked256;
      o.chunk_size = cs;
      o.fault = f;
      check_caught(judge_fault(c, o));
    }
  }
}

TEST_CASE("sharpness: a dropped chunk is rejected", "[oracle][backward][sharpness]") {
  for (std::int64_t sl : {257, 511, 512, 4096}) {
    INFO("SL " << sl);
    BackwardCase c = long_run_case(sl);
    BackwardEmulationOptions o;
    o.order = SummationOrder::Chunked256;
    o.fault = BackwardFault::DroppedChunk;
    check_caught(judge_fault(c, o));
  }
}

TEST_CASE("sharpness: a missing per-sample weight (treated as 1) is rejected",
          "[oracle][backward][sharpness]") {
  BackwardCase c = long_run_case(40, PolicyKind::SeedDefault);
  c.forward.per_sample_weights.assign(40, 1.0f);
  c.forward.per_sample_weights[17] = 0.25f;  // one lookup weighted 1/4
  BackwardEmulationOptions o;
  o.fault = BackwardFault::MissingPerSampleWeight;
  check_caught(judge_fault(c, o));
}

TEST_CASE("sharpness: two separate updates of a shared-table row are rejected (C09)",
          "[oracle][backward][sharpness]") {
  // C09: features 0 and 1 share the table; bags [1] and [1]; grads 1; Adagrad lr 0.5, eps 1e-8:
  // right answer 0.5, two separate updates give 0.1464...
  BackwardCase c = c09_case(DType::F32, PolicyKind::SeedDefault);
  BackwardEmulationOptions o;
  o.fault = BackwardFault::SeparateUpdatesPerFeature;
  const BackwardEmulationResult bad = emulate_backward(c.view(), o);
  const double w = load_as_double(DType::F32, bad.weights.data(), 2);
  CHECK(std::fabs(w - (0.5 - 0.5 / std::sqrt(2.0))) < 1e-6);  // the wrong 0.1464...
  check_caught(judge_fault(c, o));
  check_caught(judge_fault(c, o), "momentum");  // and the momentum is 2, not 4
}

TEST_CASE("sharpness: FP16 accumulation instead of FP32 is rejected",
          "[oracle][backward][sharpness]") {
  // Row 1: one lookup with grad 1, then 4096 lookups with grad 2^-12: G = 2 in FP32, but an FP16
  // accumulator (ulp 2^-10 at 1) absorbs every 2^-12 and returns 1.
  std::vector<std::vector<std::int64_t>> bags(4097, std::vector<std::int64_t>{1});
  BackwardCase c = table_case(DType::F16, PolicyKind::SeedDefault, 2, 1, bags, [](auto, auto) { return 1.0; });
  c.options.optimizer.learning_rate = 0.25;
  c.set_grad(0, 1.0);
  for (int b = 1; b <= 4096; ++b) c.set_grad(b, 0x1p-12);
  REQUIRE(c.forward.options.policy.accumulation == DType::F32);
  BackwardEmulationOptions o;
  o.accumulation = DType::F16;
  check_caught(judge_fault(c, o));  // stored 0.75 instead of 0.5
}

TEST_CASE("sharpness: a wrong 1/L is rejected", "[oracle][backward][sharpness]") {
  // MEAN, bags of 3 lookups of row 1 (and row 0): 1/(L+1) instead of 1/L.
  BackwardCase c = table_case(DType::F32, PolicyKind::FbgemmCuda, 3, 2, {{1, 1, 0}, {1, 2, 1}},
                              [](auto r, auto d) { return r - d * 0.5; });
  c.forward.options.pooling = PoolingMode::Mean;
  c.forward.per_sample_weights = {1, 2, 3, 0.5f, 1, 1};
  c.resize_grad_output();
  for (int i = 0; i < 4; ++i) c.set_grad(i, 1.0 + i);
  BackwardEmulationOptions o;
  o.fault = BackwardFault::WrongMeanScale;
  const BackwardCheckReport r = judge_fault(c, o);
  check_caught(r);
  check_caught(r, "per_sample_weight_grad");
}

TEST_CASE("sharpness: RNE where SR was asked passes per element but fails the z-test (C12)",
          "[oracle][backward][sharpness][sr]") {
  // C12: FP16 ones, 1024 rows looked up once, grad -1, Adagrad lr 2^-12, eps 1e-10: the exact
  // update is a quarter ulp above 1.
  std::vector<std::vector<std::int64_t>> bags;
  for (int r = 0; r < 1024; ++r) bags.push_back({r});
  BackwardCase c = table_case(DType::F16, PolicyKind::SeedDefault, 1024, 4, bags,
                              [](auto, auto) { return 1.0; });
  c.forward.options.policy.write_back = RoundingMode::Stochastic;
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.learning_rate = 0x1p-12;
  c.options.optimizer.eps = 1e-10;
  c.reset_momentum();
  for (int i = 0; i < 4096; ++i) c.set_grad(i, -1.0);
  const BackwardProblem p = c.view();
  const BackwardEnclosures enc = compute_backward_enclosures(p);

  SECTION("real SR with random draws passes both checks over several seeds") {
    for (std::uint64_t seed = 1; seed <= 6; ++seed) {
      BackwardEmulationOptions o;
      o.seed = seed;
      const BackwardEmulationResult r = emulate_backward(p, o);
      const BackwardCheckReport rep = judge_backward(p, enc, r.view());
      INFO(rep.summary());
      CHECK(rep.passed());
      const StochasticRoundingTest z = stochastic_rounding_test(p, enc, r.weights.data());
      INFO(z.summary());
      CHECK(z.samples == 4096);
      CHECK(z.passed());
    }
    const ReferenceRun ref = run_reference(c);  // the reference's Philox stream too
    CHECK(stochastic_rounding_test(p, enc, ref.weights.data()).passed());
    CHECK(judge_backward(p, enc, ref.view()).passed());
  }
  SECTION("RNE: inside every per-element enclosure, rejected by the z-test") {
    BackwardEmulationOptions o;
    o.fault = BackwardFault::NoStochasticRounding;
    const BackwardEmulationResult r = emulate_backward(p, o);
    for (std::int64_t e = 0; e < 4096; ++e)
      REQUIRE(load_as_double(DType::F16, r.weights.data(), e) == 1.0);
    const BackwardCheckReport rep = judge_backward(p, enc, r.view());
    INFO(rep.summary());
    CHECK(rep.passed());
    const StochasticRoundingTest z = stochastic_rounding_test(p, enc, r.weights.data());
    INFO(z.summary());
    CHECK_FALSE(z.passed());
    CHECK(z.mean_error_ulps < -0.2);
    CHECK(z.z < -30);
  }
}

TEST_CASE("sharpness: wrong values are rejected and located (weights, untouched, momentum, psw)",
          "[oracle][backward][report]") {
  BackwardCase c;
  c.forward = single_table_case(DType::BF16, DType::F32, PolicyKind::SeedDefault, PoolingMode::Sum,
                                6, 3, {{4, 1}, {4}}, [](auto r, auto d) { return r - d; });
  c.forward.feature_table_map = {0};
  c.forward.per_sample_weights = {1, 2, 3};
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.learning_rate = 0.1;
  c.reset_momentum();
  c.resize_grad_output();
  for (int i = 0; i < 6; ++i) c.set_grad(i, 0.5 * (i + 1));
  const BackwardProblem p = c.view();
  const BackwardEnclosures enc = compute_backward_enclosures(p);
  const ReferenceRun good = run_reference(c);
  REQUIRE(judge_backward(p, enc, good.view()).passed());
  auto report = [](const BackwardCheckReport& r, const std::string& name) {
    for (const auto& rep : r.reports)
      if (rep.check == name) return rep;
    FAIL("no report " << name);
    return CheckReport{};
  };

  SECTION("a touched weight") {
    ReferenceRun bad = good;
    const std::int64_t e = 4 * 3 + 2;  // row 4, column 2
    store_from_double(DType::BF16, bad.weights.data(), e, load_as_double(DType::BF16, bad.weights.data(), e) + 0.5);
    const CheckReport r = report(judge_backward(p, enc, bad.view()), "weights");
    INFO(r.summary());
    CHECK(r.failures == 1);
    CHECK(r.worst.where.table_row);
    CHECK(r.worst.where.feature == 0);
    CHECK(r.worst.where.row == 4);
    CHECK(r.worst.where.column == 2);
    CHECK(r.worst.where.flat == e);
    CHECK(r.summary().find("table 0, row 4, column 2") != std::string::npos);
  }
  SECTION("an untouched weight") {
    ReferenceRun bad = good;
    store_from_double(DType::BF16, bad.weights.data(), 5 * 3 + 1, 7.0);  // row 5 untouched
    const CheckReport r = report(judge_backward(p, enc, bad.view()), "weights.untouched");
    INFO(r.summary());
    CHECK(r.failures == 1);
    CHECK(r.elements == 4 * 3);
    CHECK(r.worst.where.row == 5);
    CHECK(r.worst.where.column == 1);
  }
  SECTION("a momentum, touched and untouched") {
    ReferenceRun bad = good;
    bad.momentum[1] *= 1.001f;
    bad.momentum[0] = 1.0f;
    const BackwardCheckReport all = judge_backward(p, enc, bad.view());
    const CheckReport m = report(all, "momentum"), mu = report(all, "momentum.untouched");
    INFO(all.summary());
    CHECK(m.failures == 1);
    CHECK(m.worst.where.row == 1);
    CHECK(m.worst.where.column == -1);
    CHECK(mu.failures == 1);
    CHECK(mu.worst.where.row == 0);
    CHECK(all.failures() == 2);
  }
  SECTION("a per-sample-weight gradient") {
    ReferenceRun bad = good;
    bad.psw_grad[2] += 0.25f;
    const CheckReport r = report(judge_backward(p, enc, bad.view()), "per_sample_weight_grad");
    INFO(r.summary());
    CHECK(r.failures == 1);
    CHECK(r.worst.where.lookup_row);
    CHECK(r.worst.where.row == 2);
    CHECK(r.worst.where.feature == 0);
    CHECK(r.worst.where.sample == 1);
  }
  SECTION("NaN is a failure; a missing buffer is an error") {
    ReferenceRun bad = good;
    store_from_double(DType::BF16, bad.weights.data(), 1 * 3, std::nan(""));
    CHECK_FALSE(judge_backward(p, enc, bad.view()).passed());
    BackwardResultView none = good.view();
    none.momentum = nullptr;
    CHECK_THROWS_AS(judge_backward(p, enc, none), InvalidArgument);
  }
}

TEST_CASE("judge_backward and the SR z-test report the same for any thread count",
          "[oracle][backward][report][sr]") {
  // 4096 FP16 rows of D = 32 (131072 elements: the parallel loops run), two lookups per bag,
  // Adagrad with SR; two stored values wrong, so failures and the worst element are located.
  constexpr std::int64_t E = 4096;
  constexpr std::int32_t D = 32;
  std::vector<std::vector<std::int64_t>> bags;
  for (std::int64_t b = 0; b < E; ++b) bags.push_back({b, (b * 7 + 3) % E});
  BackwardCase c = table_case(DType::F16, PolicyKind::SeedDefault, E, D, bags, [](auto r, auto d) {
    return 0.25 + static_cast<double>(r % 13) * 0.125 - static_cast<double>(d) * 0x1p-7;
  });
  c.forward.options.policy.write_back = RoundingMode::Stochastic;
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.learning_rate = 0.05;
  c.options.optimizer.eps = 1e-8;
  c.reset_momentum();
  for (std::int64_t i = 0; i < E * D; ++i) c.set_grad(i, static_cast<double>((i * 37) % 101 - 50) / 64.0);
  const BackwardProblem p = c.view();
  const BackwardEnclosures enc = compute_backward_enclosures(p);
  BackwardEmulationOptions o;
  o.seed = 3;
  BackwardEmulationResult r = emulate_backward(p, o);
  store_from_double(DType::F16, r.weights.data(), 1000, 7.0);
  store_from_double(DType::F16, r.weights.data(), 90000, -7.0);

  auto run = [&](int threads) {
    omp_set_num_threads(threads);
    const BackwardCheckReport rep = judge_backward(p, enc, r.view());
    const StochasticRoundingTest z = stochastic_rounding_test(p, enc, r.weights.data());
    return std::make_pair(rep, z);
  };
  const int saved = omp_get_max_threads();
  const auto [rep1, z1] = run(1);
  const auto [rep4, z4] = run(4);
  omp_set_num_threads(saved);
  REQUIRE(rep1.reports.size() == rep4.reports.size());
  CHECK(rep1.reports[0].failures == 2);
  CHECK(rep1.summary() == rep4.summary());
  for (std::size_t i = 0; i < rep1.reports.size(); ++i) {
    CHECK(rep1.reports[i].elements == rep4.reports[i].elements);
    CHECK(rep1.reports[i].failures == rep4.reports[i].failures);
    CHECK(rep1.reports[i].worst.where.flat == rep4.reports[i].worst.where.flat);
    CHECK(rep1.reports[i].worst.position == rep4.reports[i].worst.position);
  }
  CHECK(z1.samples > 0);
  CHECK(z1.samples == z4.samples);
  CHECK(z1.excluded == z4.excluded);
  CHECK(z1.mean_error_ulps == z4.mean_error_ulps);  // bitwise: the sums run in element order
  CHECK(z1.variance == z4.variance);
  CHECK(z1.bias_bound == z4.bias_bound);
  CHECK(z1.z == z4.z);
}
