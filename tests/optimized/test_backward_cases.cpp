// Backward on the GPU: forced segment lengths around the routing threshold and the chunk size
// (counters checked), many long runs at once, the public cases C09 (exact shared-table Adagrad),
// C12 (stochastic rounding really happens), C13 (deterministic long runs), hoisted transpose,
// FATAL bounds violation.
#include <algorithm>
#include <cmath>
#include <cstring>

#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include "backward_harness.h"
#include "gpu_harness.h"
#include "tbe/cuda/backward.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/precision.h"
#include "tbe/workloads.h"

using namespace tbe;
using namespace tbe::test;

namespace {

/// The rest of a generated case once its tables, map, indices and offsets are set: I32 indices,
/// SUM, WARNING, seed-default policy with FP32 output, weights and grad_output from `seed`,
/// optimizer `opt` at lr 0.01, zero momentum.
BackwardCase finish_case(BackwardCase c, DType w, OptimizerKind opt, std::uint64_t seed) {
  ForwardCase& f = c.forward;
  f.index_dtype = DType::I32;
  f.options.pooling = PoolingMode::Sum;
  f.options.bounds_check = BoundsCheckMode::Warning;
  f.options.policy = make_policy(PolicyKind::SeedDefault, w, DType::F32);
  fill_weights(f, seed);
  c.options.optimizer.kind = opt;
  c.options.optimizer.learning_rate = 0.01;
  fill_grad_output(c, seed + 1, false);
  c.reset_momentum();
  return c;
}

/// One table E×D, bags of length L over `indices` (B = ceil(N / L) bags, the last shorter).
BackwardCase one_table_case(DType w, std::int64_t E, std::int32_t D,
                            std::vector<std::int64_t> indices, std::int64_t L,
                            OptimizerKind opt, std::uint64_t seed) {
  BackwardCase c;
  ForwardCase& f = c.forward;
  f.set_tables(w, {E}, {D});
  f.feature_table_map = {0};
  f.indices = std::move(indices);
  const std::int64_t N = static_cast<std::int64_t>(f.indices.size());
  f.offsets = {0};
  for (std::int64_t p = 0; p < N; p += L) f.offsets.push_back(std::min(N, p + L));
  f.batch_size = static_cast<std::int64_t>(f.offsets.size()) - 1;
  return finish_case(std::move(c), w, opt, seed);
}

std::vector<float> floats(const std::vector<std::byte>& b) {
  std::vector<float> v(b.size() / 4);
  std::memcpy(v.data(), b.data(), v.size() * 4);
  return v;
}

/// CHECKs that the oracle passes the outcome (its summary shown on failure).
void check_judged(BackwardCase& c, const BackwardOutcome& g) {
  const oracle::BackwardCheckReport r = judge(c, g);
  INFO(r.summary());
  CHECK(r.passed());
}

/// run_backward_gpu(c, o), then REQUIREs an Ok outcome and CHECKs the sentinels and the oracle's
/// verdict (the outcome shown on failure).
BackwardOutcome run_judged(BackwardCase& c, const BackwardRunOptions& o) {
  BackwardOutcome g = run_backward_gpu(c, o);
  INFO(to_string(g));
  REQUIRE(g.kind == BackwardOutcome::Kind::Ok);
  CHECK(g.sentinels_intact);
  check_judged(c, g);
  return g;
}

std::string paths(const BackwardStats& s) {
  std::string r;
  for (const auto& p : s.paths) r += p + " ";
  return r;
}

/// Whether the run reported `path` among its paths.
bool has_path(const BackwardOutcome& g, const std::string& path) {
  return std::find(g.stats.paths.begin(), g.stats.paths.end(), path) != g.stats.paths.end();
}

/// Row r in [0, E) repeated lookups(r) times, then shuffled (Fisher-Yates, draws from `rng`).
template <class Lookups>
std::vector<std::int64_t> shuffled_rows(std::int64_t E, Lookups lookups, Rng rng) {
  std::vector<std::int64_t> idx;
  for (std::int64_t r = 0; r < E; ++r)
    for (std::int64_t k = 0; k < lookups(r); ++k) idx.push_back(r);
  for (std::size_t i = idx.size() - 1; i > 0; --i)
    std::swap(idx[i], idx[static_cast<std::size_t>(rng.uniform_int(static_cast<std::int64_t>(i) + 1))]);
  return idx;
}

}  // namespace

TEST_CASE("backward routes runs by SL and the threshold, counters exact", "[gpu][backward][routing]") {
  // row 1: SL lookups (hot); rows 0, 2: a few lookups each (short runs)
  for (std::int64_t SL : {1, 2, 255, 256, 257, 511, 512, 4096, 125000}) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(SL), 1);
    for (int i = 0; i < 3; ++i) { idx.push_back(0); idx.push_back(2); }
    const OptimizerKind opt = SL % 2 ? OptimizerKind::ExactRowwiseAdagrad : OptimizerKind::ExactSgd;
    BackwardCase c = one_table_case(DType::F32, 4, 64, idx, 5, opt, 1000 + SL);
    for (auto mode : {BackwardStrategy::LongRuns::Fused, BackwardStrategy::LongRuns::Chunked})
      for (std::int32_t thr : {256, 257, static_cast<std::int32_t>(std::min<std::int64_t>(SL, 1 << 20))}) {
        BackwardRunOptions o;
        o.strategy.long_runs = mode;
        o.strategy.long_run_threshold = thr;
        INFO("SL " << SL << " threshold " << thr << " "
                   << (mode == BackwardStrategy::LongRuns::Fused ? "fused" : "chunked"));
        const BackwardOutcome g = run_judged(c, o);
        INFO(to_string(g));
        const BackwardPathCounters& k = g.stats.counters;
        std::int64_t exp_long = 0, exp_long_lookups = 0, exp_chunks = 0;
        for (std::int64_t sl : {std::int64_t{3}, SL, std::int64_t{3}})
          if (sl >= thr) {
            ++exp_long;
            exp_long_lookups += sl;
            exp_chunks += (sl + 255) / 256;
          }
        const std::int64_t long_runs = mode == BackwardStrategy::LongRuns::Fused ? k.fused_runs : k.chunked_runs;
        const std::int64_t long_lookups = mode == BackwardStrategy::LongRuns::Fused ? k.fused_lookups : k.chunked_lookups;
        CHECK(g.stats.runs == 3);
        CHECK(g.stats.lookups == SL + 6);
        CHECK(k.short_lookups + long_lookups == SL + 6);  // lookups sum to N
        CHECK(long_runs == exp_long);
        CHECK(long_lookups == exp_long_lookups);
        CHECK(k.short_runs == 3 - exp_long);
        CHECK(k.chunks == exp_chunks);
        if (SL == 255 && thr == 256) CHECK(k.short_lookups == 261);  // SL 255 -> short
        if (SL == 256 && thr == 256) CHECK(long_runs == 1);          // SL 256 -> long
      }
  }
}

