// Backward case folders: write -> read round trips over generated backward cases (both
// optimizers, every weight-decay mode, RNE/SR, strategies, recorded outputs from the reference,
// partial recordings and errors), and rejection of malformed folders naming the file and the key.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "case_test_support.h"
#include "tbe/backward.h"
#include "tbe/io/backward_case_file.h"
#include "tbe/io/npy.h"
#include "tbe/workloads.h"

using namespace tbe;
using namespace tbe::io;
using namespace case_test;

namespace {

/// The reference's outputs for the case as a recording (or the BoundsCheckError it raised).
BackwardRecordedOutputs record_reference(BackwardCase& c) {
  BackwardRecordedOutputs r;
  r.implementation = "cpu-reference";
  const BackwardProblem p = c.view();
  std::vector<std::byte> weights = c.forward.weights;
  std::vector<float> momentum = c.momentum;
  std::vector<float> psw_grad(c.forward.per_sample_weights.size());
  BackwardOutputs out;
  out.weights = weights.data();
  out.momentum = momentum.empty() ? nullptr : momentum.data();
  out.per_sample_weight_grad = psw_grad.empty() ? nullptr : psw_grad.data();
  try {
    r.warnings = backward_reference(p, out).warnings;
    r.weights = weights;
    if (p.momentum != nullptr) r.momentum = momentum;
    if (!psw_grad.empty()) r.per_sample_weight_grad = psw_grad;
  } catch (const BoundsCheckError&) {
    r.error = "bounds_check";
  }
  return r;
}

/// grad_output from a seeded stream, momentum for Adagrad (values of several binades).
void fill_backward_inputs(BackwardCase& c, std::uint64_t seed) {
  c.reset_momentum();
  c.resize_grad_output();
  Rng rng(seed, 7);
  const DType out = c.forward.options.policy.output;
  const auto n = static_cast<std::int64_t>(c.grad_output.size() / dtype_size(out));
  for (std::int64_t i = 0; i < n; ++i) c.set_grad(i, std::ldexp(rng.uniform() - 0.5, static_cast<int>(rng.uniform_int(8)) - 4));
  for (float& m : c.momentum) m = static_cast<float>(std::ldexp(rng.uniform(), static_cast<int>(rng.uniform_int(10)) - 6));
}

/// A valid weighted Adagrad (or SGD) case with the reference's outputs recorded (the base of the
/// rejection tests): T = 2, E = 10, D = 4, B = 3, L = 3, FP16 weights, FP32 output.
BackwardCaseFile base_case(OptimizerKind kind, bool weighted = true) {
  WorkloadSpec s;
  s.T = 2;
  s.E = 10;
  s.D = 4;
  s.L = 3;
  s.B = 3;
  s.weighted = weighted;
  s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  s.options.policy.write_back = RoundingMode::Stochastic;
  BackwardCaseFile c;
  c.name = "base-backward";
  c.provenance = "test_case_file_backward";
  c.seed = 5;
  c.problem.forward = generate(s);
  OptimizerConfig& o = c.problem.options.optimizer;
  o.kind = kind;
  o.learning_rate = 0.05;
  o.eps = 1e-6;
  if (kind == OptimizerKind::ExactRowwiseAdagrad) {
    o.weight_decay_mode = WeightDecayMode::L2;
    o.weight_decay = 0.01;
  }
  o.max_gradient = 2.5;
  c.problem.options.sr_seed = 1234567;
  c.problem.options.sr_offset = 3;
  fill_backward_inputs(c.problem, 99);
  c.strategy = BackwardStrategyRecord{BackwardStrategy{257, 64, BackwardStrategy::LongRuns::Chunked, false}, true};
  c.recorded = record_reference(c.problem);
  return c;
}

auto read_backward = [](const std::string& d) { return read_backward_case(d); };

}  // namespace

