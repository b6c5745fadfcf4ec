// FP64 reference backward + exact optimizers (backward.h; docs/backward.md "The computation"; choices in
// docs/backward.md). Order of work: validate, bounds check/repair (FATAL throws), transpose, then
// per run (OpenMP over runs) G_r and the optimizer in FP64. backward_reference_fp64 keeps every
// run's FP64 values; the CPU fallback (backward_reference) stores each run's row as soon as it is
// computed, after every check, so nothing is written on error, and keeps its buffers in a
// BackwardWorkspace.
#include "tbe/backward.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>

#include "lookup_source_internal.h"
#include "parallel_internal.h"
#include "storage_internal.h"
#include "tbe/backward_case.h"
#include "tbe/bounds_check.h"
#include "tbe/host_case.h"
#include "transpose_internal.h"

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

// ---- the per-run computation (docs/backward.md "The computation") --------------------------------
// Shared by backward_reference_fp64 (into the BackwardReference arrays) and the CPU fallback (into
// per-thread rows, stored right away). Each run is computed by one thread in sorted order, so the
// bytes do not depend on the thread count or the schedule.

namespace {

/// Prefetch distances: a lookup's grad_output row is requested this many lookups ahead, a run's
/// weight row (and momentum) this many runs ahead; both are random gathers from DRAM.
constexpr std::int64_t kPrefetchLookups = 4;
constexpr std::int64_t kPrefetchRuns = 2;

/// Everything the per-run computation reads besides the two typed buffers, resolved once per call.
struct RunInputs {
  const TableBatchView* tables = nullptr;
  const Transpose* transpose = nullptr;
  std::vector<std::int64_t> row_offset;  ///< [num_tables + 1] exclusive prefix of E_t
  const std::int64_t* bag_out = nullptr;    ///< [K] grad_output offset of bag k (pooled modes)
  const double* bag_length = nullptr;       ///< [K] L of bag k in FP64 (MEAN)
  const std::int64_t* slot_grad = nullptr;  ///< [Σ SL] grad_output offset of sorted lookup i
  const float* per_sample_weights = nullptr;  ///< [N] or nullptr
  const float* momentum = nullptr;            ///< [Σ E_t] Adagrad state before the update
  bool none = false, mean = false, adagrad = false;
  WeightDecayMode mode = WeightDecayMode::None;
  double max_grad = 0, lr = 0, eps = 0, wd = 0, max_norm = 0;  ///< effective (FP32) values
};

/// How updated rows are rounded to the weights type: RNE, or stochastic rounding with the Philox
/// stream (seed, offset) of BackwardOptions.
struct WriteBack {
  bool stochastic = false;
  std::uint64_t seed = 0, offset = 0;
};

/// Where run k lives: table t, D = D_t, `row` = element offset of its row in the weights (64-bit).
struct RunRow {
  std::int64_t table, D, row;
};

RunRow run_row(const RunInputs& in, std::int64_t id) {
  const auto t = std::upper_bound(in.row_offset.begin(), in.row_offset.end(), id) -
                 in.row_offset.begin() - 1;
  const std::int64_t D = in.tables->dims[t];
  return {t, D, in.tables->table_offsets[t] + (id - in.row_offset[t]) * D};
}

/// Where each lookup's gradient comes from, resolved once per call (pooled modes: per bag; every
/// mode: per sorted lookup, so the run loop reads one sequential array instead of a chain of
/// dependent random loads).
struct GradTables {
  std::vector<std::int64_t> bag_out;    ///< [K] element offset of bag k's grad_output row
  std::vector<double> bag_length;       ///< [K] L of bag k as FP64 (MEAN only)
  std::vector<std::int64_t> slot_grad;  ///< [Σ SL] offset of sorted lookup i's grad_output row
};

/// Fills `g` from the offsets of `lookups` (as computed on) and the transpose `tr`.
void fill_grad_tables(const ForwardProblem& fp, const OutputLayout& layout,
                      const LookupBatchView& lookups, const Transpose& tr, GradTables& g) {
  const std::int64_t K = layout.num_bags;
  const bool none = fp.options.pooling == PoolingMode::None;
  const bool mean = fp.options.pooling == PoolingMode::Mean;
  g.bag_out.resize(static_cast<std::size_t>(none ? 0 : K));
  g.bag_length.resize(static_cast<std::size_t>(mean ? K : 0));
  if (!none) {
#pragma omp parallel for schedule(static) if (detail::worth_parallel(K))
    for (std::int64_t k = 0; k < K; ++k) {
      g.bag_out[k] = layout.bag_output_offset(k);
      if (mean)
        g.bag_length[k] =
            static_cast<double>(load_index(lookups.index_dtype, lookups.offsets, k + 1) -
                                load_index(lookups.index_dtype, lookups.offsets, k));
    }
  }
  const std::int64_t M = static_cast<std::int64_t>(tr.sorted_positions.size());
  g.slot_grad.resize(static_cast<std::size_t>(M));
  const std::int64_t D_none = layout.total_dim;  // NONE: output row q = [q·D, (q+1)·D)
#pragma omp parallel for schedule(static) if (detail::worth_parallel(M))
  for (std::int64_t i = 0; i < M; ++i) {
    const std::int64_t q = tr.sorted_positions[i];
    g.slot_grad[i] = none ? q * D_none : g.bag_out[tr.position_bag[q]];
  }
}

RunInputs make_run_inputs(const BackwardProblem& p, const Transpose& tr, const GradTables& g) {
  const ForwardProblem& fp = p.forward;
  const TableBatchView& tb = fp.tables;
  const OptimizerConfig& oc = p.options.optimizer;
  RunInputs in;
  in.tables = &tb;
  in.transpose = &tr;
  in.row_offset.assign(static_cast<std::size_t>(tb.num_tables()) + 1, 0);
  for (std::int64_t t = 0; t < tb.num_tables(); ++t)
    in.row_offset[t + 1] = in.row_offset[t] + tb.rows[t];
  in.bag_out = g.bag_out.data();
  in.bag_length = g.bag_length.data();
  in.slot_grad = g.slot_grad.data();
  in.per_sample_weights = fp.lookups.per_sample_weights;
  in.momentum = p.momentum;
  in.none = fp.options.pooling == PoolingMode::None;
  in.mean = fp.options.pooling == PoolingMode::Mean;
  in.adagrad = oc.kind == OptimizerKind::ExactRowwiseAdagrad;
  in.mode = oc.weight_decay_mode;
  in.max_grad = effective_hyper_parameter(oc.max_gradient);
  in.lr = effective_hyper_parameter(oc.learning_rate);
  in.eps = effective_hyper_parameter(oc.eps);
  in.wd = effective_hyper_parameter(oc.weight_decay);
  in.max_norm = effective_hyper_parameter(oc.max_norm);
  return in;
}

/// G[d] += c·clip(g[d]) for one lookup, c = s_p (and / L for MEAN): each term (s_p·g) / L is the
/// exact product divided once. Clipping (docs/backward.md "Semantics"): clamp elementwise to
/// [-max_gradient, max_gradient]; NaN stays NaN.
template <class GS, bool kClip, bool kMean>
void add_grad_row(double* G, const typename GS::type* g, std::int64_t D, double sw, double L,
                  double max_grad) {
  for (std::int64_t d = 0; d < D; ++d) {
    double v = GS::load(g, d);
    if constexpr (kClip) {
      v = v > max_grad ? max_grad : v;
      v = v < -max_grad ? -max_grad : v;
    }
    double term = sw * v;
    if constexpr (kMean) term /= L;
    G[d] += term;
  }
}

/// The per-run computation on typed buffers: grad_output of storage GS, weights of storage WS.
template <class GS, class WS>
class RunKernel {
 public:
  RunKernel(const RunInputs& in, const void* grad_output, const void* weights)
      : in_(in),
        grad_(static_cast<const typename GS::type*>(grad_output)),
        w_(static_cast<const typename WS::type*>(weights)) {}

