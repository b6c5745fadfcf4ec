// The FP64 reference backward + exact optimizers: hand-computed cases (values written from the
// formulas of docs/backward.md in the test), the semantic choices of docs/backward.md, stochastic rounding
// and its Philox stream, the transpose, and "nothing written on error / only touched rows change".
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include "backward_test_support.h"

using namespace tbe;
using namespace tbe_test;

namespace {

/// One table E x D of `wdt`, W[r][d] = fill(r, d), bags as given (B = bags.size()), SUM, FATAL,
/// FP32 output, SGD lr 0.125; grad_output zeros (set by the test).
template <class Fill>
BackwardCase hand_case(std::int64_t E, std::int32_t D,
                       const std::vector<std::vector<std::int64_t>>& bags, Fill fill,
                       DType wdt = DType::F32) {
  BackwardCase c;
  std::vector<std::int64_t> idx, off = {0};
  for (const auto& b : bags) {
    idx.insert(idx.end(), b.begin(), b.end());
    off.push_back(static_cast<std::int64_t>(idx.size()));
  }
  c.forward = one_table_case(E, D, static_cast<std::int64_t>(bags.size()), idx, off, fill, wdt);
  c.forward.options.bounds_check = BoundsCheckMode::Fatal;
  c.options.optimizer.kind = OptimizerKind::ExactSgd;
  c.options.optimizer.learning_rate = 0.125;
  c.resize_grad_output();
  return c;
}

void set_grads(BackwardCase& c, const std::vector<double>& g) {
  REQUIRE(g.size() * dtype_size(c.forward.options.policy.output) == c.grad_output.size());
  for (std::size_t i = 0; i < g.size(); ++i) c.set_grad(static_cast<std::int64_t>(i), g[i]);
}

/// FP64 updated row of (table t, row r) from the reference, or empty if untouched.
std::vector<double> updated_row(const BackwardReference& ref, std::int64_t t, std::int64_t r) {
  for (std::size_t k = 0; k < ref.run_row.size(); ++k)
    if (ref.run_table[k] == t && ref.run_row[k] == r)
      return {ref.updated.begin() + ref.run_col_offset[k],
              ref.updated.begin() + ref.run_col_offset[k + 1]};
  return {};
}
std::vector<double> grad_row(const BackwardReference& ref, std::int64_t t, std::int64_t r) {
  for (std::size_t k = 0; k < ref.run_row.size(); ++k)
    if (ref.run_table[k] == t && ref.run_row[k] == r)
      return {ref.row_grad.begin() + ref.run_col_offset[k],
              ref.row_grad.begin() + ref.run_col_offset[k + 1]};
  return {};
}

double f32(double x) { return static_cast<double>(static_cast<float>(x)); }

}  // namespace

// ---- hand-computed updates -------------------------------------------------------------------------

TEST_CASE("SGD: one lookup updates one row by minus lr times G (hand-computed)", "[backward]") {
  auto c = hand_case(3, 2, {{1}}, [](auto r, auto d) { return r + 1.0 + d; });  // W[1] = [2, 3]
  set_grads(c, {0.5, -1.0});
  const BackwardReference ref = backward_reference_fp64(c.view());
  CHECK(ref.transpose.linear_ids == std::vector<std::int64_t>{1});
  CHECK(grad_row(ref, 0, 1) == std::vector<double>{0.5, -1.0});
  CHECK(updated_row(ref, 0, 1) == std::vector<double>{2 - 0.0625, 3 + 0.125});
  const BackwardRun run = run_backward(c);
  CHECK(run.weight(c, 0, 1, 0) == 1.9375);
  CHECK(run.weight(c, 0, 1, 1) == 3.125);
  for (int r : {0, 2})
    for (int d = 0; d < 2; ++d) CHECK(run.weight(c, 0, r, d) == c.forward.weight(0, r, d));
  CHECK(run.stats.runs == 1);
  CHECK(run.stats.lookups == 1);
  CHECK(run.stats.counters.short_runs == 1);
  CHECK(run.stats.paths == std::vector<std::string>{"reference"});
}

