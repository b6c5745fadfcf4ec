// The explicit case builder (tbe/case_builder.h): bags laid out feature-major into offsets, the
// leading indices, VBE geometry, raw offsets, per-sample weights, offset faults, the fill order and
// rounding, build_lookups leaving the tables alone, and errors for inconsistent specs.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "tbe/case_builder.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/precision.h"

using namespace tbe;

namespace {

// T = 2 features over 2 tables (3 x 2 and 4 x 1), B = 2: bags [0, 2], [], [1], [3, 0, 1].
ForwardCaseSpec two_feature_spec() {
  ForwardCaseSpec s;
  s.weights = DType::F32;
  s.rows = {3, 4};
  s.dims = {2, 1};
  s.feature_table_map = {0, 1};
  s.batch_size = 2;
  s.bags = {{0, 2}, {}, {1}, {3, 0, 1}};
  s.options.pooling = PoolingMode::Sum;
  s.options.bounds_check = BoundsCheckMode::Fatal;
  s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  return s;
}

}  // namespace

TEST_CASE("case builder: bags become feature-major indices and offsets", "[case_builder]") {
  ForwardCaseSpec s = two_feature_spec();
  s.leading = {7, -1};  // before offsets[0]: in no bag
  s.index_dtype = DType::I32;
  const ForwardCase c = build_case(s);
  CHECK(c.indices == std::vector<std::int64_t>{7, -1, 0, 2, 1, 3, 0, 1});
  CHECK(c.offsets == std::vector<std::int64_t>{2, 4, 4, 5, 8});
  CHECK(c.batch_size == 2);
  CHECK(c.vbe_ranks == 0);
  CHECK(c.vbe_batch_sizes.empty());
  CHECK(c.index_dtype == DType::I32);
  CHECK(c.feature_table_map == std::vector<std::int32_t>{0, 1});
  CHECK(c.table_offsets == std::vector<std::int64_t>{0, 6});
  CHECK(c.weights.size() == 10 * sizeof(float));
  CHECK(c.per_sample_weights.empty());
  CHECK(c.options.bounds_check == BoundsCheckMode::Fatal);
  ForwardCase v = c;
  CHECK(validate(v.view()).ok());
}

TEST_CASE("case builder: fill runs table-major, once per element, rounded to storage",
          "[case_builder]") {
  ForwardCaseSpec s = two_feature_spec();
  s.weights = DType::F16;
  s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  std::vector<std::string> order;
  s.fill = [&](std::int64_t t, std::int64_t r, std::int64_t d) {
    order.push_back(std::to_string(t) + std::to_string(r) + std::to_string(d));
    return 1.0 + 0x1p-12 * static_cast<double>(t + r + d);  // not an FP16 value unless t+r+d even
  };
  const ForwardCase c = build_case(s);
  CHECK(order == std::vector<std::string>{"000", "001", "010", "011", "020", "021", "100", "110",
                                          "120", "130"});
  for (std::int64_t t = 0; t < 2; ++t)
    for (std::int64_t r = 0; r < c.rows[t]; ++r)
      for (std::int64_t d = 0; d < c.dims[t]; ++d)
        CHECK(c.weight(t, r, d) == round_to(DType::F16, 1.0 + 0x1p-12 * (t + r + d)));
}

TEST_CASE("case builder: VBE geometry and per-sample weights", "[case_builder]") {
  ForwardCaseSpec s = two_feature_spec();
  s.batch_size = 5;  // ignored under VBE
  s.vbe_ranks = 2;
  s.vbe_batch_sizes = {1, 0, 2, 1};  // feature 0: 1 bag, feature 1: 3 bags
  s.per_sample_weights = {1.0f, 0.5f, -2.0f, 0.25f, 3.0f, 4.0f};
  const ForwardCase c = build_case(s);
  CHECK(c.batch_size == 0);
  CHECK(c.vbe_ranks == 2);
  CHECK(c.vbe_batch_sizes == std::vector<std::int32_t>{1, 0, 2, 1});
  CHECK(c.offsets == std::vector<std::int64_t>{0, 2, 2, 3, 6});
  CHECK(c.per_sample_weights == s.per_sample_weights);
  ForwardCase v = c;
  CHECK(validate(v.view()).ok());
}

TEST_CASE("case builder: offset faults apply in order, past the last are skipped",
          "[case_builder]") {
  ForwardCaseSpec s = two_feature_spec();  // offsets 0 2 2 3 6, N = 6
  s.offset_faults = {{1, false, 5}, {-1, true, -2}, {9, false, 0}, {0, true, 1}};
  const ForwardCase c = build_case(s);
  CHECK(c.offsets == std::vector<std::int64_t>{7, 5, 2, 3, 4});
}

TEST_CASE("case builder: raw indices and offsets are taken as given", "[case_builder]") {
  ForwardCaseSpec s = two_feature_spec();
  s.bags.clear();
  s.indices = {1, 2, 3, 4};
  s.offsets = {0, 3, 2, 4};  // decreasing (a bad bag) and one offset short of T·B + 1
  const ForwardCase c = build_case(s);
  CHECK(c.indices == s.indices);
  CHECK(c.offsets == s.offsets);
}

TEST_CASE("case builder: build_lookups leaves the tables alone", "[case_builder]") {
  ForwardCase c = build_case(two_feature_spec());
  c.set_weight(1, 3, 0, 5.0);
  const std::vector<std::byte> weights = c.weights;
  ForwardCaseSpec s = two_feature_spec();
  s.rows = {1};  // ignored: only the lookups are built
  s.dims = {1};
  s.bags = {{2}, {0}, {1, 1}, {}};
  s.options.pooling = PoolingMode::Mean;
  build_lookups(s, c);
  CHECK(c.weights == weights);
  CHECK(c.rows == std::vector<std::int64_t>{3, 4});
  CHECK(c.indices == std::vector<std::int64_t>{2, 0, 1, 1});
  CHECK(c.offsets == std::vector<std::int64_t>{0, 1, 2, 4, 4});
  CHECK(c.options.pooling == PoolingMode::Mean);
}

TEST_CASE("case builder: inconsistent specs name the field", "[case_builder]") {
  auto argument_of = [](const ForwardCaseSpec& s) {
    try {
      (void)build_case(s);
    } catch (const InvalidArgument& e) {
      return e.argument();
    }
    return std::string("no error");
  };
  ForwardCaseSpec bags = two_feature_spec();
  bags.bags.pop_back();  // 3 bags for T·B = 4
  CHECK(argument_of(bags) == "bags");
  ForwardCaseSpec vbe = two_feature_spec();
  vbe.vbe_ranks = 2;
  vbe.vbe_batch_sizes = {1, 0, 2};  // T·R = 4 entries needed
  CHECK(argument_of(vbe) == "vbe_batch_sizes");
  ForwardCaseSpec psw = two_feature_spec();
  psw.per_sample_weights = {1.0f};  // N = 6
  CHECK(argument_of(psw) == "per_sample_weights");
  ForwardCaseSpec raw = two_feature_spec();
  raw.offsets = {0, 1, 1, 1, 1};  // raw offsets together with bags
  CHECK(argument_of(raw) == "offsets");
  ForwardCaseSpec dims = two_feature_spec();
  dims.dims = {2};
  CHECK(argument_of(dims) == "dims");
}
