// IKBO linear compression (ikbo.h): validation shared by every backend, the FP64 reference
// (Eigen, ascending-k order per element) and its policy-rounded CPU fallback.
#include <Eigen/Core>
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "ikbo_internal.h"
#include "tbe/ikbo.h"
#include "tbe/precision.h"

// GCC 12 reports a false -Wrestrict inside libstdc++ for chains of std::string operator+
// (GCC bug 105329); the messages below are built that way on purpose, for readability.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wrestrict"
#endif

namespace tbe::ikbo {

namespace {

using detail::s;
using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

/// a·b·c fits int64 (all >= 0).
bool product_fits(std::int64_t a, std::int64_t b, std::int64_t c = 1) {
  std::int64_t r = 0;
  return !__builtin_mul_overflow(a, b, &r) && !__builtin_mul_overflow(r, c, &r);
}

/// C [M, N] = W [M, K] · E [K, N] (row-major, FP64). Every element sums its K products (exact in
/// FP64 for storage-type inputs) in ascending k: rank-1 updates of 8-row x 64-column tiles of C
/// (Eigen vectorizes along N; the E panel of a column tile stays in L2), so the result is
/// independent of blocking, threads and zero padding of K.
void gemm_ascending_k(const double* W, const double* E, std::int64_t M, std::int64_t K,
                      std::int64_t N, double* C) {
  Eigen::Map<const RowMat> w(W, M, K);
  Eigen::Map<const RowMat> e(E, K, N);
  Eigen::Map<RowMat> c(C, M, N);
  c.setZero();
  constexpr std::int64_t kRowBlock = 8, kColBlock = 64;
  for (std::int64_t n0 = 0; n0 < N; n0 += kColBlock) {
    const std::int64_t nb = std::min(kColBlock, N - n0);
    for (std::int64_t m0 = 0; m0 < M; m0 += kRowBlock) {
      const std::int64_t m1 = std::min(M, m0 + kRowBlock);
      for (std::int64_t k = 0; k < K; ++k) {
        const auto e_row = e.row(k).segment(n0, nb);
        for (std::int64_t m = m0; m < m1; ++m) c.row(m).segment(n0, nb) += w(m, k) * e_row;
      }
    }
  }
}

/// Runs the decomposed LCE and calls sink(b, candidate_part[M·N], user_part[M·N]) once per
/// candidate (in parallel, OpenMP over candidates). User parts are computed once per user that
/// has candidates. Validates first (throws InvalidArgument).
template <class Sink>
void lce_fp64_per_candidate(const LceProblem& p, Sink&& sink) {
  throw_if_error(validate(p));
  throw_if_error(validate_map(std::span<const std::int32_t>(p.cand_to_user, p.B), p.U));
  const DType st = p.policy.storage;
  const std::int64_t B = p.B, U = p.U, M = p.M, N = p.N, Kc = p.K_c, Ku = p.K_u;
  const std::int64_t MN = M * N;
  const std::vector<double> w_c = detail::to_fp64(st, p.w_c, M * Kc);  // [M, K_c]
  const std::vector<double> w_u = detail::to_fp64(st, p.w_u, M * Ku);  // [M, K_u]

  // User parts [U, M, N] for the users that have candidates (others stay unused).
  std::vector<char> used(static_cast<std::size_t>(U), 0);
  for (std::int64_t b = 0; b < B; ++b) used[p.cand_to_user[b]] = 1;
  std::vector<double> user_part(Ku > 0 ? static_cast<std::size_t>(U * MN) : 0);
  if (Ku > 0) {
    const std::int64_t work = U * M * Ku * N;
#pragma omp parallel if (tbe::detail::worth_parallel(work))
    {
      std::vector<double> e_u(static_cast<std::size_t>(Ku * N));  // [K_u, N]
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t u = 0; u < U; ++u) {
        if (!used[u]) continue;
        for (std::int64_t i = 0; i < Ku * N; ++i)
          e_u[i] = detail::load_storage(st, p.e_u, u * Ku * N + i);
        gemm_ascending_k(w_u.data(), e_u.data(), M, Ku, N, user_part.data() + u * MN);
      }
    }
  }
  const std::vector<double> zeros(Ku > 0 ? 0 : static_cast<std::size_t>(MN), 0.0);
  const std::int64_t work = B * M * Kc * N;
#pragma omp parallel if (tbe::detail::worth_parallel(work))
  {
    std::vector<double> e_c(static_cast<std::size_t>(Kc * N));  // [K_c, N] of candidate b
    std::vector<double> cand(static_cast<std::size_t>(MN));     // [M, N]
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t b = 0; b < B; ++b) {
      for (std::int64_t i = 0; i < Kc * N; ++i)
        e_c[i] = detail::load_storage(st, p.e_c, b * Kc * N + i);
      gemm_ascending_k(w_c.data(), e_c.data(), M, Kc, N, cand.data());
      const double* user = Ku > 0 ? user_part.data() + p.cand_to_user[b] * MN : zeros.data();
      sink(b, cand.data(), user);
    }
  }
}

}  // namespace

