// FP64 reference backward + exact optimizers (backward.h; docs/backward.md "The computation"; choices in
// docs/backward.md). Order of work: validate, bounds check/repair (FATAL throws), transpose, then
// per run (OpenMP over runs) G_r and the optimizer in FP64, and only then any store: nothing is
// written on error.
#include "tbe/backward.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "parallel_internal.h"
#include "tbe/backward_case.h"
#include "tbe/bounds_check.h"
#include "tbe/float_loader.h"
#include "tbe/host_case.h"

// GCC 12 reports a false -Wrestrict inside libstdc++ for chains of std::string operator+
// (GCC bug 105329); the messages below are built that way on purpose, for readability.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace tbe {

namespace {

std::string s(std::int64_t v) { return std::to_string(v); }

/// Shortest text that reads back as the same double ("%.17g" trimmed).
std::string num(double v) {
  char buf[64];
  for (int prec = 6; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    if (std::strtod(buf, nullptr) == v || std::isnan(v)) break;
  }
  return buf;
}

/// Checks a hyper-parameter: finite and (> 0 or >= 0), both as given and as the FP32 value the
/// semantics use.
Status check_hyper(const char* name, double v, bool strictly_positive) {
  const double e = effective_hyper_parameter(v);
  const bool ok_raw = std::isfinite(v) && (strictly_positive ? v > 0 : v >= 0);
  const bool ok_eff = std::isfinite(e) && (strictly_positive ? e > 0 : e >= 0);
  const std::string arg = std::string("options.optimizer.") + name;
  const std::string limit = strictly_positive ? "finite and > 0" : "finite and >= 0";
  if (!ok_raw) return Status::Invalid(arg, arg + ": " + num(v) + " must be " + limit);
  if (!ok_eff)
    return Status::Invalid(arg, arg + ": " + num(v) + " must be " + limit +
                                    " as an FP32 value (it rounds to " + num(e) + ")");
  return Status::Ok();
}

bool is_adagrad(const BackwardProblem& p) {
  return p.options.optimizer.kind == OptimizerKind::ExactRowwiseAdagrad;
}

// ---- Philox-4x32-10 ------------------------------------------------------------------------------
constexpr std::uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
constexpr std::uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

inline void mulhilo(std::uint32_t a, std::uint32_t b, std::uint32_t* hi, std::uint32_t* lo) {
  const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
  *hi = static_cast<std::uint32_t>(p >> 32);
  *lo = static_cast<std::uint32_t>(p);
}

}  // namespace

double effective_hyper_parameter(double x) { return static_cast<double>(static_cast<float>(x)); }

