// validate(BackwardProblem, BackwardStrategy) and validate(BackwardProblem, BackwardOutputs):
// every rule gives an InvalidArgument naming the argument, the value and the limit, and nothing
// is written to the outputs.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>

#include "backward_test_support.h"

using namespace tbe;
using namespace tbe_test;

namespace {

/// A valid Adagrad problem: E = 4, D = 2, FP16 weights, bags [1] [2 3], weighted.
BackwardCase valid_case() {
  BackwardCase c;
  c.forward = one_table_case(4, 2, 2, {1, 2, 3}, {0, 1, 3},
                             [](auto r, auto d) { return r + 0.5 * d; }, DType::F16);
  c.forward.per_sample_weights = {1, 2, 3};
  c.forward.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.reset_momentum();
  c.resize_grad_output();
  for (int i = 0; i < 4; ++i) c.set_grad(i, 0.25 * (i + 1));
  return c;
}

struct Outputs {
  std::vector<std::byte> weights;
  std::vector<float> momentum, psw;
  BackwardOutputs view() {
    return {weights.empty() ? nullptr : weights.data(), momentum.empty() ? nullptr : momentum.data(),
            psw.empty() ? nullptr : psw.data()};
  }
};
Outputs poisoned_outputs(const BackwardCase& c) {
  Outputs o;
  o.weights.assign(c.forward.weights.size(), std::byte{0x7C});
  o.momentum.assign(c.momentum.size(), -5.0f);
  o.psw.assign(c.forward.indices.size(), -6.0f);
  return o;
}

/// Expects the problem (with `out`, strategy `s`) to be rejected with `argument` and a message
/// containing every string of `parts`; checks the poisoned outputs stay untouched, through
/// backward_reference and the reference backend.
void expect_rejected(BackwardCase& c, Outputs out, const BackwardStrategy& s,
                     const std::string& argument, const std::vector<std::string>& parts) {
  const Outputs before = out;
  const BackwardProblem p = c.view();
  Status st = validate(p, s);
  if (st.ok()) st = validate(p, out.view());
  REQUIRE_FALSE(st.ok());
  CHECK(st.argument == argument);
  for (const auto& part : parts) {
    INFO(st.message);
    CHECK(st.message.find(part) != std::string::npos);
  }
  auto be = make_reference_backend();
  try {
    be->backward(p, out.view(), s);
    FAIL("no exception");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == argument);
    CHECK(std::string(e.what()) == st.message);
  }
  if (s.chunk_size == BackwardStrategy{}.chunk_size &&
      s.long_run_threshold == BackwardStrategy{}.long_run_threshold &&
      s.long_runs == BackwardStrategy{}.long_runs)
    CHECK_THROWS_AS(backward_reference(p, out.view()), InvalidArgument);
  CHECK(out.weights == before.weights);
  CHECK(out.momentum == before.momentum);
  CHECK(out.psw == before.psw);
}

void expect_rejected(BackwardCase& c, const std::string& argument,
                     const std::vector<std::string>& parts) {
  expect_rejected(c, poisoned_outputs(c), BackwardStrategy{}, argument, parts);
}

}  // namespace

TEST_CASE("a valid problem passes both validations and runs", "[backward][validate]") {
  BackwardCase c = valid_case();
  Outputs o = poisoned_outputs(c);
  o.weights = c.forward.weights;
  o.momentum = c.momentum;
  CHECK(validate(c.view()).ok());
  CHECK(validate(c.view(), o.view()).ok());
  CHECK_NOTHROW(backward_reference(c.view(), o.view()));
  o.psw.clear();  // per-sample-weight gradients are optional
  CHECK(validate(c.view(), o.view()).ok());
}

TEST_CASE("forward validation runs first", "[backward][validate]") {
  BackwardCase c = valid_case();
  c.forward.offsets = {0, 1};  // T·B + 1 = 3 needed
  expect_rejected(c, "offsets", {"length 2", "T·B + 1 = 3"});
}