TEST_CASE("rowwise Adagrad: each weight-decay mode on a 1-row example (hand-computed)",
          "[backward][adagrad]") {
  // W = [1, 2], G = [0.5, -1] (one lookup), momentum before 0.25, lr 0.5, eps 0.25, wd 0.5.
  auto c = hand_case(1, 2, {{0}}, [](auto, auto d) { return d + 1.0; });
  set_grads(c, {0.5, -1.0});
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.learning_rate = 0.5;
  c.options.optimizer.eps = 0.25;
  c.options.optimizer.weight_decay = 0.5;
  c.reset_momentum();
  c.momentum[0] = 0.25f;
  const double w0 = 1, w1 = 2, G0 = 0.5, G1 = -1, lr = 0.5, eps = 0.25, wd = 0.5;

  SECTION("NONE: g' = G, corr = 1") {
    c.options.optimizer.weight_decay_mode = WeightDecayMode::None;
    const double m = 0.25 + (G0 * G0 + G1 * G1) / 2;  // 0.875
    const double mult = lr / (std::sqrt(m) + eps);
    const auto ref = backward_reference_fp64(c.view());
    CHECK(ref.momentum == std::vector<double>{m});
    CHECK(updated_row(ref, 0, 0) == std::vector<double>{w0 - mult * G0, w1 - mult * G1});
    const auto run = run_backward(c);
    CHECK(run.momentum[0] == static_cast<float>(m));
    CHECK(run.weight(c, 0, 0, 0) == f32(w0 - mult * G0));
    CHECK(run.weight(c, 0, 0, 1) == f32(w1 - mult * G1));
  }
  SECTION("L2: g' = G + wd*w, corr = 1 - mult*wd") {
    c.options.optimizer.weight_decay_mode = WeightDecayMode::L2;
    const double g0 = G0 + wd * w0, g1 = G1 + wd * w1;  // [1, 0]
    const double m = 0.25 + (g0 * g0 + g1 * g1) / 2;    // 0.75
    const double mult = lr / (std::sqrt(m) + eps);
    const double corr = 1 - mult * wd;
    const auto ref = backward_reference_fp64(c.view());
    CHECK(ref.momentum == std::vector<double>{m});
    CHECK(updated_row(ref, 0, 0) ==
          std::vector<double>{corr * w0 - mult * G0, corr * w1 - mult * G1});
    CHECK(m == 0.75);
  }
  SECTION("DECOUPLE: g' = G, corr = 1 - lr*wd") {
    c.options.optimizer.weight_decay_mode = WeightDecayMode::Decoupled;
    const double m = 0.25 + (G0 * G0 + G1 * G1) / 2;
    const double mult = lr / (std::sqrt(m) + eps);
    const double corr = 1 - lr * wd;  // 0.75
    const auto ref = backward_reference_fp64(c.view());
    CHECK(ref.momentum == std::vector<double>{m});
    CHECK(updated_row(ref, 0, 0) ==
          std::vector<double>{corr * w0 - mult * G0, corr * w1 - mult * G1});
  }
}

TEST_CASE("eps is added outside the square root", "[backward][adagrad]") {
  // momentum 0, G = [2] (D = 1): m = 4, sqrt(m) + eps = 2.5 with eps = 0.5 (inside: sqrt(4.5)).
  auto c = hand_case(1, 1, {{0}}, [](auto, auto) { return 1.0; });
  set_grads(c, {2.0});
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.learning_rate = 1.0;
  c.options.optimizer.eps = 0.5;
  c.reset_momentum();
  const auto ref = backward_reference_fp64(c.view());
  CHECK(updated_row(ref, 0, 0) == std::vector<double>{1.0 - (1.0 / 2.5) * 2.0});  // 0.2
}

