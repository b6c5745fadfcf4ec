// Properties of the reference backward on generated valid problems (tables, shared tables, VBE,
// SUM/MEAN/NONE, weighted, I32/I64, F32/F16/BF16, both policy kinds, RNE/SR, every optimizer
// mode), with one run forced to each routing-relevant SL: the reference equals an independent
// naive implementation (bitwise in FP64: both sum in position order), stores exactly its
// rounding, leaves untouched rows and momenta bitwise unchanged, and the transpose is a stable
// sort + RLE. A dedicated test covers one run of ~125K lookups.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <chrono>
#include <cstring>

#include "backward_test_support.h"

using namespace tbe;
using namespace tbe_test;

namespace {

/// Every claim of the property for one case; RC_ASSERTs name what failed.
void check_against_naive(BackwardCase& c, std::int64_t forced_sl, std::int64_t forced_table,
                         std::int64_t forced_row) {
  const BackwardProblem p = c.view();
  const BackwardReference ref = backward_reference_fp64(p);
  const NaiveBackward nb = naive_backward(c);
  const Transpose& tr = ref.transpose;
  const ForwardCase& fc = c.forward;
  const std::int64_t R = static_cast<std::int64_t>(tr.linear_ids.size());

  // Transpose: unique ascending ids, prefix offsets, stable positions, position -> bag.
  RC_ASSERT(static_cast<std::int64_t>(nb.G.size()) == R);
  RC_ASSERT(static_cast<std::int64_t>(tr.run_offsets.size()) == (R ? R + 1 : 1));
  std::vector<std::int64_t> row_offset(fc.rows.size(), 0);
  for (std::size_t t = 1; t < fc.rows.size(); ++t) row_offset[t] = row_offset[t - 1] + fc.rows[t - 1];
  std::int64_t inside = 0;
  for (std::size_t k = 0; k + 1 < fc.offsets.size(); ++k) inside += fc.offsets[k + 1] - fc.offsets[k];
  RC_ASSERT(static_cast<std::int64_t>(tr.sorted_positions.size()) == inside);
  for (std::int64_t k = 0; k < R; ++k) {
    if (k > 0) RC_ASSERT(tr.linear_ids[k] > tr.linear_ids[k - 1]);
    RC_ASSERT(tr.run_lengths[k] == tr.run_offsets[k + 1] - tr.run_offsets[k]);
    RC_ASSERT(tr.run_lengths[k] >= 1);
    const std::int64_t t = ref.run_table[k], r = ref.run_row[k];
    RC_ASSERT(row_offset[t] + r == tr.linear_ids[k]);
    for (std::int64_t i = tr.run_offsets[k]; i < tr.run_offsets[k + 1]; ++i) {
      const std::int64_t q = tr.sorted_positions[i];
      if (i > tr.run_offsets[k]) RC_ASSERT(q > tr.sorted_positions[i - 1]);
      RC_ASSERT(fc.indices[q] == r);
      const std::int64_t bag = tr.position_bag[q];
      RC_ASSERT(bag >= 0);
      RC_ASSERT(fc.offsets[bag] <= q);
      RC_ASSERT(q < fc.offsets[bag + 1]);
    }
    // G_r, the update and the momentum equal the naive ones bit for bit.
    const auto it = nb.G.find({t, r});
    RC_ASSERT(it != nb.G.end());
    const std::vector<double> G(ref.row_grad.begin() + ref.run_col_offset[k],
                                ref.row_grad.begin() + ref.run_col_offset[k + 1]);
    const std::vector<double> x(ref.updated.begin() + ref.run_col_offset[k],
                                ref.updated.begin() + ref.run_col_offset[k + 1]);
    RC_ASSERT(std::memcmp(G.data(), it->second.data(), G.size() * sizeof(double)) == 0);
    const auto& nx = nb.updated.at({t, r});
    RC_ASSERT(std::memcmp(x.data(), nx.data(), x.size() * sizeof(double)) == 0);
    if (c.options.optimizer.kind == OptimizerKind::ExactRowwiseAdagrad) {
      const double m = nb.momentum.at({t, r});
      RC_ASSERT(std::memcmp(&ref.momentum[k], &m, sizeof m) == 0);
    }
    if (t == forced_table && r == forced_row) RC_ASSERT(tr.run_lengths[k] == forced_sl);
  }

  // Stores: touched rows = the rounding of x (RNE or the Philox SR stream), untouched bitwise
  // unchanged; momentum likewise; per-sample-weight gradients = FP32 of the naive ones.
  const BackwardRun run = run_backward(c);
  const DType wt = fc.weights_dtype;
  const bool sr = fc.options.policy.write_back == RoundingMode::Stochastic && wt != DType::F32;
  std::vector<std::byte> expect_w = fc.weights;
  std::vector<float> expect_m = c.momentum;
  for (const auto& [key, x] : nb.updated) {
    const auto [t, r] = key;
    for (std::size_t d = 0; d < x.size(); ++d) {
      const std::int64_t e = fc.table_offsets[t] + r * fc.dims[t] + static_cast<std::int64_t>(d);
      const double v =
          sr ? stochastic_round(wt, x[d],
                                stochastic_rounding_uniform(c.options.sr_seed, c.options.sr_offset,
                                                            static_cast<std::uint64_t>(e)))
             : round_to(wt, x[d]);
      store_from_double(wt, expect_w.data(), e, v);
    }
    if (!expect_m.empty()) expect_m[row_offset[t] + r] = static_cast<float>(nb.momentum.at(key));
  }
  RC_ASSERT(run.weights == expect_w);
  RC_ASSERT(run.momentum.size() == expect_m.size());
  // Bitwise (NaN-safe); no memcmp on the null data() of an empty (SGD) momentum. (Computed
  // before RC_ASSERT: its expression capture overloads ||, which then does not short-circuit.)
  const bool same_momentum =
      expect_m.empty() ||
      std::memcmp(run.momentum.data(), expect_m.data(), expect_m.size() * sizeof(float)) == 0;
  RC_ASSERT(same_momentum);
  for (std::size_t q = 0; q < run.psw_grad.size(); ++q) {
    const float expect = static_cast<float>(nb.psw_grad[q]);
    RC_ASSERT(std::memcmp(&run.psw_grad[q], &expect, sizeof expect) == 0);
  }
  RC_ASSERT(run.stats.runs == R);
  RC_ASSERT(run.stats.lookups == inside);
  RC_ASSERT(run.stats.warnings == 0);
}

}  // namespace

