// The small-table histogram backward (docs/small-table.md "Backward") on the GPU: exact rowwise
// Adagrad and exact SGD from counts^T · grad_output (FP16 hi/lo split, tensor cores), RNE and SR
// write-back, saved counts on and off, the fallback of a non-representable histogram (a count of
// 2049) and of short rows to the generic path, or (every feature on the path: no sort) to the
// path's exact sums, a stale histogram rejected; every result judged by the backward oracle (and
// the SR z-test), the path counters proving which path ran.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "backward_harness.h"
#include "gpu_harness.h"
#include "tbe/case_builder.h"
#include "tbe/oracle/backward_oracle.h"
#include "tbe/precision.h"
#include "tbe/rng.h"

using namespace tbe;
using namespace tbe::test;
using Mode = cuda::SmallTableTuning::Mode;
using Sort = cuda::BackwardTuning::Sort;
using SplitK = cuda::BackwardTuning::SplitK;

namespace {

bool has_path(const BackwardStats& s, const std::string& name) {
  return std::find(s.paths.begin(), s.paths.end(), name) != s.paths.end();
}

/// Features on tables (E_t, D_t), B bags of lengths in [lmin, lmax], FP16 weights, grad_output
/// of `grad` dtype, optimizer `opt`.
BackwardCase small_backward(std::vector<std::int64_t> E, std::vector<std::int32_t> D,
                            std::int64_t B, std::int64_t lmin, std::int64_t lmax, PoolingMode pm,
                            DType grad, OptimizerKind opt, RoundingMode wb, std::uint64_t seed) {
  ForwardCaseSpec s;
  s.weights = DType::F16;
  s.rows = E;
  s.dims = D;
  s.batch_size = B;
  for (std::size_t f = 0; f < E.size(); ++f) s.feature_table_map.push_back(static_cast<std::int32_t>(f));
  Rng rng(seed, 2);
  for (std::size_t f = 0; f < E.size(); ++f)
    for (std::int64_t b = 0; b < B; ++b) {
      std::vector<std::int64_t> bag(static_cast<std::size_t>(lmin + rng.uniform_int(lmax - lmin + 1)));
      for (auto& i : bag) i = rng.uniform_int(E[f]);
      s.bags.push_back(std::move(bag));
    }
  s.options.pooling = pm;
  s.options.bounds_check = BoundsCheckMode::Warning;
  s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, grad, wb);
  BackwardCase c;
  c.forward = build_case(s);
  fill_weights(c.forward, seed);
  c.options.optimizer.kind = opt;
  c.options.optimizer.learning_rate = 0.05;
  if (opt == OptimizerKind::ExactRowwiseAdagrad) {
    c.options.optimizer.eps = 1e-6;
    c.options.optimizer.weight_decay = 0.01;
    c.options.optimizer.weight_decay_mode = WeightDecayMode::L2;
  }
  c.options.sr_seed = seed;
  c.options.sr_offset = 3;
  c.reset_momentum();
  for (std::size_t i = 0; i < c.momentum.size(); ++i) c.momentum[i] = 0.01f * static_cast<float>(i % 7);
  fill_grad_output(c, seed + 1, false);
  return c;
}

void require_judged(BackwardCase& c, const BackwardOutcome& gpu) {
  REQUIRE(gpu.kind == BackwardOutcome::Kind::Ok);
  REQUIRE(gpu.sentinels_intact);
  const oracle::BackwardCheckReport rep = judge(c, gpu);
  INFO(rep.summary());
  REQUIRE(rep.passed());
  if (c.forward.options.policy.write_back == RoundingMode::Stochastic) {
    const BackwardProblem p = c.view();
    const oracle::StochasticRoundingTest z =
        oracle::stochastic_rounding_test(p, oracle::compute_backward_enclosures(p), gpu.weights.data());
    INFO(z.summary());
    REQUIRE(z.passed());
  }
}

/// The GPU backward of `c` with the forward's saved counts (or its own histogram) and the given
/// split-K kernel, judged.
BackwardOutcome run_judged(BackwardCase& c, bool saved, SplitK split_k = SplitK::Warp) {
  BackwardRunOptions o;
  o.saved_counts = saved;
  o.split_k = split_k;
  BackwardOutcome gpu = run_backward_gpu(c, o);
  require_judged(c, gpu);
  return gpu;
}

}  // namespace