TEST_CASE("backward case files: write -> read gives the same case, bitwise", "[io][case][backward]") {
  const fs::path dir = scratch("bwd_rt");
  rc::prop("round trip over generated backward cases", [&] {
    BackwardCaseFile c;
    c.name = *rc::gen::element<std::string>("b", "fuzz/0002", "with \"quotes\" and \xc3\xa9");
    c.provenance = "rapidcheck";
    c.seed = *rc::gen::arbitrary<std::uint64_t>();
    c.problem.forward = gen_small_case();
    c.problem.forward.options.policy.write_back = *rc::gen::element(RoundingMode::Nearest, RoundingMode::Stochastic);
    OptimizerConfig& o = c.problem.options.optimizer;
    o.kind = *rc::gen::element(OptimizerKind::ExactSgd, OptimizerKind::ExactRowwiseAdagrad);
    o.learning_rate = *rc::gen::element(1e-3, 0.1, 0.3, 4.0);
    o.eps = *rc::gen::element(1e-10, 1e-8, 0.5);
    if (o.kind == OptimizerKind::ExactRowwiseAdagrad) {
      o.weight_decay_mode = *rc::gen::element(WeightDecayMode::None, WeightDecayMode::L2, WeightDecayMode::Decoupled);
      o.weight_decay = *rc::gen::element(0.0, 1e-4, 0.7);
    }
    o.max_norm = *rc::gen::element(0.0, 1e-3, 30.0);
    o.max_gradient = *rc::gen::element(0.0, 1e-2, 3.0);
    c.problem.options.sr_seed = *rc::gen::arbitrary<std::uint64_t>();
    c.problem.options.sr_offset = *rc::gen::arbitrary<std::uint64_t>();
    fill_backward_inputs(c.problem, c.seed);
    if (!c.problem.momentum.empty() && *rc::gen::arbitrary<bool>())
      c.problem.momentum[0] = std::nanf("");  // a NaN state survives bit for bit
    if (*rc::gen::arbitrary<bool>()) {
      BackwardStrategyRecord s;
      s.strategy.long_run_threshold = *rc::gen::element(1, 256, 1 << 20);
      s.strategy.chunk_size = *rc::gen::element(32, 256, 4096);
      s.strategy.long_runs = *rc::gen::element(BackwardStrategy::LongRuns::Chunked, BackwardStrategy::LongRuns::Fused);
      s.strategy.deterministic = *rc::gen::arbitrary<bool>();
      s.hoisted = *rc::gen::arbitrary<bool>();
      c.strategy = s;
    }
    const int recorded = *rc::gen::inRange(0, 4);  // none, reference outputs, weights only, error
    if (recorded == 1) {
      c.recorded = record_reference(c.problem);
    } else if (recorded == 2) {
      BackwardRecordedOutputs r = record_reference(c.problem);
      if (!r.error) {
        r.momentum.reset();
        r.per_sample_weight_grad.reset();
        r.warnings.reset();
      }
      c.recorded = r;
    } else if (recorded == 3) {
      BackwardRecordedOutputs r;
      r.implementation = "somebody else";
      r.error = *rc::gen::element<std::string>("invalid_argument", "device_error");
      c.recorded = r;
    }
    if (*rc::gen::arbitrary<bool>()) c.expect = Expectation{"fail", "docs/backward.md Semantics: max_norm"};
    write_case(dir.string(), c);
    const BackwardCaseFile back = read_backward_case(dir.string());
    RC_ASSERT(bitwise_equal(back, c));
  });
  fs::remove_all(dir);
}

TEST_CASE("backward case files: files, names and stale tensors", "[io][case][backward]") {
  const fs::path dir = scratch("bwd_files");
  BackwardCaseFile c = base_case(OptimizerKind::ExactRowwiseAdagrad);
  write_case(dir.string(), c);
  CHECK(read_npy((dir / "grad_output.npy").string()).descr == "<f4");
  CHECK(read_npy((dir / "momentum.npy").string()).shape == std::vector<std::int64_t>{20});
  CHECK(read_npy((dir / "recorded_weights.npy").string()).descr == "<f2");
  CHECK(fs::exists(dir / "recorded_momentum.npy"));
  CHECK(fs::exists(dir / "recorded_psw_grad.npy"));
  const json j = load_json(dir);
  CHECK(j["operator"] == "backward");
  CHECK(j["options"]["optimizer"]["kind"] == "rowwise_adagrad");
  CHECK(j["options"]["optimizer"]["weight_decay_mode"] == "l2");
  CHECK(j["options"]["policy"]["write_back"] == "sr");
  CHECK(j["options"]["sr_offset"] == 3);
  CHECK(j["strategy"]["long_runs"] == "chunked");
  CHECK(j["strategy"]["hoisted"] == true);
  CHECK(j["recorded"]["momentum"] == "recorded_momentum.npy");
  CHECK(read_case_operator(dir.string()) == CaseOperator::Backward);
  // Rewritten as SGD without a recording: momentum and recorded tensors are removed.
  c.problem.options.optimizer = OptimizerConfig{};
  c.problem.reset_momentum();
  c.recorded.reset();
  c.strategy.reset();
  write_case(dir.string(), c);
  for (const char* f : {"momentum.npy", "recorded_weights.npy", "recorded_momentum.npy", "recorded_psw_grad.npy"})
    CHECK_FALSE(fs::exists(dir / f));
  CHECK(bitwise_equal(read_backward_case(dir.string()), c));
  SECTION("in-memory cases that cannot be stored are refused by the writer") {
    BackwardCaseFile bad = c;
    bad.problem.momentum = {1.0f};
    CHECK_THROWS_AS(write_case(dir.string(), bad), InvalidArgument);
    bad = c;
    bad.problem.options.optimizer.learning_rate = std::nan("");
    CHECK_THROWS_WITH(write_case(dir.string(), bad), Catch::Contains("options.optimizer.learning_rate"));
    bad = base_case(OptimizerKind::ExactRowwiseAdagrad);
    bad.recorded->error = "device_error";
    CHECK_THROWS_WITH(write_case(dir.string(), bad), Catch::Contains("together with error"));
  }
  fs::remove_all(dir);
}