TEST_CASE("optimizer state must be FP32", "[backward][validate]") {
  BackwardCase c = valid_case();
  c.forward.options.policy.optimizer_state = DType::F16;
  expect_rejected(c, "options.policy.optimizer_state", {"fp16", "must be fp32"});
}

TEST_CASE("grad_output must be given", "[backward][validate]") {
  BackwardCase c = valid_case();
  c.grad_output.clear();
  expect_rejected(c, "grad_output", {"null pointer", "4 elements of fp32"});
}

TEST_CASE("optimizer values: finite and positive, also as FP32", "[backward][validate]") {
  const double inf = std::numeric_limits<double>::infinity();
  struct Bad {
    std::function<void(OptimizerConfig&)> set;
    std::string argument;
    std::vector<std::string> parts;
  };
  const std::vector<Bad> cases = {
      {[](auto& o) { o.learning_rate = -1; }, "options.optimizer.learning_rate",
       {"learning_rate: -1 must be finite and > 0"}},
      {[](auto& o) { o.learning_rate = 0; }, "options.optimizer.learning_rate", {": 0 must be"}},
      {[inf](auto& o) { o.learning_rate = inf; }, "options.optimizer.learning_rate", {"inf", "finite"}},
      {[](auto& o) { o.learning_rate = std::nan(""); }, "options.optimizer.learning_rate", {"nan"}},
      {[](auto& o) { o.learning_rate = 1e-50; }, "options.optimizer.learning_rate",
       {"1e-50", "as an FP32 value", "rounds to 0"}},
      {[](auto& o) { o.learning_rate = 1e300; }, "options.optimizer.learning_rate",
       {"1e+300", "rounds to inf"}},
      {[](auto& o) { o.eps = 0; }, "options.optimizer.eps", {"eps: 0 must be finite and > 0"}},
      {[](auto& o) { o.eps = 1e-50; }, "options.optimizer.eps", {"rounds to 0"}},
      {[](auto& o) { o.weight_decay = -0.5; }, "options.optimizer.weight_decay",
       {"weight_decay: -0.5 must be finite and >= 0"}},
      {[](auto& o) { o.max_norm = -1; }, "options.optimizer.max_norm", {"max_norm: -1", ">= 0"}},
      {[inf](auto& o) { o.max_norm = inf; }, "options.optimizer.max_norm", {"inf", "finite"}},
      {[](auto& o) { o.max_gradient = -2; }, "options.optimizer.max_gradient",
       {"max_gradient: -2", ">= 0"}},
      {[](auto& o) { o.kind = static_cast<OptimizerKind>(7); }, "options.optimizer.kind",
       {"7 is not an optimizer", "sgd, rowwise_adagrad"}},
      {[](auto& o) { o.weight_decay_mode = static_cast<WeightDecayMode>(9); },
       "options.optimizer.weight_decay_mode", {"9 is not a weight decay mode"}},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    BackwardCase c = valid_case();
    cases[i].set(c.options.optimizer);
    expect_rejected(c, cases[i].argument, cases[i].parts);
  }
}

TEST_CASE("eps is not checked for SGD, weight decay modes need Adagrad", "[backward][validate]") {
  BackwardCase c = valid_case();
  c.options.optimizer.kind = OptimizerKind::ExactSgd;
  c.options.optimizer.eps = -1;  // unused by SGD
  c.reset_momentum();
  CHECK(validate(c.view()).ok());
  c.options.optimizer.weight_decay_mode = WeightDecayMode::L2;
  expect_rejected(c, "options.optimizer.weight_decay_mode",
                  {"l2 needs optimizer rowwise_adagrad", "sgd allows none only"});
}

TEST_CASE("momentum: required for Adagrad, forbidden for SGD", "[backward][validate]") {
  BackwardCase c = valid_case();
  c.momentum.clear();
  expect_rejected(c, "momentum", {"null pointer", "rowwise_adagrad", "Σ E_t = 4"});
  BackwardCase s = valid_case();
  s.options.optimizer.kind = OptimizerKind::ExactSgd;
  expect_rejected(s, "momentum", {"must be nullptr with optimizer sgd"});
}