  /// Run k (at `r`): G[D] = G_r (FP64, sorted order), x[D] = the updated row after max_norm
  /// (before storage), returns the new momentum (Adagrad; 0 for SGD).
  double operator()(std::int64_t k, const RunRow& r, double* G, double* x) const {
    const Transpose& tr = *in_.transpose;
    const std::int64_t D = r.D;
    std::fill_n(G, D, 0.0);
    const std::int64_t i1 = tr.run_offsets[k + 1];
    const std::int64_t M = static_cast<std::int64_t>(tr.sorted_positions.size());
    const bool clip = in_.max_grad > 0.0;
    const bool plain = in_.none || (!in_.mean && in_.per_sample_weights == nullptr);
    for (std::int64_t i = tr.run_offsets[k]; i < i1; ++i) {
      if (i + kPrefetchLookups < M) prefetch_grad_row(in_.slot_grad[i + kPrefetchLookups], D);
      const typename GS::type* g = grad_ + in_.slot_grad[i];
      if (plain) {  // SUM unweighted, or NONE (no per-sample weights: validate)
        add(G, g, D, 1.0, 1.0, clip, false);
        continue;
      }
      const std::int64_t q = tr.sorted_positions[i];
      const double sw =
          in_.per_sample_weights ? static_cast<double>(in_.per_sample_weights[q]) : 1.0;
      add(G, g, D, sw, in_.mean ? in_.bag_length[tr.position_bag[q]] : 1.0, clip, in_.mean);
    }

    // The optimizer, hyper-parameters as FP32 values, FP64 arithmetic.
    const typename WS::type* w = w_ + r.row;
    double m = 0.0;
    if (!in_.adagrad) {
      for (std::int64_t d = 0; d < D; ++d) x[d] = WS::load(w, d) - in_.lr * G[d];
    } else {
      const WeightDecayMode mode = in_.mode;
      double sumsq = 0.0;
      if (mode == WeightDecayMode::L2) {
        for (std::int64_t d = 0; d < D; ++d) {
          const double g = G[d] + in_.wd * WS::load(w, d);
          sumsq += g * g;
        }
      } else {
        for (std::int64_t d = 0; d < D; ++d) sumsq += G[d] * G[d];
      }
      m = static_cast<double>(in_.momentum[tr.linear_ids[k]]) + sumsq / static_cast<double>(D);
      const double mult = in_.lr / (std::sqrt(m) + in_.eps);
      const double corr = mode == WeightDecayMode::L2          ? 1.0 - mult * in_.wd
                          : mode == WeightDecayMode::Decoupled ? 1.0 - in_.lr * in_.wd
                                                               : 1.0;
      for (std::int64_t d = 0; d < D; ++d) x[d] = corr * WS::load(w, d) - mult * G[d];
    }
    // max_norm: the L2 norm of the exact updated row; scaled before the one storage rounding.
    if (in_.max_norm > 0.0) {
      double sq = 0.0;
      for (std::int64_t d = 0; d < D; ++d) sq += x[d] * x[d];
      const double norm = std::sqrt(sq);
      if (norm > in_.max_norm) {
        const double scale = in_.max_norm / norm;
        for (std::int64_t d = 0; d < D; ++d) x[d] *= scale;
      }
    }
    return m;
  }

