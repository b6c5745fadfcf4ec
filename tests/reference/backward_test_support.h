// Shared helpers of the backward tests: running a backward call into fresh output buffers, an
// independent naive implementation written from docs/backward.md (plain loops over bags, a std::map from
// (table, row) to the accumulated gradient), and a RapidCheck generator of VALID backward
// problems with one run forced to a chosen segment length SL.
#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "reference_test_support.h"
#include "tbe/backend.h"
#include "tbe/backward.h"
#include "tbe/backward_case.h"

namespace tbe_test {

using namespace tbe;

/// What one backward call wrote: full copies of the weights and momentum buffers (initialised
/// from the problem's, so untouched elements must come back unchanged) and the per-sample-weight
/// gradients (initialised to NaN).
struct BackwardRun {
  std::vector<std::byte> weights;
  std::vector<float> momentum;
  std::vector<float> psw_grad;
  BackwardStats stats;
  double weight(const BackwardCase& c, std::int64_t t, std::int64_t r, std::int64_t d) const {
    return load_as_double(c.forward.weights_dtype, weights.data(),
                          c.forward.table_offsets[t] + r * c.forward.dims[t] + d);
  }
};

/// Runs backward_reference (or `be->backward`) on c into fresh buffers.
inline BackwardRun run_backward(BackwardCase& c, Backend* be = nullptr,
                                const BackwardStrategy& s = {}) {
  BackwardRun r;
  r.weights = c.forward.weights;
  r.momentum = c.momentum;
  if (!c.forward.per_sample_weights.empty())
    r.psw_grad.assign(c.forward.indices.size(), std::nanf(""));
  BackwardOutputs out;
  out.weights = r.weights.empty() ? nullptr : r.weights.data();
  out.momentum = r.momentum.empty() ? nullptr : r.momentum.data();
  out.per_sample_weight_grad = r.psw_grad.empty() ? nullptr : r.psw_grad.data();
  const BackwardProblem p = c.view();
  r.stats = be ? be->backward(p, out, s) : backward_reference(p, out);
  return r;
}

/// The naive backward of a VALID case (no repair needed), in FP64, from docs/backward.md: for every bag in
/// order, every lookup in order, G[(t, row)] += c_p·g; then each row's optimizer.
struct NaiveBackward {
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<double>> G;        ///< (t, r) -> G_r
  std::map<std::pair<std::int64_t, std::int64_t>, std::vector<double>> updated;  ///< before storage
  std::map<std::pair<std::int64_t, std::int64_t>, double> momentum;              ///< new momentum
  std::vector<double> psw_grad;  ///< [N] (weighted)
};

inline NaiveBackward naive_backward(const BackwardCase& c) {
  const ForwardCase& fc = c.forward;
  const std::int64_t T = fc.num_features();
  const auto feats = bag_features(fc);
  const bool none = fc.options.pooling == PoolingMode::None;
  const bool mean = fc.options.pooling == PoolingMode::Mean;
  const bool weighted = !fc.per_sample_weights.empty();
  auto D_of = [&](std::int64_t f) { return std::int64_t{fc.dims[fc.feature_table_map[f]]}; };
  const OptimizerConfig& o = c.options.optimizer;
  auto eff = [](double v) { return static_cast<double>(static_cast<float>(v)); };
  const double max_grad = eff(o.max_gradient);
  auto grad = [&](std::int64_t i) {
    double g = c.grad(i);
    if (max_grad > 0 && g > max_grad) g = max_grad;
    if (max_grad > 0 && g < -max_grad) g = -max_grad;
    return g;
  };

  // Element offset of the grad_output row of every bag, by hand (not OutputLayout).
  std::vector<std::int64_t> place(feats.size());
  if (!none) {
    if (fc.vbe_batch_sizes.empty()) {
      std::vector<std::int64_t> col(T);
      std::int64_t cols = 0;
      for (std::int64_t f = 0; f < T; ++f) { col[f] = cols; cols += D_of(f); }
      std::int64_t k = 0;
      for (std::int64_t f = 0; f < T; ++f)
        for (std::int64_t b = 0; b < fc.batch_size; ++b) place[k++] = b * cols + col[f];
    } else {
      const std::int64_t R = fc.vbe_ranks;
      std::vector<std::int64_t> first(T * R);
      std::int64_t k = 0, total = 0;
      for (std::int64_t f = 0; f < T; ++f)
        for (std::int64_t r = 0; r < R; ++r) { first[f * R + r] = k; k += fc.vbe_batch_sizes[f * R + r]; }
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t f = 0; f < T; ++f)
          for (std::int64_t j = 0; j < fc.vbe_batch_sizes[f * R + r]; ++j) {
            place[first[f * R + r] + j] = total;
            total += D_of(f);
          }
    }
  }

