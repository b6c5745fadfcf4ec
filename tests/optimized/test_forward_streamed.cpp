// The streamed pooled gather (ForwardTuning::staged_rows, kernels/pooled_gather_streamed.cuh): a
// warp streams the lookups of 32 consecutive bags through a shared-memory ring across bag
// boundaries. What can go wrong there: a warp's bags spanning two features (another table, D and
// output segment), empty bags at a warp's start, end or everywhere, bags longer than an index tile
// or the ring, the per-sample weight of a position read after its tile moved on, MEAN's L, a bad
// index or a repaired offset inside the stream, the last warp of a launch, VBE segments, int32
// indices, lanes past D. Every case must give the bits of the group-per-bag kernel, inside the
// oracle's enclosures, and the plan must say which kernel ran.
#include <algorithm>

#include <catch2/catch.hpp>

#include "gpu_harness.h"
#include "tbe/bounds_check.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/precision.h"

using namespace tbe;
using namespace tbe::test;

namespace {

/// Three tables (E = 61, 50, 73; D = D0, D1, D0) and T = 4 features (the fourth shares table 0);
/// B bags per feature (default 45; or VBE: ranks of 7 and 38 bags), so warps of 32 bags straddle
/// features. Bag lengths by pattern: 0 all empty; 1 cycling 0, 1, 3, 40, 0, 0, 70, (b·5) mod 9;
/// 2 every bag empty except the last one of each feature. With `bad`, one index is past E (and,
/// with int64 indices, one is 2^32 + 3 and one -2^32: their low 32 bits are in range), one offset
/// decreases and the first offset is -3 (pattern 1; WARNING repairs all of them).
ForwardCase streamed_case(DType w, std::int32_t D0, std::int32_t D1, PoolingMode pooling,
                          bool weighted, bool bad, bool vbe, int pattern, DType index,
                          std::int64_t B = 45) {
  ForwardCase c;
  c.set_tables(w, {61, 50, 73}, {D0, D1, D0});
  c.feature_table_map = {0, 1, 2, 0};
  c.index_dtype = index;
  c.options.pooling = pooling;
  c.options.bounds_check = BoundsCheckMode::Warning;
  c.options.policy = make_policy(PolicyKind::SeedDefault, w, DType::F32);
  for (std::int64_t t = 0; t < 3; ++t)
    for (std::int64_t r = 0; r < c.rows[t]; ++r)
      for (std::int32_t d = 0; d < c.dims[t]; ++d)
        c.set_weight(t, r, d, static_cast<double>((r * 13 + d * 7 + t * 5) % 29) - 14.0 + 0.125 * d);
  std::int64_t bags = 0;
  if (vbe) {
    c.vbe_ranks = 2;
    c.vbe_batch_sizes = {7, 38, 7, 38, 7, 38, 7, 38};
    bags = 4 * 45;
  } else {
    c.batch_size = B;
    bags = 4 * B;
  }
  const std::int64_t per_feature = vbe ? 45 : B;
  const std::int64_t cycle[] = {0, 1, 3, 40, 0, 0, 70};
  c.offsets = {0};
  for (std::int64_t k = 0; k < bags; ++k) {
    const std::int64_t f = k / per_feature, b = k % per_feature;
    std::int64_t L = 0;
    if (pattern == 1) L = b % 8 < 7 ? cycle[b % 8] : (b * 5) % 9;
    if (pattern == 2) L = b == per_feature - 1 ? 37 : 0;
    const std::int64_t E = c.rows[c.feature_table_map[f]];
    for (std::int64_t i = 0; i < L; ++i) c.indices.push_back((k * 31 + i * 17) % E);
    c.offsets.push_back(static_cast<std::int64_t>(c.indices.size()));
  }
  if (weighted)
    for (std::size_t i = 0; i < c.indices.size(); ++i)
      c.per_sample_weights.push_back(static_cast<float>(i % 7) * 0.5f - 1.25f);
  if (bad && !c.indices.empty()) {
    c.indices[c.indices.size() / 2] = 10'000;  // past every table's E
    c.indices[c.indices.size() / 5] = -5;      // negative (sign-extended from int32 too)
    if (index == DType::I64) {
      c.indices[c.indices.size() / 3] = (std::int64_t{1} << 32) + 3;
      c.indices[c.indices.size() / 4] = -(std::int64_t{1} << 32);
    }
    if (pattern == 1) {
      c.offsets[50] = c.offsets[49] - 1;  // decreasing offset
      c.offsets[0] = -3;                  // bag 0's start moves to 0
    }
  }
  return c;
}

/// The oracle's verdict on output o of case c (CHECK, with the report's summary on failure).
void check_in_enclosure(ForwardCase& c, const Outcome& o) {
  const oracle::CheckReport report = oracle::check_forward(c.view(), o.output.data());
  INFO(report.summary());
  CHECK(report.passed());
}

bool has_path(const Outcome& o, const std::string& path) {
  return std::find(o.stats.paths.begin(), o.stats.paths.end(), path) != o.stats.paths.end();
}

/// The group-per-bag kernel for every launch (the comparisons' base, whatever Auto's threshold).
cuda::ForwardTuning group_per_bag() {
  cuda::ForwardTuning t;
  t.staged_rows = 0;
  return t;
}

}  // namespace