TEST_CASE("reference backward equals the naive implementation for every routing SL",
          "[backward][property]") {
  rc::prop("reference == naive (G_r, updates, momentum, stores, psw grads)", [] {
    const GenBackward g = *gen_backward();
    BackwardCase c = g.c;
    RC_CLASSIFY(g.forced_sl >= 256, "long run (SL >= 256)");
    RC_TAG(sl_bucket(g.forced_sl), to_string(c.options.optimizer.kind),
           to_string(c.forward.options.pooling));
    check_against_naive(c, g.forced_sl, g.forced_table, g.forced_row);
  });
}

TEST_CASE("reference backward with exact small-integer data equals the naive one",
          "[backward][property]") {
  GenBackwardOptions o;
  o.exact_values = true;
  rc::prop("reference == naive on exact data", [o] {
    const GenBackward g = *gen_backward(o);
    BackwardCase c = g.c;
    RC_TAG(sl_bucket(g.forced_sl));
    check_against_naive(c, g.forced_sl, g.forced_table, g.forced_row);
  });
}

TEST_CASE("nothing is written on a FATAL bounds violation (poisoned outputs unchanged)",
          "[backward][property]") {
  rc::prop("FATAL violation: outputs untouched", [] {
    const GenBackward g = *gen_backward();
    BackwardCase c = g.c;
    RC_PRE(!c.forward.offsets.empty() && c.forward.offsets.back() > c.forward.offsets.front());
    c.forward.options.bounds_check = BoundsCheckMode::Fatal;
    // Corrupt one lookup inside a bag: a row past the end of its table.
    const std::int64_t q = *rc::gen::inRange(c.forward.offsets.front(), c.forward.offsets.back());
    c.forward.indices[q] = 1000000;
    std::vector<std::byte> w(c.forward.weights.size(), std::byte{0x33});
    std::vector<float> m(c.momentum.size(), -9.0f), psw(c.forward.per_sample_weights.size(), -8.0f);
    const auto w0 = w;
    const BackwardOutputs out{w.data(), m.empty() ? nullptr : m.data(),
                              psw.empty() ? nullptr : psw.data()};
    bool threw = false;
    try {
      backward_reference(c.view(), out);
    } catch (const BoundsCheckError& e) {
      threw = true;
      RC_ASSERT(e.violation().position == q);
    }
    RC_ASSERT(threw);
    RC_ASSERT(w == w0);
    for (float v : m) RC_ASSERT(v == -9.0f);
    for (float v : psw) RC_ASSERT(v == -8.0f);
  });
}

