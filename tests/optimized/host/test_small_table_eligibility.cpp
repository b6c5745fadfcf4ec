// The small-table path's eligibility on the host (src/small_table.cpp, docs/small-table.md): the
// reason of every ineligible feature, the structural conditions before the expected L, and the
// saved-counts layout. No device: Mode::Force and an expected-L hint never read the offsets.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "src/small_table.h"
#include "tbe/host_case.h"
#include "tbe/precision.h"

using namespace tbe;
using namespace tbe::cuda;
using Mode = SmallTableTuning::Mode;

namespace {

/// Tables (E_t, D_t), feature f on table f, B = 4, FP16 weights, unweighted SUM.
ForwardCase tables(std::vector<std::int64_t> E, std::vector<std::int32_t> D) {
  ForwardCase c;
  c.set_tables(DType::F16, E, D);
  for (std::size_t f = 0; f < E.size(); ++f) c.feature_table_map.push_back(static_cast<std::int32_t>(f));
  c.batch_size = 4;
  c.offsets.assign(E.size() * 4 + 1, 0);
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  return c;
}

std::vector<std::string> reasons(ForwardCase& c, SmallTableTuning t) {
  std::vector<std::string> r;
  for (const SmallTableFeature& d : detail::small_table_eligibility(c.view(), t)) {
    CHECK(d.eligible == d.reason.empty());
    r.push_back(d.reason);
  }
  return r;
}

}  // namespace

TEST_CASE("small-table eligibility: per-feature limits E <= 64, 64 <= D <= 128, expected L",
          "[small_table]") {
  ForwardCase c = tables({1, 64, 65, 48, 48, 48}, {64, 128, 96, 63, 129, 100});
  SmallTableTuning force{Mode::Force, 0};
  CHECK(reasons(c, force) == std::vector<std::string>{
                                 "", "", "feature 2: E = 65 exceeds 64",
                                 "feature 3: D = 63 is outside [64, 128]",
                                 "feature 4: D = 129 is outside [64, 128]", ""});
  SmallTableTuning hint{Mode::Auto, 63.5};
  const auto low = reasons(c, hint);
  CHECK(low[0] == "feature 0: expected L = 63.5 is below 64");
  CHECK(low[2] == "feature 2: E = 65 exceeds 64");  // structural reasons come first
  hint.expected_bag_length = 64;
  CHECK(reasons(c, hint)[0].empty());
  SmallTableTuning off{Mode::Off, 100};
  CHECK(reasons(c, off)[1] == "feature 1: the small-table path is off (SmallTableTuning::Mode::Off)");
}

TEST_CASE("small-table eligibility: a shared table stays generic", "[small_table]") {
  ForwardCase c = tables({48, 48}, {96, 96});
  c.feature_table_map = {0, 1, 0};
  c.offsets.assign(3 * 4 + 1, 0);
  SmallTableTuning force{Mode::Force, 0};
  CHECK(reasons(c, force) == std::vector<std::string>{
            "feature 0: table 0 is shared with feature 2 (the backward's histogram covers one feature)",
            "",
            "feature 2: table 0 is shared with feature 0 (the backward's histogram covers one feature)"});
}

TEST_CASE("small-table eligibility: call-wide conditions name the argument", "[small_table]") {
  SmallTableTuning force{Mode::Force, 0};
  ForwardCase c = tables({48}, {96});
  c.options.pooling = PoolingMode::None;
  CHECK(reasons(c, force)[0] == "feature 0: options.pooling is NONE (the path pools: SUM or MEAN)");
  c = tables({48}, {96});
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  c.options.policy.accumulation = DType::F64;
  CHECK(reasons(c, force)[0] == "feature 0: options.policy.accumulation is fp64, not fp32");
  ForwardCase w;
  w.set_tables(DType::BF16, {48}, {96});
  w.feature_table_map = {0};
  w.batch_size = 1;
  w.offsets = {0, 0};
  w.options.policy = make_policy(PolicyKind::SeedDefault, DType::BF16, DType::F32);
  CHECK(reasons(w, force)[0] == "feature 0: tables.dtype is bf16, not fp16");
  c = tables({48}, {96});
  c.indices = {1};
  c.offsets = {0, 1, 1, 1, 1};
  c.per_sample_weights = {2.0f};
  CHECK(reasons(c, force)[0] == "feature 0: per-sample weights (the path counts unweighted lookups)");
}

TEST_CASE("small-table saved counts: [64][B_pad] FP16 per feature, then the flags",
          "[small_table]") {
  CHECK(detail::small_table_padded_bags(1) == 16);
  CHECK(detail::small_table_padded_bags(16) == 16);
  CHECK(detail::small_table_padded_bags(8193) == 8208);
  CHECK(detail::small_table_counts_bytes(0, 100) == 0);
  const std::size_t counts = 2 * 64 * 8208 * 2;  // already a multiple of 256
  CHECK(detail::small_table_counts_bytes(2, 8193) == counts + 256);
  std::vector<char> buffer(counts + 256);
  const detail::CountsView v = detail::small_table_counts_view(buffer.data(), 2, 8193);
  CHECK(v.padded_bags == 8208);
  CHECK(reinterpret_cast<char*>(v.counts) == buffer.data());
  CHECK(reinterpret_cast<char*>(v.invalid) - buffer.data() == static_cast<std::ptrdiff_t>(counts));
}