TEST_CASE("streamed gather: same bits as the group-per-bag kernel across bag, warp and feature "
          "boundaries",
          "[gpu][forward][streamed]") {
  struct Types {
    DType w;
    PolicyKind policy;
    std::int32_t D0, D1;  // both take a whole warp per bag on the vector path
  };
  const Types types[] = {{DType::F32, PolicyKind::SeedDefault, 128, 96},
                         {DType::F32, PolicyKind::FbgemmCuda, 128, 68},
                         {DType::F16, PolicyKind::SeedDefault, 256, 136}};
  for (const Types& ty : types)
    for (int pattern : {0, 1, 2})
      for (PoolingMode pooling : {PoolingMode::Sum, PoolingMode::Mean})
        for (bool weighted : {false, true})
          for (bool bad : {false, true})
            for (bool vbe : {false, true}) {
              const DType index = (pattern + weighted + vbe) % 2 == 0 ? DType::I64 : DType::I32;
              ForwardCase c = streamed_case(ty.w, ty.D0, ty.D1, pooling, weighted, bad, vbe,
                                            pattern, index);
              c.options.policy = make_policy(ty.policy, ty.w, DType::F32);
              INFO("w=" << to_string(ty.w) << " policy=" << to_string(c.options.policy)
                        << " D=" << ty.D0 << "/" << ty.D1 << " pattern=" << pattern
                        << " pooling=" << to_string(pooling) << " weighted=" << weighted
                        << " malformed=" << bad << " vbe=" << vbe << " index=" << to_string(index));
              const std::int64_t expected_warnings = repair(c.view()).warnings;
              std::optional<Outcome> base;
              for (int staged : {0, 8, 16}) {
                for (int per_warp : {32, 5, 1, 0}) {
                  if (staged == 0 && per_warp != 32) continue;
                  const bool rows32 = per_warp % 2 == 0;
                  cuda::ForwardTuning tuning;
                  tuning.staged_rows = staged;
                  tuning.staged_bags_per_warp = per_warp;
                  tuning.row_index32 = rows32;
                  const bool fused = staged != 8 || per_warp != 5;
                  INFO(describe_gpu(fused, tuning));
                  const Outcome g = run_gpu(c, fused, tuning);
                  REQUIRE(g.kind == Outcome::Kind::Ok);
                  CHECK(g.sentinels_intact);
                  CHECK(g.stats.warnings == expected_warnings);
                  CHECK(has_path(g, "forward.pooled.streamed") == (staged != 0));
                  CHECK(has_path(g, "forward.pooled.group_per_bag") == (staged == 0));
                  check_in_enclosure(c, g);
                  if (!base) base = g;
                  else CHECK(count_bit_differences(*base, g) == 0);
                }
              }
            }
}

