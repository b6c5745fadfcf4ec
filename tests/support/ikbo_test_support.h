// Shared helpers of the IKBO tests (tests/reference, tests/oracle, tests/tools): RapidCheck
// generators of VALID LCE / attention cases (by construction) with edge sizes, a naive LCE in
// ascending-k order, small-integer fills (exact FP64 sums), and printers.
#pragma once

#include <rapidcheck.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tbe/host_case.h"
#include "tbe/ikbo.h"
#include "tbe/ikbo_workloads.h"
#include "tbe/precision.h"
#include "tbe/workloads.h"

namespace ikbo_test {

using namespace tbe;
using namespace tbe::ikbo;

/// The generated structure of an LCE case (the contents come from `seed`).
struct LceSpec {
  LceShape shape;
  IkboPolicy policy;
  MapKind map = MapKind::Sorted;
  std::uint64_t seed = 0;
  bool small_integers = false;  ///< values in [-4, 4] integers: every FP64 sum is exact
};
inline std::ostream& operator<<(std::ostream& os, const LceSpec& s) {
  return os << "LceSpec{B=" << s.shape.B << " U=" << s.shape.U << " M=" << s.shape.M
            << " N=" << s.shape.N << " K_c=" << s.shape.K_c << " K_u=" << s.shape.K_u << " "
            << to_string(s.policy) << " map=" << to_string(s.map) << " seed=" << s.seed
            << (s.small_integers ? " small-int" : "") << "}";
}

/// Overwrites a tensor with integers in [-r, r] from a seeded stream (exact in every type).
inline void fill_small_integers(std::vector<std::byte>& t, DType st, std::uint64_t seed,
                                std::uint64_t stream, int r = 4) {
  Rng rng(seed, stream);
  const auto n = static_cast<std::int64_t>(t.size() / dtype_size(st));
  for (std::int64_t i = 0; i < n; ++i)
    store_from_double(st, t.data(), i, static_cast<double>(rng.uniform_int(2 * r + 1) - r));
}

inline LceCase build(const LceSpec& s) {
  LceCase c = make_lce_case(s.shape, s.policy, s.map, s.seed);
  if (s.small_integers) {
    fill_small_integers(c.w_c, s.policy.storage, s.seed, 101);
    fill_small_integers(c.w_u, s.policy.storage, s.seed, 102);
    fill_small_integers(c.e_c, s.policy.storage, s.seed, 103);
    fill_small_integers(c.e_u, s.policy.storage, s.seed, 104);
  }
  return c;
}

/// Storage types and policies the generators draw from.
inline rc::Gen<IkboPolicy> gen_policy(bool allow_f32 = true) {
  return rc::gen::exec([allow_f32] {
    IkboPolicy p;
    std::vector<DType> st = {DType::F16, DType::BF16};
    if (allow_f32) st.push_back(DType::F32);
    p.storage = *rc::gen::elementOf(st);
    p.accumulation = p.storage == DType::F32
                         ? *rc::gen::elementOf(std::vector<DType>{DType::F32, DType::F64})
                         : DType::F32;
    p.lce_rounding = *rc::gen::elementOf(
        std::vector<LceRounding>{LceRounding::Published, LceRounding::RoundOnce,
                                 LceRounding::UserRounded});
    return p;
  });
}

/// Valid LCE specs: B in {0, 1, ...}, K_u = 0 sometimes, K not a multiple of 8, every map kind.
/// Work (B·M·N·(K_c + K_u)) is bounded so a property runs 100 cases in about a second.
inline rc::Gen<LceSpec> gen_lce_spec(bool allow_f32 = true) {
  return rc::gen::exec([allow_f32] {
    LceSpec s;
    s.map = *rc::gen::elementOf(std::vector<MapKind>(std::begin(kAllMapKinds),
                                                     std::end(kAllMapKinds)));
    s.shape.B = *rc::gen::weightedOneOf<std::int64_t>(
        {{1, rc::gen::just<std::int64_t>(0)}, {8, rc::gen::inRange<std::int64_t>(1, 13)}});
    s.shape.U = *rc::gen::inRange<std::int64_t>(
        s.map == MapKind::UsersWithoutCandidates ? 2 : 1, 7);
    s.shape.M = *rc::gen::inRange<std::int64_t>(1, 12);
    s.shape.N = *rc::gen::elementOf(std::vector<std::int64_t>{1, 2, 3, 5, 8, 17});
    s.shape.K_c = *rc::gen::weightedOneOf<std::int64_t>(
        {{4, rc::gen::inRange<std::int64_t>(1, 20)},
         {1, rc::gen::elementOf(std::vector<std::int64_t>{7, 8, 9, 61, 130})}});
    s.shape.K_u = *rc::gen::weightedOneOf<std::int64_t>(
        {{1, rc::gen::just<std::int64_t>(0)}, {4, rc::gen::inRange<std::int64_t>(1, 20)},
         {1, rc::gen::elementOf(std::vector<std::int64_t>{7, 8, 9, 97})}});
    s.policy = *gen_policy(allow_f32);
    s.seed = *rc::gen::arbitrary<std::uint64_t>();
    s.small_integers = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    return s;
  });
}

/// Naive LCE in FP64: plain triple loops, each element summing its candidate products in
/// ascending k, then its user products in ascending k, then cand + user.
struct NaiveLce {
  std::vector<double> cand, user, out;
};
inline NaiveLce naive_lce(const LceProblem& p) {
  const DType st = p.policy.storage;
  NaiveLce r;
  const auto n = static_cast<std::size_t>(p.B * p.M * p.N);
  r.cand.assign(n, 0.0);
  r.user.assign(n, 0.0);
  r.out.assign(n, 0.0);
  for (std::int64_t b = 0; b < p.B; ++b) {
    const std::int64_t u = p.cand_to_user[b];
    for (std::int64_t m = 0; m < p.M; ++m)
      for (std::int64_t j = 0; j < p.N; ++j) {
        double c = 0.0, us = 0.0;
        for (std::int64_t k = 0; k < p.K_c; ++k)
          c += load_as_double(st, p.w_c, m * p.K_c + k) *
               load_as_double(st, p.e_c, (b * p.K_c + k) * p.N + j);
        for (std::int64_t k = 0; k < p.K_u; ++k)
          us += load_as_double(st, p.w_u, m * p.K_u + k) *
                load_as_double(st, p.e_u, (u * p.K_u + k) * p.N + j);
        const std::size_t i = static_cast<std::size_t>((b * p.M + m) * p.N + j);
        r.cand[i] = c;
        r.user[i] = us;
        r.out[i] = c + us;
      }
  }
  return r;
}

/// A dense attention shape (jagged = false, no lengths, default scale).
inline AttentionShape dense_shape(std::int64_t B, std::int64_t U, std::int64_t n_seed,
                                  std::int64_t H, std::int64_t Dh, std::int64_t S) {
  AttentionShape sh;
  sh.B = B;
  sh.U = U;
  sh.n_seed = n_seed;
  sh.H = H;
  sh.Dh = Dh;
  sh.S = S;
  return sh;
}

/// The generated structure of an attention case.
struct AttentionSpec {
  AttentionShape shape;
  IkboPolicy policy;
  MapKind map = MapKind::Sorted;
  std::uint64_t seed = 0;
};
inline std::ostream& operator<<(std::ostream& os, const AttentionSpec& s) {
  os << "AttentionSpec{B=" << s.shape.B << " U=" << s.shape.U << " n_seed=" << s.shape.n_seed
     << " H=" << s.shape.H << " Dh=" << s.shape.Dh << " S=" << s.shape.S
     << (s.shape.jagged ? " jagged" : " dense") << " scale=" << s.shape.scale << " "
     << to_string(s.policy) << " map=" << to_string(s.map) << " seed=" << s.seed;
  if (!s.shape.lengths.empty()) {
    os << " lengths=[";
    for (auto l : s.shape.lengths) os << l << " ";
    os << "]";
  }
  return os << "}";
}

/// Valid attention specs: dense or jagged (user 0 empty), S from 1 to a few hundred (edge sizes
/// 1, 15, 16, 17, 64, 129), Dh odd or a power of two, every map kind.
inline rc::Gen<AttentionSpec> gen_attention_spec(bool allow_f32 = true) {
  return rc::gen::exec([allow_f32] {
    AttentionSpec s;
    s.map = *rc::gen::elementOf(std::vector<MapKind>(std::begin(kAllMapKinds),
                                                     std::end(kAllMapKinds)));
    s.shape.B = *rc::gen::weightedOneOf<std::int64_t>(
        {{1, rc::gen::just<std::int64_t>(0)}, {8, rc::gen::inRange<std::int64_t>(1, 7)}});
    s.shape.U = *rc::gen::inRange<std::int64_t>(
        s.map == MapKind::UsersWithoutCandidates ? 2 : 1, 5);
    s.shape.n_seed = *rc::gen::inRange<std::int64_t>(1, 4);
    s.shape.H = *rc::gen::inRange<std::int64_t>(1, 3);
    s.shape.Dh = *rc::gen::elementOf(std::vector<std::int64_t>{1, 3, 8, 16, 33, 64});
    s.shape.S = *rc::gen::weightedOneOf<std::int64_t>(
        {{4, rc::gen::inRange<std::int64_t>(1, 40)},
         {2, rc::gen::elementOf(std::vector<std::int64_t>{1, 15, 16, 17, 64, 129, 300})}});
    s.shape.jagged = *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
    s.shape.scale = *rc::gen::weightedElement<double>({{4, 0.0}, {1, 0.5}, {1, 2.0}});
    s.policy = *gen_policy(allow_f32);
    s.seed = *rc::gen::arbitrary<std::uint64_t>();
    return s;
  });
}
inline AttentionCase build(const AttentionSpec& s) {
  return make_attention_case(s.shape, s.policy, s.map, s.seed);
}

}  // namespace ikbo_test