  NaiveBackward nb;
  const std::int64_t N = static_cast<std::int64_t>(fc.indices.size());
  if (weighted) nb.psw_grad.assign(static_cast<std::size_t>(N), 0.0);
  for (std::size_t k = 0; k < feats.size(); ++k) {
    const std::int64_t f = feats[k], t = fc.feature_table_map[f], D = D_of(f);
    const std::int64_t L = fc.offsets[k + 1] - fc.offsets[k];
    for (std::int64_t q = fc.offsets[k]; q < fc.offsets[k + 1]; ++q) {
      auto& g = nb.G[{t, fc.indices[q]}];
      g.resize(static_cast<std::size_t>(D), 0.0);
      const double s = weighted ? fc.per_sample_weights[q] : 1.0;
      double dot = 0.0;
      for (std::int64_t d = 0; d < D; ++d) {
        const double go = none ? grad(q * D + d) : grad(place[k] + d);
        double term = s * go;
        if (mean) term /= static_cast<double>(L);
        g[d] += term;
        dot += go * fc.weight(t, fc.indices[q], d);
      }
      if (weighted) nb.psw_grad[q] = mean ? dot / static_cast<double>(L) : dot;
    }
  }

  std::vector<std::int64_t> row_offset(fc.rows.size(), 0);
  for (std::size_t t = 1; t < fc.rows.size(); ++t) row_offset[t] = row_offset[t - 1] + fc.rows[t - 1];
  const double lr = eff(o.learning_rate), eps = eff(o.eps), wd = eff(o.weight_decay);
  const double max_norm = eff(o.max_norm);
  for (const auto& [key, G] : nb.G) {
    const auto [t, r] = key;
    const std::int64_t D = static_cast<std::int64_t>(G.size());
    std::vector<double> x(G.size());
    if (o.kind == OptimizerKind::ExactSgd) {
      for (std::int64_t d = 0; d < D; ++d) x[d] = fc.weight(t, r, d) - lr * G[d];
    } else {
      double sumsq = 0.0;
      for (std::int64_t d = 0; d < D; ++d) {
        const double gp =
            o.weight_decay_mode == WeightDecayMode::L2 ? G[d] + wd * fc.weight(t, r, d) : G[d];
        sumsq += gp * gp;
      }
      const double m = static_cast<double>(c.momentum[row_offset[t] + r]) +
                       sumsq / static_cast<double>(D);
      nb.momentum[key] = m;
      const double mult = lr / (std::sqrt(m) + eps);
      double corr = 1.0;
      if (o.weight_decay_mode == WeightDecayMode::L2) corr = 1.0 - mult * wd;
      if (o.weight_decay_mode == WeightDecayMode::Decoupled) corr = 1.0 - lr * wd;
      for (std::int64_t d = 0; d < D; ++d) x[d] = corr * fc.weight(t, r, d) - mult * G[d];
    }
    if (max_norm > 0) {
      double sq = 0.0;
      for (double v : x) sq += v * v;
      const double norm = std::sqrt(sq);
      if (norm > max_norm)
        for (double& v : x) v *= max_norm / norm;
    }
    nb.updated[key] = std::move(x);
  }
  return nb;
}

/// Segment lengths that decide the GPU routing (docs/backward.md "Work routing").
inline const std::vector<std::int64_t>& routing_segment_lengths() {
  static const std::vector<std::int64_t> v = {1, 2, 255, 256, 257, 511, 512, 4096};
  return v;
}

/// A generated backward case and its forced run.
struct GenBackward {
  BackwardCase c;
  std::uint64_t content_seed = 0;
  std::int64_t forced_sl = 0;     ///< SL of the forced run (0: no forced run, e.g. no bags)
  std::int64_t forced_table = -1, forced_row = -1;
};

/// Text of an SL bucket for RC_TAG / RC_CLASSIFY.
inline std::string sl_bucket(std::int64_t sl) { return "SL=" + std::to_string(sl); }

/// Options of gen_backward.
struct GenBackwardOptions {
  bool allow_sr = true;
  bool exact_values = false;  ///< small-integer weights/grads (every FP64 sum exact)
};

