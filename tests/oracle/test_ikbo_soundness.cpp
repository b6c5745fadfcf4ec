// IKBO oracle soundness: CPU emulations of conforming kernels (every order/blocking, RNE and
// truncating accumulators, every LCE rounding policy; FA-style attention with key blocks of
// 16, 64, 128 and all keys, ascending and descending, P rounded or not, l of rounded or FP32 P)
// never land outside the enclosures; nor does the reference itself.
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include "ikbo_test_support.h"
#include "tbe/oracle/ikbo_emulation.h"
#include "tbe/oracle/ikbo_oracle.h"

using namespace ikbo_test;
using namespace tbe::oracle;

namespace {

std::vector<double> as_double(DType st, const std::vector<std::byte>& out) {
  std::vector<double> v(out.size() / dtype_size(st));
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = load_as_double(st, out.data(), static_cast<std::int64_t>(i));
  return v;
}

}  // namespace

TEST_CASE("ikbo lce oracle is sound for conforming emulations and the reference",
          "[ikbo][oracle][soundness]") {
  rc::prop("no escapes", []() {
    const LceSpec s = *gen_lce_spec();
    RC_TAG(to_string(s.map), to_string(s.policy.lce_rounding));
    const LceCase c = build(s);
    const LceProblem p = c.view();
    const IkboEnclosures enc = compute_lce_enclosures(p);
    auto out = c.make_output();
    lce_reference(p, out.data());
    const CheckReport ref = judge_lce(p, enc, as_double(s.policy.storage, out));
    RC_ASSERT(ref.passed());
    for (LceOrder order : kAllLceOrders)
      for (bool rz : {false, true})
        for (std::int64_t chunk : {std::int64_t{1}, std::int64_t{7}, std::int64_t{32}}) {
          if (order != LceOrder::Chunked && chunk != 32) continue;
          LceEmulation e;
          e.order = order;
          e.truncate = rz;
          e.chunk = chunk;
          const CheckReport r = judge_lce(p, enc, emulate_lce(p, e));
          if (!r.passed()) RC_FAIL(to_string(e) + ": " + r.summary());
        }
  });
}

TEST_CASE("ikbo lce oracle is sound on cancelling sums of the named shape's depth",
          "[ikbo][oracle][soundness]") {
  // K_c = 866, K_u = 1178 (ikbo-lce) with few elements: long reductions, heavy cancellation.
  for (DType st : {DType::F16, DType::BF16}) {
    for (auto rounding :
         {LceRounding::Published, LceRounding::RoundOnce, LceRounding::UserRounded}) {
      for (std::uint64_t seed = 1; seed <= 3; ++seed) {
        LceCase c = make_lce_case({3, 2, 2, 3, 866, 1178}, {st, DType::F32, rounding},
                                  MapKind::Unsorted, seed);
        const LceProblem p = c.view();
        const IkboEnclosures enc = compute_lce_enclosures(p);
        for (LceOrder order : kAllLceOrders)
          for (bool rz : {false, true}) {
            LceEmulation e;
            e.order = order;
            e.truncate = rz;
            e.chunk = 64;
            const CheckReport r = judge_lce(p, enc, emulate_lce(p, e));
            INFO(to_string(e) << " " << r.summary());
            CHECK(r.passed());
          }
      }
    }
  }
}

TEST_CASE("ikbo attention oracle is sound for FA-style emulations and the reference",
          "[ikbo][oracle][soundness]") {
  rc::prop("no escapes", []() {
    const AttentionSpec s = *gen_attention_spec();
    RC_TAG(s.shape.jagged ? "jagged" : "dense", to_string(s.policy.storage));
    const AttentionCase c = build(s);
    const AttentionProblem p = c.view();
    const IkboEnclosures enc = compute_attention_enclosures(p);
    auto out = c.make_output();
    attention_reference(p, out.data());
    const CheckReport ref = judge_attention(p, enc, as_double(s.policy.storage, out));
    RC_ASSERT(ref.passed());
    for (std::int64_t block : {16, 64, 128, 1 << 20})
      for (bool desc : {false, true})
        for (int variant = 0; variant < 3; ++variant) {
          AttentionEmulation e;
          e.block = block;
          e.descending = desc;
          e.round_p = variant != 2;
          e.l_from_rounded_p = variant == 1;
          e.truncate = desc && variant == 0;
          const CheckReport r = judge_attention(p, enc, emulate_attention(p, e));
          if (!r.passed()) RC_FAIL(to_string(e) + ": " + r.summary());
        }
  });
}

TEST_CASE("ikbo attention oracle is sound with peaked logits and many rescalings",
          "[ikbo][oracle][soundness]") {
  // Large scale: logits spread over tens of units, increasing keys force a rescale per block.
  for (DType st : {DType::F16, DType::BF16}) {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      AttentionShape sh = dense_shape(2, 1, 2, 1, 16, 300);
      sh.scale = seed % 2 ? 2.0 : 0.25;
      AttentionCase c = make_attention_case(sh, {st, DType::F32, {}}, MapKind::OneUser, seed);
      // Key j = (j / 300)·q-ish direction: increasing logits along j.
      for (std::int64_t j = 0; j < 300; ++j)
        for (std::int64_t d = 0; d < 16; ++d)
          store_from_double(st, c.k.data(), j * 16 + d,
                            (d % 2 ? 1.0 : -1.0) * static_cast<double>(j) / 300.0);
      for (std::int64_t i = 0; i < 4 * 16; ++i)
        store_from_double(st, c.q.data(), i, i % 2 ? 1.0 : -1.0);
      const AttentionProblem p = c.view();
      const IkboEnclosures enc = compute_attention_enclosures(p);
      for (std::int64_t block : {1, 16, 64, 128, 300})
        for (bool desc : {false, true})
          for (bool rz : {false, true}) {
            AttentionEmulation e;
            e.block = block;
            e.descending = desc;
            e.truncate = rz;
            const CheckReport r = judge_attention(p, enc, emulate_attention(p, e));
            INFO(to_string(e) << " " << r.summary());
            CHECK(r.passed());
          }
    }
  }
}