TEST_CASE("hyper-parameters are used as FP32 values", "[backward]") {
  auto c = hand_case(1, 1, {{0}}, [](auto, auto) { return 1.0; });
  set_grads(c, {1.0});
  c.options.optimizer.learning_rate = 0.1;  // 0.1f = 0.100000001490116...
  CHECK(effective_hyper_parameter(0.1) == static_cast<double>(0.1f));
  CHECK(effective_hyper_parameter(0.1) != 0.1);
  const auto ref = backward_reference_fp64(c.view());
  CHECK(updated_row(ref, 0, 0) == std::vector<double>{1.0 - static_cast<double>(0.1f)});
}

TEST_CASE("MEAN and per-sample weights: c_p = w_p/L, shared table adds into one G_r",
          "[backward]") {
  // Tables: one, E = 4, D = 1; features 0 and 1 both on table 0; B = 1.
  // f0 bag [1, 2] (weights 2, 3), f1 bag [1, 1, 3, 1] (weights 1, 0.5, 4, -1).
  BackwardCase c;
  c.forward.set_tables(DType::F32, {4}, {1});
  for (int r = 0; r < 4; ++r) c.forward.set_weight(0, r, 0, 10.0 * r);
  c.forward.feature_table_map = {0, 0};
  c.forward.batch_size = 1;
  c.forward.indices = {1, 2, 1, 1, 3, 1};
  c.forward.offsets = {0, 2, 6};
  c.forward.per_sample_weights = {2, 3, 1, 0.5, 4, -1};
  c.forward.options.pooling = PoolingMode::Mean;
  c.forward.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  c.options.optimizer.learning_rate = 1.0;
  c.resize_grad_output();
  set_grads(c, {8.0, 4.0});  // output [1, 2]: g(f0) = 8, g(f1) = 4
  const auto ref = backward_reference_fp64(c.view());
  CHECK(grad_row(ref, 0, 1) == std::vector<double>{2 * 8 / 2.0 + (1 + 0.5 - 1) * 4 / 4.0});  // 8.5
  CHECK(grad_row(ref, 0, 2) == std::vector<double>{3 * 8 / 2.0});
  CHECK(grad_row(ref, 0, 3) == std::vector<double>{4 * 4 / 4.0});
  CHECK(grad_row(ref, 0, 0).empty());
  CHECK(ref.transpose.run_lengths == std::vector<std::int64_t>{4, 1, 1});
  // dL/dw_p = (1/L)·<g, W[i_p]>
  CHECK(ref.per_sample_weight_grad ==
        std::vector<double>{8 * 10 / 2.0, 8 * 20 / 2.0, 4 * 10 / 4.0, 4 * 10 / 4.0, 4 * 30 / 4.0,
                            4 * 10 / 4.0});
  c.forward.options.pooling = PoolingMode::Sum;  // SUM: no 1/L anywhere
  const auto sum = backward_reference_fp64(c.view());
  CHECK(grad_row(sum, 0, 1) == std::vector<double>{2 * 8 + (1 + 0.5 - 1) * 4});
  CHECK(sum.per_sample_weight_grad == std::vector<double>{80, 160, 40, 40, 120, 40});
  const auto run = run_backward(c);
  CHECK(run.psw_grad == std::vector<float>{80, 160, 40, 40, 120, 40});
}

TEST_CASE("empty bag under MEAN contributes nothing (no 1/0)", "[backward]") {
  auto c = hand_case(3, 2, {{}, {2, 2}, {}}, [](auto, auto) { return 1.0; });
  c.forward.options.pooling = PoolingMode::Mean;
  set_grads(c, {std::nan(""), std::nan(""), 4.0, -2.0, 1e30, 1e30});  // empty bags' rows unused
  const auto ref = backward_reference_fp64(c.view());
  CHECK(ref.transpose.linear_ids == std::vector<std::int64_t>{2});
  CHECK(grad_row(ref, 0, 2) == std::vector<double>{4.0, -2.0});  // 2 · g / 2
}