TEST_CASE("streamed gather: launches it cannot take keep the group-per-bag kernel",
          "[gpu][forward][streamed]") {
  // D = 64 (FP32: 16 lanes per bag), D = 160 (FP32: column chunks), odd D (scalar path), and
  // FP16 at D = 128 (16 lanes): the tuning asks for the ring, the plan runs the other kernel; the
  // mixed call streams only its whole-warp features.
  struct Shape {
    DType w;
    std::int32_t D0, D1;
    bool streamed, other;
  };
  // (128 / 160: one launch of G = 32 merges a chunked feature with unchunked ones: not streamed)
  const Shape shapes[] = {{DType::F32, 64, 64, false, true},   {DType::F32, 160, 160, false, true},
                          {DType::F32, 127, 127, false, true}, {DType::F16, 128, 128, false, true},
                          {DType::F32, 128, 64, true, true},   {DType::F32, 128, 160, false, true}};
  for (const Shape& sh : shapes) {
    ForwardCase c = streamed_case(sh.w, sh.D0, sh.D1, PoolingMode::Sum, true, false, false, 1,
                                  DType::I64);
    INFO("w=" << to_string(sh.w) << " D=" << sh.D0 << "/" << sh.D1);
    cuda::ForwardTuning tuning;
    tuning.staged_rows = 16;
    const Outcome g = run_gpu(c, true, tuning);
    REQUIRE(g.kind == Outcome::Kind::Ok);
    CHECK(has_path(g, "forward.pooled.streamed") == sh.streamed);
    CHECK(has_path(g, "forward.pooled.group_per_bag") == sh.other);
    if (sh.streamed) {  // else both runs are the group-per-bag kernel: only the paths say anything
      const Outcome base = run_gpu(c, true, group_per_bag());
      REQUIRE(base.kind == Outcome::Kind::Ok);
      CHECK(count_bit_differences(base, g) == 0);
    }
    check_in_enclosure(c, g);
  }
}

TEST_CASE("streamed gather: launches of many blocks, bags per warp forced and chosen",
          "[gpu][forward][streamed]") {
  // B = 7000 bags per feature: 28000 bags, 110 blocks at 32 bags per warp, 875 at 4; chosen
  // (0): 2 per warp on a 132-SM H100 / H200 (28000 / (132 SMs · 24 warps · 4 waves)).
  for (DType index : {DType::I64, DType::I32})
    for (bool weighted : {false, true}) {
      ForwardCase c = streamed_case(DType::F32, 128, 96, PoolingMode::Mean, weighted, true, false,
                                    1, index, 7000);
      INFO("index=" << to_string(index) << " weighted=" << weighted);
      const std::int64_t expected_warnings = repair(c.view()).warnings;
      const Outcome base = run_gpu(c, true, group_per_bag());
      REQUIRE(base.kind == Outcome::Kind::Ok);
      CHECK(base.stats.warnings == expected_warnings);
      for (int staged : {8, 16})
        for (int per_warp : {32, 4, 0}) {
          cuda::ForwardTuning tuning;
          tuning.staged_rows = staged;
          tuning.staged_bags_per_warp = per_warp;
          INFO(describe_gpu(true, tuning));
          const Outcome g = run_gpu(c, true, tuning);
          REQUIRE(g.kind == Outcome::Kind::Ok);
          CHECK(g.sentinels_intact);
          CHECK(g.stats.warnings == expected_warnings);
          CHECK(has_path(g, "forward.pooled.streamed"));
          CHECK(count_bit_differences(base, g) == 0);
        }
      check_in_enclosure(c, base);
    }
}

TEST_CASE("forward launches over several streams: same bits, forked from and joined to the "
          "caller's stream",
          "[gpu][forward][streams]") {
  // D = 128 / 64 / 128 / 128: three pooled launches (features 0, 1, 2-3: the group size changes
  // at feature 1). Every stream count gives the one-stream bits and warnings (read after
  // finish(), which synchronizes only the caller's stream: the join must order the side
  // streams' launches before it); the path names the streams only when more than one runs.
  for (bool fused : {true, false})
    for (PoolingMode pooling : {PoolingMode::Sum, PoolingMode::Mean}) {
      ForwardCase c = streamed_case(DType::F32, 128, 64, pooling, true, true, false, 1, DType::I64, 700);
      INFO("fused=" << fused << " pooling=" << to_string(pooling));
      cuda::ForwardTuning one;
      one.launch_streams = 1;
      one.merge_launches = false;  // three launches (merged, they would be one)
      const Outcome base = run_gpu(c, fused, one);
      REQUIRE(base.kind == Outcome::Kind::Ok);
      CHECK_FALSE(has_path(base, "forward.launch_streams"));
      check_in_enclosure(c, base);
      for (int streams : {2, 3, 8}) {
        cuda::ForwardTuning tuning = one;
        tuning.launch_streams = streams;
        INFO(describe_gpu(fused, tuning));
        const Outcome g = run_gpu(c, fused, tuning);
        REQUIRE(g.kind == Outcome::Kind::Ok);
        CHECK(g.sentinels_intact);
        CHECK(g.stats.warnings == base.stats.warnings);
        CHECK(has_path(g, "forward.launch_streams"));
        CHECK(count_bit_differences(base, g) == 0);
      }
    }
}

