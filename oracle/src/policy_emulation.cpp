// CPU emulations of TBE forward implementations under a precision policy (policy_emulation.h).
// Every operation is computed exactly or in FP64 and then rounded once to the accumulation type
// (round_to_accumulation); for the F32/F16/BF16 operations used here this is the correctly rounded
// operation of that type (double rounding through FP64 is innocuous for +, -, *, / since
// 53 >= 2p + 2, Figueroa 1995), and it does not depend on the compiler contracting a*b+c.
#include "tbe/oracle/policy_emulation.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "float_model.h"
#include "summation_internal.h"
#include "tbe/bounds_check.h"
#include "tbe/errors.h"

namespace tbe::oracle {

namespace {

using detail::Accumulator;
using detail::mix_seed;

void check_accumulation(DType acc) {
  if (acc != DType::F64 && acc != DType::F32 && acc != DType::F16 && acc != DType::BF16)
    throw InvalidArgument("accumulation", "accumulation: " + to_string(acc) +
                                              " is not a floating type (fp64, fp32, fp16, bf16)");
}

}  // namespace

double round_to_accumulation(DType acc, double x) {
  check_accumulation(acc);
  return detail::round_acc(acc, x);
}

std::vector<double> emulate_forward(const ForwardProblem& p, const EmulationOptions& opt) {
  throw_if_error(validate(p));
  const RepairResult rr = repair(p);  // FATAL with a violation throws BoundsCheckError
  const OutputLayout layout = make_output_layout(p);
  const DType acc_t = opt.accumulation.value_or(p.options.policy.accumulation);
  check_accumulation(acc_t);
  const DType out_t = p.options.policy.output;
  const Accumulator A(acc_t);
  const FloatLoader W(p.tables.dtype, p.tables.weights);
  const float* psw = p.lookups.per_sample_weights;
  const bool mean = p.options.pooling == PoolingMode::Mean;
  const std::int64_t K = layout.num_bags;
  auto finish = [&](double v) { return opt.round_to_output ? round_to(out_t, v) : v; };

  std::vector<double> out(static_cast<std::size_t>(layout.numel), 0.0);
  if (p.options.pooling == PoolingMode::None) {
    const std::int64_t D = layout.total_dim;
#pragma omp parallel for schedule(dynamic, 8)
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t t = p.tables.feature_table_map[layout.feature_of_bag(k)];
      const std::int64_t base = p.tables.table_offsets[t];
      for (std::int64_t q = rr.offsets[k]; q < rr.offsets[k + 1]; ++q)
        for (std::int64_t d = 0; d < D; ++d)
          out[q * D + d] = finish(A.r(W(base + rr.indices[q] * D + d)));
    }
    return out;
  }

#pragma omp parallel
  {
    std::vector<double> terms;
#pragma omp for schedule(dynamic, 4)
    for (std::int64_t k = 0; k < K; ++k) {
      const std::int64_t f = layout.feature_of_bag(k);
      const std::int64_t t = p.tables.feature_table_map[f];
      const std::int64_t D = p.tables.dims[t];
      const std::int64_t base = p.tables.table_offsets[t];
      const std::int64_t o = layout.bag_output_offset(k);
      const std::int64_t s = rr.offsets[k], e = rr.offsets[k + 1];
      const std::int64_t L = e - s;
      if (L <= 0) {
        for (std::int64_t d = 0; d < D; ++d) out[o + d] = 0.0;  // +0.0 in every mode
        continue;
      }
      const double L_acc = A.r(static_cast<double>(L));
      const double inv_L = A.div(1.0, L_acc);  // fl(1/L) in acc
      for (std::int64_t d = 0; d < D; ++d) {
        terms.resize(static_cast<std::size_t>(L));
        for (std::int64_t q = s; q < e; ++q) {
          double term = A.r(W(base + rr.indices[q] * D + d));
          if (psw) term = A.mul(A.r(psw[q]), term);
          if (mean && opt.mean_scaling == MeanScaling::PerTerm) term = A.mul(inv_L, term);
          terms[q - s] = term;
        }
        double v = A.sum(terms, opt.order, mix_seed(opt.seed, k, d));
        if (mean && opt.mean_scaling == MeanScaling::AtEnd) v = A.mul(inv_L, v);
        if (mean && opt.mean_scaling == MeanScaling::Divide) v = A.div(v, L_acc);
        out[o + d] = finish(v);
      }
    }
  }
  return out;
}

std::vector<double> emulate_forward(const ForwardProblem& p, SummationOrder order,
                                    std::uint64_t seed, std::optional<DType> accumulation) {
  EmulationOptions o;
  o.order = order;
  o.seed = seed;
  o.accumulation = accumulation;
  return emulate_forward(p, o);
}

std::string to_string(SummationOrder o) {
  switch (o) {
    case SummationOrder::IndexOrder: return "index";
    case SummationOrder::SortedAscending: return "sorted-asc";
    case SummationOrder::SortedDescending: return "sorted-desc";
    case SummationOrder::SortedSigned: return "sorted-signed";
    case SummationOrder::RandomPermutation: return "random";
    case SummationOrder::PairwiseTree: return "pairwise";
    case SummationOrder::Chunked256: return "chunked256";
  }
  return "order(" + std::to_string(static_cast<int>(o)) + ")";
}

std::string to_string(MeanScaling m) {
  switch (m) {
    case MeanScaling::AtEnd: return "at-end";
    case MeanScaling::PerTerm: return "per-term";
    case MeanScaling::Divide: return "divide";
  }
  return "mean(" + std::to_string(static_cast<int>(m)) + ")";
}

std::string to_string(const EmulationOptions& o) {
  std::string s = "order=" + to_string(o.order);
  if (o.order == SummationOrder::RandomPermutation) s += " seed=" + std::to_string(o.seed);
  s += " mean=" + to_string(o.mean_scaling);
  s += " acc=" + (o.accumulation ? tbe::to_string(*o.accumulation) : std::string("policy"));
  s += o.round_to_output ? " rounded" : " unrounded";
  return s;
}

}  // namespace tbe::oracle