  /// dL/dw_q = (1/L if MEAN) · <clip(grad_output[bag]), W[i_q]> with the weights before the
  /// update; `index` = the (repaired) row index of lookup q. 0 outside every bag.
  double per_sample_weight_grad(std::int64_t q, std::int64_t index,
                                const OutputLayout& layout) const {
    const std::int64_t bag = in_.transpose->position_bag[q];
    if (bag < 0) return 0.0;
    const TableBatchView& tb = *in_.tables;
    const std::int64_t t = tb.feature_table_map[layout.feature_of_bag(bag)];
    const std::int64_t D = tb.dims[t];
    const typename WS::type* w = w_ + tb.table_offsets[t] + index * D;
    const typename GS::type* g = grad_ + in_.bag_out[bag];
    double dot = 0.0;
    for (std::int64_t d = 0; d < D; ++d) {
      double v = GS::load(g, d);
      if (in_.max_grad > 0.0) {
        if (v > in_.max_grad) v = in_.max_grad;
        if (v < -in_.max_grad) v = -in_.max_grad;
      }
      dot += v * WS::load(w, d);
    }
    if (in_.mean) dot /= in_.bag_length[bag];
    return dot;
  }

  /// Requests run k's weight row (to be read and written) and its momentum into the cache.
  void prefetch_run(std::int64_t k, const RunRow& r) const {
    const char* bytes = reinterpret_cast<const char*>(w_ + r.row);
    for (std::int64_t b = 0; b < r.D * static_cast<std::int64_t>(sizeof(*w_)); b += 64)
      __builtin_prefetch(bytes + b, 1);
    if (in_.adagrad) __builtin_prefetch(in_.momentum + in_.transpose->linear_ids[k]);
  }

