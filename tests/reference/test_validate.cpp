// validate(): every rejected shape/dtype/limit names the argument, the value and the limit;
// make_output_layout() geometry on hand-derived shapes.
#include <catch2/catch.hpp>

#include <string>

#include "reference_test_support.h"
#include "tbe/problem.h"

using namespace tbe;
using namespace tbe_test;

namespace {

// T = 2 features on 2 tables (E = 10, 6; D = 4, 3), B = 2, one lookup per bag.
ForwardCase base_case() {
  ForwardCase c;
  c.set_tables(DType::F32, {10, 6}, {4, 3});
  c.feature_table_map = {0, 1};
  c.batch_size = 2;
  c.indices = {1, 2, 3, 4};
  c.offsets = {0, 1, 2, 3, 4};
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  return c;
}

// Expects validate(p) to fail with `argument`, and every fragment inside the message.
void expect_invalid(const ForwardProblem& p, const std::string& argument,
                    std::initializer_list<std::string> fragments) {
  const Status s = validate(p);
  REQUIRE_FALSE(s.ok());
  INFO(s.message);
  CHECK(s.argument == argument);
  for (const auto& f : fragments) CHECK_THAT(s.message, Catch::Contains(f));
  // The same error reaches callers of forward as InvalidArgument with argument().
  try {
    forward_reference_fp64(p);
    FAIL("forward did not throw");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == argument);
    CHECK(std::string(e.what()) == s.message);
  }
}

}  // namespace

TEST_CASE("a valid problem passes", "[validate]") {
  ForwardCase c = base_case();
  CHECK(validate(c.view()).ok());
  c.index_dtype = DType::I32;
  CHECK(validate(c.view()).ok());
}

TEST_CASE("offsets length must be T·B + 1 (C07 shape)", "[validate]") {
  ForwardCase c = base_case();
  c.batch_size = 4;  // 2 features x 4 samples need 9 offsets; 5 given
  c.offsets = {0, 1, 2, 3, 4, 4, 4, 4};
  expect_invalid(c.view(), "offsets", {"offsets: length 8 != T·B + 1 = 9 (T=2, B=4)"});
}

TEST_CASE("dtype errors name the dtype and the allowed set", "[validate]") {
  ForwardCase c = base_case();
  auto p = c.view();
  p.lookups.index_dtype = DType::F32;
  expect_invalid(p, "lookups.index_dtype", {"fp32", "int32, int64"});
  p = c.view();
  p.options.policy.weights = DType::F16;
  expect_invalid(p, "options.policy.weights", {"fp16", "fp32"});
  p = c.view();
  p.tables.dtype = DType::F64;
  p.options.policy.weights = DType::F64;
  expect_invalid(p, "tables.dtype", {"fp64", "fp32, fp16, bf16"});
  p = c.view();
  p.options.policy.output = DType::F64;
  expect_invalid(p, "options.policy.output", {"fp64"});
  p = c.view();
  p.options.policy.output = DType::I64;
  expect_invalid(p, "options.policy.output", {"int64"});
}

TEST_CASE("table shape errors name the table, the value and the limit", "[validate]") {
  ForwardCase c = base_case();
  c.dims[0] = 4096;
  expect_invalid(c.view(), "tables.dims[0]", {"tables.dims[0]: D = 4096 exceeds the limit 2048"});
  c = base_case();
  c.dims[1] = 0;
  expect_invalid(c.view(), "tables.dims[1]", {"D = 0", "minimum 1"});
  c = base_case();
  c.rows[1] = 0;
  expect_invalid(c.view(), "tables.rows[1]", {"E = 0", "minimum 1"});
  c = base_case();
  c.feature_table_map[1] = 2;
  expect_invalid(c.view(), "tables.feature_table_map[1]", {"table 2", "num_tables=2"});
  c = base_case();
  c.feature_table_map[0] = -1;
  expect_invalid(c.view(), "tables.feature_table_map[0]", {"table -1"});
  c = base_case();
  auto p = c.view();
  std::vector<std::int32_t> dims3 = {4, 3, 2};
  p.tables.dims = dims3;
  expect_invalid(p, "tables.dims", {"length 3", "= 2"});
  p = c.view();
  std::vector<std::int64_t> to1 = {0};
  p.tables.table_offsets = to1;
  expect_invalid(p, "tables.table_offsets", {"length 1", "= 2"});
  c = base_case();
  c.dims[0] = 2048;  // the limit itself is fine
  CHECK(validate(c.view()).ok());
}

TEST_CASE("lookup errors: negative sizes and null pointers", "[validate]") {
  ForwardCase c = base_case();
  auto p = c.view();
  p.lookups.batch_size = -1;
  expect_invalid(p, "lookups.batch_size", {"B = -1"});
  p = c.view();
  p.lookups.num_indices = -3;
  expect_invalid(p, "lookups.num_indices", {"N = -3"});
  p = c.view();
  p.lookups.indices = nullptr;
  expect_invalid(p, "lookups.indices", {"null", "N = 4"});
  p = c.view();
  p.lookups.offsets = nullptr;
  expect_invalid(p, "offsets", {"null", "5 entries"});
  p = c.view();
  p.tables.weights = nullptr;
  expect_invalid(p, "tables.weights", {"null"});
  // N = 0: indices may be null.
  c.indices.clear();
  c.offsets = {0, 0, 0, 0, 0};
  p = c.view();
  p.lookups.indices = nullptr;
  CHECK(validate(p).ok());
}