TEST_CASE("small-table backward: Adagrad and SGD, RNE and SR, saved counts on and off",
          "[gpu][small_table][backward]") {
  std::uint64_t seed = 500;
  for (const OptimizerKind opt : {OptimizerKind::ExactRowwiseAdagrad, OptimizerKind::ExactSgd})
    for (const RoundingMode wb : {RoundingMode::Nearest, RoundingMode::Stochastic})
      for (const bool saved : {false, true})
        for (const std::int64_t E : {1, 2, 63, 64}) {
          const std::int32_t D = E == 1 ? 64 : (E == 2 ? 96 : (E == 63 ? 128 : 72));
          const PoolingMode pm = seed % 2 ? PoolingMode::Mean : PoolingMode::Sum;
          const DType grad = seed % 3 == 0 ? DType::F32 : (seed % 3 == 1 ? DType::F16 : DType::BF16);
          BackwardCase c = small_backward({E, 300}, {D, 32}, 600, 64, 160, pm, grad, opt, wb, seed++);
          const SplitK split_k = seed % 4 < 2 ? SplitK::Warp : SplitK::Block;
          CAPTURE(E, D, saved, to_string(pm), to_string(grad), static_cast<int>(opt),
                  static_cast<int>(wb), split_k == SplitK::Warp);
          const BackwardOutcome gpu = run_judged(c, saved, split_k);
          REQUIRE(has_path(gpu.stats, "bwd.small_table"));
          REQUIRE(has_path(gpu.stats, split_k == SplitK::Warp ? "bwd.small_table.split_k.warp"
                                                               : "bwd.small_table.split_k.block"));
          REQUIRE(has_path(gpu.stats, "bwd.small_table.saved_counts") == saved);
          REQUIRE(has_path(gpu.stats, "bwd.short"));  // the other table
          const BackwardOutcome ref = run_backward_reference(c, false);
          REQUIRE(gpu.stats.runs == ref.stats.runs);
          REQUIRE(gpu.stats.lookups == ref.stats.lookups);
        }
}

TEST_CASE("small-table backward: a 16-bag tile of empty bags counts zero (own and saved counts)",
          "[gpu][small_table][backward]") {
  // The fuzz campaign's cases 76333 / 397349 (seed 1): bags 16..31, and the last bag alone in
  // its tile, empty. The harness poisons every workspace and the saved-counts buffer, so counts
  // the forward kernel leaves unwritten are NaN in every updated row.
  std::uint64_t seed = 700;
  for (const std::int64_t B : {41, 33})
    for (const bool saved : {false, true}) {
      // the fuzz cases' shapes: 76333 E = 4, D = 127, MEAN, RNE; 397349 E = 8, D = 128, SUM, SR
      const bool first = B == 41;
      BackwardCase c = small_backward({first ? 4 : 8}, {first ? 127 : 128}, B, 96, 128,
                                      first ? PoolingMode::Mean : PoolingMode::Sum, DType::BF16,
                                      OptimizerKind::ExactRowwiseAdagrad,
                                      first ? RoundingMode::Nearest : RoundingMode::Stochastic,
                                      seed++);
      // empty bags: 16..31 for B = 41, the last one (alone in its tile) for B = 33
      std::vector<std::int64_t> keep;
      std::vector<std::int64_t> offsets{0};
      for (std::int64_t b = 0; b < B; ++b) {
        const bool empty = B == 41 ? (b >= 16 && b < 32) : b == B - 1;
        if (!empty)
          for (std::int64_t p = c.forward.offsets[b]; p < c.forward.offsets[b + 1]; ++p)
            keep.push_back(c.forward.indices[p]);
        offsets.push_back(static_cast<std::int64_t>(keep.size()));
      }
      c.forward.indices = keep;
      c.forward.offsets = offsets;
      CAPTURE(B, saved);
      const BackwardOutcome gpu = run_judged(c, saved);
      REQUIRE(has_path(gpu.stats, "bwd.small_table"));
      REQUIRE(has_path(gpu.stats, "bwd.small_table.saved_counts") == saved);
    }
}

