// IKBO validation: every rejected argument is named with its value and limit, both through
// validate() and through the reference/backends (InvalidArgument, output untouched).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "ikbo_test_support.h"

using namespace ikbo_test;

namespace {

LceCase lce_base() {
  return make_lce_case({4, 3, 2, 3, 5, 6}, {DType::F16, DType::F32, LceRounding::RoundOnce},
                       MapKind::Sorted, 1);
}
AttentionCase attention_base(bool jagged = false) {
  AttentionShape sh = dense_shape(4, 2, 2, 1, 4, 3);
  sh.jagged = jagged;
  if (jagged) sh.lengths = {2, 3};
  return make_attention_case(sh, {DType::BF16, DType::F32, {}}, MapKind::Sorted, 1);
}

// Both validations name `argument` with `message`, the reference backend's operator `run` throws
// the same InvalidArgument and leaves its output untouched, and the FP64 reference `fp64` throws.
template <class Problem, class Run, class Fp64>
void expect_invalid(const Problem& p, const std::string& argument, const std::string& message,
                    Run run, Fp64 fp64, const char* op) {
  Status s = validate(p);
  if (s.ok()) s = validate_map(std::span<const std::int32_t>(p.cand_to_user, p.B), p.U);
  REQUIRE_FALSE(s.ok());
  CHECK(s.argument == argument);
  CHECK(s.message == message);
  auto be = make_reference_ikbo_backend();
  std::vector<std::byte> out(4096, std::byte{0x5A});
  const auto copy = out;
  try {
    run(*be, p, out.data());
    FAIL(op << " did not throw");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == argument);
    CHECK(std::string(e.what()) == message);
  }
  CHECK(out == copy);
  CHECK_THROWS_AS(fp64(p), InvalidArgument);
}

void expect_lce_invalid(const LceProblem& p, const std::string& argument,
                        const std::string& message) {
  expect_invalid(
      p, argument, message, [](IkboBackend& be, const LceProblem& q, void* o) { be.lce(q, o); },
      [](const LceProblem& q) { return lce_reference_fp64(q); }, "lce");
}

void expect_attention_invalid(const AttentionProblem& p, const std::string& argument,
                              const std::string& message) {
  expect_invalid(
      p, argument, message,
      [](IkboBackend& be, const AttentionProblem& q, void* o) { be.attention(q, o); },
      [](const AttentionProblem& q) { return attention_reference_fp64(q); }, "attention");
}

}  // namespace

TEST_CASE("ikbo valid problems pass", "[ikbo][validate]") {
  const LceCase c = lce_base();
  CHECK(validate(c.view()).ok());
  CHECK(validate(attention_base().view()).ok());
  CHECK(validate(attention_base(true).view()).ok());
  CHECK(to_string(IkboPolicy{}) == "ikbo[storage=fp16,acc=fp32,lce=round-once]");
  CHECK(to_string(LceRounding::Published) == "published");
  CHECK(to_string(LceRounding::UserRounded) == "user-rounded");
  for (LceRounding r : {LceRounding::Published, LceRounding::RoundOnce, LceRounding::UserRounded})
    CHECK(parse_lce_rounding(to_string(r)) == r);
  try {
    parse_lce_rounding("round-twice", "--ikbo-rounding");
    FAIL("no exception");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == "--ikbo-rounding");
    CHECK(std::string(e.what()) ==
          "--ikbo-rounding: 'round-twice' is not a rounding (allowed: round-once, published, "
          "user-rounded)");
  }
}