std::string to_string(LceRounding r) {
  switch (r) {
    case LceRounding::Published: return "published";
    case LceRounding::RoundOnce: return "round-once";
    case LceRounding::UserRounded: return "user-rounded";
  }
  return "lce_rounding(" + std::to_string(static_cast<int>(r)) + ")";
}

LceRounding parse_lce_rounding(const std::string& s, const char* what) {
  for (LceRounding r : {LceRounding::RoundOnce, LceRounding::Published, LceRounding::UserRounded})
    if (s == to_string(r)) return r;
  throw InvalidArgument(what, std::string(what) + ": '" + s +
                                  "' is not a rounding (allowed: round-once, published, "
                                  "user-rounded)");
}

std::string to_string(const IkboPolicy& p) {
  return "ikbo[storage=" + tbe::to_string(p.storage) + ",acc=" + tbe::to_string(p.accumulation) +
         ",lce=" + to_string(p.lce_rounding) + "]";
}

Status detail::validate_policy(const IkboPolicy& pol, const std::string& prefix) {
  if (!detail::is_storage_type(pol.storage))
    return Status::Invalid(prefix + "policy.storage",
                           prefix + "policy.storage: " + tbe::to_string(pol.storage) +
                               " is not a storage type (allowed: fp16, bf16, fp32)");
  if (!detail::is_ikbo_accumulation(pol.accumulation))
    return Status::Invalid(prefix + "policy.accumulation",
                           prefix + "policy.accumulation: " + tbe::to_string(pol.accumulation) +
                               " is not an accumulation type (allowed: fp32, fp64)");
  if (pol.lce_rounding != LceRounding::Published && pol.lce_rounding != LceRounding::RoundOnce &&
      pol.lce_rounding != LceRounding::UserRounded)
    return Status::Invalid(prefix + "policy.lce_rounding",
                           prefix + "policy.lce_rounding: " + to_string(pol.lce_rounding) +
                               " is not a rounding (allowed: published, round-once, "
                               "user-rounded)");
  return Status::Ok();
}

Status validate(const LceProblem& p) {
  if (Status st = detail::validate_policy(p.policy, "lce."); !st.ok()) return st;
  auto at_least = [](const char* name, std::int64_t v, std::int64_t min) {
    return Status::Invalid(std::string("lce.") + name, std::string("lce.") + name + ": " + s(v) +
                                                           " must be >= " + s(min));
  };
  if (p.B < 0) return at_least("B", p.B, 0);
  if (p.U < 1) return at_least("U", p.U, 1);
  if (p.M < 1) return at_least("M", p.M, 1);
  if (p.N < 1) return at_least("N", p.N, 1);
  if (p.K_c < 1) return at_least("K_c", p.K_c, 1);
  if (p.K_u < 0) return at_least("K_u", p.K_u, 0);
  // Every tensor's element count must fit int64 (64-bit addressing everywhere).
  struct Sized { const char* name; std::int64_t a, b, c; const char* formula; };
  const Sized sizes[] = {{"B", p.B, p.M, p.N, "B·M·N"},     {"K_c", p.B, p.K_c, p.N, "B·K_c·N"},
                         {"K_u", p.U, p.K_u, p.N, "U·K_u·N"}, {"M", p.M, p.K_c, 1, "M·K_c"},
                         {"M", p.M, p.K_u, 1, "M·K_u"}};
  for (const Sized& z : sizes)
    if (!product_fits(z.a, z.b, z.c))
      return Status::Invalid(std::string("lce.") + z.name, std::string("lce.") + z.name + ": " +
                                                               z.formula + " = " + s(z.a) + "·" +
                                                               s(z.b) + "·" + s(z.c) +
                                                               " overflows int64");
  auto null_ptr = [](const char* name, const std::string& what) {
    return Status::Invalid(std::string("lce.") + name,
                           std::string("lce.") + name + ": null pointer for " + what + " elements");
  };
  if (p.w_c == nullptr) return null_ptr("w_c", "M·K_c = " + s(p.M * p.K_c));
  if (p.K_u > 0 && p.w_u == nullptr) return null_ptr("w_u", "M·K_u = " + s(p.M * p.K_u));
  if (p.B > 0 && p.e_c == nullptr) return null_ptr("e_c", "B·K_c·N = " + s(p.B * p.K_c * p.N));
  if (p.K_u > 0 && p.e_u == nullptr) return null_ptr("e_u", "U·K_u·N = " + s(p.U * p.K_u * p.N));
  if (p.B > 0 && p.cand_to_user == nullptr) return null_ptr("cand_to_user", "B = " + s(p.B));
  return Status::Ok();
}

