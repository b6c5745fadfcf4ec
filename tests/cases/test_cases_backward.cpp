// Backward cases of docs/edge-cases.md (C09, C12, C13) on the CPU backends, with the
// values given there. The GPU helper repeats them on the CUDA backend.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <memory>
#include <vector>

#include "../reference/backward_test_support.h"
#include "tbe/select_backend.h"

using namespace tbe;
using namespace tbe_test;

namespace {

std::vector<std::unique_ptr<Backend>> cpu_backends() {
  std::vector<std::unique_ptr<Backend>> v;
  v.push_back(make_reference_backend());
  v.push_back(select_backend(BackendKind::Cpu));
  return v;
}

/// C09: one table E = 4, D = 2, W[1] = [1, 1] (other rows 7 + r); features 0 and 1 both on it;
/// B = 1; bags [1] and [1]; grad_output ones [1 x 4]; Adagrad lr 0.5, eps 1e-8, momentum 0.
BackwardCase c09(DType wdt) {
  BackwardCase c;
  c.forward.set_tables(wdt, {4}, {2});
  for (int r = 0; r < 4; ++r)
    for (int d = 0; d < 2; ++d) c.forward.set_weight(0, r, d, r == 1 ? 1.0 : 7.0 + r);
  c.forward.feature_table_map = {0, 0};
  c.forward.batch_size = 1;
  c.forward.indices = {1, 1};
  c.forward.offsets = {0, 1, 2};
  c.forward.options.pooling = PoolingMode::Sum;
  c.forward.options.bounds_check = BoundsCheckMode::Fatal;
  c.forward.options.policy = make_policy(PolicyKind::SeedDefault, wdt, DType::F32);
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.learning_rate = 0.5;
  c.options.optimizer.eps = 1e-8;
  c.reset_momentum();
  c.resize_grad_output();
  for (int i = 0; i < 4; ++i) c.set_grad(i, 1.0);
  return c;
}

}  // namespace

TEST_CASE("C09: shared table, exact rowwise Adagrad: one update per unique row",
          "[cases][C09][backward]") {
  for (DType wdt : {DType::F32, DType::F16, DType::BF16}) {
    BackwardCase c = c09(wdt);
    const BackwardReference ref = backward_reference_fp64(c.view());
    REQUIRE(ref.transpose.run_lengths == std::vector<std::int64_t>{2});
    CHECK(ref.row_grad == std::vector<double>{2.0, 2.0});
    CHECK(ref.momentum == std::vector<double>{4.0});
    for (auto& be : cpu_backends()) {
      INFO(be->name() << " " << to_string(wdt));
      const BackwardRun run = run_backward(c, be.get());
      CHECK(run.momentum == std::vector<float>{0.0f, 4.0f, 0.0f, 0.0f});
      CHECK(run.weight(c, 0, 1, 0) == 0.5);
      CHECK(run.weight(c, 0, 1, 1) == 0.5);
      // two separate updates (G = [1, 1] each: m = 1 then 2) would give 1 - 0.5 = 0.5, then
      // 0.5 - 0.5/√2 ≈ 0.1464 (wrong; the oracle's sharpness test rejects it)
      for (int r : {0, 2, 3})
        for (int d = 0; d < 2; ++d) CHECK(run.weight(c, 0, r, d) == 7.0 + r);
      CHECK(run.stats.runs == 1);
      CHECK(run.stats.lookups == 2);
    }
  }
}