TEST_CASE("ikbo lce validation names argument, value and limit", "[ikbo][validate]") {
  const LceCase c = lce_base();
  auto with = [&](auto edit) {
    LceProblem p = c.view();
    edit(p);
    return p;
  };
  expect_lce_invalid(with([](LceProblem& p) { p.policy.storage = DType::F64; }),
                     "lce.policy.storage",
                     "lce.policy.storage: fp64 is not a storage type (allowed: fp16, bf16, fp32)");
  expect_lce_invalid(with([](LceProblem& p) { p.policy.storage = DType::I32; }),
                     "lce.policy.storage",
                     "lce.policy.storage: int32 is not a storage type (allowed: fp16, bf16, fp32)");
  expect_lce_invalid(with([](LceProblem& p) { p.policy.accumulation = DType::F16; }),
                     "lce.policy.accumulation",
                     "lce.policy.accumulation: fp16 is not an accumulation type (allowed: fp32, "
                     "fp64)");
  expect_lce_invalid(with([](LceProblem& p) { p.B = -1; }), "lce.B", "lce.B: -1 must be >= 0");
  expect_lce_invalid(with([](LceProblem& p) { p.U = 0; }), "lce.U", "lce.U: 0 must be >= 1");
  expect_lce_invalid(with([](LceProblem& p) { p.M = 0; }), "lce.M", "lce.M: 0 must be >= 1");
  expect_lce_invalid(with([](LceProblem& p) { p.N = 0; }), "lce.N", "lce.N: 0 must be >= 1");
  expect_lce_invalid(with([](LceProblem& p) { p.K_c = 0; }), "lce.K_c", "lce.K_c: 0 must be >= 1");
  expect_lce_invalid(with([](LceProblem& p) { p.K_u = -2; }), "lce.K_u",
                     "lce.K_u: -2 must be >= 0");
  expect_lce_invalid(with([](LceProblem& p) { p.B = std::int64_t{1} << 40; p.N = 1 << 30; }),
                     "lce.B", "lce.B: B·M·N = 1099511627776·2·1073741824 overflows int64");
  expect_lce_invalid(with([](LceProblem& p) { p.w_c = nullptr; }), "lce.w_c",
                     "lce.w_c: null pointer for M·K_c = 10 elements");
  expect_lce_invalid(with([](LceProblem& p) { p.w_u = nullptr; }), "lce.w_u",
                     "lce.w_u: null pointer for M·K_u = 12 elements");
  expect_lce_invalid(with([](LceProblem& p) { p.e_c = nullptr; }), "lce.e_c",
                     "lce.e_c: null pointer for B·K_c·N = 60 elements");
  expect_lce_invalid(with([](LceProblem& p) { p.e_u = nullptr; }), "lce.e_u",
                     "lce.e_u: null pointer for U·K_u·N = 54 elements");
  expect_lce_invalid(with([](LceProblem& p) { p.cand_to_user = nullptr; }), "lce.cand_to_user",
                     "lce.cand_to_user: null pointer for B = 4 elements");
  expect_lce_invalid(
      with([](LceProblem& p) { p.policy.lce_rounding = static_cast<LceRounding>(7); }),
      "lce.policy.lce_rounding",
      "lce.policy.lce_rounding: lce_rounding(7) is not a rounding (allowed: published, "
      "round-once, user-rounded)");
  expect_lce_invalid(with([](LceProblem& p) { p.K_c = std::int64_t{1} << 62; }), "lce.K_c",
                     "lce.K_c: B·K_c·N = 4·4611686018427387904·3 overflows int64");
  // K_u = 0: the user tensors may be null.
  CHECK(validate(with([](LceProblem& p) { p.K_u = 0; p.w_u = p.e_u = nullptr; })).ok());
}

TEST_CASE("ikbo map values outside 0 to U-1 are errors, never wild reads", "[ikbo][validate]") {
  LceCase c = lce_base();
  c.cand_to_user[3] = 3;
  expect_lce_invalid(c.view(), "cand_to_user[3]", "cand_to_user[3]: 3 outside [0, U=3)");
  c.cand_to_user[3] = -1;
  expect_lce_invalid(c.view(), "cand_to_user[3]", "cand_to_user[3]: -1 outside [0, U=3)");
  c.cand_to_user[3] = std::numeric_limits<std::int32_t>::max();
  expect_lce_invalid(c.view(), "cand_to_user[3]",
                     "cand_to_user[3]: 2147483647 outside [0, U=3)");
  AttentionCase a = attention_base();
  a.cand_to_user[0] = 2;
  expect_attention_invalid(a.view(), "cand_to_user[0]", "cand_to_user[0]: 2 outside [0, U=2)");
  const std::vector<std::int32_t> m = {0};
  CHECK(validate_map(m, 0).message == "U: 0 must be >= 1");
}

TEST_CASE("ikbo null output: validate_output names out with the element count, as both "
          "references throw it before the map", "[ikbo][validate]") {
  LceCase c = lce_base();
  std::byte one{};
  CHECK(validate_output(c.view(), &one).ok());
  const Status s = validate_output(c.view(), nullptr);
  CHECK(s.argument == "out");
  CHECK(s.message == "out: null pointer for B·M·N = 24 elements");  // B = 4, M = 2, N = 3
  c.cand_to_user[3] = -1;  // a bad map too: out is reported first
  try {
    lce_reference(c.view(), nullptr);
    FAIL("no error for a null out");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()) == s.message);
  }
  const LceCase empty = make_lce_case({0, 2, 4, 5, 7, 3}, {}, MapKind::Sorted, 9);
  CHECK(validate_output(empty.view(), nullptr).ok());  // B = 0: nothing to write
  AttentionCase a = attention_base();
  CHECK(validate_output(a.view(), &one).ok());
  const Status t = validate_output(a.view(), nullptr);
  CHECK(t.argument == "out");
  CHECK(t.message == "out: null pointer for B·n_seed·H·Dh = 32 elements");
  a.cand_to_user[0] = 2;
  try {
    attention_reference(a.view(), nullptr);
    FAIL("no error for a null out");
  } catch (const InvalidArgument& e) {
    CHECK(std::string(e.what()) == t.message);
  }
}

