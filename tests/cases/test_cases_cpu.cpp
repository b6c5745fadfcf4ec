// Public bug-report cases (docs/edge-cases.md) on the CPU backend, with the exact
// values given there (hand-derived; no oracle involved). C04 (2^31-element table) and the GPU side
// of C06 are GPU tests; C06 runs here on the CPU at B = 64. C09, C12, C13 are backward cases.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tbe/select_backend.h"
#include "tbe/host_case.h"
#include "../reference/reference_test_support.h"

using namespace tbe;

namespace {

// The CPU backends this executable may use: the reference directly, and select_backend(Cpu).
std::vector<std::unique_ptr<Backend>> cpu_backends() {
  std::vector<std::unique_ptr<Backend>> v;
  v.push_back(make_reference_backend());
  v.push_back(select_backend(BackendKind::Cpu));
  return v;
}

struct Result {
  std::vector<double> out;
  ForwardStats stats;
};

// Runs forward into a typed buffer with a sentinel element past the end, reads it back as FP64.
Result run(Backend& be, ForwardCase& c) {
  const ForwardProblem p = c.view();
  const OutputLayout L = make_output_layout(p);
  const DType ot = p.options.policy.output;
  std::vector<std::byte> buf((static_cast<std::size_t>(L.numel) + 1) * dtype_size(ot));
  store_from_double(ot, buf.data(), L.numel, -777.0);  // sentinel past the end
  Result r;
  r.stats = be.forward(p, buf.data());
  CHECK(load_as_double(ot, buf.data(), L.numel) == -777.0);
  for (std::int64_t i = 0; i < L.numel; ++i) r.out.push_back(load_as_double(ot, buf.data(), i));
  return r;
}

// One table E x D, W[r][d] = value(r, d); SUM, WARNING, FP32 output (shared test helper).
using tbe_test::one_table_case;

// Row r of a single-table case as FP64 (exact), optionally scaled.
std::vector<double> row(const ForwardCase& c, std::int64_t r, double scale = 1.0) {
  std::vector<double> v;
  for (std::int64_t d = 0; d < c.dims[0]; ++d) v.push_back(scale * c.weight(0, r, d));
  return v;
}
std::vector<double> add(std::vector<double> a, const std::vector<double>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}
std::vector<double> concat(std::initializer_list<std::vector<double>> parts) {
  std::vector<double> v;
  for (const auto& p : parts) v.insert(v.end(), p.begin(), p.end());
  return v;
}

}  // namespace

TEST_CASE("C01: bad indices (>= E, negative) are repaired to 0 and counted, FATAL names them",
          "[cases][C01]") {
  auto c = one_table_case(10, 4, 2, {3, 12, -5, 7}, {0, 2, 4},
                        [](auto r, auto d) { return 10.0 * r + d + 1; });
  for (auto& be : cpu_backends()) {
    INFO(be->name());
    const auto rr = be->repair(c.view());
    CHECK(rr.indices == std::vector<std::int64_t>{3, 0, 0, 7});
    CHECK(rr.warnings == 2);
    CHECK(rr.bad_indices == 2);
    const Result r = run(*be, c);
    CHECK(r.out == concat({add(row(c, 3), row(c, 0)), add(row(c, 0), row(c, 7))}));
    CHECK(r.out == std::vector<double>{32, 34, 36, 38, 72, 74, 76, 78});
    CHECK(r.stats.warnings == 2);
    ForwardCase fatal = c;
    fatal.options.bounds_check = BoundsCheckMode::Fatal;
    try {
      run(*be, fatal);
      FAIL("FATAL did not throw");
    } catch (const BoundsCheckError& e) {
      CHECK(e.violation().position == 1);
      CHECK(e.violation().value == 12);
      CHECK(e.violation().limit == 10);
      CHECK_THAT(e.what(), Catch::Contains("position 1") && Catch::Contains("index 12"));
    }
  }
}

