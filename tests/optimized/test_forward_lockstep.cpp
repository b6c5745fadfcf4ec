// The pooled gather's lock step (kernels/pooled_gather.cuh): the groups of one warp (G < 32, so
// several bags per warp) run their loops to the warp's longest bag with per-lane predicates, the
// last warp of a launch holds groups past the last bag, and full batches skip the predicates.
// Bags of very different lengths (empty, 1, longer than an index tile) share warps here; every
// tuning must give the same bits, inside the oracle's enclosures.
#include <catch2/catch.hpp>

#include "gpu_harness.h"
#include "tbe/bounds_check.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/precision.h"

using namespace tbe;
using namespace tbe::test;

namespace {

/// One table (E = 97 rows of D) and B = 37 bags whose lengths cycle through 0, 1, 5, 33, 300 and
/// (b·7) mod 45; with `bad`, one index of a long bag is out of range and one offset is
/// decreasing (WARNING repairs both).
ForwardCase mixed_lengths(DType w, std::int32_t D, PoolingMode pooling, bool weighted, bool bad) {
  ForwardCase c;
  c.set_tables(w, {97}, {D});
  c.feature_table_map = {0};
  c.batch_size = 37;
  c.options.pooling = pooling;
  c.options.bounds_check = BoundsCheckMode::Warning;
  c.options.policy = make_policy(PolicyKind::SeedDefault, w, DType::F32);
  for (std::int64_t r = 0; r < 97; ++r)
    for (std::int32_t d = 0; d < D; ++d) c.set_weight(0, r, d, (r * 13 + d * 7) % 29 - 14.0 + 0.25 * d);
  const std::int64_t cycle[] = {0, 1, 5, 33, 300};
  c.offsets = {0};
  for (std::int64_t b = 0; b < 37; ++b) {
    const std::int64_t L = b % 3 == 0 ? cycle[(b / 3) % 5] : (b * 7) % 45;
    for (std::int64_t i = 0; i < L; ++i) c.indices.push_back((b * 31 + i * 17) % 97);
    c.offsets.push_back(static_cast<std::int64_t>(c.indices.size()));
  }
  if (weighted)
    for (std::size_t i = 0; i < c.indices.size(); ++i)
      c.per_sample_weights.push_back(static_cast<float>(i % 7) * 0.5f - 1.0f);
  if (bad) {
    c.indices[c.offsets[12] + 100] = 97;  // bag 12 has 300 lookups: past the first tile
    c.offsets[20] = c.offsets[19] - 1;    // decreasing offset
  }
  return c;
}

}  // namespace

TEST_CASE("lock-step groups: bags of any length share a warp, same bits under every tuning",
          "[gpu][forward]") {
  for (DType w : {DType::F32, DType::F16})
    for (std::int32_t D : {4, 8, 24, 64, 136})
      for (PoolingMode pooling : {PoolingMode::Sum, PoolingMode::Mean})
        for (bool weighted : {false, true})
          for (bool bad : {false, true}) {
            ForwardCase c = mixed_lengths(w, D, pooling, weighted, bad);
            INFO("w=" << to_string(w) << " D=" << D << " pooling=" << to_string(pooling)
                      << " weighted=" << weighted << " malformed=" << bad);
            const std::int64_t expected_warnings = repair(c.view()).warnings;
            CHECK(expected_warnings == (bad ? 2 : 0));
            std::optional<Outcome> first;
            for (int variant = 0; variant < 8; ++variant) {
              cuda::ForwardTuning tuning;
              tuning.rows_in_flight = variant % 2 == 0 ? 4 : 8;
              tuning.row_index32 = variant / 2 % 2 == 0;
              tuning.pipelined = variant / 4 == 1;
              const bool fused = variant % 3 != 0;
              INFO(describe_gpu(fused, tuning));
              const Outcome g = run_gpu(c, fused, tuning);
              REQUIRE(g.kind == Outcome::Kind::Ok);
              CHECK(g.sentinels_intact);
              CHECK(g.stats.warnings == expected_warnings);
              const oracle::CheckReport report = oracle::check_forward(c.view(), g.output.data());
              INFO(report.summary());
              CHECK(report.passed());
              if (!first) first = g;
              else CHECK(count_bit_differences(*first, g) == 0);
            }
          }
}