TEST_CASE("small-table backward: short rows stay generic, long rows take the histogram",
          "[gpu][small_table][backward]") {
  // E = 64 rows, bags of 64: B = 20 gives SL around 20 < min_run (42 + 1 tile + 2 blocks = 45):
  // all generic (sorted; this test forces the sort: the next one skips it)
  for (const std::int64_t B : {20, 600}) {
    BackwardCase c = small_backward({64}, {128}, B, 64, 64, PoolingMode::Sum, DType::F32,
                                    OptimizerKind::ExactRowwiseAdagrad, RoundingMode::Nearest, 9 + B);
    // B = 600: one row looked up at least once per bag (SL >= B); B = 20: every SL is about 20
    if (B == 600)
      for (std::int64_t b = 0; b < B; ++b) c.forward.indices[c.forward.offsets[b]] = 5;
    BackwardRunOptions o;
    o.small_table.mode = Mode::Force;
    o.sort = Sort::Always;
    const BackwardOutcome gpu = run_backward_gpu(c, o);
    require_judged(c, gpu);
    REQUIRE(has_path(gpu.stats, "bwd.small_table") == (B == 600));
    REQUIRE(has_path(gpu.stats, "bwd.sort.key32"));
    REQUIRE(gpu.stats.counters.histogram_exact_runs == 0);
    const BackwardOutcome ref = run_backward_reference(c, false);
    REQUIRE(gpu.stats.runs == ref.stats.runs);
    // the counters: histogram rows (SL >= the path's minimum run) plus the generic paths' rows
    const BackwardPathCounters& k = gpu.stats.counters;
    CAPTURE(B, k.short_runs, k.chunked_runs, k.fused_runs, k.histogram_runs, k.histogram_min_run);
    REQUIRE(k.short_runs + k.chunked_runs + k.fused_runs + k.histogram_runs == ref.stats.runs);
    REQUIRE(k.short_lookups + k.chunked_lookups + k.fused_lookups + k.histogram_lookups ==
            ref.stats.lookups);
    REQUIRE((k.histogram_runs > 0) == (B == 600));
    if (B == 600) {  // docs/oracle.md: min run = 42 + tiles per block + blocks, over 608 padded bags
      REQUIRE(k.histogram_min_run == 42 + k.histogram_block_tiles + k.histogram_blocks);
      REQUIRE(k.histogram_blocks * k.histogram_block_tiles * 16 >= 608);
      REQUIRE((k.histogram_blocks - 1) * k.histogram_block_tiles * 16 < 608);
    } else {
      REQUIRE(k.histogram_min_run == 0);
    }
    REQUIRE(k.histogram_lookups >= k.histogram_runs * k.histogram_min_run);
  }
}

TEST_CASE("small-table backward: split-K blocks of several k-tiles, one, three or 40 features",
          "[gpu][small_table][backward]") {
  // B = 5000 (313 k-tiles) on one feature and B = 2000 (125 k-tiles) on three: blocks of 2 tiles,
  // so the block's k-loop prefetches the next tile's grad_output while it multiplies this one
  struct Shape { std::vector<std::int64_t> E; std::vector<std::int32_t> D; std::int64_t B; PoolingMode pm; };
  // and 40 features at B = 1024 (64 k-tiles): at least sqrt(tiles) blocks per feature, so T_b
  // stays <= 8 (256 / 40 alone would give 7 blocks of 10 tiles)
  for (const Shape& sh : {Shape{{48}, {96}, 5000, PoolingMode::Mean},
                          Shape{{8, 64, 33}, {128, 64, 100}, 2000, PoolingMode::Sum},
                          Shape{std::vector<std::int64_t>(40, 8), std::vector<std::int32_t>(40, 64),
                                1024, PoolingMode::Sum}})
  for (const SplitK split_k : {SplitK::Block, SplitK::Warp}) {
    BackwardCase c = small_backward(sh.E, sh.D, sh.B, 64, 80, sh.pm, DType::F32,
                                    OptimizerKind::ExactRowwiseAdagrad, RoundingMode::Nearest, sh.B);
    BackwardRunOptions o;
    o.small_table.mode = Mode::Force;
    o.split_k = split_k;
    CAPTURE(split_k == SplitK::Warp);
    const BackwardOutcome gpu = run_backward_gpu(c, o);
    require_judged(c, gpu);
    const BackwardPathCounters& k = gpu.stats.counters;
    CAPTURE(sh.B, k.histogram_blocks, k.histogram_block_tiles, k.histogram_runs, k.histogram_min_run);
    const std::int64_t tiles = (sh.B + 15) / 16;
    REQUIRE(k.histogram_block_tiles >= 2);
    std::int64_t root = 1;
    while (root * root < tiles) ++root;
    REQUIRE(k.histogram_block_tiles <= root);
    REQUIRE(k.histogram_blocks * k.histogram_block_tiles >= tiles);
    REQUIRE((k.histogram_blocks - 1) * k.histogram_block_tiles < tiles);
    REQUIRE(k.histogram_min_run == 42 + k.histogram_block_tiles + k.histogram_blocks);
    std::int64_t rows = 0;
    for (const std::int64_t e : sh.E) rows += e;
    REQUIRE(k.histogram_runs == rows);  // every row of every feature is looked up >> min run times
    const BackwardOutcome again = run_backward_gpu(c, o);
    REQUIRE(again.weights == gpu.weights);  // one configuration: bitwise stable
    REQUIRE(again.momentum == gpu.momentum);
  }
}