/// RapidCheck generator of valid backward problems: 1-3 tables (shared by 1-4 features), VBE
/// sometimes, SUM/MEAN/NONE, weighted or not, I32/I64, F32/F16/BF16 weights and outputs, both
/// policy kinds, RNE/SR, SGD or Adagrad with every weight-decay mode, optional max_norm and
/// clipping. One row (table t0, row r0) is looked up exactly SL times, SL from
/// routing_segment_lengths(); no other lookup touches it.
inline rc::Gen<GenBackward> gen_backward(GenBackwardOptions opt = {}) {
  return rc::gen::exec([opt]() {
    GenBackward g;
    g.content_seed = *rc::gen::arbitrary<std::uint64_t>();
    tbe::Rng rng(g.content_seed, 11);
    BackwardCase& c = g.c;
    ForwardCase& fc = c.forward;

    const PoolingMode pooling =
        *rc::gen::element(PoolingMode::Sum, PoolingMode::Mean, PoolingMode::None);
    const bool none = pooling == PoolingMode::None;
    const std::int64_t target_sl = *rc::gen::elementOf(routing_segment_lengths());
    const int num_tables = *rc::gen::inRange(1, 4);
    std::vector<std::int64_t> rows(num_tables);
    std::vector<std::int32_t> dims(num_tables);
    const std::vector<std::int32_t> dim_choices =
        target_sl >= 511 ? std::vector<std::int32_t>{1, 2, 3, 4, 5, 8, 13}
                         : std::vector<std::int32_t>{1, 2, 3, 4, 5, 7, 8, 16, 33, 64, 129};
    for (int t = 0; t < num_tables; ++t) {
      rows[t] = *rc::gen::inRange<std::int64_t>(2, 40);
      dims[t] = *rc::gen::elementOf(dim_choices);
    }
    if (none) std::fill(dims.begin(), dims.end(), dims[0]);
    const DType wdt = *rc::gen::element(DType::F32, DType::F16, DType::BF16);
    const DType odt = *rc::gen::element(DType::F32, DType::F16, DType::BF16);
    fc.set_tables(wdt, rows, dims);
    for (int t = 0; t < num_tables; ++t)
      for (std::int64_t r = 0; r < rows[t]; ++r)
        for (std::int64_t d = 0; d < dims[t]; ++d)
          fc.set_weight(t, r, d,
                        opt.exact_values ? static_cast<double>(rng.uniform_int(17) - 8)
                                         : 2.0 * rng.uniform() - 1.0);

    const int T = *rc::gen::inRange(1, 5);
    fc.feature_table_map.resize(T);
    for (int f = 0; f < T; ++f) fc.feature_table_map[f] = *rc::gen::inRange(0, num_tables);
    const bool vbe = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    if (vbe) {
      fc.vbe_ranks = *rc::gen::inRange(1, 4);
      fc.vbe_batch_sizes.resize(static_cast<std::size_t>(T) * fc.vbe_ranks);
      for (auto& b : fc.vbe_batch_sizes) b = *rc::gen::inRange(0, 4);
    } else {
      fc.batch_size = *rc::gen::inRange<std::int64_t>(1, 5);
    }
    const std::vector<std::int64_t> feats = bag_features(fc);
    const std::int64_t K = static_cast<std::int64_t>(feats.size());

    // The forced run: a random bag picks (feature, table t0); row r0 of t0.
    std::int64_t t0 = -1, r0 = -1;
    std::vector<std::int64_t> extra(static_cast<std::size_t>(K), 0);  // forced lookups per bag
    if (K > 0) {
      const std::int64_t k0 = rng.uniform_int(K);
      t0 = fc.feature_table_map[feats[k0]];
      r0 = rng.uniform_int(rows[t0]);
      // Spread SL lookups over the bags of features on t0 (at least one in bag k0).
      std::vector<std::int64_t> on_t0;
      for (std::int64_t k = 0; k < K; ++k)
        if (fc.feature_table_map[feats[k]] == t0) on_t0.push_back(k);
      extra[k0] = 1;
      for (std::int64_t i = 1; i < target_sl; ++i) ++extra[on_t0[rng.uniform_int(on_t0.size())]];
      g.forced_sl = target_sl;
      g.forced_table = t0;
      g.forced_row = r0;
    }
    const std::int64_t lead = *rc::gen::weightedElement<std::int64_t>({{6, 0}, {1, 2}});
    fc.offsets.assign(1, lead);
    for (std::int64_t q = 0; q < lead; ++q) fc.indices.push_back(rng.uniform_int(1000) - 500);
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t t = fc.feature_table_map[feats[k]];
      const std::int64_t L = rng.uniform_int(5) + extra[k];
      std::int64_t forced_left = extra[k];
      for (std::int64_t i = 0; i < L; ++i) {
        // forced lookups at random places inside the bag
        const bool forced = forced_left > 0 && rng.uniform_int(L - i) < forced_left;
        std::int64_t r;
        if (forced) {
          r = r0;
          --forced_left;
        } else {
          r = rng.uniform_int(rows[t]);
          if (t == t0 && r == r0) r = (r + 1) % rows[t];  // E >= 2: never r0
        }
        fc.indices.push_back(r);
      }
      fc.offsets.push_back(static_cast<std::int64_t>(fc.indices.size()));
    }
    const std::int64_t N = static_cast<std::int64_t>(fc.indices.size());
    const bool weighted = !none && *rc::gen::arbitrary<bool>();
    if (weighted) {
      fc.per_sample_weights.resize(static_cast<std::size_t>(N));
      for (auto& w : fc.per_sample_weights)
        w = opt.exact_values ? static_cast<float>(rng.uniform_int(9) * 0.5 - 2.0)
                             : static_cast<float>(0.5 + rng.uniform());
    }
    fc.index_dtype = *rc::gen::element(DType::I32, DType::I64);
    fc.options.pooling = pooling;
    fc.options.bounds_check = *rc::gen::element(BoundsCheckMode::Fatal, BoundsCheckMode::Warning,
                                                BoundsCheckMode::Ignore, BoundsCheckMode::None);
    const PolicyKind kind = *rc::gen::element(PolicyKind::SeedDefault, PolicyKind::FbgemmCuda);
    const bool sr = opt.allow_sr && *rc::gen::arbitrary<bool>();
    fc.options.policy =
        make_policy(kind, wdt, odt, sr ? RoundingMode::Stochastic : RoundingMode::Nearest);

    OptimizerConfig& o = c.options.optimizer;
    o.kind = *rc::gen::element(OptimizerKind::ExactSgd, OptimizerKind::ExactRowwiseAdagrad);
    o.learning_rate = *rc::gen::element(0.01, 0.5, 0.1, 3.0);
    o.eps = *rc::gen::element(1e-8, 1e-3, 0.25);
    if (o.kind == OptimizerKind::ExactRowwiseAdagrad) {
      o.weight_decay_mode =
          *rc::gen::element(WeightDecayMode::None, WeightDecayMode::L2, WeightDecayMode::Decoupled);
      o.weight_decay = *rc::gen::element(0.0, 0.01, 0.5);
    }
    o.max_norm = *rc::gen::weightedElement<double>({{3, 0.0}, {1, 0.75}, {1, 4.0}});
    o.max_gradient = *rc::gen::weightedElement<double>({{3, 0.0}, {1, 0.5}});
    c.options.sr_seed = rng.next_u64();
    c.options.sr_offset = rng.uniform_int(1000);
    c.reset_momentum();
    for (auto& m : c.momentum) m = static_cast<float>(rng.uniform_int(3) == 0 ? 0.0 : rng.uniform());
    c.resize_grad_output();
    const std::int64_t numel = static_cast<std::int64_t>(c.grad_output.size() / dtype_size(odt));
    for (std::int64_t i = 0; i < numel; ++i)
      c.set_grad(i, opt.exact_values ? static_cast<double>(rng.uniform_int(9) - 4)
                                     : 2.0 * rng.uniform() - 1.0);
    return g;
  });
}

inline void print_backward_case(const BackwardCase& c, std::ostream& os) {
  print_case(c.forward, os);
  const OptimizerConfig& o = c.options.optimizer;
  os << " optimizer=" << to_string(o.kind) << " lr=" << o.learning_rate << " eps=" << o.eps
     << " wd=" << o.weight_decay << " wd_mode=" << to_string(o.weight_decay_mode)
     << " max_norm=" << o.max_norm << " max_gradient=" << o.max_gradient
     << " sr_seed=" << c.options.sr_seed << " sr_offset=" << c.options.sr_offset;
}

inline void showValue(const GenBackward& g, std::ostream& os) {
  os << "content_seed=" << g.content_seed << " forced SL=" << g.forced_sl << " at (table "
     << g.forced_table << ", row " << g.forced_row << ") ";
  print_backward_case(g.c, os);
}

}  // namespace tbe_test