namespace {
/// T features over 5 tables of D = 4, 8, 64, 128, 16 (FP32 vector path: group sizes 1, 2, 16,
/// 32, 4; FP16: D = 4 on the narrow 8-byte path (scalar with narrow_vectors off), the rest 1, 8,
/// 16, 2), feature f on table f mod 5, so no two neighbours share a launch: T pooled launches, T
/// spans once merged (T = 40: 40 FP32 spans, more than one ballot step; FP16: 32 vector spans
/// and 8 narrow). B bags per feature
/// (or VBE: ranks of 3 and B - 3 bags), lengths cycling 0..9 with a 300 every 97th bag; one bad
/// index and one decreasing offset (WARNING repairs them).
ForwardCase mixed_group_case(DType w, std::int32_t T, std::int64_t B, PoolingMode pooling,
                             bool weighted, bool vbe) {
  ForwardCase c;
  c.set_tables(w, {40, 88, 208, 64, 8}, {4, 8, 64, 128, 16});  // E·D multiples of 8: aligned
  for (std::int32_t f = 0; f < T; ++f) c.feature_table_map.push_back(f % 5);
  c.options.pooling = pooling;
  c.options.bounds_check = BoundsCheckMode::Warning;
  c.options.policy = make_policy(PolicyKind::SeedDefault, w, DType::F32);
  for (std::int64_t t = 0; t < 5; ++t)
    for (std::int64_t r = 0; r < c.rows[t]; ++r)
      for (std::int32_t d = 0; d < c.dims[t]; ++d)
        c.set_weight(t, r, d, static_cast<double>((r * 11 + d * 5 + t * 3) % 31) - 15.0 + 0.25 * d);
  if (vbe) {
    c.vbe_ranks = 2;
    for (std::int32_t f = 0; f < T; ++f) {
      c.vbe_batch_sizes.push_back(3);
      c.vbe_batch_sizes.push_back(B - 3);
    }
  } else {
    c.batch_size = B;
  }
  c.offsets = {0};
  for (std::int64_t k = 0; k < T * B; ++k) {
    const std::int64_t E = c.rows[c.feature_table_map[k / B]];
    const std::int64_t L = k % 97 == 50 ? 300 : k % 10;
    for (std::int64_t i = 0; i < L; ++i) c.indices.push_back((k * 29 + i * 13) % E);
    c.offsets.push_back(static_cast<std::int64_t>(c.indices.size()));
  }
  if (weighted)
    for (std::size_t i = 0; i < c.indices.size(); ++i)
      c.per_sample_weights.push_back(static_cast<float>(i % 9) * 0.25f - 1.0f);
  c.indices[c.indices.size() / 3] = 100'000;  // past every table's E
  const std::size_t m = c.offsets.size() / 2;
  c.offsets[m] = c.offsets[m - 1] - 1;        // decreasing offset
  return c;
}
}  // namespace