TEST_CASE("small-table backward: a count above 2048 falls back to the generic path or the exact sums",
          "[gpu][small_table][backward]") {
  // sorted: the generic long-run kernels take the table; without the sort: the path's exact sums
  // count the row from the lookups themselves
  for (const std::int64_t L : {2048, 2049}) {
    BackwardCase c = small_backward({1}, {64}, 80, L, L, PoolingMode::Mean, DType::F32,
                                    OptimizerKind::ExactRowwiseAdagrad, RoundingMode::Nearest, L);
    for (const Sort sort : {Sort::Always, Sort::Auto})
      for (const bool saved : {false, true}) {
        CAPTURE(L, saved, sort == Sort::Auto);
        BackwardRunOptions o;
        o.saved_counts = saved;
        o.sort = sort;
        const BackwardOutcome gpu = run_backward_gpu(c, o);
        require_judged(c, gpu);
        const BackwardPathCounters& k = gpu.stats.counters;
        REQUIRE(has_path(gpu.stats, "bwd.small_table") == (L == 2048));
        REQUIRE(has_path(gpu.stats, "bwd.small_table.no_sort") == (sort == Sort::Auto));
        REQUIRE(has_path(gpu.stats, "bwd.long.fused") == (L == 2049 && sort == Sort::Always));  // SL = 80·2049
        REQUIRE(has_path(gpu.stats, "bwd.small_table.exact") == (L == 2049 && sort == Sort::Auto));
        if (L == 2049 && sort == Sort::Auto) {
          REQUIRE(k.histogram_exact_runs == 1);
          REQUIRE(k.histogram_exact_lookups == 80 * 2049);
        }
      }
  }
}