TEST_CASE("one run of ~125K lookups (shared table, MEAN, weighted, Adagrad)",
          "[backward][long]") {
  // Table 0: E = 8, D = 5, FP16; features 0 and 1 share it; row 3 is looked up 125000 times in
  // bags of 7 (plus other rows); BF16 grad_output.
  BackwardCase c;
  ForwardCase& fc = c.forward;
  fc.set_tables(DType::F16, {8, 6}, {5, 3});
  tbe::Rng rng(2024, 1);
  for (int r = 0; r < 8; ++r)
    for (int d = 0; d < 5; ++d) fc.set_weight(0, r, d, 2 * rng.uniform() - 1);
  fc.feature_table_map = {0, 1, 0};
  const std::int64_t B = 12000;
  fc.batch_size = B;
  fc.offsets = {0};
  std::int64_t hot = 0;
  for (std::int64_t f = 0; f < 3; ++f)
    for (std::int64_t b = 0; b < B; ++b) {
      for (int i = 0; i < 7; ++i) {
        const bool on_hot = f != 1 && hot < 125000 && i < 6;
        std::int64_t r = on_hot ? 3 : rng.uniform_int(f == 1 ? 6 : 8);
        if (!on_hot && f != 1 && r == 3) r = 4;
        hot += on_hot;
        fc.indices.push_back(r);
      }
      fc.offsets.push_back(static_cast<std::int64_t>(fc.indices.size()));
    }
  REQUIRE(hot == 125000);
  fc.per_sample_weights.resize(fc.indices.size());
  for (auto& w : fc.per_sample_weights) w = static_cast<float>(0.5 + rng.uniform());
  fc.index_dtype = DType::I32;
  fc.options.pooling = PoolingMode::Mean;
  fc.options.bounds_check = BoundsCheckMode::Warning;
  fc.options.policy = make_policy(PolicyKind::FbgemmCuda, DType::F16, DType::BF16);
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.learning_rate = 0.05;
  c.options.optimizer.weight_decay_mode = WeightDecayMode::Decoupled;
  c.options.optimizer.weight_decay = 0.01;
  c.reset_momentum();
  c.resize_grad_output();
  const std::int64_t numel = static_cast<std::int64_t>(c.grad_output.size() / 2);
  for (std::int64_t i = 0; i < numel; ++i) c.set_grad(i, 2 * rng.uniform() - 1);

  const auto t0 = std::chrono::steady_clock::now();
  const BackwardReference ref = backward_reference_fp64(c.view());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("backward_reference_fp64: " << secs << " s for " << fc.indices.size() << " lookups");
  std::int64_t max_sl = 0;
  for (auto sl : ref.transpose.run_lengths) max_sl = std::max(max_sl, sl);
  CHECK(max_sl == 125000);
  const NaiveBackward nb = naive_backward(c);
  for (std::size_t k = 0; k < ref.run_row.size(); ++k) {
    const std::pair<std::int64_t, std::int64_t> key{ref.run_table[k], ref.run_row[k]};
    const std::vector<double> x(ref.updated.begin() + ref.run_col_offset[k],
                                ref.updated.begin() + ref.run_col_offset[k + 1]);
    CHECK(x == nb.updated.at(key));
    CHECK(ref.momentum[k] == nb.momentum.at(key));
  }
  CHECK(ref.per_sample_weight_grad == nb.psw_grad);
}