TEST_CASE("backward case files: a case from the reference generators, recorded by the reference", "[io][case][backward]") {
  // seed-large's shape scaled down: generate() with Zipf indices, T = 4, mixed D, VBE off.
  const fs::path dir = scratch("bwd_gen");
  WorkloadSpec s;
  s.T = 4;
  s.table_rows = {1000, 50, 7};
  s.table_dims = {64, 8, 3};
  s.feature_table_map = {0, 1, 2, 0};
  s.B = 64;
  s.L = 20;
  s.distribution = IndexDistribution::Zipf;
  s.weighted = true;
  s.options.pooling = PoolingMode::Mean;
  s.options.policy = make_policy(PolicyKind::FbgemmCuda, DType::BF16, DType::F32);
  s.options.policy.write_back = RoundingMode::Stochastic;
  s.seed = 2024;
  BackwardCaseFile c;
  c.name = "generated-backward";
  c.provenance = "tbe::generate seed 2024 + seeded grad_output";
  c.seed = s.seed;
  c.problem.forward = generate(s);
  c.problem.options.optimizer = OptimizerConfig{OptimizerKind::ExactRowwiseAdagrad, 0.02, 1e-8, 0.001, WeightDecayMode::Decoupled, 0.0, 0.0};
  c.problem.options.sr_seed = 42;
  fill_backward_inputs(c.problem, s.seed);
  c.recorded = record_reference(c.problem);
  REQUIRE_FALSE(c.recorded->error);
  write_case(dir.string(), c);
  const BackwardCaseFile back = read_backward_case(dir.string());
  CHECK(bitwise_equal(back, c));
  // Reading it and running the reference again reproduces the recording bit for bit (the SR
  // stream is keyed by the stored seed and offset).
  BackwardCaseFile again = back;
  again.recorded = record_reference(again.problem);
  CHECK(bitwise_equal(again, back));
  fs::remove_all(dir);
}