TEST_CASE("forward: group-per-bag launches merged into one per vector path (merge_launches)",
          "[gpu][forward][merge]") {
  // Every feature its own group size, so every block boundary of the merged launch is a span
  // boundary somewhere: a block given the wrong span writes the wrong rows or none (the output
  // sentinels), a span's group size taken from its neighbour reads the wrong columns. Merged and
  // unmerged give the same bits and warnings, inside the enclosures; the plan says when it merged.
  struct Shape {
    DType w;
    std::int32_t T;
    std::int64_t B;
    PoolingMode pooling;
    bool weighted, vbe;
  };
  const Shape shapes[] = {
      {DType::F32, 40, 300, PoolingMode::Sum, false, false},  // 40 spans: two ballot steps
      {DType::F32, 7, 1000, PoolingMode::Mean, true, false},  // G = 1 spans of 4 blocks
      {DType::F16, 40, 70, PoolingMode::Sum, true, true},     // 32 vector + 8 narrow spans, VBE
      {DType::F32, 6, 1, PoolingMode::Sum, false, false},     // one bag per feature: spans of one block
  };
  for (const Shape& sh : shapes)
    for (bool fused : {true, false}) {
      ForwardCase c = mixed_group_case(sh.w, sh.T, sh.B, sh.pooling, sh.weighted, sh.vbe && sh.B > 3);
      INFO("w=" << to_string(sh.w) << " T=" << sh.T << " B=" << sh.B << " pooling="
                << to_string(sh.pooling) << " weighted=" << sh.weighted << " vbe=" << sh.vbe
                << " fused=" << fused);
      const std::int64_t expected_warnings = repair(c.view()).warnings;
      cuda::ForwardTuning apart = group_per_bag();
      apart.merge_launches = false;
      const Outcome base = run_gpu(c, fused, apart);
      REQUIRE(base.kind == Outcome::Kind::Ok);
      CHECK(base.stats.warnings == expected_warnings);
      CHECK_FALSE(has_path(base, "forward.pooled.merged_launch"));
      check_in_enclosure(c, base);
      for (int streams : {1, 4}) {
        cuda::ForwardTuning merged = group_per_bag();
        merged.launch_streams = streams;
        INFO(describe_gpu(fused, merged));
        const Outcome g = run_gpu(c, fused, merged);
        REQUIRE(g.kind == Outcome::Kind::Ok);
        CHECK(g.sentinels_intact);
        CHECK(g.stats.warnings == expected_warnings);
        CHECK(has_path(g, "forward.pooled.merged_launch"));
        CHECK(count_bit_differences(base, g) == 0);
      }
    }
}

TEST_CASE("forward: merge_launches leaves streamed, pipelined and 8-rows launches alone",
          "[gpu][forward][merge]") {
  // FP32, T = 8 (D 4, 8, 64, 128, 16, 4, 8, 64): with every G = 32 launch streamed
  // (staged_rows 8) one D = 128 launch streams and the seven others merge; with pipelined or 8
  // rows in flight the vector launches run that kernel and nothing merges (FP16 adds the narrow
  // D = 4 spans, on the group-per-bag kernel: two of them merge). Same bits as the group-per-bag kernel unmerged.
  for (DType w : {DType::F32, DType::F16}) {
    ForwardCase c = mixed_group_case(w, 8, 200, PoolingMode::Sum, false, false);
    cuda::ForwardTuning apart = group_per_bag();
    apart.merge_launches = false;
    const Outcome base = run_gpu(c, true, apart);
    REQUIRE(base.kind == Outcome::Kind::Ok);
    cuda::ForwardTuning streamed;
    streamed.staged_rows = 8;
    cuda::ForwardTuning pipelined = group_per_bag();
    pipelined.pipelined = true;
    cuda::ForwardTuning rows8 = group_per_bag();
    rows8.rows_in_flight = 8;
    for (const cuda::ForwardTuning& t : {streamed, pipelined, rows8}) {
      INFO("w=" << to_string(w) << " " << describe_gpu(true, t));
      const Outcome g = run_gpu(c, true, t);
      REQUIRE(g.kind == Outcome::Kind::Ok);
      CHECK(g.sentinels_intact);
      CHECK(count_bit_differences(base, g) == 0);
      // streamed: FP32 D = 128 (G = 32) streams; FP16 D = 128 has G = 16: every launch merges
      CHECK(has_path(g, "forward.pooled.streamed") == (t.staged_rows == 8 && w == DType::F32));
      CHECK(has_path(g, "forward.pooled.pipelined") == t.pipelined);
      // merged: the group-per-bag launches of a vector path, when two or more
      const bool vector_kept = t.pipelined || t.rows_in_flight == 8;
      CHECK(has_path(g, "forward.pooled.merged_launch") == (!vector_kept || w == DType::F16));
    }
  }
}

TEST_CASE("streamed gather: path names follow the kernel each launch runs",
          "[gpu][forward][streamed]") {
  // FP32 D = 128 (streamed) beside D = 127 (scalar path) with pipelined asked for: the scalar
  // launch runs the group-per-bag kernel, nothing runs pipelined
  ForwardCase c = streamed_case(DType::F32, 128, 127, PoolingMode::Sum, false, false, false, 1,
                                DType::I64);
  cuda::ForwardTuning tuning;
  tuning.staged_rows = 8;
  tuning.pipelined = true;
  const Outcome g = run_gpu(c, true, tuning);
  REQUIRE(g.kind == Outcome::Kind::Ok);
  CHECK(has_path(g, "forward.pooled.streamed"));
  CHECK(has_path(g, "forward.pooled.group_per_bag"));
  CHECK_FALSE(has_path(g, "forward.pooled.pipelined"));
  const Outcome base = run_gpu(c, true, group_per_bag());
  REQUIRE(base.kind == Outcome::Kind::Ok);
  CHECK(count_bit_differences(base, g) == 0);
}

