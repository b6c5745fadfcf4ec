// Internal helpers of the CPU emulations (forward and backward): an accumulator that sums a term
// list in a chosen SummationOrder, every addition rounded once to the accumulation type, and the
// seeds of their tbe::Rng streams (not a public header).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "float_model.h"
#include "tbe/oracle/policy_emulation.h"
#include "tbe/rng.h"

namespace tbe::oracle::detail {

class Accumulator {
 public:
  /// `chunk_size`: lookups per chunk of SummationOrder::Chunked256 (256 unless a caller varies it).
  explicit Accumulator(DType acc, std::size_t chunk_size = 256) : acc_(acc), chunk_size_(chunk_size) {}
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
        Rng g = Rng::from_state(seed);
        for (std::size_t i = n - 1; i > 0; --i) std::swap(x[i], x[g.below(i + 1)]);
        break;
      }
      case SummationOrder::PairwiseTree: return pairwise(x.data(), n);
      case SummationOrder::Chunked256: {
        const std::size_t kChunk = chunk_size_;
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
  std::size_t chunk_size_;
};

/// The seed of element (bag, col)'s stream: the first draw of the plain splitmix64 sequence from
/// seed ^ bag·k1 ^ col·k2 (a pure function of its arguments, independent of evaluation order).
inline std::uint64_t mix_seed(std::uint64_t seed, std::int64_t bag, std::int64_t col) {
  return Rng::from_state(seed ^ (static_cast<std::uint64_t>(bag) * 0xD1B54A32D192ED03ull) ^
                         (static_cast<std::uint64_t>(col) * 0x8CB92BA72F3D8DD7ull))
      .next_u64();
}

}  // namespace tbe::oracle::detail