TEST_CASE("backward with many long runs at once, odd D, runs spanning chunk boundaries", "[gpu][backward][routing]") {
  const std::int64_t E = 300;
  const std::vector<std::int64_t> idx =
      shuffled_rows(E, [](std::int64_t r) { return 300 + r % 70; }, Rng(42, 1));
  for (DType w : {DType::F32, DType::F16})
    for (std::int32_t D : {33, 128, 1000}) {
      BackwardCase c = one_table_case(w, E, D, idx, 9, OptimizerKind::ExactRowwiseAdagrad, 7 + D);
      for (auto mode : {BackwardStrategy::LongRuns::Fused, BackwardStrategy::LongRuns::Chunked})
        for (bool det : {true, false}) {
          BackwardRunOptions o;
          o.strategy.long_runs = mode;
          o.strategy.chunk_size = 64;
          o.strategy.deterministic = det;
          INFO("w " << to_string(w) << " D " << D << " det " << det);
          const BackwardOutcome g = run_judged(c, o);
          INFO(to_string(g));
          const BackwardPathCounters& k = g.stats.counters;
          CHECK(k.fused_runs + k.chunked_runs == E);
          CHECK(k.short_runs == 0);
          std::int64_t chunks = 0;
          for (std::int64_t r = 0; r < E; ++r) chunks += (300 + r % 70 + 63) / 64;
          CHECK(k.chunks == chunks);
          if (!det) continue;
          // the fixed stride (ChunkSchedule::Static) gives the same bits; at D = 1000 (block
          // groups, about one per SM) each group takes many chunks under either schedule
          BackwardRunOptions s = o;
          s.chunk_schedule = cuda::BackwardTuning::ChunkSchedule::Static;
          const BackwardOutcome gs = run_backward_gpu(c, s);
          REQUIRE(gs.kind == BackwardOutcome::Kind::Ok);
          CHECK(has_path(g, "bwd.chunk_schedule.dynamic"));
          CHECK(has_path(gs, "bwd.chunk_schedule.static"));
          CHECK(gs.weights == g.weights);
          CHECK(gs.momentum == g.momentum);
        }
    }
}

TEST_CASE("interleaved launch: short runs and long-run chunks in one launch give the separate "
          "launches' bits",
          "[gpu][backward][routing][interleaved]") {
  // cuda::BackwardTuning::RunLaunch::Interleaved: one persistent launch whose warps take long-run
  // chunks and batches of short runs from two device cursors (kernels/backward_interleaved.cu).
  // Rows with zipf-like counts (row r: max(1, 3000 / (r + 1)) lookups: 11 long runs of 272..3000
  // lookups, 3989 short runs of 1..250), shuffled. Each warp share (1: every warp starts on the
  // chunks; 2; 64: nearly all start on the short runs) must give the Separate launches' bits.
  const std::int64_t E = 4000;
  const std::vector<std::int64_t> idx = shuffled_rows(
      E, [](std::int64_t r) { return std::max<std::int64_t>(1, 3000 / (r + 1)); }, Rng(23, 1));
  using RunLaunch = cuda::BackwardTuning::RunLaunch;
  SECTION("every warp share, both long-run modes, with and without determinism") {
    for (DType w : {DType::F32, DType::F16})
      for (std::int32_t D : {33, 128}) {  // D = 33: misaligned rows (register gather), 16 lanes
        BackwardCase c = one_table_case(w, E, D, idx, 9, OptimizerKind::ExactRowwiseAdagrad, 11 + D);
        for (auto mode : {BackwardStrategy::LongRuns::Fused, BackwardStrategy::LongRuns::Chunked})
          for (bool det : {true, false}) {
            BackwardRunOptions o;
            o.strategy.long_runs = mode;
            o.strategy.deterministic = det;
            o.short_runs = cuda::BackwardTuning::ShortRuns::Staged;  // the instance it needs
            o.run_launch = RunLaunch::Separate;
            const BackwardOutcome sep = run_backward_gpu(c, o);
            REQUIRE(sep.kind == BackwardOutcome::Kind::Ok);
            CHECK(has_path(sep, "bwd.runs.separate"));
            for (std::int32_t every : {1, 2, 64}) {
              INFO("w " << to_string(w) << " D " << D << " det " << det << " every " << every);
              BackwardRunOptions i = o;
              i.run_launch = RunLaunch::Interleaved;
              i.interleave_chunk_every = every;
              const BackwardOutcome g = run_backward_gpu(c, i);
              INFO(to_string(g));
              REQUIRE(g.kind == BackwardOutcome::Kind::Ok);
              CHECK(g.sentinels_intact);
              CHECK(has_path(g, "bwd.runs.interleaved"));
              CHECK(!has_path(g, "bwd.runs.separate"));
              const BackwardPathCounters& k = g.stats.counters;
              CHECK(k.short_runs == sep.stats.counters.short_runs);
              CHECK(k.short_runs > 3900);
              CHECK(k.fused_runs + k.chunked_runs == 11);
              CHECK(k.chunks == sep.stats.counters.chunks);
              check_judged(c, g);
              if (!det) continue;  // float atomics: the order varies run to run
              CHECK(g.weights == sep.weights);
              CHECK(g.momentum == sep.momentum);
            }
          }
      }
  }
  SECTION("Auto takes one launch with the staged instance and the chunk cursor, else two") {
    BackwardCase c = one_table_case(DType::F32, E, 128, idx, 9, OptimizerKind::ExactSgd, 8);
    BackwardRunOptions o;  // Auto everywhere: N / K = 6.37 lookups per row takes the staged instance
    const BackwardOutcome one = run_backward_gpu(c, o);
    REQUIRE(one.kind == BackwardOutcome::Kind::Ok);
    CHECK(has_path(one, "bwd.short.staged"));
    CHECK(has_path(one, "bwd.runs.interleaved"));
    check_judged(c, one);
    o.chunk_schedule = cuda::BackwardTuning::ChunkSchedule::Static;
    const BackwardOutcome two = run_backward_gpu(c, o);
    REQUIRE(two.kind == BackwardOutcome::Kind::Ok);
    CHECK(has_path(two, "bwd.runs.separate"));
    CHECK(two.weights == one.weights);
    o.chunk_schedule = cuda::BackwardTuning::ChunkSchedule::Dynamic;
    o.short_runs = cuda::BackwardTuning::ShortRuns::Registers;
    const BackwardOutcome reg = run_backward_gpu(c, o);
    REQUIRE(reg.kind == BackwardOutcome::Kind::Ok);
    CHECK(has_path(reg, "bwd.runs.separate"));
    CHECK(reg.weights == one.weights);
  }
  SECTION("where the register short-run instance runs (block groups, ShortRuns::Auto) two launches run") {
    BackwardCase c = one_table_case(DType::F32, E, 1000, idx, 9, OptimizerKind::ExactSgd, 5);
    BackwardRunOptions o;
    o.run_launch = RunLaunch::Interleaved;
    const BackwardOutcome block = run_backward_gpu(c, o);  // D = 1000: block groups
    REQUIRE(block.kind == BackwardOutcome::Kind::Ok);
    CHECK(has_path(block, "bwd.group.block"));
    CHECK(has_path(block, "bwd.runs.separate"));
    check_judged(c, block);
    // E = 40000 rows for the same lookups: N / K = 0.64 < 4, so ShortRuns::Auto takes registers
    BackwardCase r = one_table_case(DType::F32, 10 * E, 128, idx, 9, OptimizerKind::ExactSgd, 6);
    const BackwardOutcome reg = run_backward_gpu(r, o);
    REQUIRE(reg.kind == BackwardOutcome::Kind::Ok);
    CHECK(has_path(reg, "bwd.short.registers"));
    CHECK(has_path(reg, "bwd.runs.separate"));
    check_judged(r, reg);
  }
  SECTION("contradictory or out-of-range tuning is named before any launch") {
    BackwardCase c = one_table_case(DType::F32, E, 128, idx, 9, OptimizerKind::ExactSgd, 7);
    BackwardRunOptions o;
    o.run_launch = RunLaunch::Interleaved;
    o.chunk_schedule = cuda::BackwardTuning::ChunkSchedule::Static;
    const BackwardOutcome a = run_backward_gpu(c, o);
    CHECK(a.kind == BackwardOutcome::Kind::InvalidArgument);
    CHECK(a.argument == "tuning.run_launch");
    CHECK(a.what.find("chunk_schedule") != std::string::npos);
    o.chunk_schedule = cuda::BackwardTuning::ChunkSchedule::Dynamic;
    o.short_runs = cuda::BackwardTuning::ShortRuns::Registers;
    const BackwardOutcome r = run_backward_gpu(c, o);
    CHECK(r.kind == BackwardOutcome::Kind::InvalidArgument);
    CHECK(r.argument == "tuning.run_launch");
    CHECK(r.what.find("short_runs = Registers") != std::string::npos);
    for (std::int32_t every : {0, 65}) {
      BackwardRunOptions e;
      e.interleave_chunk_every = every;  // checked whatever the launch
      const BackwardOutcome b = run_backward_gpu(c, e);
      INFO("every " << every);
      CHECK(b.kind == BackwardOutcome::Kind::InvalidArgument);
      CHECK(b.argument == "tuning.interleave_chunk_every");
      CHECK(b.what.find(std::to_string(every) + " is outside [1, 64]") != std::string::npos);
    }
  }
}