  /// Stores the updated row x of run `r` in `weights` (same storage type): RNE, or stochastic
  /// rounding with the Philox stream keyed by the element's flat index.
  void store_row(const RunRow& r, const double* x, void* weights, const WriteBack& wb) const {
    auto* w = static_cast<typename WS::type*>(weights) + r.row;
    if (!wb.stochastic) {
      WS::store_row(w, x, r.D);
      return;
    }
    for (std::int64_t d = 0; d < r.D; ++d) {
      const auto e = static_cast<std::uint64_t>(r.row + d);
      const double u = stochastic_rounding_uniform(wb.seed, wb.offset, e);
      WS::store(w, d, stochastic_round(WS::dtype, x[d], u));
    }
  }

 private:
  void add(double* G, const typename GS::type* g, std::int64_t D, double sw, double L, bool clip,
           bool mean) const {
    const double mg = in_.max_grad;
    if (clip)
      mean ? add_grad_row<GS, true, true>(G, g, D, sw, L, mg)
           : add_grad_row<GS, true, false>(G, g, D, sw, L, mg);
    else
      mean ? add_grad_row<GS, false, true>(G, g, D, sw, L, mg)
           : add_grad_row<GS, false, false>(G, g, D, sw, L, mg);
  }
  void prefetch_grad_row(std::int64_t offset, std::int64_t D) const {
    const char* bytes = reinterpret_cast<const char*>(grad_ + offset);
    for (std::int64_t b = 0; b < D * static_cast<std::int64_t>(sizeof(*grad_)); b += 64)
      __builtin_prefetch(bytes + b);
  }

