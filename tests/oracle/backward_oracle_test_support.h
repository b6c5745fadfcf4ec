// Test support for the backward oracle: a printable recipe of a random backward problem
// (BackwardSpec = the forward CaseSpec + grad_output values, momentum and optimizer) that
// RapidCheck generates and shrinks, its deterministic builder, the set of conforming emulation
// configurations the soundness tests run, and running the reference into judgeable buffers.
#pragma once

#include <catch2/catch.hpp>
#include <rapidcheck.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "oracle_test_support.h"
#include "tbe/backward.h"
#include "tbe/backward_case.h"
#include "tbe/oracle/backward_emulation.h"
#include "tbe/oracle/backward_oracle.h"

namespace tbe::oracle::testing {

/// A printable recipe for one backward problem.
struct BackwardSpec {
  CaseSpec forward;
  RoundingMode write_back = RoundingMode::Nearest;
  ValueMode grads = ValueMode::Binades;  ///< grad_output values
  int grad_spread = 10;
  OptimizerConfig optimizer;
  bool random_momentum = true;
  std::uint64_t sr_seed = 0;
};

inline void showValue(const BackwardSpec& s, std::ostream& os) {
  os << "BackwardSpec{" << s.forward << ", write_back=" << to_string(s.write_back)
     << ", grads=" << static_cast<int>(s.grads) << ", grad_spread=" << s.grad_spread
     << ", optimizer=" << to_string(s.optimizer.kind) << " lr=" << s.optimizer.learning_rate
     << " eps=" << s.optimizer.eps << " wd=" << s.optimizer.weight_decay << " "
     << to_string(s.optimizer.weight_decay_mode) << " max_norm=" << s.optimizer.max_norm
     << " max_gradient=" << s.optimizer.max_gradient << ", random_momentum=" << s.random_momentum
     << ", sr_seed=" << s.sr_seed << "}";
}
inline std::ostream& operator<<(std::ostream& os, const BackwardSpec& s) {
  showValue(s, os);
  return os;
}

/// Expands a spec into a valid backward case (grad_output and momentum from the spec's seed).
inline BackwardCase build_backward_case(const BackwardSpec& s) {
  BackwardCase c;
  c.forward = build_case(s.forward);
  c.forward.options.policy.write_back = s.write_back;
  c.options.optimizer = s.optimizer;
  c.options.sr_seed = s.sr_seed;
  c.options.sr_offset = s.forward.seed % 7;
  c.reset_momentum();
  c.resize_grad_output();
  CaseRng g(s.forward.seed ^ 0xB4C4ull);
  const DType out = c.forward.options.policy.output;
  const std::int64_t n = static_cast<std::int64_t>(c.grad_output.size() / dtype_size(out));
  int elo, ehi;
  exponent_range(out, &elo, &ehi);
  const int e0 = static_cast<int>(g.range(std::max(elo, -30), std::max(elo, std::min(ehi - s.grad_spread, 4))));
  for (std::int64_t i = 0; i < n; ++i) c.set_grad(i, draw_value(g, out, s.grads, e0, s.grad_spread));
  if (s.random_momentum)
    for (auto& m : c.momentum) m = static_cast<float>(std::ldexp(g.unit(), static_cast<int>(g.range(-20, 4))));
  return c;
}

/// RapidCheck generator: gen_case_spec() (every policy, pooling, dtype, VBE, bounds mode and
/// value mode of the forward soundness tests), plus grads over binades / cancelling / near
/// underflow, SGD or Adagrad with every weight-decay mode, max_norm and clipping sometimes, RNE
/// or SR.
inline rc::Gen<BackwardSpec> gen_backward_spec() {
  return rc::gen::exec([] {
    BackwardSpec s;
    s.forward = *gen_case_spec();
    s.write_back = *rc::gen::element(RoundingMode::Nearest, RoundingMode::Stochastic);
    s.grads = *rc::gen::element(ValueMode::SmallIntegers, ValueMode::Binades,
                                ValueMode::Cancellation, ValueMode::NearUnderflow);
    s.grad_spread = *rc::gen::inRange(0, 30);
    OptimizerConfig& o = s.optimizer;
    o.kind = *rc::gen::element(OptimizerKind::ExactSgd, OptimizerKind::ExactRowwiseAdagrad);
    o.learning_rate = *rc::gen::element(1e-3, 0.01, 0.5, 4.0);
    o.eps = *rc::gen::element(1e-10, 1e-8, 1e-3, 0.5);
    if (o.kind == OptimizerKind::ExactRowwiseAdagrad) {
      o.weight_decay_mode =
          *rc::gen::element(WeightDecayMode::None, WeightDecayMode::L2, WeightDecayMode::Decoupled);
      o.weight_decay = *rc::gen::element(0.0, 1e-4, 0.1, 0.7);
    }
    o.max_norm = *rc::gen::weightedElement<double>({{4, 0.0}, {1, 1e-3}, {1, 0.8}, {1, 30.0}});
    o.max_gradient = *rc::gen::weightedElement<double>({{4, 0.0}, {1, 1e-2}, {1, 3.0}});
    s.random_momentum = *rc::gen::arbitrary<bool>();
    s.sr_seed = *rc::gen::arbitrary<std::uint64_t>();
    return s;
  });
}

/// The conforming emulation configurations run on every soundness case: every summation order
/// (chunks of 255/256/257/32 among them), every term form, random column orders, the policy's
/// accumulation and FP64, FP32 and FP64 optimizer arithmetic, random SR draws (seeded).
inline std::vector<BackwardEmulationOptions> conforming_emulations(const BackwardProblem& p,
                                                                   std::uint64_t seed) {
  std::vector<BackwardEmulationOptions> v;
  int i = 0;
  for (SummationOrder order : kAllSummationOrders) {
    BackwardEmulationOptions o;
    o.order = order;
    o.column_order = kAllSummationOrders[(i + 3) % 7];
    o.term_form = kAllTermForms[i % 3];
    o.seed = seed + static_cast<std::uint64_t>(i);
    v.push_back(o);
    ++i;
  }
  for (std::int32_t cs : {255, 257, 32}) {
    BackwardEmulationOptions o;
    o.order = SummationOrder::Chunked256;
    o.chunk_size = cs;
    o.column_order = SummationOrder::RandomPermutation;
    o.term_form = kAllTermForms[(i++) % 3];
    o.seed = seed + 100 + static_cast<std::uint64_t>(cs);
    v.push_back(o);
  }
  {  // wider arithmetic is conforming: FP64 optimizer, and FP64 accumulation under an FP32 policy
    BackwardEmulationOptions o;
    o.order = SummationOrder::SortedDescending;
    o.optimizer_arithmetic = DType::F64;
    o.seed = seed + 200;
    v.push_back(o);
    if (p.forward.options.policy.accumulation == DType::F32) {
      o.accumulation = DType::F64;
      o.order = SummationOrder::RandomPermutation;
      o.optimizer_arithmetic = DType::F32;
      v.push_back(o);
    }
  }
  return v;
}

/// backward_reference into full buffers (copies of the problem's), judgeable by judge_backward.
struct ReferenceRun {
  std::vector<std::byte> weights;
  std::vector<float> momentum, psw_grad;
  BackwardResultView view() const {
    return {weights.empty() ? nullptr : weights.data(), momentum.empty() ? nullptr : momentum.data(),
            psw_grad.empty() ? nullptr : psw_grad.data()};
  }
};
inline ReferenceRun run_reference(BackwardCase& c) {
  ReferenceRun r;
  r.weights = c.forward.weights;
  r.momentum = c.momentum;
  if (!c.forward.per_sample_weights.empty()) r.psw_grad.assign(c.forward.indices.size(), 0.0f);
  const BackwardOutputs out{r.weights.empty() ? nullptr : r.weights.data(),
                            r.momentum.empty() ? nullptr : r.momentum.data(),
                            r.psw_grad.empty() ? nullptr : r.psw_grad.data()};
  backward_reference(c.view(), out);
  return r;
}

/// Longest run of a case (after its bounds check), for RC_TAG.
inline std::string max_sl_bucket(const BackwardEnclosures& enc) {
  std::int64_t m = 0;
  for (auto sl : enc.reference.transpose.run_lengths) m = std::max(m, sl);
  if (m == 0) return "no runs";
  if (m < 32) return "SL<32";
  if (m < 256) return "SL<256";
  if (m <= 512) return "SL 256..512";
  return "SL>512";
}

/// Case C09 (docs/edge-cases.md): one table E=4, D=2 shared by features 0 and 1, bags [1] and
/// [1], grad_output all ones, rowwise Adagrad lr 0.5, eps 1e-8, momentum 0. Right answer: one
/// update, W[1] = [0.5, 0.5]; two separate updates give 0.1464...
inline BackwardCase c09_case(DType wdt, PolicyKind kind) {
  BackwardCase c;
  c.forward = single_table_case(wdt, DType::F32, kind, PoolingMode::Sum, 4, 2, {{1}},
                                [](auto, auto) { return 1.0; });
  c.forward.feature_table_map = {0, 0};
  c.forward.batch_size = 1;
  c.forward.indices = {1, 1};
  c.forward.offsets = {0, 1, 2};
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.learning_rate = 0.5;
  c.options.optimizer.eps = 1e-8;
  c.reset_momentum();
  c.resize_grad_output();
  for (int i = 0; i < 4; ++i) c.set_grad(i, 1.0);
  return c;
}

}  // namespace tbe::oracle::testing