TEST_CASE("interleaved launch: many more runs and chunks than groups, in place, same bits as two "
          "launches",
          "[gpu][backward][routing][interleaved][large]") {
  // 600,000 rows of 2..8 lookups (37,500 batches of 16 runs) and 64 rows of 2,000 lookups (4,032
  // chunks of 32) at D = 32 (groups of 8 lanes, four per warp): every group takes many items of
  // both pools, the batch taken ahead included. In place (outputs alias the inputs), so a run or
  // a chunk applied twice, or one skipped, changes the weights.
  const std::int64_t E = 600000;
  const std::vector<std::int64_t> idx = shuffled_rows(
      E, [](std::int64_t r) { return r < 64 ? std::int64_t{2000} : 2 + r % 7; }, Rng(7, 2));
  for (DType w : {DType::F32, DType::F16}) {
    BackwardCase c = one_table_case(w, E, 32, idx, 20, OptimizerKind::ExactRowwiseAdagrad, 31);
    BackwardRunOptions o;
    o.strategy.chunk_size = 32;
    o.in_place = true;
    o.run_launch = cuda::BackwardTuning::RunLaunch::Separate;
    const BackwardOutcome sep = run_backward_gpu(c, o);
    REQUIRE(sep.kind == BackwardOutcome::Kind::Ok);
    CHECK(has_path(sep, "bwd.runs.separate"));
    CHECK(sep.stats.counters.chunks == 64 * 63);  // ceil(2000 / 32) each
    for (std::int32_t every : {1, 2}) {
      INFO("w " << to_string(w) << " every " << every);
      BackwardRunOptions i = o;
      i.run_launch = cuda::BackwardTuning::RunLaunch::Auto;
      i.interleave_chunk_every = every;
      const BackwardOutcome g = run_backward_gpu(c, i);
      REQUIRE(g.kind == BackwardOutcome::Kind::Ok);
      CHECK(has_path(g, "bwd.runs.interleaved"));
      CHECK(g.weights == sep.weights);
      CHECK(g.momentum == sep.momentum);
      if (every == 1) check_judged(c, g);
    }
  }
}

namespace {
/// Tables of the given D (E rows each), one feature per table plus features reading tables 0 and
/// 3 again (shared tables), B bags per feature: feature f looks up row r of its table
/// lookups(r) times, shuffled, spread over its B bags. Row 0 of every table is looked up.
template <class Lookups>
BackwardCase mixed_d_case(DType w, const std::vector<std::int32_t>& dims,
                          const std::vector<std::int64_t>& rows, std::int64_t B, Lookups lookups,
                          OptimizerKind opt, std::uint64_t seed) {
  BackwardCase c;
  ForwardCase& f = c.forward;
  f.set_tables(w, rows, dims);
  f.feature_table_map.clear();
  for (std::size_t t = 0; t < dims.size(); ++t) f.feature_table_map.push_back(static_cast<std::int32_t>(t));
  f.feature_table_map.push_back(0);
  f.feature_table_map.push_back(dims.size() > 3 ? 3 : 0);
  f.offsets = {0};
  for (std::size_t fi = 0; fi < f.feature_table_map.size(); ++fi) {
    const std::vector<std::int64_t> idx = shuffled_rows(rows[f.feature_table_map[fi]], lookups, Rng(seed, fi + 1));
    const auto n = static_cast<std::int64_t>(idx.size());
    const std::int64_t first = static_cast<std::int64_t>(f.indices.size());
    f.indices.insert(f.indices.end(), idx.begin(), idx.end());
    for (std::int64_t b = 1; b <= B; ++b) f.offsets.push_back(first + n * b / B);
  }
  f.batch_size = B;
  return finish_case(std::move(c), w, opt, seed);
}
template <class Lookups>
BackwardCase mixed_d_case(DType w, const std::vector<std::int32_t>& dims, std::int64_t E,
                          std::int64_t B, Lookups lookups, OptimizerKind opt, std::uint64_t seed) {
  return mixed_d_case(w, dims, std::vector<std::int64_t>(dims.size(), E), B, lookups, opt, seed);
}
}  // namespace