TEST_CASE("C12: stochastic rounding really happens (about 25% round up, seed-dependent)",
          "[cases][C12][backward]") {
  // FP16 weights E = 1024, D = 4, all 1.0; bags of one, each row once; grad_output -1; Adagrad
  // lr 2^-12, eps 1e-10: the exact update is 1 + 2^-12 (a quarter ulp above 1).
  BackwardCase c;
  c.forward.set_tables(DType::F16, {1024}, {4});
  for (int r = 0; r < 1024; ++r)
    for (int d = 0; d < 4; ++d) c.forward.set_weight(0, r, d, 1.0);
  c.forward.feature_table_map = {0};
  c.forward.batch_size = 1024;
  c.forward.offsets = {0};
  for (int r = 0; r < 1024; ++r) {
    c.forward.indices.push_back(r);
    c.forward.offsets.push_back(r + 1);
  }
  c.forward.options.bounds_check = BoundsCheckMode::Fatal;
  c.forward.options.policy =
      make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32, RoundingMode::Stochastic);
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.learning_rate = 0x1p-12;
  c.options.optimizer.eps = 1e-10;
  c.reset_momentum();
  c.resize_grad_output();
  for (int i = 0; i < 4096; ++i) c.set_grad(i, -1.0);

  for (auto& be : cpu_backends()) {
    INFO(be->name());
    std::vector<std::vector<std::byte>> patterns;
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      c.options.sr_seed = seed;
      const BackwardRun run = run_backward(c, be.get());
      std::int64_t up = 0;
      for (std::int64_t e = 0; e < 4096; ++e) {
        const double v = load_as_double(DType::F16, run.weights.data(), e);
        REQUIRE((v == 1.0 || v == 1 + 0x1p-10));
        up += v != 1.0;
      }
      INFO("seed " << seed << ": " << up << " of 4096 rounded up");
      CHECK(up >= 0.22 * 4096);
      CHECK(up <= 0.28 * 4096);
      patterns.push_back(run.weights);
    }
    CHECK(patterns[0] != patterns[1]);
    CHECK(patterns[1] != patterns[2]);
    c.forward.options.policy.write_back = RoundingMode::Nearest;  // SR off: all exactly 1
    const BackwardRun rne = run_backward(c, be.get());
    for (std::int64_t e = 0; e < 4096; ++e)
      CHECK(load_as_double(DType::F16, rne.weights.data(), e) == 1.0);
    c.forward.options.policy.write_back = RoundingMode::Stochastic;
  }
}

TEST_CASE("C13: deterministic backward: bitwise identical over 3 runs", "[cases][C13][backward]") {
  // E = 4, D = 64, 200000 lookups uniform in [0, 4), bags of 7 (the last one shorter), fixed
  // grad_output; FP32 SGD and FP16 Adagrad with stochastic rounding.
  for (bool adagrad : {false, true}) {
    BackwardCase c;
    const DType wdt = adagrad ? DType::F16 : DType::F32;
    c.forward.set_tables(wdt, {4}, {64});
    tbe::Rng rng(13, 0);
    for (int r = 0; r < 4; ++r)
      for (int d = 0; d < 64; ++d) c.forward.set_weight(0, r, d, 2 * rng.uniform() - 1);
    c.forward.feature_table_map = {0};
    const std::int64_t N = 200000, B = (N + 6) / 7;
    c.forward.batch_size = B;
    for (std::int64_t q = 0; q < N; ++q) c.forward.indices.push_back(rng.uniform_int(4));
    for (std::int64_t b = 0; b <= B; ++b) c.forward.offsets.push_back(std::min(7 * b, N));
    c.forward.options.bounds_check = BoundsCheckMode::Fatal;
    c.forward.options.policy = make_policy(PolicyKind::SeedDefault, wdt, DType::F32,
                                           adagrad ? RoundingMode::Stochastic
                                                   : RoundingMode::Nearest);
    c.options.optimizer.kind = adagrad ? OptimizerKind::ExactRowwiseAdagrad : OptimizerKind::ExactSgd;
    c.options.optimizer.learning_rate = 1e-4;
    c.options.sr_seed = 77;
    c.reset_momentum();
    c.resize_grad_output();
    for (std::int64_t i = 0; i < B * 64; ++i) c.set_grad(i, 2 * rng.uniform() - 1);

    for (auto& be : cpu_backends()) {
      INFO(be->name() << (adagrad ? " adagrad fp16 sr" : " sgd fp32"));
      const int threads = omp_get_max_threads();
      const BackwardRun a = run_backward(c, be.get());
      omp_set_num_threads(1);
      const BackwardRun b = run_backward(c, be.get());
      omp_set_num_threads(threads);
      const BackwardRun d = run_backward(c, be.get());
      CHECK(a.weights != c.forward.weights);
      CHECK(a.weights == b.weights);
      CHECK(a.weights == d.weights);
      CHECK(a.momentum == b.momentum);
      CHECK(a.momentum == d.momentum);
      CHECK(a.stats.runs == 4);
      CHECK(a.stats.lookups == N);
    }
  }
}
