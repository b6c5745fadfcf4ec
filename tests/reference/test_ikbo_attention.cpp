// IKBO attention reference: a naive softmax without max subtraction on small logits, single-key
// rows, empty jagged ranges (zeros), dense == jagged with equal lengths, scale, rounding.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <cmath>
#include <cstring>

#include "ikbo_test_support.h"

using namespace ikbo_test;

TEST_CASE("ikbo attention == naive softmax without max subtraction (small logits)",
          "[ikbo][attention]") {
  rc::prop("within both FP64 error bounds", []() {
    const AttentionSpec s = *gen_attention_spec();
    const AttentionCase c = build(s);
    const AttentionProblem p = c.view();
    const std::vector<double> r = attention_reference_fp64(p);
    const DType st = s.policy.storage;
    const double scale = attention_scale(p);
    const std::int64_t H = p.H, Dh = p.Dh, HD = H * Dh;
    for (std::int64_t b = 0; b < p.B; ++b) {
      const auto [k0, k1] = attention_key_range(p, p.cand_to_user[b]);
      const std::int64_t n = k1 - k0;
      for (std::int64_t i = 0; i < p.n_seed; ++i)
        for (std::int64_t h = 0; h < H; ++h) {
          const std::int64_t row = b * p.n_seed + i;
          // |q|, |k| <= 1 and scale·Dh <= 2·64: logits stay far from exp's overflow.
          std::vector<double> e(static_cast<std::size_t>(n));
          double l = 0.0, smax = 0.0;
          for (std::int64_t j = 0; j < n; ++j) {
            double dot = 0.0, adot = 0.0;
            for (std::int64_t d = 0; d < Dh; ++d) {
              const double t = load_as_double(st, p.q, row * HD + h * Dh + d) *
                               load_as_double(st, p.k, (k0 + j) * HD + h * Dh + d);
              dot += t;
              adot += std::fabs(t);
            }
            smax = std::max(smax, scale * adot);
            e[j] = std::exp(scale * dot);
            l += e[j];
          }
          for (std::int64_t d = 0; d < Dh; ++d) {
            const double got = r[row * HD + h * Dh + d];
            if (n == 0) {
              RC_ASSERT(got == 0.0);
              continue;
            }
            double acc = 0.0, aacc = 0.0;
            for (std::int64_t j = 0; j < n; ++j) {
              const double v = load_as_double(st, p.v, (k0 + j) * HD + h * Dh + d);
              acc += e[j] * v;
              aacc += std::fabs(e[j] * v);
            }
            // Each side: every logit within γ(Dh + 1)·smax of the exact one (dot product in any
            // order, then ·scale) and max subtraction adds |s - m|·u <= 2·smax·u, so every weight
            // exp(s_j)/Σexp is off by a relative <= 2·(Dh + 3)·u·smax (first order), plus the
            // exp, the sum of n weights, the division and the PV sum: (2n + 10)·u. Both sides,
            // and a factor 2 for second-order terms.
            const double u = 0x1p-53;
            const double rel = 2 * (2 * (Dh + 3) * u * smax + (2 * n + 10) * u);
            RC_ASSERT(std::fabs(got - acc / l) <= 2 * rel * (aacc / l));
          }
        }
    }
  });
}

TEST_CASE("ikbo attention with one key returns v exactly", "[ikbo][attention]") {
  AttentionShape sh = dense_shape(3, 2, 2, 2, 5, 1);
  const AttentionCase c = make_attention_case(sh, {DType::BF16, DType::F32, {}},
                                              MapKind::Unsorted, 4);
  const AttentionProblem p = c.view();
  const std::vector<double> r = attention_reference_fp64(p);
  for (std::int64_t b = 0; b < p.B; ++b)
    for (std::int64_t i = 0; i < p.n_seed; ++i)
      for (std::int64_t hd = 0; hd < p.H * p.Dh; ++hd)
        CHECK(r[(b * p.n_seed + i) * p.H * p.Dh + hd] ==
              load_as_double(DType::BF16, p.v, p.cand_to_user[b] * p.H * p.Dh + hd));
}