TEST_CASE("per-D short-run launches: every table's runs at its own group size, the widest "
          "launch's bits",
          "[gpu][backward][routing][per_dim]") {
  // cuda::BackwardTuning::ShortGroups::PerDim: a search finds each table's range of runs, then one
  // short-run launch per group size takes its tables' runs (D = 4: 1 lane, 8: 2, 64: 16, 128: 32,
  // 3: 1, 33: 16, 5: 2). Tables alternate narrow and wide groups and row 0 of every table is looked
  // up, so a range that starts one run late (or early) hands a row to a launch of the wrong group
  // size: columns left unwritten. Row r: 1 + r % 6 lookups (short runs), rows 1 and 2: 300 (long
  // runs, chunks), 1,200 rows per table.
  using ShortGroups = cuda::BackwardTuning::ShortGroups;
  const std::int64_t E = 1200;
  const auto lookups = [](std::int64_t r) { return r == 1 || r == 2 ? std::int64_t{300} : 1 + r % 6; };
  SECTION("PerDim == Auto == Widest, bitwise; both instances, both long-run modes, in place") {
    for (const std::vector<std::int32_t>& dims :
         {std::vector<std::int32_t>{4, 128, 8, 64, 4, 128}, std::vector<std::int32_t>{128, 3, 33, 5, 64, 1}})
      for (DType w : {DType::F32, DType::F16})
        for (OptimizerKind opt : {OptimizerKind::ExactSgd, OptimizerKind::ExactRowwiseAdagrad}) {
          BackwardCase c = mixed_d_case(w, dims, E, 37, lookups, opt, 101 + dims[1]);
          for (auto instance : {cuda::BackwardTuning::ShortRuns::Registers, cuda::BackwardTuning::ShortRuns::Staged})
            for (auto mode : {BackwardStrategy::LongRuns::Fused, BackwardStrategy::LongRuns::Chunked}) {
              INFO("dims[1] " << dims[1] << " w " << to_string(w) << " opt " << to_string(opt)
                              << " staged " << (instance == cuda::BackwardTuning::ShortRuns::Staged)
                              << " fused " << (mode == BackwardStrategy::LongRuns::Fused));
              BackwardRunOptions o;
              o.strategy.long_runs = mode;
              o.short_runs = instance;
              o.in_place = true;
              o.short_groups = ShortGroups::Widest;
              const BackwardOutcome wide = run_backward_gpu(c, o);
              REQUIRE(wide.kind == BackwardOutcome::Kind::Ok);
              CHECK(!has_path(wide, "bwd.short.per_dim"));
              o.short_groups = ShortGroups::PerDim;
              const BackwardOutcome per = run_judged(c, o);
              o.short_groups = ShortGroups::Auto;
              const BackwardOutcome au = run_backward_gpu(c, o);
              REQUIRE(au.kind == BackwardOutcome::Kind::Ok);
              for (const BackwardOutcome* g : {&per, &au}) {
                INFO(paths(g->stats));
                CHECK(has_path(*g, "bwd.short.per_dim"));
                CHECK(has_path(*g, "bwd.runs.separate"));  // Auto's launch with per-D groups
                CHECK(g->stats.counters.short_runs == wide.stats.counters.short_runs);
                // rows 1 and 2 of every table (a shared table's features add to the same runs)
                CHECK(g->stats.counters.fused_runs + g->stats.counters.chunked_runs == 2 * static_cast<std::int64_t>(dims.size()));
                CHECK(g->weights == wide.weights);
                CHECK(g->momentum == wide.momentum);
              }
            }
        }
  }
  SECTION("more runs than groups: every group takes runs of several tables") {
    // D = 4, 128, 4, 128 with 200,003 / 30,011 / 150,001 / 25,007 rows, each looked up once or
    // twice per feature (tables 0 and 3 read by two features): about 350 K runs at G = 1 and 55 K
    // at G = 32, several times the groups of a launch (a warp per run: 4 blocks of 8 warps per SM;
    // one lane per run: 32 times as many), in counts that are not multiples of them, so the
    // groups' share of the tables' runs wraps across table boundaries. In place.
    for (DType w : {DType::F32, DType::F16}) {
      BackwardCase c = mixed_d_case(w, {4, 128, 4, 128}, {200003, 30011, 150001, 25007}, 64,
                                    [](std::int64_t r) { return 1 + (r % 5 == 0 ? 1 : 0); },
                                    w == DType::F32 ? OptimizerKind::ExactSgd : OptimizerKind::ExactRowwiseAdagrad, 77);
      INFO("w " << to_string(w));
      BackwardRunOptions o;
      o.in_place = true;
      o.short_groups = ShortGroups::Widest;
      const BackwardOutcome wide = run_backward_gpu(c, o);
      REQUIRE(wide.kind == BackwardOutcome::Kind::Ok);
      o.short_groups = ShortGroups::PerDim;
      const BackwardOutcome per = run_judged(c, o);
      CHECK(has_path(per, "bwd.short.per_dim"));
      CHECK(per.stats.counters.short_runs == wide.stats.counters.short_runs);
      CHECK(per.stats.counters.short_runs > 400000);
      CHECK(per.weights == wide.weights);
      CHECK(per.momentum == wide.momentum);
    }
  }
  SECTION("one group size: Auto keeps one launch, PerDim forced gives its bits") {
    BackwardCase c = mixed_d_case(DType::F32, {128, 100, 128}, E, 37, lookups,
                                  OptimizerKind::ExactRowwiseAdagrad, 7);
    BackwardRunOptions o;
    const BackwardOutcome au = run_judged(c, o);
    CHECK(!has_path(au, "bwd.short.per_dim"));
    o.short_groups = ShortGroups::PerDim;
    const BackwardOutcome per = run_judged(c, o);
    CHECK(has_path(per, "bwd.short.per_dim"));
    CHECK(per.weights == au.weights);
    CHECK(per.momentum == au.momentum);
  }
  SECTION("Auto with run_launch = Interleaved keeps the one launch at the widest group") {
    BackwardCase c = mixed_d_case(DType::F32, {4, 128}, E, 37, lookups, OptimizerKind::ExactSgd, 9);
    BackwardRunOptions o;
    o.short_runs = cuda::BackwardTuning::ShortRuns::Staged;
    o.run_launch = cuda::BackwardTuning::RunLaunch::Interleaved;
    const BackwardOutcome il = run_judged(c, o);
    CHECK(has_path(il, "bwd.runs.interleaved"));
    CHECK(!has_path(il, "bwd.short.per_dim"));
    o.run_launch = cuda::BackwardTuning::RunLaunch::Auto;
    const BackwardOutcome au = run_judged(c, o);
    CHECK(has_path(au, "bwd.short.per_dim"));
    CHECK(has_path(au, "bwd.runs.separate"));
    CHECK(au.weights == il.weights);
  }
  SECTION("PerDim with the one launch, or with block groups, is named before any launch") {
    BackwardCase c = mixed_d_case(DType::F32, {4, 128}, E, 37, lookups, OptimizerKind::ExactSgd, 3);
    BackwardRunOptions o;
    o.short_groups = ShortGroups::PerDim;
    o.short_runs = cuda::BackwardTuning::ShortRuns::Staged;
    o.run_launch = cuda::BackwardTuning::RunLaunch::Interleaved;
    const BackwardOutcome a = run_backward_gpu(c, o);
    CHECK(a.kind == BackwardOutcome::Kind::InvalidArgument);
    CHECK(a.argument == "tuning.short_groups");
    CHECK(a.what.find("run_launch = Interleaved") != std::string::npos);
    BackwardCase b = mixed_d_case(DType::F32, {4, 1000}, E, 37, lookups, OptimizerKind::ExactSgd, 4);
    BackwardRunOptions p;
    p.short_groups = ShortGroups::PerDim;
    const BackwardOutcome e = run_backward_gpu(b, p);
    CHECK(e.kind == BackwardOutcome::Kind::InvalidArgument);
    CHECK(e.argument == "tuning.short_groups");
    CHECK(e.what.find("largest D is 1000") != std::string::npos);
    p.short_groups = ShortGroups::Auto;  // block groups: Auto keeps one launch
    const BackwardOutcome g = run_judged(b, p);
    CHECK(has_path(g, "bwd.group.block"));
    CHECK(!has_path(g, "bwd.short.per_dim"));
  }
}