TEST_CASE("small-table backward without the sort: rare rows summed exactly from the counts",
          "[gpu][small_table][backward][no_sort]") {
  // One feature, E = 64, B = 600 bags of 64 (min run 42 + 1 + 38 = 81): rows 0..58 uniform
  // (SL about 630), row 59 looked up 200 times (the product), rows 60, 61, 62 once, 5 and 40
  // times (exact sums), row 63 never (untouched).
  std::uint64_t seed = 900;
  for (const PoolingMode pm : {PoolingMode::Sum, PoolingMode::Mean})
    for (const RoundingMode wb : {RoundingMode::Nearest, RoundingMode::Stochastic})
      for (const bool saved : {false, true}) {
        BackwardCase c = small_backward({64}, {96}, 600, 64, 64, pm, DType::BF16,
                                        OptimizerKind::ExactRowwiseAdagrad, wb, seed++);
        Rng rng(seed, 7);
        for (auto& i : c.forward.indices) i = rng.uniform_int(59);
        const std::int64_t n = static_cast<std::int64_t>(c.forward.indices.size());
        std::int64_t at = 3;
        for (const auto& [row, times] : std::vector<std::pair<std::int64_t, int>>{{59, 200}, {60, 1}, {61, 5}, {62, 40}})
          for (int r = 0; r < times; ++r, at = (at + 97) % n) c.forward.indices[at] = row;
        CAPTURE(to_string(pm), static_cast<int>(wb), saved);
        BackwardRunOptions o;
        o.saved_counts = saved;
        const BackwardOutcome gpu = run_backward_gpu(c, o);
        require_judged(c, gpu);
        const BackwardPathCounters& k = gpu.stats.counters;
        CAPTURE(k.histogram_runs, k.histogram_exact_runs, k.histogram_min_run);
        REQUIRE(has_path(gpu.stats, "bwd.small_table.no_sort"));
        REQUIRE(has_path(gpu.stats, "bwd.small_table.exact"));
        REQUIRE_FALSE(has_path(gpu.stats, "bwd.sort.key32"));
        REQUIRE(k.short_runs + k.chunked_runs + k.fused_runs == 0);
        REQUIRE(k.histogram_runs == 60);
        REQUIRE(k.histogram_exact_runs == 3);
        REQUIRE(k.histogram_exact_lookups == 1 + 5 + 40);
        const BackwardOutcome ref = run_backward_reference(c, false);
        REQUIRE(gpu.stats.runs == ref.stats.runs);
        REQUIRE(gpu.stats.lookups == ref.stats.lookups);
        const BackwardOutcome again = run_backward_gpu(c, o);
        REQUIRE(again.weights == gpu.weights);  // bitwise stable
        REQUIRE(again.momentum == gpu.momentum);
        // the same call sorted: the generic run kernels take rows 60..62, judged the same way
        o.sort = Sort::Always;
        const BackwardOutcome sorted = run_backward_gpu(c, o);
        require_judged(c, sorted);
        REQUIRE(sorted.stats.counters.histogram_exact_runs == 0);
        REQUIRE(sorted.stats.counters.short_runs == 3);
      }
}

TEST_CASE("small-table backward without the sort: a histogram that is not representable",
          "[gpu][small_table][backward][no_sort]") {
  // E = 8, B = 40 bags of 100..140 lookups, then bag 3 gains 2049 lookups of row 2 (a count above
  // 2048: the feature's histogram is invalid), row 7 is never looked up and two indices are bad
  // (WARNING: row 0, counted). Every row of the table is summed exactly from the lookups.
  for (const bool saved : {false, true})
    for (const bool hoisted : {false, true}) {
      BackwardCase c = small_backward({8}, {64}, 40, 100, 140, PoolingMode::Mean, DType::F32,
                                      OptimizerKind::ExactRowwiseAdagrad, RoundingMode::Nearest, 55);
      std::vector<std::int64_t> idx, off{0};
      for (std::int64_t b = 0; b < 40; ++b) {
        for (std::int64_t p = c.forward.offsets[b]; p < c.forward.offsets[b + 1]; ++p)
          idx.push_back(c.forward.indices[p] == 7 ? 6 : c.forward.indices[p]);
        if (b == 3) idx.insert(idx.end(), 2049, 2);
        off.push_back(static_cast<std::int64_t>(idx.size()));
      }
      idx[10] = -1;
      idx[idx.size() - 5] = 8;
      c.forward.indices = idx;
      c.forward.offsets = off;
      CAPTURE(saved, hoisted);
      BackwardRunOptions o;
      o.saved_counts = saved;
      o.hoisted = hoisted;
      const BackwardOutcome gpu = run_backward_gpu(c, o);
      require_judged(c, gpu);
      const BackwardPathCounters& k = gpu.stats.counters;
      REQUIRE(has_path(gpu.stats, "bwd.small_table.no_sort"));
      REQUIRE_FALSE(has_path(gpu.stats, "bwd.small_table"));
      REQUIRE(k.histogram_runs == 0);
      REQUIRE(k.histogram_exact_runs == 7);  // rows 0..6
      const BackwardOutcome ref = run_backward_reference(c, false);
      REQUIRE(gpu.stats.runs == ref.stats.runs);
      REQUIRE(gpu.stats.lookups == ref.stats.lookups);
      REQUIRE(k.histogram_exact_lookups == ref.stats.lookups);
      REQUIRE(gpu.stats.warnings == ref.stats.warnings);
      REQUIRE(gpu.stats.warnings == 2);
    }
}