  const RunInputs& in_;
  const typename GS::type* grad_;
  const typename WS::type* w_;
};

/// The CPU fallback's run loop (OpenMP over runs when `parallel`): G_r and the new row of each run
/// into this thread's buffers ([max_D] each), then stored to `out`. A run reads and writes only
/// its own row and momentum, so the in-place update (outputs aliasing the inputs) is exact.
template <class Kernel>
void update_runs(const Kernel& kernel, const RunInputs& in, const BackwardOutputs& out,
                 std::int64_t max_D, bool parallel, const WriteBack& wb) {
  const Transpose& tr = *in.transpose;
  const std::int64_t R = static_cast<std::int64_t>(tr.linear_ids.size());
#pragma omp parallel if (parallel)
  {
    std::vector<double> rows(static_cast<std::size_t>(2 * max_D));
    double* G = rows.data();  // [D] G_r
    double* x = G + max_D;    // [D] updated row
#pragma omp for schedule(dynamic, 16)
    for (std::int64_t k = 0; k < R; ++k) {
      if (k + kPrefetchRuns < R)
        kernel.prefetch_run(k + kPrefetchRuns, run_row(in, tr.linear_ids[k + kPrefetchRuns]));
      const RunRow r = run_row(in, tr.linear_ids[k]);
      const double m = kernel(k, r, G, x);
      kernel.store_row(r, x, out.weights, wb);
      if (out.momentum != nullptr) out.momentum[tr.linear_ids[k]] = static_cast<float>(m);
    }
  }
}

/// The one dispatch point of the backward: grad_output dtype x weights dtype -> RunKernel.
template <class F>
decltype(auto) with_run_kernel(const BackwardProblem& p, const RunInputs& in, F&& f) {
  const ForwardProblem& fp = p.forward;
  const DType grad_t = fp.options.policy.output;
  return detail::with_float_storage(grad_t, "options.policy.output", [&]<class GS>() {
    return detail::with_float_storage(fp.tables.dtype, "tables.dtype", [&]<class WS>() {
      return f(RunKernel<GS, WS>(in, p.grad_output, fp.tables.weights));
    });
  });
}

}  // namespace

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
  LookupBatchView repaired = fp.lookups;
  repaired.index_dtype = DType::I64;
  repaired.indices = ref.repair.indices.data();
  repaired.offsets = ref.repair.offsets.data();
  GradTables grad_tables;
  fill_grad_tables(fp, layout, repaired, tr, grad_tables);
  const RunInputs in = make_run_inputs(p, tr, grad_tables);
  const std::int64_t R = static_cast<std::int64_t>(tr.linear_ids.size());
  const std::int64_t N = fp.lookups.num_indices;

  // Run -> (table, row, columns). Linearized ids ascend, so tables are found by a binary search
  // over the exclusive prefix of E_t.
  ref.run_table.resize(R);
  ref.run_row.resize(R);
  ref.run_col_offset.assign(static_cast<std::size_t>(R) + 1, 0);
  for (std::int64_t k = 0; k < R; ++k) {
    const RunRow r = run_row(in, tr.linear_ids[k]);
    ref.run_table[k] = static_cast<std::int32_t>(r.table);
    ref.run_row[k] = tr.linear_ids[k] - in.row_offset[r.table];
    ref.run_col_offset[k + 1] = ref.run_col_offset[k] + r.D;
  }
  const std::int64_t total_cols = ref.run_col_offset[R];
  ref.row_grad.assign(static_cast<std::size_t>(total_cols), 0.0);
  ref.updated.assign(static_cast<std::size_t>(total_cols), 0.0);
  if (in.adagrad) ref.momentum.assign(static_cast<std::size_t>(R), 0.0);
  if (fp.lookups.weighted()) ref.per_sample_weight_grad.assign(static_cast<std::size_t>(N), 0.0);

  const std::int64_t M = static_cast<std::int64_t>(tr.sorted_positions.size());
  const std::int64_t mean_D = R > 0 ? std::max<std::int64_t>(total_cols / R, 1) : 1;
  with_run_kernel(p, in, [&](const auto& kernel) {
#pragma omp parallel for schedule(dynamic, 16) if (detail::worth_parallel((M + R) * mean_D))
    for (std::int64_t k = 0; k < R; ++k) {
      const std::int64_t t = ref.run_table[k];
      const RunRow r{t, tb.dims[t], tb.table_offsets[t] + ref.run_row[k] * tb.dims[t]};
      const double m = kernel(k, r, ref.row_grad.data() + ref.run_col_offset[k],
                              ref.updated.data() + ref.run_col_offset[k]);
      if (in.adagrad) ref.momentum[k] = m;
    }
    if (!fp.lookups.weighted()) return;
#pragma omp parallel for schedule(dynamic, 256) if (detail::worth_parallel(N * mean_D))
    for (std::int64_t q = 0; q < N; ++q)
      ref.per_sample_weight_grad[q] =
          kernel.per_sample_weight_grad(q, ref.repair.indices[q], layout);
  });
  return ref;
}

// ---- the CPU fallback ----------------------------------------------------------------------------

struct BackwardWorkspace::Buffers {
  Transpose transpose;
  detail::TransposeScratch scratch;
  GradTables grad;
};

BackwardWorkspace::BackwardWorkspace() = default;
BackwardWorkspace::~BackwardWorkspace() = default;
BackwardWorkspace::BackwardWorkspace(BackwardWorkspace&&) noexcept = default;
BackwardWorkspace& BackwardWorkspace::operator=(BackwardWorkspace&&) noexcept = default;