TEST_CASE("positions outside every bag: no gradient, per-sample-weight gradient 0", "[backward]") {
  auto c = hand_case(4, 1, {{1}, {2}}, [](auto r, auto) { return r + 1.0; });
  // Prepend two positions before offsets[0] (they look up row 3, but belong to no bag).
  c.forward.indices = {3, 3, 1, 2};
  c.forward.offsets = {2, 3, 4};
  c.forward.per_sample_weights = {5, 5, 1, 1};
  set_grads(c, {1.0, 1.0});
  const auto ref = backward_reference_fp64(c.view());
  CHECK(ref.transpose.position_bag == std::vector<std::int64_t>{-1, -1, 0, 1});
  CHECK(ref.transpose.sorted_positions == std::vector<std::int64_t>{2, 3});
  CHECK(grad_row(ref, 0, 3).empty());
  const auto run = run_backward(c);
  CHECK(run.psw_grad == std::vector<float>{0, 0, 2, 3});
  CHECK(run.weight(c, 0, 3, 0) == 4.0);
}

TEST_CASE("NONE pooling gradient layout: grad_output is [N, D], row p per lookup", "[backward]") {
  // Two tables with D = 2; feature 0 -> table 1, feature 1 -> table 0; position 0 in no bag.
  BackwardCase c;
  c.forward.set_tables(DType::F32, {3, 2}, {2, 2});
  c.forward.feature_table_map = {1, 0};
  c.forward.batch_size = 1;
  c.forward.indices = {0, 1, 1, 2, 2};  // f0 (table 1) = [1, 1]; f1 (table 0) = [2, 2]
  c.forward.offsets = {1, 3, 5};
  c.forward.options.pooling = PoolingMode::None;
  c.forward.options.bounds_check = BoundsCheckMode::Fatal;
  c.forward.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  c.options.optimizer.learning_rate = 1.0;
  c.resize_grad_output();
  REQUIRE(c.grad_output.size() == 5 * 2 * sizeof(float));
  set_grads(c, {100, 100, 1, 2, 3, 4, 5, 6, 7, 8});
  const auto ref = backward_reference_fp64(c.view());
  CHECK(grad_row(ref, 1, 1) == std::vector<double>{1 + 3, 2 + 4});
  CHECK(grad_row(ref, 0, 2) == std::vector<double>{5 + 7, 6 + 8});
  CHECK(ref.transpose.linear_ids == std::vector<std::int64_t>{2, 3 + 1});
}

TEST_CASE("VBE addressing: bag k reads grad_output at its rank-major output row", "[backward]") {
  // T = 2 (tables 0, 1; D = 1 and 2), R = 2, batch sizes f0: [1, 1], f1: [1, 0].
  // Output: rank 0: f0 s0 (1), f1 s0 (2); rank 1: f0 s1 (1) -> 4 elements.
  BackwardCase c;
  c.forward.set_tables(DType::F32, {4, 4}, {1, 2});
  c.forward.feature_table_map = {0, 1};
  c.forward.vbe_ranks = 2;
  c.forward.vbe_batch_sizes = {1, 1, 1, 0};
  c.forward.indices = {3, 3, 2};  // bags: f0r0 = [3], f0r1 = [3], f1r0 = [2]
  c.forward.offsets = {0, 1, 2, 3};
  c.forward.options.bounds_check = BoundsCheckMode::Fatal;
  c.forward.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  c.options.optimizer.learning_rate = 1.0;
  c.resize_grad_output();
  set_grads(c, {1, 20, 30, 400});
  const auto ref = backward_reference_fp64(c.view());
  CHECK(grad_row(ref, 0, 3) == std::vector<double>{1 + 400});
  CHECK(grad_row(ref, 1, 2) == std::vector<double>{20, 30});
}

TEST_CASE("clipping applies to G_r and to the per-sample-weight gradient", "[backward]") {
  auto c = hand_case(2, 2, {{1, 1}}, [](auto, auto d) { return d + 1.0; });
  c.forward.per_sample_weights = {1, 2};
  c.options.optimizer.max_gradient = 0.5;
  set_grads(c, {10.0, -0.25});
  const auto ref = backward_reference_fp64(c.view());
  CHECK(grad_row(ref, 0, 1) == std::vector<double>{3 * 0.5, 3 * -0.25});
  CHECK(ref.per_sample_weight_grad == std::vector<double>{0.5 * 1 - 0.25 * 2, 0.5 - 0.5});
}