TEST_CASE("C09 shared table, exact rowwise Adagrad on the GPU", "[gpu][backward][cases]") {
  for (bool hoisted : {false, true}) {
    BackwardCase c;
    ForwardCase& f = c.forward;
    f.set_tables(DType::F32, {4}, {2});
    f.set_weight(0, 1, 0, 1.0);
    f.set_weight(0, 1, 1, 1.0);
    f.set_weight(0, 3, 0, 7.0);
    f.feature_table_map = {0, 0};
    f.indices = {1, 1};
    f.offsets = {0, 1, 2};
    f.batch_size = 1;
    f.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
    c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
    c.options.optimizer.learning_rate = 0.5;
    c.options.optimizer.eps = 1e-8;
    c.resize_grad_output();
    for (int i = 0; i < 4; ++i) c.set_grad(i, 1.0);
    c.reset_momentum();
    BackwardRunOptions o;
    o.hoisted = hoisted;
    const BackwardOutcome g = run_backward_gpu(c, o);
    REQUIRE(g.kind == BackwardOutcome::Kind::Ok);
    const auto w = floats(g.weights);
    CHECK(w[2] == 0.5f);
    CHECK(w[3] == 0.5f);
    CHECK(g.momentum[1] == 4.0f);
    CHECK(w[6] == 7.0f);  // untouched rows
    CHECK(w[0] == 0.0f);
    CHECK(g.momentum[0] == 0.0f);
    CHECK(g.momentum[3] == 0.0f);
    CHECK(g.stats.runs == 1);
    check_judged(c, g);
  }
}

TEST_CASE("C12 stochastic rounding really happens on the GPU", "[gpu][backward][cases][sr]") {
  auto make = [](RoundingMode rm, std::uint64_t seed) {
    BackwardCase c;
    ForwardCase& f = c.forward;
    f.set_tables(DType::F16, {1024}, {4});
    for (std::int64_t r = 0; r < 1024; ++r)
      for (int d = 0; d < 4; ++d) f.set_weight(0, r, d, 1.0);
    f.feature_table_map = {0};
    for (std::int64_t r = 0; r < 1024; ++r) f.indices.push_back(r);
    for (std::int64_t r = 0; r <= 1024; ++r) f.offsets.push_back(r);
    f.batch_size = 1024;
    f.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32, rm);
    c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
    c.options.optimizer.learning_rate = 0x1p-12;
    c.options.optimizer.eps = 1e-10;
    c.options.sr_seed = seed;
    c.options.sr_offset = 3;
    c.resize_grad_output();
    for (std::int64_t i = 0; i < 4096; ++i) c.set_grad(i, -1.0);
    c.reset_momentum();
    return c;
  };
  std::vector<std::vector<std::byte>> patterns;
  for (std::uint64_t seed : {1ull, 2ull}) {
    BackwardCase c = make(RoundingMode::Stochastic, seed);
    const BackwardOutcome g = run_backward_gpu(c, {});
    REQUIRE(g.kind == BackwardOutcome::Kind::Ok);
    CHECK(paths(g.stats).find("bwd.sr") != std::string::npos);
    std::int64_t up = 0, stay = 0;
    for (std::int64_t i = 0; i < 4096; ++i) {
      const double v = load_as_double(DType::F16, g.weights.data(), i);
      if (v == 1.0 + 0x1p-10) ++up;
      else if (v == 1.0) ++stay;
    }
    CHECK(up + stay == 4096);
    const double frac = static_cast<double>(up) / 4096.0;
    INFO("fraction moved " << frac);
    CHECK(frac >= 0.22);
    CHECK(frac <= 0.28);
    check_judged(c, g);
    const BackwardProblem p = c.view();
    const oracle::BackwardEnclosures enc = oracle::compute_backward_enclosures(p);
    const oracle::StochasticRoundingTest t = oracle::stochastic_rounding_test(p, enc, g.weights.data());
    INFO(t.summary());
    CHECK(t.passed());
    patterns.push_back(g.weights);
  }
  CHECK(patterns[0] != patterns[1]);  // the pattern changes with the seed
  BackwardCase rne = make(RoundingMode::Nearest, 1);
  const BackwardOutcome g = run_backward_gpu(rne, {});
  REQUIRE(g.kind == BackwardOutcome::Kind::Ok);
  for (std::int64_t i = 0; i < 4096; ++i) CHECK(load_as_double(DType::F16, g.weights.data(), i) == 1.0);
}