TEST_CASE("small-table backward without the sort: FATAL stops before any update",
          "[gpu][small_table][backward][no_sort][bounds]") {
  BackwardCase c = small_backward({16}, {64}, 100, 64, 80, PoolingMode::Sum, DType::F32,
                                  OptimizerKind::ExactRowwiseAdagrad, RoundingMode::Nearest, 61);
  c.forward.options.bounds_check = BoundsCheckMode::Fatal;
  c.forward.indices[1234] = 16;
  for (const bool hoisted : {false, true}) {
    CAPTURE(hoisted);
    BackwardRunOptions o;
    o.hoisted = hoisted;
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

TEST_CASE("small-table backward: a stale saved histogram is rejected before any launch",
          "[gpu][small_table][backward]") {
  BackwardCase c = small_backward({48}, {96}, 200, 100, 140, PoolingMode::Sum, DType::F32,
                                  OptimizerKind::ExactSgd, RoundingMode::Nearest, 77);
  BackwardRunOptions o;
  o.saved_counts = true;
  o.stale_batch = true;
  const BackwardOutcome gpu = run_backward_gpu(c, o);
  REQUIRE(gpu.kind == BackwardOutcome::Kind::InvalidArgument);
  REQUIRE(gpu.argument == "small_table_counts");
  REQUIRE(gpu.what.find("stale: written for batch 1, this backward runs batch 2") != std::string::npos);
}

TEST_CASE("small-table backward: malformed input repaired like the generic path",
          "[gpu][small_table][backward][bounds]") {
  BackwardCase c = small_backward({40}, {80}, 300, 90, 120, PoolingMode::Mean, DType::F32,
                                  OptimizerKind::ExactRowwiseAdagrad, RoundingMode::Nearest, 31);
  c.forward.indices[7] = -3;
  c.forward.indices[900] = 40;
  c.forward.offsets[11] = c.forward.offsets[12] + 5;
  c.forward.offsets.back() += 3;
  // without the sort the path counts the bad indices itself (its own histogram, or a count-only
  // pass when the forward's saved histogram is used)
  for (const Sort sort : {Sort::Auto, Sort::Always})
    for (const bool saved : {false, true}) {
      CAPTURE(saved, sort == Sort::Auto);
      BackwardRunOptions o;
      o.saved_counts = saved;
      o.sort = sort;
      const BackwardOutcome gpu = run_backward_gpu(c, o);
      require_judged(c, gpu);
      REQUIRE(has_path(gpu.stats, "bwd.small_table"));
      REQUIRE(has_path(gpu.stats, "bwd.small_table.no_sort") == (sort == Sort::Auto));
      const BackwardOutcome ref = run_backward_reference(c, false);
      REQUIRE(gpu.stats.warnings == ref.stats.warnings);
      REQUIRE(gpu.stats.runs == ref.stats.runs);
    }
}

TEST_CASE("small-table backward: grad tiles with a wide range or an Inf take the exact tile sum",
          "[gpu][small_table][backward]") {
  // (the warp-column kernel decides per tile and column: the tiny value's column, the huge
  // value's column and the Inf's column are summed exactly, the others of those tiles still on
  // tensor cores)
  for (const SplitK split_k : {SplitK::Block, SplitK::Warp}) {
    BackwardCase c = small_backward({16}, {96}, 512, 64, 64, PoolingMode::Sum, DType::F32,
                                    OptimizerKind::ExactSgd, RoundingMode::Nearest, 44);
    c.set_grad(3 * 96 + 1, 1e-9);    // 2^-30 next to values near 1: a range wider than 2^15
    c.set_grad(200 * 96 + 70, 3e30);  // and a huge one in another tile (warp 2's columns)
    c.set_grad(300 * 96 + 40, std::numeric_limits<double>::infinity());  // and an Inf (warp 1)
    BackwardRunOptions o;
    o.split_k = split_k;
    CAPTURE(split_k == SplitK::Warp);
    const BackwardOutcome gpu = run_backward_gpu(c, o);
    require_judged(c, gpu);
    REQUIRE(has_path(gpu.stats, "bwd.small_table"));
  }
}