TEST_CASE("max_norm scales the exact row before the one rounding", "[backward]") {
  SECTION("norm 5 > 2.5 halves the row; norm below the limit leaves it") {
    auto c = hand_case(1, 2, {{0}}, [](auto, auto) { return 0.0; });
    c.options.optimizer.learning_rate = 1.0;
    set_grads(c, {-3.0, -4.0});  // x = [3, 4]
    c.options.optimizer.max_norm = 2.5;
    CHECK(updated_row(backward_reference_fp64(c.view()), 0, 0) == std::vector<double>{1.5, 2.0});
    c.options.optimizer.max_norm = 5.0;  // not > 5: unchanged
    CHECK(updated_row(backward_reference_fp64(c.view()), 0, 0) == std::vector<double>{3.0, 4.0});
  }
  SECTION("BF16: scaling the exact row differs from scaling the rounded row") {
    auto c = hand_case(1, 2, {{0}}, [](auto, auto) { return 1.0; }, DType::BF16);
    c.options.optimizer.learning_rate = 1.0;
    c.options.optimizer.max_norm = 1.0;
    set_grads(c, {-3 * 0x1p-9, 0.0});  // x = [1 + 3·2^-9, 1]: BF16 would round x0 to 1
    const double x0 = 1 + 3 * 0x1p-9, x1 = 1.0;
    const double scale = 1.0 / std::sqrt(x0 * x0 + x1 * x1);
    const auto run = run_backward(c);
    CHECK(run.weight(c, 0, 0, 0) == round_to(DType::BF16, x0 * scale));
    CHECK(run.weight(c, 0, 0, 1) == round_to(DType::BF16, x1 * scale));
    // rounding first then scaling would store the same value twice: pin that we do not
    const double rounded_first = round_to(DType::BF16, 1.0 / std::sqrt(2.0));
    CHECK(run.weight(c, 0, 0, 1) != rounded_first);
  }
}

TEST_CASE("G_r under WARNING repair: repaired index -> row 0 with its weight kept",
          "[backward][bounds]") {
  auto c = hand_case(4, 1, {{2, 9}, {-1}}, [](auto r, auto) { return r + 1.0; });
  c.forward.options.bounds_check = BoundsCheckMode::Warning;
  c.forward.per_sample_weights = {1, 3, 5};
  set_grads(c, {1.0, 2.0});
  const auto ref = backward_reference_fp64(c.view());
  CHECK(ref.repair.indices == std::vector<std::int64_t>{2, 0, 0});
  CHECK(grad_row(ref, 0, 0) == std::vector<double>{3 * 1.0 + 5 * 2.0});
  CHECK(grad_row(ref, 0, 2) == std::vector<double>{1.0});
  CHECK(ref.per_sample_weight_grad == std::vector<double>{3.0, 1.0, 2.0});  // <g, W[0]> = g
  const auto run = run_backward(c);
  CHECK(run.stats.warnings == 2);
  CHECK(run.weight(c, 0, 0, 0) == 1.0 - 0.125 * 13);
}

TEST_CASE("FATAL bounds violation: BoundsCheckError, nothing written", "[backward][bounds]") {
  auto c = hand_case(4, 2, {{1, 7}}, [](auto r, auto) { return r + 1.0; });
  c.forward.per_sample_weights = {1, 1};
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.reset_momentum();
  set_grads(c, {1.0, 1.0});
  std::vector<std::byte> w(c.forward.weights.size(), std::byte{0x5A});
  std::vector<float> m(c.momentum.size(), -3.0f), psw(2, -7.0f);
  const auto w0 = w;
  const BackwardOutputs out{w.data(), m.data(), psw.data()};
  CHECK_THROWS_AS(backward_reference(c.view(), out), BoundsCheckError);
  CHECK_THROWS_AS(backward_reference_fp64(c.view()), BoundsCheckError);
  auto be = make_reference_backend();
  CHECK_THROWS_AS(be->backward(c.view(), out), BoundsCheckError);
  CHECK(w == w0);
  CHECK(m == std::vector<float>(m.size(), -3.0f));
  CHECK(psw == std::vector<float>(2, -7.0f));
}