TEST_CASE("streamed gather: Auto streams the launches of at least staged_auto_min_bags bags",
          "[gpu][forward][streamed]") {
  // FP32, D = 128 / 64 / 128 / 128: launches of 45 bags (feature 0, a warp per bag), 45 (feature
  // 1, 16 lanes per bag: never streamed) and 90 (features 2 and 3, a warp per bag). The threshold
  // at 90 streams the last launch, at 91 none; pipelined or 8 rows in flight keep their kernels;
  // every run gives the group-per-bag kernel's bits, inside the enclosures.
  ForwardCase c = streamed_case(DType::F32, 128, 64, PoolingMode::Mean, true, true, false, 1,
                                DType::I64);
  const Outcome base = run_gpu(c, true, group_per_bag());
  REQUIRE(base.kind == Outcome::Kind::Ok);
  check_in_enclosure(c, base);
  struct Row {
    std::int64_t min_bags;
    bool pipelined;
    int rows_in_flight;
    bool streamed;
  };
  const Row rows[] = {{0, false, 4, true},          {45, false, 4, true},  {90, false, 4, true},
                      {91, false, 4, false},        {1 << 17, false, 4, false},
                      {0, true, 4, false},          {0, false, 8, false}};
  for (const Row& r : rows) {
    cuda::ForwardTuning tuning;
    REQUIRE(tuning.staged_rows == cuda::ForwardTuning::kStagedRowsAuto);
    tuning.staged_auto_min_bags = r.min_bags;
    tuning.pipelined = r.pipelined;
    tuning.rows_in_flight = r.rows_in_flight;
    INFO(describe_gpu(true, tuning));
    const Outcome g = run_gpu(c, true, tuning);
    REQUIRE(g.kind == Outcome::Kind::Ok);
    CHECK(g.sentinels_intact);
    CHECK(g.stats.warnings == base.stats.warnings);
    CHECK(has_path(g, "forward.pooled.streamed") == r.streamed);
    CHECK(has_path(g, "forward.pooled.group_per_bag") == !r.pipelined);  // feature 1 at least
    CHECK(has_path(g, "forward.pooled.pipelined") == r.pipelined);
    CHECK(count_bit_differences(base, g) == 0);
  }
  // types the streamed kernel is not compiled for (BF16 weights) and 16-bit rows that take half a
  // warp (FP16, D = 128) stay on the group-per-bag kernel at any threshold
  for (DType w : {DType::BF16, DType::F16}) {
    ForwardCase c16 = streamed_case(w, 128, 128, PoolingMode::Sum, false, false, false, 1,
                                    DType::I32);
    cuda::ForwardTuning tuning;
    tuning.staged_auto_min_bags = 0;
    INFO("w=" << to_string(w));
    const Outcome g = run_gpu(c16, true, tuning);
    REQUIRE(g.kind == Outcome::Kind::Ok);
    CHECK_FALSE(has_path(g, "forward.pooled.streamed"));
    CHECK(has_path(g, "forward.pooled.group_per_bag"));
    check_in_enclosure(c16, g);
  }
}