TEST_CASE("ikbo attention: empty jagged range gives zeros, never NaN", "[ikbo][attention]") {
  AttentionShape sh = dense_shape(6, 3, 2, 2, 4, 0);
  sh.jagged = true;
  sh.lengths = {0, 5, 0};
  const AttentionCase c = make_attention_case(sh, {DType::F16, DType::F32, {}}, MapKind::Sorted, 8);
  const AttentionProblem p = c.view();
  const std::vector<double> r = attention_reference_fp64(p);
  auto out = c.make_output();
  attention_reference(p, out.data());
  const std::int64_t per = p.n_seed * p.H * p.Dh;
  for (std::int64_t b = 0; b < p.B; ++b) {
    const bool empty = p.cand_to_user[b] != 1;
    for (std::int64_t i = 0; i < per; ++i) {
      const double v = r[b * per + i];
      CHECK(std::isfinite(v));
      if (empty) {
        CHECK(v == 0.0);
        CHECK(load_as_double(DType::F16, out.data(), b * per + i) == 0.0);
      }
    }
  }
}

TEST_CASE("ikbo attention dense == jagged with equal lengths", "[ikbo][attention]") {
  rc::prop("bitwise equal fp64 and rounded outputs", []() {
    AttentionSpec s = *gen_attention_spec();
    s.shape.jagged = false;
    const AttentionCase dense = build(s);
    AttentionCase jag = dense;
    jag.shape.jagged = true;
    jag.k_offsets.resize(static_cast<std::size_t>(dense.shape.U + 1));
    for (std::int64_t u = 0; u <= dense.shape.U; ++u) jag.k_offsets[u] = u * dense.shape.S;
    RC_ASSERT(attention_reference_fp64(jag.view()) == attention_reference_fp64(dense.view()));
    auto o1 = dense.make_output(), o2 = jag.make_output();
    attention_reference(dense.view(), o1.data());
    attention_reference(jag.view(), o2.data());
    RC_ASSERT(o1 == o2);
  });
}

TEST_CASE("ikbo attention output is the fp64 result rounded once; scale 0 is 1/sqrt(Dh)",
          "[ikbo][attention]") {
  rc::prop("rounded == round_to(fp64); scale = 1/sqrt(Dh) explicitly gives the same", []() {
    AttentionSpec s = *gen_attention_spec();
    s.shape.scale = 0.0;
    AttentionCase c = build(s);
    const std::vector<double> r = attention_reference_fp64(c.view());
    auto out = c.make_output();
    attention_reference(c.view(), out.data());
    for (std::size_t i = 0; i < r.size(); ++i)
      RC_ASSERT(load_as_double(s.policy.storage, out.data(), static_cast<std::int64_t>(i)) ==
                round_to(s.policy.storage, r[i]));
    c.shape.scale = 1.0 / std::sqrt(static_cast<double>(c.shape.Dh));
    RC_ASSERT(attention_reference_fp64(c.view()) == r);
  });
}

TEST_CASE("ikbo attention large logits stay finite (max subtraction)", "[ikbo][attention]") {
  // Logits of ±4000: exp without max subtraction overflows; the reference must not.
  AttentionShape sh = dense_shape(2, 1, 1, 1, 1, 3);
  sh.scale = 1000.0;
  AttentionCase c = make_attention_case(sh, {DType::F32, DType::F64, {}}, MapKind::OneUser, 2);
  const float q[] = {4.0f, -4.0f}, k[] = {1.0f, 0.5f, -1.0f}, v[] = {1.0f, 2.0f, 3.0f};
  std::memcpy(c.q.data(), q, sizeof q);
  std::memcpy(c.k.data(), k, sizeof k);
  std::memcpy(c.v.data(), v, sizeof v);
  const std::vector<double> r = attention_reference_fp64(c.view());
  CHECK(r[0] == 1.0);  // candidate 0: key 0 dominates by exp(-2000) = 0 in FP64
  CHECK(r[1] == 3.0);  // candidate 1: key 2
}