TEST_CASE("NaN grad_output propagates (no special case)", "[backward]") {
  auto c = hand_case(2, 3, {{1}}, [](auto, auto) { return 1.0; });
  set_grads(c, {1.0, std::nan(""), 2.0});
  SECTION("SGD: only the NaN column") {
    const auto x = updated_row(backward_reference_fp64(c.view()), 0, 1);
    CHECK(x[0] == 1.0 - 0.125);
    CHECK(std::isnan(x[1]));
    CHECK(x[2] == 1.0 - 0.25);
  }
  SECTION("Adagrad: the momentum and the whole row") {
    c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
    c.reset_momentum();
    const auto ref = backward_reference_fp64(c.view());
    CHECK(std::isnan(ref.momentum[0]));
    for (double v : updated_row(ref, 0, 1)) CHECK(std::isnan(v));
    const auto run = run_backward(c);
    CHECK(std::isnan(run.momentum[1]));
    CHECK(run.momentum[0] == 0.0f);
    CHECK(std::isnan(run.weight(c, 0, 1, 0)));
  }
}

TEST_CASE("only touched rows and their momenta change, in place too", "[backward]") {
  auto c = hand_case(6, 3, {{4, 1}, {4}}, [](auto r, auto d) { return 0.25 * r - d; },
                     DType::F16);
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.reset_momentum();
  for (std::size_t i = 0; i < c.momentum.size(); ++i) c.momentum[i] = 0.5f * i;
  set_grads(c, {1, 2, 3, -1, -2, 5});  // G(1) = [1, 2, 3], G(4) = [0, 0, 8]
  const auto run = run_backward(c);
  for (int r = 0; r < 6; ++r) {
    const bool touched = r == 1 || r == 4;
    CHECK((run.momentum[r] != c.momentum[r]) == touched);
    bool same = true;
    for (int d = 0; d < 3; ++d) same = same && run.weight(c, 0, r, d) == c.forward.weight(0, r, d);
    CHECK(same == !touched);
  }
  // In place: outputs alias the problem's weights and momentum.
  BackwardCase in_place = c;
  BackwardProblem p = in_place.view();
  const BackwardOutputs out{in_place.forward.weights.data(), in_place.momentum.data(), nullptr};
  backward_reference(p, out);
  CHECK(in_place.forward.weights == run.weights);
  CHECK(in_place.momentum == run.momentum);
}

TEST_CASE("no lookups: nothing written, zero runs", "[backward]") {
  auto c = hand_case(3, 2, {{}, {}}, [](auto, auto) { return 1.0; });
  set_grads(c, {1, 2, 3, 4});
  const auto run = run_backward(c);
  CHECK(run.weights == c.forward.weights);
  CHECK(run.stats.runs == 0);
  CHECK(run.stats.lookups == 0);
}

TEST_CASE("Backend::backward of the reference backend equals backward_reference", "[backward]") {
  auto c = hand_case(5, 3, {{1, 2, 1}, {4}}, [](auto r, auto d) { return r - 0.5 * d; },
                     DType::BF16);
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.weight_decay_mode = WeightDecayMode::L2;
  c.options.optimizer.weight_decay = 0.01;
  c.reset_momentum();
  set_grads(c, {0.1, -0.2, 0.3, 0.7, 0.5, -0.9});
  const auto direct = run_backward(c);
  {
    auto be = make_reference_backend();
    BackwardStrategy s;
    s.long_run_threshold = 1;
    s.chunk_size = 32;
    s.long_runs = BackwardStrategy::LongRuns::Chunked;
    const auto via = run_backward(c, be.get(), s);
    CHECK(via.weights == direct.weights);
    CHECK(via.momentum == direct.momentum);
    CHECK(via.stats.runs == direct.stats.runs);
    s.chunk_size = 33;
    CHECK_THROWS_AS(run_backward(c, be.get(), s), InvalidArgument);
  }
}