TEST_CASE("C13 deterministic backward is bitwise reproducible, hoisted or not", "[gpu][backward][cases]") {
  Rng rng(13, 0);
  std::vector<std::int64_t> idx(200000);
  for (auto& i : idx) i = rng.uniform_int(4);
  BackwardCase c = one_table_case(DType::F32, 4, 64, idx, 7, OptimizerKind::ExactRowwiseAdagrad, 13);
  for (auto mode : {BackwardStrategy::LongRuns::Fused, BackwardStrategy::LongRuns::Chunked}) {
    BackwardRunOptions o;
    o.strategy.long_runs = mode;
    const BackwardOutcome first = run_backward_gpu(c, o);
    REQUIRE(first.kind == BackwardOutcome::Kind::Ok);
    check_judged(c, first);
    for (int rep = 0; rep < 2; ++rep) {
      const BackwardOutcome again = run_backward_gpu(c, o);
      CHECK(again.weights == first.weights);
      CHECK(again.momentum == first.momentum);
    }
    o.hoisted = true;
    const BackwardOutcome hoisted = run_backward_gpu(c, o);
    CHECK(paths(hoisted.stats).find("bwd.hoisted") != std::string::npos);
    CHECK(hoisted.weights == first.weights);
    CHECK(hoisted.momentum == first.momentum);
    o.hoisted = false;
    o.strategy.deterministic = false;  // float atomics: still inside the enclosures
    const BackwardOutcome nd = run_backward_gpu(c, o);
    REQUIRE(nd.kind == BackwardOutcome::Kind::Ok);
    check_judged(c, nd);
  }
}

TEST_CASE("fused long runs under contention: 1,563 arrivals per run, bitwise stable over 20 calls",
          "[gpu][backward][routing]") {
  // A litmus for the fused route's fence (docs/mutation.md: bwd_fused_fence_missing): 4 rows of
  // D = 1024 (block groups: many stores per partial before the arrival count), chunks of 32, so
  // the last of ~1,563 arrivals per run reads partials just written by other SMs. A partial read
  // before it is visible changes the result of that call only. On the H200 this test did not kill
  // that fault (3.0 s, docs/mutation.md); it stays as the fused route's determinism check under
  // contention.
  Rng rng(21, 0);
  std::vector<std::int64_t> idx(200000);
  for (auto& i : idx) i = rng.uniform_int(4);
  BackwardCase c = one_table_case(DType::F32, 4, 1024, idx, 7, OptimizerKind::ExactSgd, 21);
  BackwardRunOptions o;
  o.strategy.long_runs = BackwardStrategy::LongRuns::Fused;
  o.strategy.chunk_size = 32;
  const BackwardOutcome first = run_backward_gpu(c, o);
  REQUIRE(first.kind == BackwardOutcome::Kind::Ok);
  check_judged(c, first);
  REQUIRE(first.stats.counters.fused_runs == 4);
  int differ = 0;
  for (int rep = 0; rep < 20; ++rep) differ += run_backward_gpu(c, o).weights != first.weights;
  CHECK(differ == 0);
}

TEST_CASE("hoisted and non-hoisted backward agree bitwise on a scaled-down seed-large", "[gpu][backward][hoisted]") {
  WorkloadSpec spec = named_workload("seed-large", 64);
  spec.T = 4;
  BackwardCase c;
  c.forward = generate(spec);
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  fill_grad_output(c, 5, false);
  c.reset_momentum();
  BackwardRunOptions o;
  const BackwardOutcome plain = run_backward_gpu(c, o);
  o.hoisted = true;
  const BackwardOutcome hoisted = run_backward_gpu(c, o);
  REQUIRE(plain.kind == BackwardOutcome::Kind::Ok);
  REQUIRE(hoisted.kind == BackwardOutcome::Kind::Ok);
  CHECK(plain.weights == hoisted.weights);
  CHECK(plain.momentum == hoisted.momentum);
  check_judged(c, plain);
}

TEST_CASE("transpose keys on a scaled-down seed-large: row bits and linearized ids, 8- and 9-bit "
          "digits, positions outside every bag, same bits", "[gpu][backward][transpose_keys]") {
  // N = T · 2048 · 20 lookups: CUB's onesweep passes run (not its one-block sort). Seven positions
  // before the first bag and five after the last carry the sentinel key, which must sort after
  // every row bit pattern. T = 4 tables of 100,000 rows: K = 400,000 (19 bits: three passes
  // either way for linearized ids), rb = 17 (two 9-bit passes). T = 2 tables of 60,000 rows:
  // K = 120,000 (17 bits: two 9-bit passes), rb = 16 (two 8-bit passes). T = 2 tables of 256
  // rows: one 9-bit pass of row bits against two 8-bit passes of linearized ids. Auto takes
  // linearized ids.
  using Keys = cuda::TransposeTuning::Keys;
  struct Shape {
    std::int64_t T, E;
    bool rows_wide, linear_wide;
  };
  for (const Shape sh : {Shape{4, 100000, true, false}, Shape{2, 60000, false, true},
                         // K = 512 (10 bits: two passes), rb = 9: one 9-bit pass (odd count)
                         Shape{2, 256, true, false}}) {
    DYNAMIC_SECTION("T = " << sh.T << ", E = " << sh.E) {
      WorkloadSpec spec = named_workload("seed-large", 2048);
      spec.T = sh.T;
      spec.E = sh.E;
      BackwardCase c;
      c.forward = generate(spec);
      ForwardCase& f = c.forward;
      f.indices.insert(f.indices.begin(), {1, 2, 3, 4, 5, 6, 7});
      for (std::int64_t& o : f.offsets) o += 7;
      f.indices.insert(f.indices.end(), {8, 9, 10, 11, 12});
      c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
      fill_grad_output(c, 17, false);
      c.reset_momentum();
      BackwardRunOptions o, lin, rows, mixed;
      lin.transpose.keys = Keys::LinearIds;
      rows.transpose.keys = Keys::RowBits;
      mixed.hoisted = true;  // the backward's own keys are row bits, the hoisted ones not
      mixed.transpose.keys = Keys::RowBits;
      mixed.hoisted_transpose.keys = Keys::LinearIds;
      const BackwardOutcome a = run_backward_gpu(c, o);
      const BackwardOutcome l = run_backward_gpu(c, lin);
      const BackwardOutcome r = run_backward_gpu(c, rows);
      const BackwardOutcome m = run_backward_gpu(c, mixed);
      for (const BackwardOutcome* x : {&a, &l, &r, &m}) {
        INFO(x->what << " " << paths(x->stats));
        REQUIRE(x->kind == BackwardOutcome::Kind::Ok);
      }
      INFO(paths(a.stats));
      CHECK(has_path(a, "bwd.sort.linear_ids"));  // Auto
      CHECK(has_path(a, "bwd.sort.wide_digits") == sh.linear_wide);
      CHECK(has_path(r, "bwd.sort.row_bits"));
      CHECK(has_path(r, "bwd.sort.wide_digits") == sh.rows_wide);
      CHECK(has_path(l, "bwd.sort.linear_ids"));
      CHECK(has_path(l, "bwd.sort.wide_digits") == sh.linear_wide);
      CHECK(has_path(m, "bwd.sort.linear_ids"));
      check_judged(c, a);
      for (const BackwardOutcome* x : {&l, &r, &m}) {
        CHECK(a.weights == x->weights);
        CHECK(a.momentum == x->momentum);
        CHECK(a.stats.runs == x->stats.runs);
        CHECK(a.stats.lookups == x->stats.lookups);
      }
    }
  }
}