Status validate_map(std::span<const std::int32_t> cand_to_user, std::int64_t U) {
  if (U < 1) return Status::Invalid("U", "U: " + s(U) + " must be >= 1");
  for (std::size_t b = 0; b < cand_to_user.size(); ++b) {
    const std::int64_t u = cand_to_user[b];
    if (u < 0 || u >= U)
      return Status::Invalid("cand_to_user[" + s(static_cast<std::int64_t>(b)) + "]",
                             "cand_to_user[" + s(static_cast<std::int64_t>(b)) + "]: " + s(u) +
                                 " outside [0, U=" + s(U) + ")");
  }
  return Status::Ok();
}

std::int64_t lce_output_numel(const LceProblem& p) { return p.B * p.M * p.N; }

LceReference lce_reference_fp64(const LceProblem& p) {
  throw_if_error(validate(p));
  LceReference r;
  const std::int64_t MN = p.M * p.N;
  const auto n = static_cast<std::size_t>(lce_output_numel(p));
  r.candidate_part.resize(n);
  r.user_part.resize(n);
  r.out.resize(n);
  lce_fp64_per_candidate(p, [&](std::int64_t b, const double* cand, const double* user) {
    for (std::int64_t i = 0; i < MN; ++i) {
      r.candidate_part[b * MN + i] = cand[i];
      r.user_part[b * MN + i] = user[i];
      r.out[b * MN + i] = cand[i] + user[i];
    }
  });
  return r;
}

Status validate_output(const LceProblem& p, const void* out) {
  const std::int64_t n = p.B > 0 ? lce_output_numel(p) : 0;
  if (n > 0 && out == nullptr)
    return Status::Invalid("out", "out: null pointer for B·M·N = " + s(n) + " elements");
  return Status::Ok();
}

void lce_reference(const LceProblem& p, void* out) {
  throw_if_error(validate(p));
  throw_if_error(validate_output(p, out));
  const DType st = p.policy.storage;
  const DType acc = p.policy.accumulation;
  const LceRounding rounding = p.policy.lce_rounding;
  const std::int64_t MN = p.M * p.N;
  lce_fp64_per_candidate(p, [&](std::int64_t b, const double* cand, const double* user) {
    for (std::int64_t i = 0; i < MN; ++i) {
      // Published: each part rounded to storage, their (exact) FP64 sum rounded again: the
      // storage-type addition. RoundOnce: the FP64 sum rounded once. UserRounded: the user part
      // rounded to storage, added to the candidate part with one rounding to the accumulation
      // type, the result rounded to storage (store_rounded). The FP64 sum cand + RN_st(user) is
      // exact whenever the parts are (small-integer inputs); else it is within 2^-53 relative,
      // far below the accumulation type's rounding it feeds (docs/ikbo.md).
      double v = cand[i] + user[i];
      if (rounding == LceRounding::Published)
        v = round_to(st, round_to(st, cand[i]) + round_to(st, user[i]));
      else if (rounding == LceRounding::UserRounded)
        v = round_to(acc, cand[i] + round_to(st, user[i]));
      detail::store_rounded(st, out, b * MN + i, v);
    }
  });
}

}  // namespace tbe::ikbo