TEST_CASE("strategy values are validated by the reference too", "[backward][validate]") {
  struct Bad {
    BackwardStrategy s;
    std::string argument;
    std::vector<std::string> parts;
  };
  std::vector<Bad> cases(6);
  cases[0].s.long_run_threshold = 0;
  cases[0].argument = "strategy.long_run_threshold";
  cases[0].parts = {"0 is outside [1, 1048576]"};
  cases[1].s.long_run_threshold = (1 << 20) + 1;
  cases[1].argument = "strategy.long_run_threshold";
  cases[1].parts = {"1048577", "[1, 1048576]"};
  cases[2].s.chunk_size = 16;
  cases[2].argument = "strategy.chunk_size";
  cases[2].parts = {"16 must be in [32, 4096] and a multiple of 32"};
  cases[3].s.chunk_size = 100;
  cases[3].argument = "strategy.chunk_size";
  cases[3].parts = {"100", "multiple of 32"};
  cases[4].s.chunk_size = 4128;
  cases[4].argument = "strategy.chunk_size";
  cases[4].parts = {"4128", "[32, 4096]"};
  cases[5].s.long_runs = static_cast<BackwardStrategy::LongRuns>(5);
  cases[5].argument = "strategy.long_runs";
  cases[5].parts = {"5 is not a long-run path"};
  for (auto& b : cases) {
    BackwardCase c = valid_case();
    expect_rejected(c, poisoned_outputs(c), b.s, b.argument, b.parts);
  }
  BackwardStrategy edge;
  edge.long_run_threshold = 1 << 20;
  edge.chunk_size = 4096;
  BackwardCase c = valid_case();
  CHECK(validate(c.view(), edge).ok());
  edge.long_run_threshold = 1;
  edge.chunk_size = 32;
  CHECK(validate(c.view(), edge).ok());
}

TEST_CASE("outputs: weights, momentum iff Adagrad, per-sample-weight gradient only weighted",
          "[backward][validate]") {
  SECTION("weights") {
    BackwardCase c = valid_case();
    Outputs o = poisoned_outputs(c);
    o.weights.clear();
    expect_rejected(c, o, {}, "outputs.weights", {"null pointer", "8 elements of fp16"});
  }
  SECTION("momentum missing under Adagrad") {
    BackwardCase c = valid_case();
    Outputs o = poisoned_outputs(c);
    o.momentum.clear();
    expect_rejected(c, o, {}, "outputs.momentum", {"null pointer", "Σ E_t = 4"});
  }
  SECTION("momentum given under SGD") {
    BackwardCase c = valid_case();
    c.options.optimizer.kind = OptimizerKind::ExactSgd;
    c.reset_momentum();
    Outputs o = poisoned_outputs(c);
    o.momentum.assign(4, 0.0f);
    expect_rejected(c, o, {}, "outputs.momentum", {"must be nullptr with optimizer sgd"});
  }
  SECTION("per-sample-weight gradient for an unweighted problem") {
    BackwardCase c = valid_case();
    c.forward.per_sample_weights.clear();
    Outputs o = poisoned_outputs(c);
    expect_rejected(c, o, {}, "outputs.per_sample_weight_grad",
                    {"must be nullptr for an unweighted problem"});
  }
}

TEST_CASE("optimizer and weight decay names parse and print", "[backward][validate]") {
  for (auto k : {OptimizerKind::ExactSgd, OptimizerKind::ExactRowwiseAdagrad})
    CHECK(parse_optimizer(to_string(k)) == k);
  for (auto m : {WeightDecayMode::None, WeightDecayMode::L2, WeightDecayMode::Decoupled})
    CHECK(parse_weight_decay_mode(to_string(m)) == m);
  try {
    parse_optimizer("adam", "--optimizer");
    FAIL("no exception");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == "--optimizer");
    CHECK(std::string(e.what()).find("'adam'") != std::string::npos);
  }
  CHECK_THROWS_AS(parse_weight_decay_mode("l1"), InvalidArgument);
}