// ---- stochastic rounding -----------------------------------------------------------------------------

TEST_CASE("Philox-4x32-10 matches Random123's known-answer vectors", "[backward][sr]") {
  using A4 = std::array<std::uint32_t, 4>;
  CHECK(philox4x32_10({0, 0, 0, 0}, {0, 0}) == A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
        A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
        A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("the SR uniform is word 0 of Philox at counter (offset, element), key seed",
          "[backward][sr]") {
  const std::uint64_t seed = 0x0123456789ABCDEFull, offset = 0x1122334455667788ull, e = 77;
  const auto w = philox4x32_10({0x55667788u, 0x11223344u, 77u, 0u}, {0x89ABCDEFu, 0x01234567u});
  CHECK(stochastic_rounding_uniform(seed, offset, e) == w[0] * 0x1p-32);
  const double u = stochastic_rounding_uniform(1, 2, 3);
  CHECK(u >= 0.0);
  CHECK(u < 1.0);
  CHECK(stochastic_rounding_uniform(1, 2, 4) != u);
  CHECK(stochastic_rounding_uniform(1, 3, 3) != u);
  CHECK(stochastic_rounding_uniform(2, 2, 3) != u);
}

TEST_CASE("stochastic_round picks RU iff u < fraction, exact and special values unchanged",
          "[backward][sr]") {
  const double x = 1 + 0x1p-12;  // FP16: a quarter ulp above 1
  CHECK(stochastic_round(DType::F16, x, 0.0) == 1 + 0x1p-10);
  CHECK(stochastic_round(DType::F16, x, 0.2499) == 1 + 0x1p-10);
  CHECK(stochastic_round(DType::F16, x, 0.25) == 1.0);
  CHECK(stochastic_round(DType::F16, x, 0.9) == 1.0);
  // -x: RD = -(1 + 2^-10), RU = -1, fraction (x - RD)/(RU - RD) = 3/4 towards RU = -1
  CHECK(stochastic_round(DType::F16, -x, 0.7499) == -1.0);
  CHECK(stochastic_round(DType::F16, -x, 0.75) == -(1 + 0x1p-10));
  CHECK(stochastic_round(DType::BF16, 1.5, 0.0) == 1.5);
  CHECK(stochastic_round(DType::F32, 1 + 0x1p-30, 0.0) == 1 + 0x1p-23);
  CHECK(std::isnan(stochastic_round(DType::F16, std::nan(""), 0.5)));
  CHECK(stochastic_round(DType::F16, 1e6, 0.0) == std::numeric_limits<double>::infinity());
  CHECK(stochastic_round(DType::F16, 65504 + 8, 0.0) == 65504.0);  // beyond max: as RNE
  CHECK_THROWS_AS(stochastic_round(DType::I32, 1.0, 0.0), InvalidArgument);
}

TEST_CASE("SR store: each element is RD or RU of x, about a quarter rounds up, seed-dependent",
          "[backward][sr]") {
  // C12-shaped: 1024 FP16 rows of ones looked up once, SGD lr 2^-12, grad -1 -> x = 1 + 2^-12.
  std::vector<std::vector<std::int64_t>> bags;
  for (int r = 0; r < 1024; ++r) bags.push_back({r});
  auto c = hand_case(1024, 4, bags, [](auto, auto) { return 1.0; }, DType::F16);
  c.forward.options.policy =
      make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32, RoundingMode::Stochastic);
  c.options.optimizer.learning_rate = 0x1p-12;
  set_grads(c, std::vector<double>(1024 * 4, -1.0));
  c.options.sr_seed = 1234;
  const auto a = run_backward(c);
  std::int64_t up = 0;
  for (std::int64_t e = 0; e < 4096; ++e) {
    const double v = load_as_double(DType::F16, a.weights.data(), e);
    REQUIRE((v == 1.0 || v == 1 + 0x1p-10));
    const bool expect_up = stochastic_rounding_uniform(1234, 0, static_cast<std::uint64_t>(e)) < 0.25;
    CHECK((v != 1.0) == expect_up);
    up += v != 1.0;
  }
  CHECK(up > 0.22 * 4096);
  CHECK(up < 0.28 * 4096);
  c.options.sr_seed = 99;
  CHECK(run_backward(c).weights != a.weights);
  c.options.sr_seed = 1234;
  c.options.sr_offset = 1;
  CHECK(run_backward(c).weights != a.weights);
  c.options.sr_offset = 0;
  CHECK(run_backward(c).weights == a.weights);  // deterministic for a fixed stream
  // RNE: all exactly 1
  c.forward.options.policy.write_back = RoundingMode::Nearest;
  for (std::int64_t e = 0; e < 4096; ++e)
    CHECK(load_as_double(DType::F16, run_backward(c).weights.data(), e) == 1.0);
}

TEST_CASE("SR with FP32 weights stores RNE", "[backward][sr]") {
  auto c = hand_case(2, 3, {{1}}, [](auto, auto d) { return 1.0 + d; });
  set_grads(c, {0.3, -0.7, 0.1});
  c.options.optimizer.learning_rate = 0.01;
  const auto rne = run_backward(c);
  c.forward.options.policy.write_back = RoundingMode::Stochastic;
  for (std::uint64_t seed = 0; seed < 8; ++seed) {
    c.options.sr_seed = seed;
    CHECK(run_backward(c).weights == rne.weights);
  }
}

// ---- transpose -----------------------------------------------------------------------------------------

TEST_CASE("transpose: int64 linearized ids, stable positions, RLE and prefix (hand-derived)",
          "[backward][transpose]") {
  // Tables t0 (E = 3), t1 (E = 5); features f0 -> t1, f1 -> t0, f2 -> t1; B = 1; leading gap 1.
  ForwardCase fc;
  fc.set_tables(DType::F32, {3, 5}, {1, 1});
  fc.feature_table_map = {1, 0, 1};
  fc.batch_size = 1;
  fc.indices = {9, 4, 0, 2, 2, 4, 0};
  fc.offsets = {1, 3, 5, 7};  // f0 = [4, 0] (ids 7, 3), f1 = [2, 2] (ids 2, 2), f2 = [4, 0] (7, 3)
  fc.options.bounds_check = BoundsCheckMode::Fatal;
  fc.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  const ForwardProblem p = fc.view();
  const Transpose tr = transpose_lookups(p, repair(p));
  CHECK(tr.linear_ids == std::vector<std::int64_t>{2, 3, 7});
  CHECK(tr.run_lengths == std::vector<std::int64_t>{2, 2, 2});
  CHECK(tr.run_offsets == std::vector<std::int64_t>{0, 2, 4, 6});
  CHECK(tr.sorted_positions == std::vector<std::int64_t>{3, 4, 2, 6, 1, 5});
  CHECK(tr.position_bag == std::vector<std::int64_t>{-1, 0, 0, 1, 1, 2, 2});
}

TEST_CASE("transpose: ids beyond 2^31 stay exact (int64 keys)", "[backward][transpose]") {
  // Two tables of 2^31 + 5 rows each (D = 1); no weights are read by the transpose.
  ForwardCase fc;
  fc.rows = {(std::int64_t{1} << 31) + 5, (std::int64_t{1} << 31) + 5};
  fc.dims = {1, 1};
  fc.table_offsets = {0, fc.rows[0]};
  fc.weights_dtype = DType::F32;
  fc.feature_table_map = {1};
  fc.batch_size = 1;
  fc.indices = {(std::int64_t{1} << 31) + 3};
  fc.offsets = {0, 1};
  fc.options.bounds_check = BoundsCheckMode::None;
  fc.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  ForwardProblem p = fc.view();
  static float dummy = 0;
  p.tables.weights = &dummy;  // validate() wants a pointer when N > 0; never dereferenced here
  const Transpose tr = transpose_lookups(p, repair(p));
  CHECK(tr.linear_ids == std::vector<std::int64_t>{fc.rows[0] + (std::int64_t{1} << 31) + 3});
}