TEST_CASE("VBE metadata errors (C08 shape)", "[validate]") {
  ForwardCase c = base_case();
  c.vbe_ranks = 2;
  c.vbe_batch_sizes = {1, 2, 2, 1};  // 6 bags
  c.offsets = {0, 1, 2, 3, 4, 4};    // 5 bags
  expect_invalid(c.view(), "vbe_batch_sizes",
                 {"vbe_batch_sizes: total bags 6 != len(offsets) - 1 = 5"});
  c.vbe_batch_sizes = {1, 2, 2};
  expect_invalid(c.view(), "vbe_batch_sizes", {"length 3", "T·R = 4"});
  c.vbe_batch_sizes = {1, 2, -1, 3};
  expect_invalid(c.view(), "vbe_batch_sizes[2]", {"-1", "feature 1, rank 0"});
  c.vbe_batch_sizes = {1, 2, 2, 1};
  c.vbe_ranks = 0;
  expect_invalid(c.view(), "lookups.vbe_ranks", {"R = 0"});
  c = base_case();
  c.vbe_ranks = 2;  // ranks without batch sizes
  expect_invalid(c.view(), "vbe_batch_sizes", {"empty", "vbe_ranks = 2"});
}

TEST_CASE("NONE pooling needs one D and no per-sample weights", "[validate]") {
  ForwardCase c = base_case();
  c.options.pooling = PoolingMode::None;
  expect_invalid(c.view(), "options.pooling",
                 {"options.pooling: NONE needs one D for every feature (feature 1 has D=3, "
                  "feature 0 has D=4)"});
  c.feature_table_map = {0, 0};
  CHECK(validate(c.view()).ok());
  c.per_sample_weights = {1, 1, 1, 1};
  expect_invalid(c.view(), "lookups.per_sample_weights",
                 {"lookups.per_sample_weights: not allowed with pooling NONE"});
}

TEST_CASE("int32 view rejects values that do not fit, naming the position", "[validate]") {
  ForwardCase c = base_case();
  c.index_dtype = DType::I32;
  c.indices[2] = (std::int64_t{1} << 31);
  try {
    c.view();
    FAIL("no throw");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == "lookups.indices");
    CHECK_THAT(e.what(), Catch::Contains("[2]") && Catch::Contains("2147483648"));
  }
}

TEST_CASE("output layout: pooled, NONE and VBE geometry", "[validate][layout]") {
  ForwardCase c = base_case();
  auto L = make_output_layout(c.view());
  CHECK(L.num_bags == 4);
  CHECK(L.total_dim == 7);
  CHECK(L.numel == 14);  // [B=2, 4 + 3]
  CHECK(L.feature_col_offset == std::vector<std::int64_t>{0, 4, 7});
  CHECK(L.feature_bag_offset == std::vector<std::int64_t>{0, 2, 4});
  // bag k = f·B + b -> row b, columns of f
  CHECK(L.bag_output_offset(0) == 0);
  CHECK(L.bag_output_offset(1) == 7);
  CHECK(L.bag_output_offset(2) == 4);
  CHECK(L.bag_output_offset(3) == 11);
  CHECK(L.feature_of_bag(3) == 1);

  // VBE: T=2, R=2, batch sizes [[1, 2], [0, 3]]; D = 4, 3.
  c.vbe_ranks = 2;
  c.vbe_batch_sizes = {1, 2, 0, 3};
  c.offsets = {0, 1, 1, 2, 2, 3, 4};
  c.indices = {1, 2, 3, 4};
  L = make_output_layout(c.view());
  REQUIRE(validate(c.view()).ok());
  CHECK(L.num_bags == 6);
  CHECK(L.feature_bag_offset == std::vector<std::int64_t>{0, 3, 6});
  CHECK(L.vbe_bag_offset == std::vector<std::int64_t>{0, 1, 3, 3});
  // rank 0: f0 1x4 at 0, f1 0x3 at 4; rank 1: f0 2x4 at 4, f1 3x3 at 12; total 21
  CHECK(L.vbe_output_offset == std::vector<std::int64_t>{0, 4, 4, 12});
  CHECK(L.numel == 21);
  CHECK(L.bag_output_offset(0) == 0);   // f0 r0 s0
  CHECK(L.bag_output_offset(1) == 4);   // f0 r1 s0
  CHECK(L.bag_output_offset(2) == 8);   // f0 r1 s1
  CHECK(L.bag_output_offset(3) == 12);  // f1 r1 s0 (rank 0 of f1 is empty)
  CHECK(L.bag_output_offset(5) == 18);
  CHECK(L.feature_of_bag(3) == 1);

  // NONE: [N, D]
  c = base_case();
  c.feature_table_map = {0, 0};
  c.options.pooling = PoolingMode::None;
  L = make_output_layout(c.view());
  CHECK(L.total_dim == 4);
  CHECK(L.numel == 16);
}
