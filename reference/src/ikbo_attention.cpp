// IKBO cross attention (ikbo.h): validation, the FP64 reference (Eigen GEMMs, max-subtracted
// softmax in FP64) and its once-rounded CPU fallback. OpenMP over candidates.
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "ikbo_internal.h"
#include "tbe/ikbo.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"  // GCC bug 105329 (string operator+ chains)
#endif

namespace tbe::ikbo {

namespace {

using detail::s;
using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using StridedMap = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;

bool product_fits(std::int64_t a, std::int64_t b, std::int64_t c, std::int64_t d = 1) {
  std::int64_t r = 0;
  return !__builtin_mul_overflow(a, b, &r) && !__builtin_mul_overflow(r, c, &r) &&
         !__builtin_mul_overflow(r, d, &r);
}

/// Calls sink(b, out_b) with out_b the FP64 result [n_seed, H, Dh] of candidate b (parallel over
/// candidates). Validates first (throws InvalidArgument).
template <class Sink>
void attention_fp64_per_candidate(const AttentionProblem& p, Sink&& sink) {
  throw_if_error(validate(p));
  throw_if_error(validate_map(std::span<const std::int32_t>(p.cand_to_user, p.B), p.U));
  const DType st = p.policy.storage;
  const std::int64_t H = p.H, Dh = p.Dh, ns = p.n_seed, HD = H * Dh;
  const double scale = attention_scale(p);
  const std::int64_t keys = p.total_keys();
  const std::vector<double> k64 = detail::to_fp64(st, p.k, keys * HD);  // [keys, H, Dh]
  const std::vector<double> v64 = detail::to_fp64(st, p.v, keys * HD);  // [keys, H, Dh]
  const std::int64_t work = p.B * ns * HD * std::max<std::int64_t>(keys / p.U, 1);
#pragma omp parallel if (tbe::detail::worth_parallel(work))
  {
    std::vector<double> q64(static_cast<std::size_t>(ns * HD));  // [n_seed, H, Dh]
    std::vector<double> o64(static_cast<std::size_t>(ns * HD));  // [n_seed, H, Dh]
    RowMat scores, probs, acc;                                   // [n_seed, n], [n_seed, Dh]
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < p.B; ++b) {
      const auto [k0, k1] = attention_key_range(p, p.cand_to_user[b]);
      const std::int64_t n = k1 - k0;
      if (n == 0) {  // empty key range: zeros (docs/ikbo.md), never 0/0
        std::fill(o64.begin(), o64.end(), 0.0);
        sink(b, o64.data());
        continue;
      }
      for (std::int64_t i = 0; i < ns * HD; ++i)
        q64[i] = detail::load_storage(st, p.q, b * ns * HD + i);
      for (std::int64_t h = 0; h < H; ++h) {
        const StridedMap q(q64.data() + h * Dh, ns, Dh, Eigen::OuterStride<>(HD));
        const StridedMap k(k64.data() + k0 * HD + h * Dh, n, Dh, Eigen::OuterStride<>(HD));
        const StridedMap v(v64.data() + k0 * HD + h * Dh, n, Dh, Eigen::OuterStride<>(HD));
        scores.noalias() = q * k.transpose();  // [n_seed, n] <q_i, k_j>
        probs.resize(ns, n);
        for (std::int64_t i = 0; i < ns; ++i) {
          // s_j = scale·<q, k_j>; softmax with the row maximum subtracted (exp <= 1).
          double m = -std::numeric_limits<double>::infinity();
          for (std::int64_t j = 0; j < n; ++j) m = std::max(m, scale * scores(i, j));
          double l = 0.0;
          for (std::int64_t j = 0; j < n; ++j) {
            probs(i, j) = std::exp(scale * scores(i, j) - m);
            l += probs(i, j);
          }
          probs.row(i) /= l;
        }
        acc.noalias() = probs * v;  // [n_seed, Dh]
        for (std::int64_t i = 0; i < ns; ++i)
          for (std::int64_t d = 0; d < Dh; ++d) o64[(i * H + h) * Dh + d] = acc(i, d);
      }
      sink(b, o64.data());
    }
  }
}

}  // namespace

