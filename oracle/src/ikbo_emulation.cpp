// IKBO kernel emulations (ikbo_emulation.h).
#include "tbe/oracle/ikbo_emulation.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "float_model.h"
#include "tbe/errors.h"
#include "tbe/precision.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329 (string operator+ chains)
#endif

namespace tbe::oracle {

namespace {

/// Rounding of one exact (FP64-evaluated) result into the accumulation type.
struct Arith {
  DType acc = DType::F32;
  bool truncate = false;
  double r(double x) const {
    if (!truncate || acc == DType::F64) return detail::round_acc(acc, x);
    if (std::isnan(x) || x == 0.0) return x;
    return x > 0 ? round_down_to(acc, x) : round_up_to(acc, x);  // toward zero
  }
  double add(double a, double b) const { return r(a + b); }
  double mul(double a, double b) const { return r(a * b); }
};

/// Σ terms[idx] in the given order (terms are already acc values).
double reduce(const Arith& A, const std::vector<double>& t, LceOrder order, std::int64_t chunk) {
  const auto n = static_cast<std::int64_t>(t.size());
  if (n == 0) return 0.0;
  switch (order) {
    case LceOrder::Descending: {
      double s = t[n - 1];
      for (std::int64_t k = n - 2; k >= 0; --k) s = A.add(s, t[k]);
      return s;
    }
    case LceOrder::Pairwise: {
      auto rec = [&](auto&& self, std::int64_t lo, std::int64_t hi) -> double {
        if (hi - lo == 1) return t[lo];
        const std::int64_t mid = lo + (hi - lo) / 2;
        return A.add(self(self, lo, mid), self(self, mid, hi));
      };
      return rec(rec, 0, n);
    }
    case LceOrder::Chunked: {
      const std::int64_t c = std::max<std::int64_t>(chunk, 1);
      double total = 0.0;
      bool first = true;
      for (std::int64_t k0 = 0; k0 < n; k0 += c) {
        double s = t[k0];
        for (std::int64_t k = k0 + 1; k < std::min(n, k0 + c); ++k) s = A.add(s, t[k]);
        total = first ? s : A.add(total, s);
        first = false;
      }
      return total;
    }
    default: {
      double s = t[0];
      for (std::int64_t k = 1; k < n; ++k) s = A.add(s, t[k]);
      return s;
    }
  }
}

}  // namespace

std::string to_string(LceOrder o) {
  switch (o) {
    case LceOrder::Ascending: return "asc";
    case LceOrder::Descending: return "desc";
    case LceOrder::Pairwise: return "pairwise";
    case LceOrder::Chunked: return "chunked";
    case LceOrder::SingleAccumulator: return "single-acc";
  }
  return "order(" + std::to_string(static_cast<int>(o)) + ")";
}

std::string to_string(const LceEmulation& o) {
  std::string s = "order=" + to_string(o.order);
  if (o.order == LceOrder::Chunked) s += "/" + std::to_string(o.chunk);
  if (o.accumulation) s += " acc=" + tbe::to_string(*o.accumulation);
  s += o.truncate ? " rz" : " rne";
  if (o.rounding) s += " lce=" + ikbo::to_string(*o.rounding);
  if (o.user_offset != 0) s += " user+" + std::to_string(o.user_offset);
  return s;
}

std::string to_string(const AttentionEmulation& o) {
  std::string s = "block=" + std::to_string(o.block) + (o.descending ? " desc" : " asc") +
                  (o.round_p ? " p=rounded" : " p=fp32") +
                  (o.l_from_rounded_p ? " l=rounded-p" : " l=fp32-p");
  if (o.accumulation) s += " acc=" + tbe::to_string(*o.accumulation);
  if (o.truncate) s += " rz";
  if (!o.subtract_max) s += " no-max";
  if (!o.apply_scale) s += " no-scale";
  if (o.drop_block >= 0) s += " drop-block=" + std::to_string(o.drop_block);
  return s;
}

std::vector<double> emulate_lce(const ikbo::LceProblem& p, const LceEmulation& o) {
  throw_if_error(ikbo::validate(p));
  throw_if_error(ikbo::validate_map(std::span<const std::int32_t>(p.cand_to_user, p.B), p.U));
  const DType st = p.policy.storage;
  const Arith A{o.accumulation.value_or(p.policy.accumulation), o.truncate};
  const ikbo::LceRounding rounding = o.rounding.value_or(p.policy.lce_rounding);
  const FloatLoader wc(st, p.w_c), wu(st, p.w_u), ec(st, p.e_c), eu(st, p.e_u);
  const std::int64_t M = p.M, N = p.N, Kc = p.K_c, Ku = p.K_u;
  std::vector<double> out(static_cast<std::size_t>(p.B * M * N));
#pragma omp parallel
  {
    std::vector<double> tc(static_cast<std::size_t>(Kc)), tu(static_cast<std::size_t>(Ku)), all;
#pragma omp for collapse(2) schedule(static)
    for (std::int64_t b = 0; b < p.B; ++b)
      for (std::int64_t m = 0; m < M; ++m) {
        const std::int64_t u = (p.cand_to_user[b] + o.user_offset) % p.U;
        for (std::int64_t n = 0; n < N; ++n) {
          // Products rounded into acc (exact for 16-bit storage in FP32: 22 <= 24 bits).
          for (std::int64_t k = 0; k < Kc; ++k)
            tc[k] = A.mul(A.r(wc(m * Kc + k)), A.r(ec((b * Kc + k) * N + n)));
          for (std::int64_t k = 0; k < Ku; ++k)
            tu[k] = A.mul(A.r(wu(m * Ku + k)), A.r(eu((u * Ku + k) * N + n)));
          double v;
          if (rounding == ikbo::LceRounding::Published) {
            const double c = round_to(st, reduce(A, tc, o.order, o.chunk));
            const double us = Ku > 0 ? round_to(st, reduce(A, tu, o.order, o.chunk)) : 0.0;
            v = round_to(st, c + us);  // the storage-type add (exact sum rounded once)
          } else if (rounding == ikbo::LceRounding::UserRounded) {
            // The user part stored once in storage; added to the candidate reduction in acc,
            // or (single-acc: a GEMM whose accumulator starts from the C operand) as its first
            // term.
            const double us = Ku > 0 ? round_to(st, reduce(A, tu, o.order, o.chunk)) : 0.0;
            if (o.order == LceOrder::SingleAccumulator) {
              all.assign(1, us);
              all.insert(all.end(), tc.begin(), tc.end());
              v = round_to(st, reduce(A, all, LceOrder::Ascending, 0));
            } else {
              const double c = reduce(A, tc, o.order, o.chunk);
              v = round_to(st, Ku > 0 ? A.add(c, us) : c);
            }
          } else if (o.order == LceOrder::SingleAccumulator) {
            all = tu;
            all.insert(all.end(), tc.begin(), tc.end());
            v = round_to(st, reduce(A, all, LceOrder::Ascending, 0));
          } else {
            const double c = reduce(A, tc, o.order, o.chunk);
            v = round_to(st, Ku > 0 ? A.add(c, reduce(A, tu, o.order, o.chunk)) : c);
          }
          out[(b * M + m) * N + n] = v;
        }
      }
  }
  return out;
}

std::vector<double> emulate_attention(const ikbo::AttentionProblem& p,
                                      const AttentionEmulation& o) {
  throw_if_error(ikbo::validate(p));
  throw_if_error(ikbo::validate_map(std::span<const std::int32_t>(p.cand_to_user, p.B), p.U));
  const DType st = p.policy.storage;
  const Arith A{o.accumulation.value_or(p.policy.accumulation), o.truncate};
  const FloatLoader Q(st, p.q), K(st, p.k), V(st, p.v);
  const double scale = o.apply_scale ? A.r(ikbo::attention_scale(p)) : 1.0;
  const std::int64_t H = p.H, Dh = p.Dh, ns = p.n_seed, HD = H * Dh;
  const std::int64_t bs = std::max<std::int64_t>(o.block, 1);
  std::vector<double> out(static_cast<std::size_t>(ikbo::attention_output_numel(p)), 0.0);
  constexpr double kNegInf = -std::numeric_limits<double>::infinity();
#pragma omp parallel
  {
    std::vector<double> s, pr, acc(static_cast<std::size_t>(Dh)), blk(static_cast<std::size_t>(Dh));
#pragma omp for collapse(2) schedule(dynamic, 4)
    for (std::int64_t r = 0; r < p.B * ns; ++r)
      for (std::int64_t h = 0; h < H; ++h) {
        const std::int64_t b = r / ns;
        const auto [k0, k1] = ikbo::attention_key_range(p, p.cand_to_user[b]);
        const std::int64_t n = k1 - k0;
        double* o_row = out.data() + (r * H + h) * Dh;
        if (n == 0) continue;  // zeros
        const std::int64_t nblocks = (n + bs - 1) / bs;
        double m = kNegInf, l = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t t = 0; t < nblocks; ++t) {
          const std::int64_t blk_id = o.descending ? nblocks - 1 - t : t;
          if (blk_id == o.drop_block) continue;
          const std::int64_t j0 = blk_id * bs, j1 = std::min(n, j0 + bs);
          s.assign(static_cast<std::size_t>(j1 - j0), 0.0);
          double bmax = kNegInf;
          for (std::int64_t j = j0; j < j1; ++j) {
            double dot = 0.0;
            for (std::int64_t d = 0; d < Dh; ++d)
              dot = A.add(dot, A.mul(Q(r * HD + h * Dh + d), K((k0 + j) * HD + h * Dh + d)));
            s[j - j0] = A.mul(dot, scale);
            bmax = std::max(bmax, s[j - j0]);
          }
          const double m_new = o.subtract_max ? std::max(m, bmax) : 0.0;
          // Rescale the running sums by exp(m - m_new) (exactly 1 when the max is unchanged).
          const double alpha = (m == kNegInf) ? 0.0 : A.r(std::exp(A.add(m, -m_new)));
          if (o.subtract_max && m != kNegInf && alpha != 1.0) {
            l = A.mul(l, alpha);
            for (std::int64_t d = 0; d < Dh; ++d) acc[d] = A.mul(acc[d], alpha);
          }
          m = m_new;
          pr.assign(s.size(), 0.0);
          double lsum = 0.0;
          for (std::size_t j = 0; j < s.size(); ++j) {
            const double e = A.r(std::exp(A.add(s[j], -m)));
            const double pe = o.round_p ? round_to(st, e) : e;
            pr[j] = pe;
            lsum = A.add(lsum, o.l_from_rounded_p ? pe : e);
          }
          l = A.add(l, lsum);
          for (std::int64_t d = 0; d < Dh; ++d) {
            double sum = 0.0;
            for (std::size_t j = 0; j < s.size(); ++j)
              sum = A.add(sum, A.mul(pr[j], V((k0 + j0 + static_cast<std::int64_t>(j)) * HD +
                                              h * Dh + d)));
            acc[d] = A.add(acc[d], sum);
          }
        }
        for (std::int64_t d = 0; d < Dh; ++d)
          o_row[d] = round_to(st, A.r(acc[d] / l));  // 0/0 (every block dropped) gives NaN
      }
  }
  return out;
}

}  // namespace tbe::oracle