TEST_CASE("transpose keys: sentinel lookups among the rows (NONE, out-of-range indices), E a "
          "power of two, row bits and linearized ids give the same bits", "[gpu][backward][transpose_keys]") {
  // Bounds-check NONE with out-of-range indices (a broken promise: those lookups get no gradient)
  // puts sentinel keys between the lookups of rows 0 and E - 1 of both tables. With E = 1024 the
  // row bits are rb = 11: a sentinel whose row bits equal a row's (rb one too small, or the
  // sentinel's row bits 0) would sort into that row's lookups and split its run, and the split
  // row would get two updates from the same old value.
  const std::int64_t E = 1024, B = 1024, L = 8;
  BackwardCase c;
  ForwardCase& f = c.forward;
  f.set_tables(DType::F32, {E, E}, {64, 64});
  f.feature_table_map = {0, 1};
  Rng rng(77, 3);
  for (std::int64_t p = 0; p < 2 * B * L; ++p)
    f.indices.push_back(p % 97 == 5   ? E + 3
                        : p % 89 == 7 ? -1
                        : p % 3 == 0  ? 0
                        : p % 5 == 0  ? E - 1
                                      : rng.uniform_int(E));
  for (std::int64_t k = 0; k <= 2 * B; ++k) f.offsets.push_back(k * L);
  f.batch_size = B;
  f.index_dtype = DType::I64;
  f.options.pooling = PoolingMode::Sum;
  f.options.bounds_check = BoundsCheckMode::None;
  f.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
  fill_weights(f, 5);
  c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  c.options.optimizer.learning_rate = 0.01;
  fill_grad_output(c, 6, false);
  c.reset_momentum();
  BackwardRunOptions lin, rows;
  lin.transpose.keys = cuda::TransposeTuning::Keys::LinearIds;
  rows.transpose.keys = cuda::TransposeTuning::Keys::RowBits;
  const BackwardOutcome l = run_backward_gpu(c, lin);
  const BackwardOutcome r = run_backward_gpu(c, rows);
  REQUIRE(l.kind == BackwardOutcome::Kind::Ok);
  REQUIRE(r.kind == BackwardOutcome::Kind::Ok);
  INFO(paths(r.stats));
  CHECK(has_path(r, "bwd.sort.row_bits"));
  CHECK(has_path(l, "bwd.sort.linear_ids"));
  CHECK(r.weights == l.weights);
  CHECK(r.momentum == l.momentum);
  CHECK(r.stats.runs == l.stats.runs);
  CHECK(r.weights != c.forward.weights);  // rows 0 and E - 1 were updated
}

TEST_CASE("linearize: bags of every length across its blocks of 256 bags, empty blocks, bags "
          "longer than a block's pass, positions before the first bag", "[gpu][backward][transpose]") {
  // linearize (kernels/backward_preprocess.cu) gives each block 256 bags and each thread a lookup
  // of them, its bag found among the block's offsets in shared memory. Bags [256, 512) are all
  // empty (a block with no lookup), every 11th bag is empty, every 173rd has 1500 lookups (more
  // than the 256 · 4 a block takes per pass), the rest 1 to 9; the first 5 positions belong to no
  // bag (offsets[0] = 5 is valid and needs no repair; the last offset is N: indices past it would
  // be moved into the last bag by WARNING's repair, with a warning). Two tables of 300 rows, two
  // features: every run's lookups come from many bags and blocks. SUM (bag ids sorted) and MEAN
  // with per-sample weights (positions and scales), both keys: the oracle judges each, no warning
  // is raised, and the counters count every lookup inside a bag.
  const std::int64_t E = 300, B = 700, before = 5;
  for (PoolingMode pooling : {PoolingMode::Sum, PoolingMode::Mean})
    for (auto keys : {cuda::TransposeTuning::Keys::LinearIds, cuda::TransposeTuning::Keys::RowBits}) {
      BackwardCase c;
      ForwardCase& f = c.forward;
      f.set_tables(DType::F32, {E, E}, {33, 33});
      f.feature_table_map = {0, 1};
      Rng rng(91, pooling == PoolingMode::Mean ? 2 : 1);
      std::int64_t N = before, bags_with_lookups = 0;
      f.offsets.push_back(N);
      for (std::int64_t k = 0; k < 2 * B; ++k) {
        const std::int64_t L = k >= 256 && k < 512 ? 0 : k % 11 == 0 ? 0 : k % 173 == 5 ? 1500 : k % 9 + 1;
        N += L;
        bags_with_lookups += L > 0 ? 1 : 0;
        f.offsets.push_back(N);
      }
      for (std::int64_t p = 0; p < N; ++p) f.indices.push_back(rng.uniform_int(E));
      f.batch_size = B;
      f.index_dtype = DType::I64;
      f.options.pooling = pooling;
      f.options.bounds_check = BoundsCheckMode::Warning;
      f.options.policy = make_policy(PolicyKind::SeedDefault, DType::F32, DType::F32);
      if (pooling == PoolingMode::Mean)
        for (std::int64_t p = 0; p < N; ++p)
          f.per_sample_weights.push_back(static_cast<float>(0.25 + rng.uniform_int(8) * 0.25));
      fill_weights(f, 17);
      c.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
      c.options.optimizer.learning_rate = 0.01;
      fill_grad_output(c, 18, false);
      c.reset_momentum();
      BackwardRunOptions o;
      o.transpose.keys = keys;
      INFO((pooling == PoolingMode::Mean ? "MEAN, weighted" : "SUM") << ", "
           << (keys == cuda::TransposeTuning::Keys::RowBits ? "row bits" : "linearized ids")
           << ", N " << N << ", bags with lookups " << bags_with_lookups);
      const BackwardOutcome g = run_judged(c, o);
      INFO(to_string(g));
      const BackwardPathCounters& k = g.stats.counters;
      CHECK(g.stats.warnings == 0);
      CHECK(g.stats.lookups == N - before);  // the lookups inside bags, each counted once
      CHECK(k.short_lookups + k.fused_lookups + k.chunked_lookups == N - before);
    }
}

