// CPU emulations of TBE backward + exact optimizer kernels (backward_emulation.h). Every
// operation is computed in FP64 and rounded once to its type (the accumulation type for G_r and
// the per-sample-weight gradients, the optimizer type for the update): for +, -, *, / and sqrt on
// operands of those types this is the correctly rounded operation (Figueroa 1995, 53 >= 2p + 2),
// independent of compiler contraction (the library is built with -ffp-contract=off).
#include "tbe/oracle/backward_emulation.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "float_model.h"
#include "summation_internal.h"
#include "tbe/backward_case.h"
#include "tbe/bounds_check.h"
#include "tbe/errors.h"

namespace tbe::oracle {

namespace {

using detail::Accumulator;
using detail::mix_seed;

bool is_chunked(const BackwardEmulationOptions& o) { return o.order == SummationOrder::Chunked256; }

/// Sum of x in chunks of `cs` (position order inside a chunk, then the partial sums in order),
/// with the chunk-boundary faults of `fault`.
double chunked_sum(const Accumulator& A, const std::vector<double>& x, std::size_t cs,
                   BackwardFault fault) {
  const std::size_t n = x.size();
  const std::size_t chunks = (n + cs - 1) / cs;
  double total = 0.0;
  bool first_part = true;
  for (std::size_t c = 0; c < chunks; ++c) {
    if (fault == BackwardFault::DroppedChunk && chunks > 1 && c + 1 == chunks) break;
    const std::size_t a = c * cs;
    std::size_t b = std::min(n, a + cs);
    if (fault == BackwardFault::ChunkBoundaryLost && c + 1 < chunks) --b;
    double part = x[a];
    if (fault == BackwardFault::ChunkBoundaryDuplicated && c > 0) part = A.add(part, x[a]);
    for (std::size_t i = a + 1; i < b; ++i) part = A.add(part, x[i]);
    total = first_part ? part : A.add(total, part);
    first_part = false;
  }
  return total;
}

void check_float(DType t, const char* what) {
  if (t != DType::F64 && t != DType::F32 && t != DType::F16 && t != DType::BF16)
    throw InvalidArgument(what, std::string(what) + ": " + to_string(t) +
                                    " is not a floating type (fp64, fp32, fp16, bf16)");
}

}  // namespace

BackwardResultView BackwardEmulationResult::view() const {
  BackwardResultView v;
  v.weights = weights.empty() ? nullptr : weights.data();
  v.momentum = momentum.empty() ? nullptr : momentum.data();
  v.per_sample_weight_grad = per_sample_weight_grad.empty() ? nullptr : per_sample_weight_grad.data();
  return v;
}

BackwardEmulationResult emulate_backward(const BackwardProblem& p,
                                         const BackwardEmulationOptions& o) {
  throw_if_error(validate(p));
  const ForwardProblem& fp = p.forward;
  const TableBatchView& tb = fp.tables;
  const PrecisionPolicy& pol = fp.options.policy;
  const DType acc_t = o.accumulation.value_or(pol.accumulation);
  check_float(acc_t, "accumulation");
  const DType opt_t = o.optimizer_arithmetic;
  if (opt_t != DType::F32 && opt_t != DType::F64)
    throw InvalidArgument("optimizer_arithmetic", "optimizer_arithmetic: " + to_string(opt_t) +
                                                      " is not fp32 or fp64");
  if (o.chunk_size < 1)
    throw InvalidArgument("chunk_size",
                          "chunk_size: " + std::to_string(o.chunk_size) + " is below 1");
  const RepairResult rr = repair(fp);  // FATAL with a violation throws: nothing computed
  const Transpose tr = transpose_lookups(fp, rr);
  const OutputLayout layout = make_output_layout(fp);
  const std::vector<std::int64_t>& off = rr.offsets;
  const bool none = fp.options.pooling == PoolingMode::None;
  const bool mean = fp.options.pooling == PoolingMode::Mean;
  const float* psw = fp.lookups.per_sample_weights;
  const bool weighted = psw != nullptr;
  const DType wt = tb.dtype, out_t = pol.output;
  const bool sr = pol.write_back == RoundingMode::Stochastic && wt != DType::F32 &&
                  o.fault != BackwardFault::NoStochasticRounding;
  const Accumulator A(acc_t, static_cast<std::size_t>(o.chunk_size));
  const Accumulator Op(opt_t);
  const FloatLoader W(wt, tb.weights);

  const OptimizerConfig& oc = p.options.optimizer;
  const bool adagrad = oc.kind == OptimizerKind::ExactRowwiseAdagrad;
  const double lr = effective_hyper_parameter(oc.learning_rate);
  const double eps = effective_hyper_parameter(oc.eps);
  const double wd = effective_hyper_parameter(oc.weight_decay);
  const double max_norm = effective_hyper_parameter(oc.max_norm);
  const double max_grad = effective_hyper_parameter(oc.max_gradient);
  auto grad = [&](std::int64_t i) {  // clipping is a clamp: exact
    const double g = load_as_double(out_t, p.grad_output, i);
    if (max_grad > 0.0) {
      if (g > max_grad) return max_grad;
      if (g < -max_grad) return -max_grad;
    }
    return g;
  };
  auto bag_length = [&](std::int64_t bag) {
    return static_cast<double>(off[bag + 1] - off[bag] +
                               (o.fault == BackwardFault::WrongMeanScale ? 1 : 0));
  };
  std::vector<std::int64_t> bag_out(static_cast<std::size_t>(none ? 0 : layout.num_bags));
  if (!none)
    for (std::int64_t k = 0; k < layout.num_bags; ++k) bag_out[k] = layout.bag_output_offset(k);

  BackwardEmulationResult res;
  const std::int64_t elements = total_weight_elements(tb);
  const std::int64_t rows = total_rows(tb);
  if (elements > 0)
    res.weights.assign(static_cast<const std::byte*>(tb.weights),
                       static_cast<const std::byte*>(tb.weights) + elements * dtype_size(wt));
  if (adagrad) res.momentum.assign(p.momentum, p.momentum + rows);

  std::vector<std::int64_t> row_offset(static_cast<std::size_t>(tb.num_tables()) + 1, 0);
  for (std::int64_t t = 0; t < tb.num_tables(); ++t) row_offset[t + 1] = row_offset[t] + tb.rows[t];
  const std::int64_t R = static_cast<std::int64_t>(tr.linear_ids.size());

  const std::int64_t work = (static_cast<std::int64_t>(tr.sorted_positions.size()) + R) *
                           std::max<std::int64_t>(layout.total_dim, 1);
#pragma omp parallel if (detail::worth_parallel(work))
  {
    std::vector<double> terms, G, w, col;
    std::vector<std::int64_t> group;
#pragma omp for schedule(dynamic, 4)
    for (std::int64_t k = 0; k < R; ++k) {
      const std::int64_t id = tr.linear_ids[k];
      const auto t = static_cast<std::int64_t>(
          std::upper_bound(row_offset.begin(), row_offset.end(), id) - row_offset.begin() - 1);
      const std::int64_t D = tb.dims[t];
      const std::int64_t row = tb.table_offsets[t] + (id - row_offset[t]) * D;
      w.resize(static_cast<std::size_t>(D));
      for (std::int64_t d = 0; d < D; ++d) w[d] = Op.r(W(row + d));
      double m = adagrad ? static_cast<double>(p.momentum[id]) : 0.0;

      // Groups of lookups updated together: the run, or (fault) one group per feature.
      const std::int64_t a = tr.run_offsets[k], b = tr.run_offsets[k + 1];
      std::vector<std::pair<std::int64_t, std::int64_t>> groups;  // (feature or -1, unused)
      if (o.fault == BackwardFault::SeparateUpdatesPerFeature && !none) {
        for (std::int64_t i = a; i < b; ++i) {
          const std::int64_t f = layout.feature_of_bag(tr.position_bag[tr.sorted_positions[i]]);
          if (std::find_if(groups.begin(), groups.end(), [f](auto& g) { return g.first == f; }) ==
              groups.end())
            groups.emplace_back(f, 0);
        }
        std::sort(groups.begin(), groups.end());
      } else {
        groups.emplace_back(-1, 0);
      }

      for (const auto& grp : groups) {
        group.clear();
        for (std::int64_t i = a; i < b; ++i) {
          const std::int64_t q = tr.sorted_positions[i];
          if (grp.first >= 0 && layout.feature_of_bag(tr.position_bag[q]) != grp.first) continue;
          group.push_back(q);
        }
        // G_r per column in the accumulation type, then rounded to the optimizer type.
        G.assign(static_cast<std::size_t>(D), 0.0);
        for (std::int64_t d = 0; d < D; ++d) {
          terms.resize(group.size());
          for (std::size_t i = 0; i < group.size(); ++i) {
            const std::int64_t q = group[i];
            if (none) {
              terms[i] = A.r(grad(q * D + d));
              continue;
            }
            const std::int64_t bag = tr.position_bag[q];
            const double g = A.r(grad(bag_out[bag] + d));
            const bool use_w = weighted && o.fault != BackwardFault::MissingPerSampleWeight;
            const double sw = use_w ? A.r(static_cast<double>(psw[q])) : 1.0;
            const double L = A.r(bag_length(bag));
            double term = 0.0;
            switch (o.term_form) {
              case TermForm::ProductThenScale:
                term = use_w ? A.mul(sw, g) : g;
                if (mean) term = A.mul(term, A.div(1.0, L));
                break;
              case TermForm::WeightThenScale: {
                double c = sw;
                if (mean) c = A.mul(c, A.div(1.0, L));
                term = (use_w || mean) ? A.mul(c, g) : g;
                break;
              }
              case TermForm::Divide:
                term = use_w ? A.mul(sw, g) : g;
                if (mean) term = A.div(term, L);
                break;
            }
            terms[i] = term;
          }
          double s = 0.0;
          if (terms.empty()) s = 0.0;
          else if (is_chunked(o)) s = chunked_sum(A, terms, static_cast<std::size_t>(o.chunk_size), o.fault);
          else s = A.sum(terms, o.order, mix_seed(o.seed, id, d));
          G[d] = Op.r(s);
        }

        // The optimizer, one rounding per operation in opt_t.
        if (!adagrad) {
          for (std::int64_t d = 0; d < D; ++d) w[d] = Op.add(w[d], -Op.mul(lr, G[d]));
        } else {
          const WeightDecayMode mode = oc.weight_decay_mode;
          col.resize(static_cast<std::size_t>(D));
          for (std::int64_t d = 0; d < D; ++d) {
            const double gp = mode == WeightDecayMode::L2 ? Op.add(G[d], Op.mul(wd, w[d])) : G[d];
            col[d] = Op.mul(gp, gp);
          }
          const double sumsq = Op.sum(col, o.column_order, mix_seed(o.seed ^ 0x5151, id, -1));
          m = Op.add(m, Op.div(sumsq, static_cast<double>(D)));
          const double den = o.fault == BackwardFault::EpsInsideSqrt
                                 ? Op.r(std::sqrt(Op.add(m, eps)))
                                 : Op.add(Op.r(std::sqrt(m)), eps);
          const double mult = Op.div(lr, den);
          double corr = 1.0;
          if (mode == WeightDecayMode::L2) corr = Op.add(1.0, -Op.mul(mult, wd));
          if (mode == WeightDecayMode::Decoupled) corr = Op.add(1.0, -Op.mul(lr, wd));
          for (std::int64_t d = 0; d < D; ++d)
            w[d] = Op.add(Op.mul(corr, w[d]), -Op.mul(mult, G[d]));
        }
        if (max_norm > 0.0) {
          col.resize(static_cast<std::size_t>(D));
          for (std::int64_t d = 0; d < D; ++d) col[d] = Op.mul(w[d], w[d]);
          const double norm = Op.r(std::sqrt(Op.sum(col, o.column_order, mix_seed(o.seed ^ 0x7777, id, -2))));
          if (norm > max_norm) {
            const double scale = Op.div(max_norm, norm);
            for (std::int64_t d = 0; d < D; ++d) w[d] = Op.mul(w[d], scale);
          }
        }
      }

      // Stores.
      for (std::int64_t d = 0; d < D; ++d) {
        const std::int64_t e = row + d;
        double v = w[d];
        if (sr) {
          Rng g = Rng::from_state(mix_seed(o.seed ^ 0x5352, e, 0));
          v = stochastic_round(wt, v, g.uniform());
        }
        store_from_double(wt, res.weights.data(), e, v);  // RNE (exact after SR)
      }
      if (adagrad) res.momentum[id] = static_cast<float>(m);
    }
  }

  // Per-sample-weight gradients: D products in acc, summed in column_order, scaled by 1/L.
  if (weighted) {
    const std::int64_t N = fp.lookups.num_indices;
    res.per_sample_weight_grad.assign(static_cast<std::size_t>(N), 0.0f);
#pragma omp parallel if (detail::worth_parallel(N * std::max<std::int64_t>(layout.total_dim, 1)))
    {
      std::vector<double> terms;
#pragma omp for schedule(dynamic, 64)
      for (std::int64_t q = 0; q < N; ++q) {
        const std::int64_t bag = tr.position_bag[q];
        if (bag < 0) continue;
        const std::int64_t t = tb.feature_table_map[layout.feature_of_bag(bag)];
        const std::int64_t D = tb.dims[t];
        const std::int64_t row = tb.table_offsets[t] + rr.indices[q] * D;
        terms.resize(static_cast<std::size_t>(D));
        for (std::int64_t d = 0; d < D; ++d)
          terms[d] = A.mul(A.r(grad(bag_out[bag] + d)), A.r(W(row + d)));
        double dot = A.sum(terms, o.column_order, mix_seed(o.seed ^ 0x9393, q, -3));
        if (mean) {
          const double L = A.r(bag_length(bag));
          dot = o.term_form == TermForm::Divide ? A.div(dot, L) : A.mul(dot, A.div(1.0, L));
        }
        res.per_sample_weight_grad[q] = static_cast<float>(dot);
      }
    }
  }
  return res;
}

std::string to_string(BackwardFault f) {
  switch (f) {
    case BackwardFault::None: return "none";
    case BackwardFault::EpsInsideSqrt: return "eps-inside-sqrt";
    case BackwardFault::ChunkBoundaryLost: return "chunk-boundary-lost";
    case BackwardFault::ChunkBoundaryDuplicated: return "chunk-boundary-duplicated";
    case BackwardFault::DroppedChunk: return "dropped-chunk";
    case BackwardFault::MissingPerSampleWeight: return "missing-per-sample-weight";
    case BackwardFault::SeparateUpdatesPerFeature: return "separate-updates-per-feature";
    case BackwardFault::WrongMeanScale: return "wrong-mean-scale";
    case BackwardFault::NoStochasticRounding: return "no-stochastic-rounding";
  }
  return "fault(" + std::to_string(static_cast<int>(f)) + ")";
}

std::string to_string(TermForm f) {
  switch (f) {
    case TermForm::ProductThenScale: return "product-then-scale";
    case TermForm::WeightThenScale: return "weight-then-scale";
    case TermForm::Divide: return "divide";
  }
  return "term(" + std::to_string(static_cast<int>(f)) + ")";
}

std::string to_string(const BackwardEmulationOptions& o) {
  std::string s = "order=" + to_string(o.order);
  if (o.order == SummationOrder::Chunked256) s += " chunk=" + std::to_string(o.chunk_size);
  s += " columns=" + to_string(o.column_order) + " term=" + to_string(o.term_form);
  s += " seed=" + std::to_string(o.seed);
  s += " acc=" + (o.accumulation ? tbe::to_string(*o.accumulation) : std::string("policy"));
  s += " opt=" + tbe::to_string(o.optimizer_arithmetic);
  if (o.fault != BackwardFault::None) s += " fault=" + to_string(o.fault);
  return s;
}

}  // namespace tbe::oracle