TEST_CASE("C02: a decreasing offset is repaired deterministically (1 warning)", "[cases][C02]") {
  auto c = one_table_case(10, 2, 3, {1, 2, 3, 4}, {0, 3, 2, 4},
                        [](auto r, auto d) { return r + 0.25 * d; });
  for (auto& be : cpu_backends()) {
    INFO(be->name());
    CHECK(be->repair(c.view()).offsets == std::vector<std::int64_t>{0, 3, 3, 4});
    const Result first = run(*be, c);
    const auto expect =
        concat({add(add(row(c, 1), row(c, 2)), row(c, 3)), {0.0, 0.0}, row(c, 4)});
    CHECK(first.out == expect);
    CHECK(first.out == std::vector<double>{6, 6.75, 0, 0, 4, 4.25});
    CHECK(first.stats.warnings == 1);
    for (int rep = 0; rep < 5; ++rep) {  // every run, bit for bit
      const Result again = run(*be, c);
      CHECK(again.out == first.out);
      CHECK(again.stats.warnings == 1);
    }
  }
}

TEST_CASE("C03: no lookups -> zeros of shape (B, ΣD), no error", "[cases][C03]") {
  ForwardCase c;
  c.set_tables(DType::F32, {16, 16}, {8, 8});
  c.feature_table_map = {0, 1};
  c.batch_size = 2;
  c.index_dtype = DType::I32;
  c.offsets = {0, 0, 0, 0, 0};
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  for (auto& be : cpu_backends()) {
    for (auto mode : {BoundsCheckMode::Fatal, BoundsCheckMode::Warning, BoundsCheckMode::None}) {
      for (auto pool : {PoolingMode::Sum, PoolingMode::Mean}) {
        c.options.bounds_check = mode;
        c.options.pooling = pool;
        const Result r = run(*be, c);
        CHECK(r.out == std::vector<double>(32, 0.0));  // [2, 16]
        for (double v : r.out) CHECK_FALSE(std::signbit(v));
        CHECK(r.stats.warnings == 0);
      }
    }
  }
}

TEST_CASE("C05: permuted feature_table_map uses each feature's own table size", "[cases][C05]") {
  ForwardCase c;
  c.set_tables(DType::F32, {8, 4}, {4, 4});
  for (int t = 0; t < 2; ++t)
    for (int r = 0; r < (t ? 4 : 8); ++r)
      for (int d = 0; d < 4; ++d) c.set_weight(t, r, d, 100 * t + 10 * r + d);
  c.feature_table_map = {1, 0};
  c.batch_size = 1;
  c.indices = {3, 7};
  c.offsets = {0, 1, 2};
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  for (auto& be : cpu_backends()) {
    for (auto mode : {BoundsCheckMode::Fatal, BoundsCheckMode::Warning}) {
      c.options.bounds_check = mode;
      const Result r = run(*be, c);
      // [W_1[3] | W_0[7]]
      CHECK(r.out == std::vector<double>{130, 131, 132, 133, 70, 71, 72, 73});
      CHECK(r.stats.warnings == 0);
    }
  }
}

TEST_CASE("C06 (CPU): wide rows D in {1280, 1536, 2048}, bags of one index", "[cases][C06]") {
  auto be = make_reference_backend();
  for (DType dt : {DType::F32, DType::F16}) {
    for (std::int32_t D : {1280, 1536, 2048}) {
      const std::int64_t B = 64;
      std::vector<std::int64_t> idx, off = {0};
      for (std::int64_t b = 0; b < B; ++b) {
        idx.push_back(b % 64);
        off.push_back(b + 1);
      }
      // Distinct integers per (r, d), exact in FP16 (|v| <= 1024).
      auto c = one_table_case(64, D, B, idx, off,
                            [](auto r, auto d) { return double((r * 131 + d * 7) % 2049) - 1024; }, dt);
      INFO(to_string(dt) << " D=" << D);
      const Result r = run(*be, c);
      REQUIRE(r.out.size() == static_cast<std::size_t>(B * D));
      bool all_equal = true;
      for (std::int64_t b = 0; b < B; ++b)
        for (std::int64_t d = 0; d < D; ++d)
          all_equal = all_equal && r.out[b * D + d] == c.weight(0, b % 64, d);
      CHECK(all_equal);
    }
  }
}

TEST_CASE("C07: offsets of length 8 for T=2, B=4 -> error naming 8 and T·B+1, nothing written",
          "[cases][C07]") {
  ForwardCase c;
  c.set_tables(DType::F32, {10, 10}, {4, 4});
  c.feature_table_map = {0, 1};
  c.batch_size = 4;
  c.indices = {1, 2, 3, 4, 5, 6, 7};
  c.offsets = {0, 1, 2, 3, 4, 5, 6, 7};
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  for (auto& be : cpu_backends()) {
    std::vector<float> out(32, 5.0f);
    try {
      be->forward(c.view(), out.data());
      FAIL("no error");
    } catch (const InvalidArgument& e) {
      CHECK(e.argument() == "offsets");
      CHECK(std::string(e.what()) == "offsets: length 8 != T·B + 1 = 9 (T=2, B=4)");
    }
    CHECK(out == std::vector<float>(32, 5.0f));
    CHECK_THROWS_AS(be->repair(c.view()), InvalidArgument);
  }
}