TEST_CASE("FATAL bounds violation: same offender, weights bitwise unchanged", "[gpu][backward][bounds]") {
  for (bool hoisted : {false, true})
    for (bool in_place : {false, true}) {
      BackwardCase c = one_table_case(DType::F32, 10, 4, {3, 12, -5, 7}, 2,
                                      OptimizerKind::ExactRowwiseAdagrad, 3);
      c.forward.options.bounds_check = BoundsCheckMode::Fatal;
      BackwardRunOptions o;
      o.hoisted = hoisted;
      o.in_place = in_place;
      const BackwardOutcome g = run_backward_gpu(c, o);
      const BackwardOutcome r = run_backward_reference(c, false);
      REQUIRE(g.kind == BackwardOutcome::Kind::BoundsCheck);
      REQUIRE(r.kind == BackwardOutcome::Kind::BoundsCheck);
      CHECK(g.violation == r.violation);
      CHECK(g.what == r.what);
      CHECK(g.weights == c.forward.weights);
      CHECK(g.momentum == c.momentum);
      CHECK(g.sentinels_intact);
    }
}

TEST_CASE("a hoisted transpose of other lookups, or one never run, is rejected", "[gpu][backward][hoisted]") {
  // two calls that differ only in their lookups
  BackwardCase a = one_table_case(DType::F32, 8, 4, {1, 2, 3, 1}, 2, OptimizerKind::ExactSgd, 1);
  BackwardCase b = one_table_case(DType::F32, 8, 4, {1, 2, 3, 1, 5, 6}, 2, OptimizerKind::ExactSgd, 2);
  auto upload = [](BackwardCase& c, std::vector<cuda::DeviceBuffer>& keep) {
    BackwardProblem p = c.view();
    const std::size_t isz = dtype_size(c.forward.index_dtype);
    keep.emplace_back(c.forward.weights.data(), c.forward.weights.size());
    p.forward.tables.weights = keep.back().get();
    keep.emplace_back(p.forward.lookups.indices, c.forward.indices.size() * isz);
    p.forward.lookups.indices = keep.back().get();
    keep.emplace_back(p.forward.lookups.offsets, c.forward.offsets.size() * isz);
    p.forward.lookups.offsets = keep.back().get();
    keep.emplace_back(c.grad_output.data(), c.grad_output.size());
    p.grad_output = keep.back().get();
    return p;
  };
  std::vector<cuda::DeviceBuffer> keep;
  keep.reserve(16);
  const BackwardProblem pa = upload(a, keep), pb = upload(b, keep);
  cuda::BackwardOp op(pa);
  cuda::TransposeOp other(pb.forward), never_run(pa.forward);
  cuda::DeviceBuffer ws(op.workspace_bytes()), tws(other.workspace_bytes()),
      out(a.forward.weights.size());
  BackwardOutputs o;
  o.weights = out.get();
  other.run(tws.get(), nullptr);
  try {
    op.run(o, ws.get(), nullptr, other.sorted());
    FAIL("a SortedLookups of other lookups was accepted");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == "hoisted");
  }
  try {
    op.run(o, ws.get(), nullptr, never_run.sorted());
    FAIL("a SortedLookups whose TransposeOp never ran was accepted");
  } catch (const InvalidArgument& e) {
    CHECK(e.argument() == "hoisted");
  }
  cudaDeviceSynchronize();
}

TEST_CASE("the one-CTA chunk order takes calls whose chunk slots fit, and refuses larger ones by name",
          "[gpu][backward][chunk_order]") {
  // max_chunks = N / chunk_size + N / long_run_threshold + 2 at the defaults (256, 256); the one-CTA
  // sort holds tuning::Preprocess::kChunkOrderOneCtaSlots (optimized/dispatch/tuning.h: 9216), so
  // N = 1,179,392 gives 9216 slots (fits) and N = 1,179,648 gives 9218 (does not)
  using ChunkOrder = cuda::BackwardTuning::ChunkOrder;
  for (const std::int64_t N : {std::int64_t{1179392}, std::int64_t{1179648}}) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(N));
    for (std::int64_t p = 0; p < N; ++p) idx[static_cast<std::size_t>(p)] = p % 8;  // runs of N / 8
    BackwardCase c = one_table_case(DType::F32, 8, 4, std::move(idx), 64, OptimizerKind::ExactSgd, 7);
    const bool fits = N / 256 + N / 256 + 2 <= 9216;
    INFO("N = " << N);
    test::BackwardRunOptions o;
    const test::BackwardOutcome a = test::run_backward_gpu(c, o);
    REQUIRE(a.kind == test::BackwardOutcome::Kind::Ok);
    CHECK(has_path(a, fits ? "bwd.chunk_order.one-cta" : "bwd.chunk_order.device-wide"));
    o.chunk_order = ChunkOrder::OneCta;
    const test::BackwardOutcome b = test::run_backward_gpu(c, o);
    if (fits) {
      REQUIRE(b.kind == test::BackwardOutcome::Kind::Ok);
      CHECK(b.weights == a.weights);
    } else {
      CHECK(b.kind == test::BackwardOutcome::Kind::InvalidArgument);
      CHECK(b.argument == "tuning.chunk_order");
      CHECK(b.what.find("9216") != std::string::npos);
    }
  }
}