TEST_CASE("backward case files: malformed folders are rejected naming the key", "[io][case][backward][untrusted]") {
  const fs::path dir = scratch("bwd_bad");
  struct Mutation {
    const char* what;
    OptimizerKind base;
    bool weighted;
    std::function<void(json&, const fs::path&)> apply;
    std::string file;  // the file the message must name ("case.json" unless a tensor)
    std::vector<std::string> parts;
  };
  const auto ada = OptimizerKind::ExactRowwiseAdagrad;
  const auto sgd = OptimizerKind::ExactSgd;
  auto none = [](json&, const fs::path&) {};
  const std::vector<Mutation> mutations = {
      {"unknown optimizer key", ada, true, [](json& j, const fs::path&) { j["options"]["optimizer"]["beta1"] = 0.9; }, "case.json",
       {"options.optimizer[\"beta1\"]", "unknown key"}},
      {"missing optimizer key", ada, true, [](json& j, const fs::path&) { j["options"]["optimizer"].erase("eps"); }, "case.json",
       {"options.optimizer.eps", "missing required key"}},
      {"missing optimizer", ada, true, [](json& j, const fs::path&) { j["options"].erase("optimizer"); }, "case.json",
       {"options.optimizer", "missing required key"}},
      {"missing sr_offset", ada, true, [](json& j, const fs::path&) { j["options"].erase("sr_offset"); }, "case.json",
       {"options.sr_offset", "missing"}},
      {"unknown top-level key", ada, true, [](json& j, const fs::path&) { j["momentum"] = 1; }, "case.json",
       {"case.json[\"momentum\"]", "unknown key"}},
      {"learning rate as a string", ada, true, [](json& j, const fs::path&) { j["options"]["optimizer"]["learning_rate"] = "0.1"; },
       "case.json", {"options.optimizer.learning_rate", "expected a number", "string"}},
      {"learning rate null (JSON has no NaN)", ada, true, [](json& j, const fs::path&) { j["options"]["optimizer"]["learning_rate"] = nullptr; },
       "case.json", {"options.optimizer.learning_rate", "expected a number", "null"}},
      {"learning rate negative (validate)", ada, true, [](json& j, const fs::path&) { j["options"]["optimizer"]["learning_rate"] = -1; },
       "case.json", {"options.optimizer.learning_rate", "-1", "> 0"}},
      {"eps underflows FP32 (validate)", ada, true, [](json& j, const fs::path&) { j["options"]["optimizer"]["eps"] = 1e-50; },
       "case.json", {"options.optimizer.eps", "rounds to 0"}},
      {"weight decay negative (validate)", ada, true, [](json& j, const fs::path&) { j["options"]["optimizer"]["weight_decay"] = -0.5; },
       "case.json", {"options.optimizer.weight_decay", "-0.5"}},
      {"unknown optimizer", ada, true, [](json& j, const fs::path&) { j["options"]["optimizer"]["kind"] = "adam"; }, "case.json",
       {"options.optimizer.kind", "adam", "sgd, rowwise_adagrad"}},
      {"unknown weight decay mode", ada, true, [](json& j, const fs::path&) { j["options"]["optimizer"]["weight_decay_mode"] = "decouple"; },
       "case.json", {"options.optimizer.weight_decay_mode", "decouple"}},
      {"weight decay mode with sgd (validate)", sgd, true, [](json& j, const fs::path&) { j["options"]["optimizer"]["weight_decay_mode"] = "l2"; },
       "case.json", {"options.optimizer.weight_decay_mode", "needs optimizer rowwise_adagrad"}},
      {"negative sr_seed", ada, true, [](json& j, const fs::path&) { j["options"]["sr_seed"] = -3; }, "case.json",
       {"options.sr_seed", "negative"}},
      {"optimizer state fp16 (validate)", ada, true, [](json& j, const fs::path&) { j["options"]["policy"]["optimizer_state"] = "fp16"; },
       "case.json", {"options.policy.optimizer_state", "fp16"}},
      {"strategy chunk size not a multiple of 32 (validate)", ada, true, [](json& j, const fs::path&) { j["strategy"]["chunk_size"] = 100; },
       "case.json", {"strategy.chunk_size", "100", "multiple of 32"}},
      {"strategy chunk size out of range", ada, true, [](json& j, const fs::path&) { j["strategy"]["chunk_size"] = 8; },
       "case.json", {"strategy.chunk_size", "outside [32, 4096]"}},
      {"strategy threshold out of range", ada, true, [](json& j, const fs::path&) { j["strategy"]["long_run_threshold"] = 0; },
       "case.json", {"strategy.long_run_threshold", "outside"}},
      {"strategy long-run path", ada, true, [](json& j, const fs::path&) { j["strategy"]["long_runs"] = "warp"; }, "case.json",
       {"strategy.long_runs", "warp", "chunked, fused"}},
      {"strategy unknown key", ada, true, [](json& j, const fs::path&) { j["strategy"]["stream"] = 2; }, "case.json",
       {"strategy[\"stream\"]", "unknown key"}},
      {"strategy not an object", ada, true, [](json& j, const fs::path&) { j["strategy"] = "fused"; }, "case.json",
       {"strategy", "expected an object"}},
      {"momentum present for SGD", ada, true,
       [](json& j, const fs::path&) {
         j["options"]["optimizer"]["kind"] = "sgd";
         j["options"]["optimizer"]["weight_decay_mode"] = "none";
         j["recorded"]["momentum"] = nullptr;
       },
       "momentum.npy", {"momentum", "sgd"}},
      {"momentum missing for Adagrad", ada, true, [](json&, const fs::path& d) { fs::remove(d / "momentum.npy"); }, "momentum.npy",
       {"missing", "momentum"}},
      {"momentum of the wrong length", ada, true,
       [](json&, const fs::path& d) {
         std::vector<float> m(19, 0.0f);
         write_npy((d / "momentum.npy").string(), make_npy(DType::F32, {19}, m.data()));
       },
       "momentum.npy", {"momentum", "19", "Σ E_t = 20"}},
      {"momentum of the wrong dtype", ada, true,
       [](json&, const fs::path& d) {
         std::vector<double> m(20, 0.0);
         write_npy((d / "momentum.npy").string(), make_npy(DType::F64, {20}, m.data()));
       },
       "momentum.npy", {"momentum", "<f8", "<f4"}},
      {"grad_output of the wrong length", ada, true,
       [](json&, const fs::path& d) {
         std::vector<float> g(23, 0.0f);
         write_npy((d / "grad_output.npy").string(), make_npy(DType::F32, {23}, g.data()));
       },
       "grad_output.npy", {"grad_output", "23", "the forward output size of the case = 24"}},
      {"grad_output of the wrong dtype", ada, true, [](json& j, const fs::path&) { j["options"]["policy"]["output"] = "fp16"; },
       "grad_output.npy", {"grad_output", "<f4", "<f2"}},
      {"grad_output missing", ada, true, [](json&, const fs::path& d) { fs::remove(d / "grad_output.npy"); }, "grad_output.npy",
       {"missing"}},
      {"recorded momentum for SGD", sgd, true, [](json& j, const fs::path&) { j["recorded"]["momentum"] = "recorded_momentum.npy"; },
       "case.json", {"recorded.momentum", "sgd"}},
      {"recorded per-sample-weight gradient of an unweighted case", ada, false,
       [](json& j, const fs::path&) { j["recorded"]["per_sample_weight_grad"] = "recorded_psw_grad.npy"; }, "case.json",
       {"recorded.per_sample_weight_grad", "unweighted"}},
      {"recorded path traversal", ada, true, [](json& j, const fs::path&) { j["recorded"]["weights"] = "../../etc/passwd"; },
       "case.json", {"recorded.weights", "etc/passwd", "recorded_weights.npy"}},
      {"recorded outputs and an error", ada, true, [](json& j, const fs::path&) { j["recorded"]["error"] = "device_error"; },
       "case.json", {"recorded.weights", "together with error"}},
      {"recorded error kind", ada, true,
       [](json& j, const fs::path&) {
         j["recorded"]["error"] = "segfault";
       },
       "case.json", {"recorded.error", "segfault"}},
      {"recorded nothing", ada, true,
       [](json& j, const fs::path&) {
         j["recorded"]["weights"] = nullptr;
         j["recorded"]["momentum"] = nullptr;
         j["recorded"]["per_sample_weight_grad"] = nullptr;
       },
       "case.json", {"recorded", "no output and no error"}},
      {"recorded weights of the wrong length", ada, true,
       [](json&, const fs::path& d) {
         std::vector<std::uint16_t> w(81, 0);
         write_npy((d / "recorded_weights.npy").string(), make_npy(DType::F16, {81}, w.data()));
       },
       "recorded_weights.npy", {"recorded.weights", "81", "Σ E·D = 80"}},
      {"recorded weights missing", ada, true, [](json&, const fs::path& d) { fs::remove(d / "recorded_weights.npy"); },
       "recorded_weights.npy", {"missing"}},
      {"tables over the payload limit", ada, true, [](json& j, const fs::path&) { j["tables"]["rows"][0] = std::int64_t{1} << 40; },
       "weights.npy", {"tables.weights", "exceed the .npy payload limit"}},
      {"forward block errors as for the forward", ada, true, [](json& j, const fs::path&) { j["lookups"]["batch_size"] = "3"; },
       "case.json", {"lookups.batch_size", "expected an integer"}},
      {"a forward case's option keys only", ada, true, [](json& j, const fs::path&) { j["options"]["optimiser"] = 1; }, "case.json",
       {"options[\"optimiser\"]", "unknown key"}},
      {"recorded weights as 2-D torch tensors are fine", ada, true,
       [](json&, const fs::path& d) {
         NpyArray a = read_npy((d / "recorded_weights.npy").string());
         a.shape = {20, 4};
         write_npy((d / "recorded_weights.npy").string(), a);
       },
       "", {}},
      {"the strategy is optional", ada, true, [](json& j, const fs::path&) { j.erase("strategy"); }, "", {}},
      {"unmodified", ada, true, none, "", {}},
  };
  for (const Mutation& m : mutations) {
    DYNAMIC_SECTION(m.what) {
      const BackwardCaseFile good = base_case(m.base, m.weighted);
      write_case(dir.string(), good);
      json j = load_json(dir);
      m.apply(j, dir);
      save_json(dir, j);
      if (m.parts.empty()) {
        CHECK_NOTHROW(read_backward_case(dir.string()));
      } else {
        expect_rejected_by(read_backward, dir, m.file, m.parts);
      }
    }
  }
  SECTION("a backward folder is not a forward case, and the reverse") {
    write_case(dir.string(), base_case(ada));
    expect_rejected(dir, "case.json", {"operator", "'backward' is not 'forward'"});
    CaseFile f;
    f.problem = base_case(ada).problem.forward;
    write_case(dir.string(), f);
    expect_rejected_by(read_backward, dir, "case.json", {"operator", "'forward' is not 'backward'"});
  }
  fs::remove_all(dir);
}
