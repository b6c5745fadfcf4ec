// The small-table histogram forward (docs/small-table.md) on the GPU: the outputs in the forward
// oracle's enclosures (points for small-integer fills), the path counters proving which bags ran
// on tensor cores, the per-feature eligibility reasons, the saved counts equal to the histogram of
// the repaired lookups, and the bounds-check repair equal to the generic path's.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include "gpu_harness.h"
#include "tbe/bounds_check.h"
#include "tbe/case_builder.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/forward.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/precision.h"
#include "tbe/rng.h"

using namespace tbe;
using namespace tbe::test;
using Mode = cuda::SmallTableTuning::Mode;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) FAIL(std::string(what) + ": " + cudaGetErrorString(e));
}

/// One forward through ForwardOp with the given small-table knobs; the saved counts (host copy)
/// when `save`.
struct SmallRun {
  std::vector<std::byte> output;
  ForwardStats stats;
  cuda::SmallTableStats small;
  std::vector<cuda::SmallTableFeature> decision;
  cuda::SmallTableCounts counts;
  std::vector<std::uint16_t> saved;   ///< [num_small][64][B_pad] FP16 bits
  std::vector<std::uint32_t> invalid; ///< [num_small]
  std::int64_t padded_bags = 0;
};

SmallRun run_small(ForwardCase& c, cuda::SmallTableTuning st, bool fused = true, bool save = false) {
  SmallRun r;
  DeviceCase dc(c);  // every pointer of the problem on the device, per-sample weights too
  const ForwardProblem& p = dc.problem;
  ForwardStrategy strategy;
  strategy.fused_bounds_check = fused;
  cuda::ForwardTuning tuning;
  tuning.small_table = st;
  cuda::ForwardOp op(p, strategy, tuning);
  r.decision = op.small_table_features();
  const std::size_t out_bytes = op.layout().numel * dtype_size(p.options.policy.output);
  cuda::DeviceBuffer out(out_bytes + kSentinelBytes);
  check(cudaMemset(out.get(), 0xff, out_bytes), "poison");
  check(cudaMemset(static_cast<char*>(out.get()) + out_bytes, 0xa5, kSentinelBytes), "sentinel");
  cuda::DeviceBuffer ws(op.workspace_bytes());
  cuda::DeviceBuffer counts(std::max<std::size_t>(1, op.small_table_counts_bytes()));
  if (save) {
    r.counts.data = counts.get();
    r.counts.bytes = op.small_table_counts_bytes();
    op.save_small_table_counts(&r.counts, 7);
  }
  op.run(out.get(), ws.get());
  r.stats = op.finish();
  r.small = op.small_table_stats();
  std::vector<std::byte> all(out_bytes + kSentinelBytes);
  check(cudaMemcpy(all.data(), out.get(), all.size(), cudaMemcpyDeviceToHost), "download");
  for (std::size_t i = out_bytes; i < all.size(); ++i) REQUIRE(all[i] == std::byte{0xa5});
  all.resize(out_bytes);
  r.output = std::move(all);
  if (save) {
    const std::int64_t n = static_cast<std::int64_t>(r.counts.features.size());
    r.padded_bags = (c.batch_size + 15) / 16 * 16;
    const std::size_t count_bytes = static_cast<std::size_t>(n) * 64 * r.padded_bags * 2;
    r.saved.resize(count_bytes / 2);
    r.invalid.resize(static_cast<std::size_t>(n));
    check(cudaMemcpy(r.saved.data(), counts.get(), count_bytes, cudaMemcpyDeviceToHost), "counts");
    const std::size_t inv_at = (count_bytes + 255) / 256 * 256;
    check(cudaMemcpy(r.invalid.data(), static_cast<char*>(counts.get()) + inv_at, n * 4,
                     cudaMemcpyDeviceToHost), "invalid flags");
  }
  return r;
}

bool has_path(const ForwardStats& s, const std::string& name) {
  return std::find(s.paths.begin(), s.paths.end(), name) != s.paths.end();
}

