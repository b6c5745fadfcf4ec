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
#include "tbe/bounds_check.h"
#include "tbe/errors.h"

namespace tbe::oracle {

namespace {

/// splitmix64 (Steele, Lea, Flood 2014): a tiny, well-mixed, portable generator.
struct SplitMix64 {
  std::uint64_t state;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, n) (n >= 1) by rejection: portable, unlike std::uniform_int_distribution.
  std::uint64_t below(std::uint64_t n) {
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
    std::uint64_t x;
    do x = next(); while (x >= limit);
    return x % n;
  }
};

class Accumulator {
 public:
  explicit Accumulator(DType acc) : acc_(acc) {}
  double r(double x) const { return detail::round_acc(acc_, x); }
  double add(double a, double b) const { return r(a + b); }
  double mul(double a, double b) const { return r(a * b); }
  double div(double a, double b) const { return r(a / b); }

  /// Sum of x[0..n) in `order`; x may be permuted in place.
  double sum(std::vector<double>& x, SummationOrder order, std::uint64_t seed) const {
    const std::size_t n = x.size();
    if (n == 0) return 0.0;
    switch (order) {
      case SummationOrder::IndexOrder: break;
      case SummationOrder::SortedAscending:
        std::stable_sort(x.begin(), x.end(),
                         [](double a, double b) { return std::fabs(a) < std::fabs(b); });
        break;
      case SummationOrder::SortedDescending:
        std::stable_sort(x.begin(), x.end(),
                         [](double a, double b) { return std::fabs(a) > std::fabs(b); });
        break;
      case SummationOrder::SortedSigned: std::stable_sort(x.begin(), x.end()); break;
      case SummationOrder::RandomPermutation: {
        SplitMix64 g{seed};
        for (std::size_t i = n - 1; i > 0; --i) std::swap(x[i], x[g.below(i + 1)]);
        break;
      }
      case SummationOrder::PairwiseTree: return pairwise(x.data(), n);
      case SummationOrder::Chunked256: {
        constexpr std::size_t kChunk = 256;
        double total = 0.0;
        bool first_chunk = true;
        for (std::size_t c = 0; c < n; c += kChunk) {
          const std::size_t end = std::min(n, c + kChunk);
          double part = x[c];
          for (std::size_t i = c + 1; i < end; ++i) part = add(part, x[i]);
          total = first_chunk ? part : add(total, part);
          first_chunk = false;
        }
        return total;
      }
    }
    double s = x[0];
    for (std::size_t i = 1; i < n; ++i) s = add(s, x[i]);
    return s;
  }

 private:
  double pairwise(const double* x, std::size_t n) const {
    if (n == 1) return x[0];
    const std::size_t h = n / 2;
    return add(pairwise(x, h), pairwise(x + h, n - h));
  }
  DType acc_;
};

std::uint64_t mix_seed(std::uint64_t seed, std::int64_t bag, std::int64_t col) {
  SplitMix64 g{seed ^ (static_cast<std::uint64_t>(bag) * 0xD1B54A32D192ED03ull) ^
               (static_cast<std::uint64_t>(col) * 0x8CB92BA72F3D8DD7ull)};
  return g.next();
}

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
  const detail::WeightLoader W(p.tables.dtype, p.tables.weights);
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