Status validate(const AttentionProblem& p) {
  if (Status st = detail::validate_policy(p.policy, "attention."); !st.ok()) return st;
  auto at_least = [](const char* name, std::int64_t v, std::int64_t min) {
    return Status::Invalid(std::string("attention.") + name,
                           std::string("attention.") + name + ": " + s(v) + " must be >= " +
                               s(min));
  };
  if (p.B < 0) return at_least("B", p.B, 0);
  if (p.U < 1) return at_least("U", p.U, 1);
  if (p.n_seed < 1) return at_least("n_seed", p.n_seed, 1);
  if (p.H < 1) return at_least("H", p.H, 1);
  if (p.Dh < 1) return at_least("Dh", p.Dh, 1);
  if (!p.jagged() && p.S < 1)
    return Status::Invalid("attention.S", "attention.S: " + s(p.S) +
                                              " must be >= 1 in dense mode (k_offsets empty)");
  if (p.jagged() && p.S < 0) return at_least("S", p.S, 0);
  if (p.scale != 0.0 && !(std::isfinite(p.scale) && p.scale > 0.0)) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.17g", p.scale);
    return Status::Invalid("attention.scale",
                           std::string("attention.scale: ") + buf +
                               " must be finite and > 0 (or 0 for 1/sqrt(Dh))");
  }
  if (p.jagged()) {
    const auto len = static_cast<std::int64_t>(p.k_offsets.size());
    if (len != p.U + 1)
      return Status::Invalid("attention.k_offsets", "attention.k_offsets: length " + s(len) +
                                                        " != U + 1 = " + s(p.U + 1));
    if (p.k_offsets[0] != 0)
      return Status::Invalid("attention.k_offsets[0]",
                             "attention.k_offsets[0]: " + s(p.k_offsets[0]) + " must be 0");
    for (std::int64_t u = 0; u < p.U; ++u)
      if (p.k_offsets[u + 1] < p.k_offsets[u])
        return Status::Invalid("attention.k_offsets[" + s(u + 1) + "]",
                               "attention.k_offsets[" + s(u + 1) + "]: " + s(p.k_offsets[u + 1]) +
                                   " < k_offsets[" + s(u) + "] = " + s(p.k_offsets[u]) +
                                   " (must be non-decreasing)");
  }
  if (!product_fits(p.B, p.n_seed, p.H, p.Dh))
    return Status::Invalid("attention.B", "attention.B: B·n_seed·H·Dh = " + s(p.B) + "·" +
                                              s(p.n_seed) + "·" + s(p.H) + "·" + s(p.Dh) +
                                              " overflows int64");
  if (!p.jagged() && !product_fits(p.U, p.S, 1))
    return Status::Invalid("attention.S", "attention.S: U·S = " + s(p.U) + "·" + s(p.S) +
                                              " overflows int64");
  if (!product_fits(p.total_keys(), p.H, p.Dh))
    return Status::Invalid("attention.k", "attention.k: keys·H·Dh = " + s(p.total_keys()) + "·" +
                                              s(p.H) + "·" + s(p.Dh) + " overflows int64");
  auto null_ptr = [](const char* name, const std::string& what) {
    return Status::Invalid(std::string("attention.") + name, std::string("attention.") + name +
                                                                 ": null pointer for " + what +
                                                                 " elements");
  };
  const std::int64_t nq = p.B * p.n_seed * p.H * p.Dh, nk = p.total_keys() * p.H * p.Dh;
  if (nq > 0 && p.q == nullptr) return null_ptr("q", "B·n_seed·H·Dh = " + s(nq));
  if (nk > 0 && p.k == nullptr) return null_ptr("k", "keys·H·Dh = " + s(nk));
  if (nk > 0 && p.v == nullptr) return null_ptr("v", "keys·H·Dh = " + s(nk));
  if (p.B > 0 && p.cand_to_user == nullptr) return null_ptr("cand_to_user", "B = " + s(p.B));
  return Status::Ok();
}

std::int64_t attention_output_numel(const AttentionProblem& p) {
  return p.B * p.n_seed * p.H * p.Dh;
}

double attention_scale(const AttentionProblem& p) {
  return p.scale != 0.0 ? p.scale : 1.0 / std::sqrt(static_cast<double>(p.Dh));
}

std::pair<std::int64_t, std::int64_t> attention_key_range(const AttentionProblem& p,
                                                          std::int64_t u) {
  if (p.jagged()) return {p.k_offsets[u], p.k_offsets[u + 1]};
  return {u * p.S, (u + 1) * p.S};
}

std::vector<double> attention_reference_fp64(const AttentionProblem& p) {
  throw_if_error(validate(p));
  std::vector<double> out(static_cast<std::size_t>(attention_output_numel(p)));
  const std::int64_t per = p.n_seed * p.H * p.Dh;
  attention_fp64_per_candidate(p, [&](std::int64_t b, const double* o) {
    std::copy_n(o, per, out.data() + b * per);
  });
  return out;
}

Status validate_output(const AttentionProblem& p, const void* out) {
  const std::int64_t n = attention_output_numel(p);
  if (n > 0 && out == nullptr)
    return Status::Invalid("out", "out: null pointer for B·n_seed·H·Dh = " + s(n) + " elements");
  return Status::Ok();
}

void attention_reference(const AttentionProblem& p, void* out) {
  throw_if_error(validate(p));
  throw_if_error(validate_output(p, out));
  const std::int64_t per = p.n_seed * p.H * p.Dh;
  const DType st = p.policy.storage;
  attention_fp64_per_candidate(p, [&](std::int64_t b, const double* o) {
    for (std::int64_t i = 0; i < per; ++i) detail::store_rounded(st, out, b * per + i, o[i]);
  });
}

}  // namespace tbe::ikbo