BackwardWorkspace::Buffers& BackwardWorkspace::buffers() {
  if (!buffers_) buffers_ = std::make_unique<Buffers>();
  return *buffers_;
}

std::size_t BackwardWorkspace::bytes() const {
  if (!buffers_) return 0;
  const auto cap = [](const auto& v) { return v.capacity() * sizeof(v[0]); };
  const Buffers& b = *buffers_;
  const Transpose& t = b.transpose;
  const detail::TransposeScratch& s = b.scratch;
  return cap(t.linear_ids) + cap(t.run_lengths) + cap(t.run_offsets) + cap(t.sorted_positions) +
         cap(t.position_bag) + cap(s.keys) + cap(s.keys_alt) + cap(s.positions_alt) +
         cap(s.bag_slot) + cap(s.histogram) + cap(b.grad.bag_out) + cap(b.grad.bag_length) +
         cap(b.grad.slot_grad);
}

void BackwardWorkspace::release() { buffers_.reset(); }

BackwardStats backward_reference(const BackwardProblem& p, const BackwardOutputs& out) {
  BackwardWorkspace workspace;
  return backward_reference(p, out, workspace);
}

BackwardStats backward_reference(const BackwardProblem& p, const BackwardOutputs& out,
                                 BackwardWorkspace& workspace) {
  throw_if_error(validate(p));
  throw_if_error(validate(p, out));
  const ForwardProblem& fp = p.forward;
  const TableBatchView& tb = fp.tables;
  const OutputLayout layout = make_output_layout(fp);
  // FATAL with a violation throws here; WARNING / IGNORE repair only an invalid input.
  const detail::LookupSource src = detail::prepare_lookups(fp);
  BackwardWorkspace::Buffers& ws = workspace.buffers();
  detail::transpose_into(fp, src.lookups, ws.transpose, ws.scratch);
  const Transpose& tr = ws.transpose;
  fill_grad_tables(fp, layout, src.lookups, tr, ws.grad);
  const RunInputs in = make_run_inputs(p, tr, ws.grad);
  const std::int64_t R = static_cast<std::int64_t>(tr.linear_ids.size());
  const std::int64_t M = static_cast<std::int64_t>(tr.sorted_positions.size());
  const std::int64_t N = fp.lookups.num_indices;

  const DType wt = tb.dtype;
  const bool sr = fp.options.policy.write_back == RoundingMode::Stochastic &&
                  (wt == DType::F16 || wt == DType::BF16);
  std::int64_t max_D = 1, sum_D = 0;
  for (std::int64_t t = 0; t < tb.num_tables(); ++t) {
    max_D = std::max<std::int64_t>(max_D, tb.dims[t]);
    sum_D += tb.dims[t];
  }
  const std::int64_t mean_D =
      std::max<std::int64_t>(sum_D / std::max<std::int64_t>(tb.num_tables(), 1), 1);

  // Nothing can fail from here on: every store happens after the last check.
  with_run_kernel(p, in, [&](const auto& kernel) {
    // Per-sample-weight gradients first: they read the weights before the update, and
    // out.weights may alias them.
    if (out.per_sample_weight_grad != nullptr) {
      const LookupBatchView& lk = src.lookups;
#pragma omp parallel for schedule(dynamic, 256) if (detail::worth_parallel(N * mean_D))
      for (std::int64_t q = 0; q < N; ++q)
        out.per_sample_weight_grad[q] = static_cast<float>(kernel.per_sample_weight_grad(
            q, load_index(lk.index_dtype, lk.indices, q), layout));
    }
    update_runs(kernel, in, out, max_D, detail::worth_parallel((M + R) * mean_D),
                {sr, p.options.sr_seed, p.options.sr_offset});
  });

  BackwardStats st;
  st.warnings = src.warnings;
  st.runs = R;
  st.lookups = M;
  st.counters.short_runs = R;
  st.counters.short_lookups = M;
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