TEST_CASE("ikbo attention validation names argument, value and limit", "[ikbo][validate]") {
  const AttentionCase c = attention_base();
  const AttentionCase j = attention_base(true);
  auto with = [](const AttentionCase& from, auto edit) {
    AttentionProblem p = from.view();
    edit(p);
    return p;
  };
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.policy.storage = DType::F64; }),
                           "attention.policy.storage",
                           "attention.policy.storage: fp64 is not a storage type (allowed: fp16, "
                           "bf16, fp32)");
  expect_attention_invalid(
      with(c, [](AttentionProblem& p) { p.policy.accumulation = DType::BF16; }),
      "attention.policy.accumulation",
      "attention.policy.accumulation: bf16 is not an accumulation type (allowed: fp32, fp64)");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.B = -3; }), "attention.B",
                           "attention.B: -3 must be >= 0");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.U = 0; }), "attention.U",
                           "attention.U: 0 must be >= 1");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.n_seed = 0; }),
                           "attention.n_seed", "attention.n_seed: 0 must be >= 1");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.H = 0; }), "attention.H",
                           "attention.H: 0 must be >= 1");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.Dh = 0; }), "attention.Dh",
                           "attention.Dh: 0 must be >= 1");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.S = 0; }), "attention.S",
                           "attention.S: 0 must be >= 1 in dense mode (k_offsets empty)");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.scale = -1.0; }),
                           "attention.scale",
                           "attention.scale: -1 must be finite and > 0 (or 0 for 1/sqrt(Dh))");
  expect_attention_invalid(
      with(c, [](AttentionProblem& p) { p.scale = std::numeric_limits<double>::infinity(); }),
      "attention.scale", "attention.scale: inf must be finite and > 0 (or 0 for 1/sqrt(Dh))");
  expect_attention_invalid(
      with(c, [](AttentionProblem& p) { p.scale = std::numeric_limits<double>::quiet_NaN(); }),
      "attention.scale", "attention.scale: nan must be finite and > 0 (or 0 for 1/sqrt(Dh))");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.q = nullptr; }), "attention.q",
                           "attention.q: null pointer for B·n_seed·H·Dh = 32 elements");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.k = nullptr; }), "attention.k",
                           "attention.k: null pointer for keys·H·Dh = 24 elements");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.v = nullptr; }), "attention.v",
                           "attention.v: null pointer for keys·H·Dh = 24 elements");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.cand_to_user = nullptr; }),
                           "attention.cand_to_user",
                           "attention.cand_to_user: null pointer for B = 4 elements");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.Dh = std::int64_t{1} << 62; }),
                           "attention.B",
                           "attention.B: B·n_seed·H·Dh = 4·2·1·4611686018427387904 overflows "
                           "int64");
  expect_attention_invalid(with(c, [](AttentionProblem& p) { p.S = std::int64_t{1} << 62; }),
                           "attention.S", "attention.S: U·S = 2·4611686018427387904 overflows int64");
  // Jagged: length U + 1, starting at 0, non-decreasing; S is ignored.
  CHECK(validate(with(j, [](AttentionProblem& p) { p.S = 0; })).ok());
  const std::vector<std::int64_t> short_offsets = {0, 2};
  expect_attention_invalid(with(j, [&](AttentionProblem& p) { p.k_offsets = short_offsets; }),
                           "attention.k_offsets",
                           "attention.k_offsets: length 2 != U + 1 = 3");
  const std::vector<std::int64_t> not_zero = {1, 2, 5};
  expect_attention_invalid(with(j, [&](AttentionProblem& p) { p.k_offsets = not_zero; }),
                           "attention.k_offsets[0]", "attention.k_offsets[0]: 1 must be 0");
  const std::vector<std::int64_t> decreasing = {0, 4, 3};
  expect_attention_invalid(with(j, [&](AttentionProblem& p) { p.k_offsets = decreasing; }),
                           "attention.k_offsets[2]",
                           "attention.k_offsets[2]: 3 < k_offsets[1] = 4 (must be "
                           "non-decreasing)");
  const std::vector<std::int64_t> empty_all = {0, 0, 0};
  CHECK(validate(with(j, [&](AttentionProblem& p) {
          p.k_offsets = empty_all;
          p.k = p.v = nullptr;  // no keys: null K/V are fine
        })).ok());
}