std::array<std::uint32_t, 4> philox4x32_10(std::array<std::uint32_t, 4> c,
                                           std::array<std::uint32_t, 2> k) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key is bumped between rounds (9 bumps for 10 rounds)
      k[0] += kPhiloxW0;
      k[1] += kPhiloxW1;
    }
    std::uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kPhiloxM0, c[0], &hi0, &lo0);
    mulhilo(kPhiloxM1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

double stochastic_rounding_uniform(std::uint64_t seed, std::uint64_t offset,
                                   std::uint64_t element) {
  const auto lo = [](std::uint64_t v) { return static_cast<std::uint32_t>(v); };
  const auto hi = [](std::uint64_t v) { return static_cast<std::uint32_t>(v >> 32); };
  const auto r = philox4x32_10({lo(offset), hi(offset), lo(element), hi(element)},
                               {lo(seed), hi(seed)});
  return static_cast<double>(r[0]) * 0x1p-32;
}

double stochastic_round(DType t, double x, double u) {
  if (!is_floating(t))
    throw InvalidArgument("dtype", "stochastic_round: " + to_string(t) + " is not a floating type");
  if (t == DType::F64 || !std::isfinite(x)) return x;
  const double r = round_to(t, x);
  if (r == x) return x;
  if (std::fabs(x) > float_traits(t).max_finite) return r;  // overflow: as RNE
  const double down = round_down_to(t, x), up = round_up_to(t, x);
  const double frac = (x - down) / (up - down);
  return u < frac ? up : down;
}

// ---- validation ----------------------------------------------------------------------------------

Status validate(const BackwardProblem& p, const BackwardStrategy& st) {
  if (Status f = validate(p.forward); !f.ok()) return f;
  const PrecisionPolicy& pol = p.forward.options.policy;
  if (pol.optimizer_state != DType::F32)
    return Status::Invalid("options.policy.optimizer_state",
                           "options.policy.optimizer_state: " + to_string(pol.optimizer_state) +
                               " is not supported (must be fp32)");
  const OutputLayout layout = make_output_layout(p.forward);
  if (layout.numel > 0 && p.grad_output == nullptr)
    return Status::Invalid("grad_output", "grad_output: null pointer for " + s(layout.numel) +
                                              " elements of " + to_string(pol.output));

  const OptimizerConfig& o = p.options.optimizer;
  if (o.kind != OptimizerKind::ExactSgd && o.kind != OptimizerKind::ExactRowwiseAdagrad)
    return Status::Invalid("options.optimizer.kind",
                           "options.optimizer.kind: " + s(static_cast<int>(o.kind)) +
                               " is not an optimizer (sgd, rowwise_adagrad)");
  if (o.weight_decay_mode != WeightDecayMode::None && o.weight_decay_mode != WeightDecayMode::L2 &&
      o.weight_decay_mode != WeightDecayMode::Decoupled)
    return Status::Invalid("options.optimizer.weight_decay_mode",
                           "options.optimizer.weight_decay_mode: " +
                               s(static_cast<int>(o.weight_decay_mode)) +
                               " is not a weight decay mode (none, l2, decoupled)");
  if (Status h = check_hyper("learning_rate", o.learning_rate, true); !h.ok()) return h;
  if (o.kind == OptimizerKind::ExactRowwiseAdagrad)
    if (Status h = check_hyper("eps", o.eps, true); !h.ok()) return h;
  if (Status h = check_hyper("weight_decay", o.weight_decay, false); !h.ok()) return h;
  if (o.kind == OptimizerKind::ExactSgd && o.weight_decay_mode != WeightDecayMode::None)
    return Status::Invalid("options.optimizer.weight_decay_mode",
                           "options.optimizer.weight_decay_mode: " + to_string(o.weight_decay_mode) +
                               " needs optimizer rowwise_adagrad (sgd allows none only)");
  if (Status h = check_hyper("max_norm", o.max_norm, false); !h.ok()) return h;
  if (Status h = check_hyper("max_gradient", o.max_gradient, false); !h.ok()) return h;

  const std::int64_t rows = total_rows(p.forward.tables);
  if (o.kind == OptimizerKind::ExactRowwiseAdagrad && rows > 0 && p.momentum == nullptr)
    return Status::Invalid("momentum", "momentum: null pointer with optimizer rowwise_adagrad "
                                       "(needs Σ E_t = " + s(rows) + " FP32 values)");
  if (o.kind == OptimizerKind::ExactSgd && p.momentum != nullptr)
    return Status::Invalid("momentum",
                           "momentum: must be nullptr with optimizer sgd (it has no state)");

  if (st.long_run_threshold < 1 || st.long_run_threshold > (1 << 20))
    return Status::Invalid("strategy.long_run_threshold",
                           "strategy.long_run_threshold: " + s(st.long_run_threshold) +
                               " is outside [1, " + s(1 << 20) + "]");
  if (st.chunk_size < 32 || st.chunk_size > 4096 || st.chunk_size % 32 != 0)
    return Status::Invalid("strategy.chunk_size",
                           "strategy.chunk_size: " + s(st.chunk_size) +
                               " must be in [32, 4096] and a multiple of 32");
  if (st.long_runs != BackwardStrategy::LongRuns::Chunked &&
      st.long_runs != BackwardStrategy::LongRuns::Fused)
    return Status::Invalid("strategy.long_runs",
                           "strategy.long_runs: " + s(static_cast<int>(st.long_runs)) +
                               " is not a long-run path (chunked, fused)");
  return Status::Ok();
}

Status validate(const BackwardProblem& p, const BackwardOutputs& out) {
  const TableBatchView& tb = p.forward.tables;
  const std::int64_t elements = total_weight_elements(tb);
  if (elements > 0 && out.weights == nullptr)
    return Status::Invalid("outputs.weights", "outputs.weights: null pointer (needs " +
                                                  s(elements) + " elements of " +
                                                  to_string(tb.dtype) + ")");
  const std::int64_t rows = total_rows(tb);
  if (is_adagrad(p) && rows > 0 && out.momentum == nullptr)
    return Status::Invalid("outputs.momentum", "outputs.momentum: null pointer with optimizer "
                                               "rowwise_adagrad (needs Σ E_t = " + s(rows) +
                                                   " FP32 values)");
  if (!is_adagrad(p) && out.momentum != nullptr)
    return Status::Invalid("outputs.momentum",
                           "outputs.momentum: must be nullptr with optimizer sgd (it has no state)");
  if (!p.forward.lookups.weighted() && out.per_sample_weight_grad != nullptr)
    return Status::Invalid("outputs.per_sample_weight_grad",
                           "outputs.per_sample_weight_grad: must be nullptr for an unweighted "
                           "problem (lookups.per_sample_weights is null)");
  return Status::Ok();
}

// ---- the FP64 reference --------------------------------------------------------------------------

BackwardReference backward_reference_fp64(const BackwardProblem& p) {
  throw_if_error(validate(p));
  const ForwardProblem& fp = p.forward;
  const TableBatchView& tb = fp.tables;
  const OutputLayout layout = make_output_layout(fp);

  BackwardReference ref;
  ref.repair = repair(fp);  // FATAL with a violation throws here: nothing computed
  ref.transpose = transpose_lookups(fp, ref.repair);
  const Transpose& tr = ref.transpose;
  const std::vector<std::int64_t>& off = ref.repair.offsets;
  const std::int64_t R = static_cast<std::int64_t>(tr.linear_ids.size());
  const std::int64_t K = layout.num_bags;
  const std::int64_t N = fp.lookups.num_indices;

  // Run -> (table, row, columns). Linearized ids ascend, so tables are found by a binary search
  // over the exclusive prefix of E_t.
  std::vector<std::int64_t> row_offset(static_cast<std::size_t>(tb.num_tables()) + 1, 0);
  for (std::int64_t t = 0; t < tb.num_tables(); ++t) row_offset[t + 1] = row_offset[t] + tb.rows[t];
  ref.run_table.resize(R);
  ref.run_row.resize(R);
  ref.run_col_offset.assign(static_cast<std::size_t>(R) + 1, 0);
  for (std::int64_t k = 0; k < R; ++k) {
    const std::int64_t id = tr.linear_ids[k];
    const auto t = static_cast<std::int32_t>(
        std::upper_bound(row_offset.begin(), row_offset.end(), id) - row_offset.begin() - 1);
    ref.run_table[k] = t;
    ref.run_row[k] = id - row_offset[t];
    ref.run_col_offset[k + 1] = ref.run_col_offset[k] + tb.dims[t];
  }

  // Per bag: feature and the element offset of its grad_output row (pooled modes).
  const bool none = fp.options.pooling == PoolingMode::None;
  const bool mean = fp.options.pooling == PoolingMode::Mean;
  std::vector<std::int64_t> bag_out(static_cast<std::size_t>(none ? 0 : K));
  if (!none)
    for (std::int64_t k = 0; k < K; ++k) bag_out[k] = layout.bag_output_offset(k);

  const FloatLoader grad_load(fp.options.policy.output, p.grad_output);
  const FloatLoader w_load(tb.dtype, tb.weights);
  const float* psw = fp.lookups.per_sample_weights;
  const OptimizerConfig& oc = p.options.optimizer;
  const double max_grad = effective_hyper_parameter(oc.max_gradient);
  // Clipping (docs/backward.md "Semantics"): clamp elementwise to [-max_gradient, max_gradient]; NaN stays NaN.
  auto grad = [&](std::int64_t i) {
    const double g = grad_load(i);
    if (max_grad > 0.0) {
      if (g > max_grad) return max_grad;
      if (g < -max_grad) return -max_grad;
    }
    return g;
  };
  const double lr = effective_hyper_parameter(oc.learning_rate);
  const double eps = effective_hyper_parameter(oc.eps);
  const double wd = effective_hyper_parameter(oc.weight_decay);
  const double max_norm = effective_hyper_parameter(oc.max_norm);
  const bool adagrad = oc.kind == OptimizerKind::ExactRowwiseAdagrad;

  const std::int64_t total_cols = ref.run_col_offset[R];
  ref.row_grad.assign(static_cast<std::size_t>(total_cols), 0.0);
  ref.updated.assign(static_cast<std::size_t>(total_cols), 0.0);
  if (adagrad) ref.momentum.assign(static_cast<std::size_t>(R), 0.0);

  const std::int64_t mean_D = R > 0 ? std::max<std::int64_t>(total_cols / R, 1) : 1;
#pragma omp parallel for schedule(dynamic, 16) \
    if (detail::worth_parallel((static_cast<std::int64_t>(tr.sorted_positions.size()) + R) * mean_D))
  for (std::int64_t k = 0; k < R; ++k) {
    const std::int64_t t = ref.run_table[k];
    const std::int64_t D = tb.dims[t];
    const std::int64_t row = tb.table_offsets[t] + ref.run_row[k] * D;  // 64-bit element address
    double* G = ref.row_grad.data() + ref.run_col_offset[k];
    double* x = ref.updated.data() + ref.run_col_offset[k];

    // G_r = Σ_p c_p · grad_output[b(p), cols(f(p))] in sorted (= position) order; each term
    // (s_p·g) / L is the exact product divided once.
    for (std::int64_t i = tr.run_offsets[k]; i < tr.run_offsets[k + 1]; ++i) {
      const std::int64_t q = tr.sorted_positions[i];
      if (none) {
        for (std::int64_t d = 0; d < D; ++d) G[d] += grad(q * D + d);
        continue;
      }
      const std::int64_t bag = tr.position_bag[q];
      const double sw = psw ? static_cast<double>(psw[q]) : 1.0;
      const double L = static_cast<double>(off[bag + 1] - off[bag]);
      const std::int64_t g0 = bag_out[bag];
      for (std::int64_t d = 0; d < D; ++d) {
        double term = sw * grad(g0 + d);
        if (mean) term /= L;
        G[d] += term;
      }
    }

    // The optimizer (docs/backward.md "The computation"), hyper-parameters as FP32 values, FP64 arithmetic.
    if (!adagrad) {
      for (std::int64_t d = 0; d < D; ++d) x[d] = w_load(row + d) - lr * G[d];
    } else {
      const WeightDecayMode mode = oc.weight_decay_mode;
      double sumsq = 0.0;
      for (std::int64_t d = 0; d < D; ++d) {
        const double g = mode == WeightDecayMode::L2 ? G[d] + wd * w_load(row + d) : G[d];
        sumsq += g * g;
      }
      const double m = static_cast<double>(p.momentum[tr.linear_ids[k]]) +
                       sumsq / static_cast<double>(D);
      ref.momentum[k] = m;
      const double mult = lr / (std::sqrt(m) + eps);
      const double corr = mode == WeightDecayMode::L2          ? 1.0 - mult * wd
                          : mode == WeightDecayMode::Decoupled ? 1.0 - lr * wd
                                                               : 1.0;
      for (std::int64_t d = 0; d < D; ++d) x[d] = corr * w_load(row + d) - mult * G[d];
    }
    // max_norm: the L2 norm of the exact updated row; scaled before the one storage rounding.
    if (max_norm > 0.0) {
      double sq = 0.0;
      for (std::int64_t d = 0; d < D; ++d) sq += x[d] * x[d];
      const double norm = std::sqrt(sq);
      if (norm > max_norm) {
        const double scale = max_norm / norm;
        for (std::int64_t d = 0; d < D; ++d) x[d] *= scale;
      }
    }
  }

  // dL/dw_p = (1/L if MEAN) · <grad_output[bag], W[i_p]> with the weights before the update.
  if (fp.lookups.weighted()) {
    ref.per_sample_weight_grad.assign(static_cast<std::size_t>(N), 0.0);
    const std::int64_t D_mean =
        std::max<std::int64_t>(layout.total_dim / std::max<std::int64_t>(layout.num_features, 1), 1);
#pragma omp parallel for schedule(dynamic, 256) if (detail::worth_parallel(N * D_mean))
    for (std::int64_t q = 0; q < N; ++q) {
      const std::int64_t bag = tr.position_bag[q];
      if (bag < 0) continue;  // outside every bag: 0
      const std::int64_t t = tb.feature_table_map[layout.feature_of_bag(bag)];
      const std::int64_t D = tb.dims[t];
      const std::int64_t row = tb.table_offsets[t] + ref.repair.indices[q] * D;
      const std::int64_t g0 = bag_out[bag];
      double dot = 0.0;
      for (std::int64_t d = 0; d < D; ++d) dot += grad(g0 + d) * w_load(row + d);
      if (mean) dot /= static_cast<double>(off[bag + 1] - off[bag]);
      ref.per_sample_weight_grad[q] = dot;
    }
  }
  return ref;
}

BackwardStats backward_reference(const BackwardProblem& p, const BackwardOutputs& out) {
  throw_if_error(validate(p));
  throw_if_error(validate(p, out));
  const BackwardReference ref = backward_reference_fp64(p);  // may throw: nothing written yet

  const TableBatchView& tb = p.forward.tables;
  const DType wt = tb.dtype;
  const bool sr = p.forward.options.policy.write_back == RoundingMode::Stochastic &&
                  (wt == DType::F16 || wt == DType::BF16);
  const std::int64_t R = static_cast<std::int64_t>(ref.transpose.linear_ids.size());
  const std::int64_t lookups = static_cast<std::int64_t>(ref.transpose.sorted_positions.size());
  const std::uint64_t seed = p.options.sr_seed, offset = p.options.sr_offset;

#pragma omp parallel for schedule(dynamic, 64) if (detail::worth_parallel(ref.run_col_offset[R]))
  for (std::int64_t k = 0; k < R; ++k) {
    const std::int64_t t = ref.run_table[k];
    const std::int64_t D = tb.dims[t];
    const std::int64_t row = tb.table_offsets[t] + ref.run_row[k] * D;
    const double* x = ref.updated.data() + ref.run_col_offset[k];
    for (std::int64_t d = 0; d < D; ++d) {
      const std::int64_t e = row + d;
      const double v = sr ? stochastic_round(wt, x[d],
                                             stochastic_rounding_uniform(
                                                 seed, offset, static_cast<std::uint64_t>(e)))
                          : x[d];
      store_from_double(wt, out.weights, e, v);  // RNE (exact when SR already rounded)
    }
    if (out.momentum != nullptr)
      out.momentum[ref.transpose.linear_ids[k]] = static_cast<float>(ref.momentum[k]);
  }
  if (out.per_sample_weight_grad != nullptr) {
    const std::int64_t N = p.forward.lookups.num_indices;
    for (std::int64_t q = 0; q < N; ++q)
      out.per_sample_weight_grad[q] = static_cast<float>(ref.per_sample_weight_grad[q]);
  }

  BackwardStats st;
  st.warnings = ref.repair.warnings;
  st.runs = R;
  st.lookups = lookups;
  st.counters.short_runs = R;
  st.counters.short_lookups = lookups;
  st.paths = {"reference"};
  return st;
}

// ---- names ---------------------------------------------------------------------------------------

std::string to_string(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::ExactSgd: return "sgd";
    case OptimizerKind::ExactRowwiseAdagrad: return "rowwise_adagrad";
  }
  return "optimizer(" + s(static_cast<int>(k)) + ")";
}

std::string to_string(WeightDecayMode m) {
  switch (m) {
    case WeightDecayMode::None: return "none";
    case WeightDecayMode::L2: return "l2";
    case WeightDecayMode::Decoupled: return "decoupled";
  }
  return "weight_decay_mode(" + s(static_cast<int>(m)) + ")";
}

OptimizerKind parse_optimizer(const std::string& text, const char* what) {
  if (text == "sgd") return OptimizerKind::ExactSgd;
  if (text == "rowwise_adagrad") return OptimizerKind::ExactRowwiseAdagrad;
  throw InvalidArgument(what, std::string(what) + ": unknown optimizer '" + text +
                                  "' (known: sgd, rowwise_adagrad)");
}

WeightDecayMode parse_weight_decay_mode(const std::string& text, const char* what) {
  if (text == "none") return WeightDecayMode::None;
  if (text == "l2") return WeightDecayMode::L2;
  if (text == "decoupled") return WeightDecayMode::Decoupled;
  throw InvalidArgument(what, std::string(what) + ": unknown weight decay mode '" + text +
                                  "' (known: none, l2, decoupled)");
}

}  // namespace tbe