/// T features over tables (E_t, D_t) (feature f uses table f), B bags, bag lengths drawn in
/// [lmin, lmax] with indices uniform in [0, E) (repeated rows: E is small), FP16 weights.
ForwardCase small_case(std::vector<std::int64_t> E, std::vector<std::int32_t> D, std::int64_t B,
                       std::int64_t lmin, std::int64_t lmax, PoolingMode pooling, DType out,
                       std::uint64_t seed, DType index = DType::I64) {
  ForwardCaseSpec s;
  s.weights = DType::F16;
  s.rows = E;
  s.dims = D;
  s.batch_size = B;
  s.index_dtype = index;
  for (std::size_t f = 0; f < E.size(); ++f) s.feature_table_map.push_back(static_cast<std::int32_t>(f));
  Rng rng(seed, 1);
  for (std::size_t f = 0; f < E.size(); ++f)
    for (std::int64_t b = 0; b < B; ++b) {
      const std::int64_t L = lmin + rng.uniform_int(lmax - lmin + 1);
      std::vector<std::int64_t> bag(static_cast<std::size_t>(L));
      for (auto& i : bag) i = rng.uniform_int(E[f]);
      s.bags.push_back(std::move(bag));
    }
  s.options.pooling = pooling;
  s.options.bounds_check = BoundsCheckMode::Warning;
  s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, out);
  ForwardCase c = build_case(s);
  fill_weights(c, seed);
  return c;
}

void require_in_enclosure(ForwardCase& c, const SmallRun& r) {
  const oracle::CheckReport rep = oracle::check_forward(c.view(), r.output.data());
  INFO(rep.summary());
  REQUIRE(rep.passed());
}

/// The histogram of feature f's bag b after tbe::repair (bad index -> row 0).
std::vector<int> host_counts(const ForwardCase& c, const RepairResult& rr, std::int64_t f,
                             std::int64_t b) {
  const std::int64_t E = c.rows[c.feature_table_map[f]];
  std::vector<int> h(static_cast<std::size_t>(E), 0);
  const std::int64_t k = f * c.batch_size + b;
  for (std::int64_t p = rr.offsets[k]; p < rr.offsets[k + 1]; ++p) ++h[rr.indices[p]];
  return h;
}

float half_bits_to_float(std::uint16_t bits) {
  // FP16 -> FP32 for the exact small integers the counts are (normal numbers only)
  if (bits == 0) return 0.0f;
  const int e = (bits >> 10) & 0x1f;
  const float m = 1.0f + static_cast<float>(bits & 0x3ff) / 1024.0f;
  return std::ldexp(m, e - 15);
}

}  // namespace

TEST_CASE("small-table forward: E x D x L grid on tensor cores, in the enclosure",
          "[gpu][small_table]") {
  std::uint64_t seed = 1;
  for (const std::int64_t E : {1, 2, 63, 64})
    for (const std::int32_t D : {64, 96, 128})
      for (const PoolingMode pm : {PoolingMode::Sum, PoolingMode::Mean}) {
        const DType out = seed % 3 == 0 ? DType::F16 : (seed % 3 == 1 ? DType::F32 : DType::BF16);
        const DType index = seed % 2 ? DType::I32 : DType::I64;
        ForwardCase c = small_case({E}, {D}, 37, 64, 200, pm, out, seed++, index);
        CAPTURE(E, D, to_string(pm), to_string(out), to_string(index));
        const SmallRun r = run_small(c, {});  // Auto, measured L (mean >= 64)
        REQUIRE(r.decision.at(0).eligible);
        REQUIRE(r.small.mma_bags == 37);
        REQUIRE(r.small.direct_bags == 0);
        REQUIRE(has_path(r.stats, "forward.small_table.mma"));
        REQUIRE_FALSE(has_path(r.stats, "forward.pooled.group_per_bag"));
        require_in_enclosure(c, r);
      }
}

TEST_CASE("small-table forward: small-integer fills are exact (points)", "[gpu][small_table]") {
  for (const std::int64_t L : {64, 100, 2048, 2049, 5000}) {
    ForwardCase c = small_case({5, 64}, {96, 128}, 19, L, L, PoolingMode::Sum, DType::F32, 40 + L);
    fill_weights(c, 9, /*small_integers=*/true);
    CAPTURE(L);
    const SmallRun r = run_small(c, {});
    REQUIRE(r.small.mma_bags == 2 * 19);
    require_in_enclosure(c, r);  // every element is a point: a miscount is a failure
  }
}