TEST_CASE("C08: VBE batch sizes totalling 6 bags with 5 bags of offsets -> error naming both",
          "[cases][C08]") {
  ForwardCase c;
  c.set_tables(DType::F32, {10, 10}, {4, 4});
  c.feature_table_map = {0, 1};
  c.vbe_ranks = 2;
  c.vbe_batch_sizes = {1, 2, 2, 1};
  c.indices = {1, 2, 3, 4, 5};
  c.offsets = {0, 1, 2, 3, 4, 5};
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  for (auto& be : cpu_backends()) {
    std::vector<float> out(64, 5.0f);
    try {
      be->forward(c.view(), out.data());
      FAIL("no error");
    } catch (const InvalidArgument& e) {
      CHECK(e.argument() == "vbe_batch_sizes");
      CHECK_THAT(e.what(), Catch::Contains("total bags 6") &&
                               Catch::Contains("len(offsets) - 1 = 5"));
    }
    CHECK(out == std::vector<float>(64, 5.0f));
  }
}

TEST_CASE("C10: FP16 weights accumulate beyond FP16 precision", "[cases][C10]") {
  auto c = one_table_case(2, 4, 1, {0, 1}, {0, 2},
                        [](auto r, auto) { return r == 0 ? 1.0 : 0x1p-11; }, DType::F16);
  for (auto& be : cpu_backends()) {
    CHECK(run(*be, c).out == std::vector<double>(4, 1.00048828125));
    std::vector<std::int64_t> ones(3000, 0);
    auto c2 = one_table_case(2, 4, 1, ones, {0, 3000}, [](auto, auto) { return 1.0; }, DType::F16);
    CHECK(run(*be, c2).out == std::vector<double>(4, 3000.0));
  }
}

TEST_CASE("C11: MEAN with empty bags gives exact zeros, never NaN", "[cases][C11]") {
  auto c = one_table_case(5, 3, 5, {0, 1, 2, 3, 4}, {0, 1, 1, 3, 3, 5},
                        [](auto r, auto d) { return 3.0 * r + d; });
  for (auto& be : cpu_backends()) {
    c.options.pooling = PoolingMode::Sum;
    CHECK(run(*be, c).out ==
          std::vector<double>{0, 1, 2, 0, 0, 0, 9, 11, 13, 0, 0, 0, 21, 23, 25});
    c.options.pooling = PoolingMode::Mean;
    const Result m = run(*be, c);
    CHECK(m.out ==
          std::vector<double>{0, 1, 2, 0, 0, 0, 4.5, 5.5, 6.5, 0, 0, 0, 10.5, 11.5, 12.5});
    for (double v : m.out) CHECK_FALSE(std::isnan(v));
  }
}

TEST_CASE("C14: trailing indices -> last offset repaired to N (1 warning), FATAL errors",
          "[cases][C14]") {
  auto c = one_table_case(32, 4, 2, {10, 11, 20, 5, 5, 5}, {0, 2, 3},
                        [](auto r, auto d) { return r + 0.5 * d; });
  for (auto& be : cpu_backends()) {
    INFO(be->name());
    const auto rr = be->repair(c.view());
    CHECK(rr.offsets == std::vector<std::int64_t>{0, 2, 6});
    CHECK(rr.bad_last_offset == 1);
    const Result r = run(*be, c);
    CHECK(r.out == concat({add(row(c, 10), row(c, 11)), add(row(c, 20), row(c, 5, 3.0))}));
    CHECK(r.out == std::vector<double>{21, 22, 23, 24, 35, 37, 39, 41});
    CHECK(r.stats.warnings == 1);
    ForwardCase fatal = c;
    fatal.options.bounds_check = BoundsCheckMode::Fatal;
    try {
      run(*be, fatal);
      FAIL("FATAL did not throw");
    } catch (const BoundsCheckError& e) {
      CHECK(e.violation().kind == BoundsViolation::Kind::LastOffset);
      CHECK(e.violation().value == 3);
      CHECK(e.violation().limit == 6);
    }
  }
}