namespace {
/// 16-bit tables packed back to back (element offsets 0, 20, 5140, 5536, 6624, 6660, 27660,
/// 27662): D = 4 (E = 5: the next table starts 8- but not 16-byte aligned), 128, 12 (D % 8 == 4),
/// 64 (back on a 16-byte boundary: the vector path), 3 (odd: scalar), 1000 (narrow with column
/// chunks: D > 32·4), 2 (E = 1, scalar), 8 at an offset of 2 mod 4 (rows only 4-byte aligned:
/// scalar, though D % 4 == 0). Feature f on table f mod 8 (T = 16), lengths cycling 0..6 with a
/// 200 every 41st bag, one bad index (WARNING repairs it).
ForwardCase narrow_case(DType w, PoolingMode pooling, bool weighted, bool vbe) {
  ForwardCase c;
  c.set_tables(w, {5, 40, 33, 17, 12, 21, 1, 6}, {4, 128, 12, 64, 3, 1000, 2, 8});
  const std::int32_t T = 16;
  const std::int64_t B = 37;
  for (std::int32_t f = 0; f < T; ++f) c.feature_table_map.push_back(f % 8);
  c.options.pooling = pooling;
  c.options.bounds_check = BoundsCheckMode::Warning;
  c.options.policy = make_policy(PolicyKind::SeedDefault, w, DType::F32);
  for (std::int64_t t = 0; t < 8; ++t)
    for (std::int64_t r = 0; r < c.rows[t]; ++r)
      for (std::int32_t d = 0; d < c.dims[t]; ++d)
        c.set_weight(t, r, d, static_cast<double>((r * 7 + d * 3 + t) % 29) - 14.0 + 0.125 * (d % 8));
  if (vbe) {
    c.vbe_ranks = 2;
    for (std::int32_t f = 0; f < T; ++f) {
      c.vbe_batch_sizes.push_back(5);
      c.vbe_batch_sizes.push_back(B - 5);
    }
  } else {
    c.batch_size = B;
  }
  c.offsets = {0};
  for (std::int64_t k = 0; k < T * B; ++k) {
    const std::int64_t E = c.rows[c.feature_table_map[k / B]];
    const std::int64_t L = k % 41 == 20 ? 200 : k % 7;
    for (std::int64_t i = 0; i < L; ++i) c.indices.push_back((k * 31 + i * 17) % E);
    c.offsets.push_back(static_cast<std::int64_t>(c.indices.size()));
  }
  if (weighted)
    for (std::size_t i = 0; i < c.indices.size(); ++i)
      c.per_sample_weights.push_back(static_cast<float>(i % 7) * 0.5f - 1.5f);
  c.indices[c.indices.size() / 2] = 50'000;  // past every table's E
  return c;
}
}  // namespace

TEST_CASE("forward: 8-byte vectors for 16-bit rows that 16-byte ones do not fit (narrow_vectors)",
          "[gpu][forward][narrow]") {
  // cuda::ForwardTuning::narrow_vectors: FP16/BF16 features with D % 4 == 0 whose rows are not
  // 16-byte aligned (a D = 4 table of odd E before them, or D % 8 == 4) load 4-element vectors
  // instead of one element per lane. Each column sums the same rows in the same order, so on and
  // off give the same bits; the odd-D table stays scalar; inside the enclosures.
  for (DType w : {DType::F16, DType::BF16})
    for (PoolingMode pooling : {PoolingMode::Sum, PoolingMode::Mean})
      for (bool weighted : {false, true})
        for (bool vbe : {false, true})
          for (bool fused : {true, false}) {
            ForwardCase c = narrow_case(w, pooling, weighted, vbe);
            INFO("w=" << to_string(w) << " pooling=" << to_string(pooling) << " weighted=" << weighted
                      << " vbe=" << vbe << " fused=" << fused);
            const std::int64_t expected_warnings = repair(c.view()).warnings;
            cuda::ForwardTuning off;
            off.narrow_vectors = false;
            const Outcome base = run_gpu(c, fused, off);
            REQUIRE(base.kind == Outcome::Kind::Ok);
            CHECK_FALSE(has_path(base, "forward.pooled.narrow_vec4"));
            CHECK(base.stats.warnings == expected_warnings);
            for (bool merge : {true, false}) {
              cuda::ForwardTuning on;
              on.merge_launches = merge;
              INFO(describe_gpu(fused, on));
              const Outcome g = run_gpu(c, fused, on);
              REQUIRE(g.kind == Outcome::Kind::Ok);
              CHECK(g.sentinels_intact);
              CHECK(g.stats.warnings == expected_warnings);
              CHECK(has_path(g, "forward.pooled.narrow_vec4"));
              CHECK(has_path(g, "forward.pooled.scalar"));       // D = 3
              CHECK(has_path(g, "forward.pooled.vec8"));         // D = 64
              CHECK(has_path(g, "forward.pooled.column_chunks"));  // D = 1000
              CHECK(count_bit_differences(base, g) == 0);
              if (merge) check_in_enclosure(c, g);
            }
          }
}