TEST_CASE("small-table forward: short and empty bags are summed directly", "[gpu][small_table]") {
  ForwardCase c = small_case({48}, {96}, 50, 0, 63, PoolingMode::Mean, DType::F32, 77);
  cuda::SmallTableTuning force;
  force.mode = Mode::Force;
  const SmallRun r = run_small(c, force);
  REQUIRE(r.decision.at(0).eligible);
  REQUIRE(r.small.direct_bags == 50);
  REQUIRE(r.small.mma_bags == 0);
  REQUIRE(has_path(r.stats, "forward.small_table.direct"));
  require_in_enclosure(c, r);
  // Auto with the measured mean L (< 64) leaves the feature on the generic path, with a reason
  const SmallRun g = run_small(c, {});
  REQUIRE_FALSE(g.decision.at(0).eligible);
  REQUIRE(g.decision.at(0).reason.find("expected L") != std::string::npos);
  REQUIRE(g.small.mma_bags + g.small.direct_bags == 0);
  require_in_enclosure(c, g);
}

TEST_CASE("small-table forward: mixed eligible and ineligible features in one call",
          "[gpu][small_table]") {
  // f0 eligible, f1 E = 65, f2 D = 32, f3 eligible (D = 72: a D tail inside the last n-tile),
  // f4 D = 130
  ForwardCase c = small_case({48, 65, 10, 3, 20}, {96, 64, 32, 72, 130}, 40, 60, 140,
                             PoolingMode::Sum, DType::F16, 5);
  const SmallRun r = run_small(c, {});
  REQUIRE(r.decision.at(0).eligible);
  REQUIRE(r.decision.at(1).reason == "feature 1: E = 65 exceeds 64");
  REQUIRE(r.decision.at(2).reason == "feature 2: D = 32 is outside [64, 128]");
  REQUIRE(r.decision.at(3).eligible);
  REQUIRE(r.decision.at(4).reason == "feature 4: D = 130 is outside [64, 128]");
  REQUIRE(r.small.mma_bags + r.small.direct_bags == 2 * 40);
  REQUIRE(has_path(r.stats, "forward.small_table"));
  REQUIRE(has_path(r.stats, "forward.pooled.group_per_bag"));
  require_in_enclosure(c, r);
  // and the whole call without the path: bitwise the same for the ineligible features' columns
  cuda::SmallTableTuning off;
  off.mode = Mode::Off;
  const SmallRun g = run_small(c, off);
  REQUIRE(g.decision.at(0).reason == "feature 0: the small-table path is off (SmallTableTuning::Mode::Off)");
  require_in_enclosure(c, g);
}

TEST_CASE("small-table forward: ineligible problems name the reason", "[gpu][small_table]") {
  ForwardCase c = small_case({48}, {96}, 8, 64, 64, PoolingMode::Sum, DType::F32, 3);
  c.per_sample_weights.assign(c.indices.size(), 0.5f);
  SmallRun r = run_small(c, {});
  REQUIRE(r.decision.at(0).reason == "feature 0: per-sample weights (the path counts unweighted lookups)");
  REQUIRE(r.small.mma_bags + r.small.direct_bags == 0);
  require_in_enclosure(c, r);  // the generic path read the uploaded per-sample weights
  c.per_sample_weights.clear();
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  c.options.policy.accumulation = DType::F64;
  r = run_small(c, {});
  REQUIRE(r.decision.at(0).reason == "feature 0: options.policy.accumulation is fp64, not fp32");
  require_in_enclosure(c, r);
}

TEST_CASE("small-table forward: saved counts equal the histogram of the repaired lookups",
          "[gpu][small_table]") {
  // bag lengths up to 2049 with E = 1 (a count of 2049: not exact in FP16 -> invalid flag) and
  // E = 2 (counts <= 2048 stay valid even in a bag of 2049 lookups: only the counts matter)
  for (const std::int64_t E : {1, 2, 48}) {
    for (const std::int64_t L : {64, 2048, 2049}) {
      ForwardCase c = small_case({E}, {64}, 21, L, L, PoolingMode::Sum, DType::F32, 100 + L + E);
      if (E == 2)  // at most 2048 lookups of each row
        for (std::int64_t b = 0; b < 21; ++b)
          for (std::int64_t p = c.offsets[b]; p < c.offsets[b + 1]; ++p)
            c.indices[p] = (p - c.offsets[b]) < 1100 ? 0 : 1;
      CAPTURE(E, L);
      const SmallRun r = run_small(c, {}, true, true);
      REQUIRE(r.counts.written);
      REQUIRE(r.counts.batch == 7);
      REQUIRE(r.counts.features == std::vector<std::int32_t>{0});
      const RepairResult rr = repair(c.view());
      bool over = false;
      for (std::int64_t b = 0; b < r.padded_bags; ++b) {
        const std::vector<int> h = b < 21 ? host_counts(c, rr, 0, b) : std::vector<int>(E, 0);
        for (std::int64_t e = 0; e < E; ++e) {
          over = over || h[e] > 2048;
          if (h[e] <= 2048)
            REQUIRE(half_bits_to_float(r.saved[e * r.padded_bags + b]) == static_cast<float>(h[e]));
        }
      }
      REQUIRE(r.invalid.at(0) == (over ? 1u : 0u));
      REQUIRE(over == (E == 1 && L == 2049));
      require_in_enclosure(c, r);
    }
  }
}

TEST_CASE("small-table forward: malformed input repaired exactly as the generic path",
          "[gpu][small_table][bounds]") {
  for (const bool fused : {true, false})
    for (const BoundsCheckMode mode : {BoundsCheckMode::Warning, BoundsCheckMode::Ignore}) {
      ForwardCase c = small_case({40, 300}, {80, 16}, 33, 60, 90, PoolingMode::Mean, DType::F32, 11);
      c.options.bounds_check = mode;
      c.indices[5] = -1;    // bad indices -> row 0
      c.indices[70] = 40;   // E of feature 0
      c.indices[200] = 1000;
      c.offsets[3] = c.offsets[4] + 7;  // a bag with start > end (bags 2 and 3 repaired)
      c.offsets[10] = -4;
      c.offsets.back() = 5;             // wrong last offset
      cuda::SmallTableTuning force;
      force.mode = Mode::Force;
      CAPTURE(fused, to_string(mode));
      const SmallRun r = run_small(c, force, fused, true);
      const SmallRun g = run_small(c, cuda::SmallTableTuning{Mode::Off, 0}, fused);
      REQUIRE(r.small.mma_bags > 0);
      REQUIRE(r.stats.warnings == repair(c.view()).warnings);
      REQUIRE(r.stats.warnings == g.stats.warnings);
      require_in_enclosure(c, r);
      const RepairResult rr = repair(c.view());
      for (std::int64_t b = 0; b < 33; ++b) {
        const std::vector<int> h = host_counts(c, rr, 0, b);
        for (std::int64_t e = 0; e < 40; ++e)
          REQUIRE(half_bits_to_float(r.saved[e * r.padded_bags + b]) == static_cast<float>(h[e]));
      }
    }
}

TEST_CASE("small-table forward: FATAL reports the first offender and writes nothing",
          "[gpu][small_table][bounds]") {
  ForwardCase c = small_case({40}, {64}, 20, 64, 64, PoolingMode::Sum, DType::F32, 12);
  c.options.bounds_check = BoundsCheckMode::Fatal;
  c.indices[300] = 40;
  cuda::SmallTableTuning force;
  force.mode = Mode::Force;
  REQUIRE_THROWS_AS(run_small(c, force), BoundsCheckError);
  const Outcome gpu = run_gpu(c, true);  // the harness: poison intact, same offender as the reference
  const Outcome ref = run_reference(c);
  REQUIRE(gpu.kind == Outcome::Kind::BoundsCheck);
  REQUIRE(gpu.poison_intact);
  REQUIRE(gpu.violation == ref.violation);
}

TEST_CASE("small-table forward: a non-finite table row poisons only the bags that use it",
          "[gpu][small_table]") {
  ForwardCase c = small_case({16}, {64}, 40, 64, 64, PoolingMode::Sum, DType::F32, 13);
  c.set_weight(0, 3, 5, std::numeric_limits<double>::infinity());
  for (std::int64_t b = 0; b < 40; b += 2)  // even bags never look up row 3
    for (std::int64_t p = c.offsets[b]; p < c.offsets[b + 1]; ++p)
      if (c.indices[p] == 3) c.indices[p] = 4;
  const SmallRun r = run_small(c, {});
  REQUIRE(r.small.direct_bags == 40);  // the tile holds an Inf: every bag is summed directly
  require_in_enclosure(c, r);
}
