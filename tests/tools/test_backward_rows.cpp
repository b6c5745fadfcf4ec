// tbe-verify's backward rows on a small seed-large slice: CPU self-check rows pass; device rows
// pass with a correct backend (the CPU reference behind a stand-in that routes runs by SL like
// the GPU and reports its counters and paths, the small-table tables' runs on the histogram), and
// catch deliberately faulty backends.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <tuple>
#include <sstream>

#include <filesystem>
#include <unistd.h>

#include "scratch_dir.h"
#include "tbe/backward.h"
#include "tbe/io/backward_case_file.h"
#include "tbe/judge/backward_rows.h"
#include "tbe/judge/case_commands.h"
#include "tbe/precision.h"

using namespace tbe;
using namespace tbe::judge;

namespace {

enum class BwdFault {
  None,
  NearestInsteadOfStochastic,
  SkipOneRow,
  FlipBitOnSecondCall,
  NoLongRoute,
  NoHistogram,  // the small-table tables stay on the generic routes
  SrOffsetIgnored,      // stochastic rounding draws as if sr_offset were 0
  HistogramLoDropped,   // a call with a histogram table sees grad_output to 11 bits (hi only)
};

// A table the stand-in updates "from the histogram" (the CUDA path's shape: FP16, E <= 64,
// 64 <= D <= 128; docs/small-table.md).
bool histogram_table(const ForwardProblem& p, std::int64_t t) {
  return p.tables.dtype == DType::F16 && p.options.pooling != PoolingMode::None &&
         p.tables.rows[t] <= 64 && p.tables.dims[t] >= 64 && p.tables.dims[t] <= 128;
}

// The reference backend behind the routing rule of tbe/backward.h: runs with SL >= threshold are
// counted on the long route the strategy names, in ceil(SL / chunk) chunks; runs of histogram
// tables on the histogram counters, as the CUDA backend reports them.
class RoutingStandIn : public Backend {
 public:
  explicit RoutingStandIn(BwdFault f) : fault_(f), ref_(make_reference_backend()) {}
  std::string name() const override { return "routing-stand-in"; }
  ForwardStats forward(const ForwardProblem& p, void* out, const ForwardStrategy& s) override {
    ForwardStats st = ref_->forward(p, out, s);
    bool hist = false;
    for (std::int64_t t = 0; t < p.tables.num_tables(); ++t) hist |= histogram_table(p, t);
    if (hist && fault_ != BwdFault::NoHistogram) st.paths.push_back("forward.small_table.mma");
    return st;
  }
  TrainingStepStats training_step(const BackwardProblem& p, void* output,
                                  const BackwardOutputs& out, const BackwardStrategy& s) override {
    TrainingStepStats st = Backend::training_step(p, output, out, s);
    if (std::find(st.backward.paths.begin(), st.backward.paths.end(), "bwd.small_table") !=
        st.backward.paths.end())
      st.backward.paths.push_back("bwd.small_table.saved_counts");
    return st;
  }
  RepairResult repair(const ForwardProblem& p) override { return ref_->repair(p); }
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& s) override {
    BackwardProblem q = p;
    if (fault_ == BwdFault::NearestInsteadOfStochastic)
      q.forward.options.policy.write_back = RoundingMode::Nearest;
    if (fault_ == BwdFault::SrOffsetIgnored) q.options.sr_offset = 0;
    std::vector<std::byte> hi_only;
    bool any_hist = false;
    for (std::int64_t t = 0; t < p.forward.tables.num_tables(); ++t)
      any_hist |= histogram_table(p.forward, t);
    if (fault_ == BwdFault::HistogramLoDropped && any_hist) {
      // FP32 grad_output (the rows' type), each element rounded to FP16's 11 significant bits
      const DType g = p.forward.options.policy.output;
      const std::int64_t n = make_output_layout(p.forward).numel;
      hi_only.resize(static_cast<std::size_t>(n) * dtype_size(g));
      for (std::int64_t i = 0; i < n; ++i)
        store_from_double(g, hi_only.data(), i,
                          round_to(DType::F16, load_as_double(g, p.grad_output, i) * 1024.0) / 1024.0);
      q.grad_output = hi_only.data();
    }
    const BackwardReference ref = backward_reference_fp64(q);
    BackwardStats st = ref_->backward(q, out, s);
    st.paths.clear();
    st.counters = {};
    const bool long_ok = fault_ != BwdFault::NoLongRoute;
    bool hist = false;
    // the CUDA run kernels' gathers (docs/backward.md "Work routing"): staged for warp groups of
    // >= 16 lanes (33 <= D_max <= 128, every D % 4 == 0) on long runs and short runs longer than 4
    const auto& tdims = p.forward.tables.dims;
    const std::int32_t dmax = tdims.empty() ? 0 : *std::max_element(tdims.begin(), tdims.end());
    const bool staged_shape = dmax > 32 && dmax <= 128 &&
                              std::all_of(tdims.begin(), tdims.end(), [](std::int32_t d) { return d % 4 == 0; });
    // the short-run kernel instance (cuda::BackwardTuning::ShortRuns::Auto): staged when the mean
    // lookups per table row N / K is at least 4, for warp groups (D_max <= 128)
    std::int64_t K = 0;
    for (const std::int64_t e : p.forward.tables.rows) K += e;
    const bool short_staged = dmax <= 128 && K > 0 &&
                              static_cast<double>(p.forward.lookups.num_indices) >= 4.0 * static_cast<double>(K);
    bool gather_staged = false, gather_registers = false;
    for (std::size_t i = 0; i < ref.transpose.run_lengths.size(); ++i) {
      const std::int64_t sl = ref.transpose.run_lengths[i];
      if (fault_ != BwdFault::NoHistogram && histogram_table(p.forward, ref.run_table[i])) {
        hist = true;
        ++st.counters.histogram_runs;
        st.counters.histogram_lookups += sl;
        st.counters.histogram_min_run = 1;
      } else if (sl >= s.long_run_threshold && long_ok) {
        const std::int64_t chunks = (sl + s.chunk_size - 1) / s.chunk_size;
        st.counters.chunks += chunks;
        (staged_shape ? gather_staged : gather_registers) = true;
        if (s.long_runs == BackwardStrategy::LongRuns::Chunked) {
          ++st.counters.chunked_runs;
          st.counters.chunked_lookups += sl;
        } else {
          ++st.counters.fused_runs;
          st.counters.fused_lookups += sl;
        }
      } else {
        ++st.counters.short_runs;
        st.counters.short_lookups += sl;
        (staged_shape && short_staged && sl > 4 ? gather_staged : gather_registers) = true;
      }
    }
    if (gather_staged) st.paths.push_back("bwd.gather.staged");
    if (gather_registers) st.paths.push_back("bwd.gather.registers");
    // every table on the histogram (the hi/lo probe): the CUDA backward skips the sort
    bool all_hist = fault_ != BwdFault::NoHistogram && p.forward.tables.num_tables() > 0;
    for (std::int64_t t = 0; t < p.forward.tables.num_tables(); ++t)
      all_hist = all_hist && histogram_table(p.forward, t);
    st.paths.push_back(all_hist ? "bwd.small_table.no_sort" : "bwd.sort.key32");
    if (hist) st.paths.push_back("bwd.small_table");
    if (st.counters.short_runs) {
      st.paths.push_back("bwd.short");
      st.paths.push_back(short_staged ? "bwd.short.staged" : "bwd.short.registers");
    }
    if (st.counters.chunked_runs) st.paths.push_back("bwd.long.chunked");
    if (st.counters.fused_runs) st.paths.push_back("bwd.long.fused");
    if (st.counters.chunked_runs + st.counters.fused_runs > 0) {
      // the chunk-order sort (cuda::BackwardTuning::ChunkOrder::Auto): one CTA when the chunk
      // slots N / chunk_size + N / long_run_threshold + 2 fit its 1024 x 9 keys
      const std::int64_t N = p.forward.lookups.num_indices;
      const std::int64_t slots = N / s.chunk_size + N / s.long_run_threshold + 2;
      st.paths.push_back(slots <= 9216 ? "bwd.chunk_order.one-cta" : "bwd.chunk_order.device-wide");
      // the default chunk schedule (cuda::BackwardTuning::ChunkSchedule::Dynamic)
      st.paths.push_back("bwd.chunk_schedule.dynamic");
    }
    // cuda::BackwardTuning::RunLaunch::Auto: one launch where the staged short-run instance runs
    if (st.counters.short_runs + st.counters.chunked_runs + st.counters.fused_runs > 0)
      st.paths.push_back(short_staged ? "bwd.runs.interleaved" : "bwd.runs.separate");
    if (!s.deterministic && st.counters.chunks) st.paths.push_back("bwd.nondeterministic");
    if (out.per_sample_weight_grad) st.paths.push_back("bwd.psw_grad");
    const auto& dims = p.forward.tables.dims;
    if (std::any_of(dims.begin(), dims.end(), [](std::int32_t d) { return d <= 128; }))
      st.paths.push_back("bwd.group.warp");
    if (std::any_of(dims.begin(), dims.end(), [](std::int32_t d) { return d > 128; }))
      st.paths.push_back("bwd.group.block");
    if (p.forward.options.policy.write_back == RoundingMode::Stochastic &&
        p.forward.tables.dtype != DType::F32)
      st.paths.push_back("bwd.sr");
    const std::size_t esize = dtype_size(p.forward.tables.dtype);
    if (fault_ == BwdFault::SkipOneRow && !ref.run_table.empty()) {
      // Restore the first touched row: an update that never happened.
      const std::int64_t t = ref.run_table[0], r = ref.run_row[0];
      const std::int64_t off = p.forward.tables.table_offsets[t] + r * p.forward.tables.dims[t];
      std::memcpy(static_cast<std::byte*>(out.weights) + off * esize,
                  static_cast<const std::byte*>(p.forward.tables.weights) + off * esize,
                  esize * static_cast<std::size_t>(p.forward.tables.dims[t]));
    }
    if (fault_ == BwdFault::FlipBitOnSecondCall && (++calls_ % 2 == 0) && !ref.run_table.empty()) {
      const std::int64_t t = ref.run_table[0], r = ref.run_row[0];
      const std::int64_t off = p.forward.tables.table_offsets[t] + r * p.forward.tables.dims[t];
      static_cast<std::byte*>(out.weights)[off * esize] ^= std::byte{1};
    }
    return st;
  }

 private:
  BwdFault fault_;
  std::unique_ptr<Backend> ref_;
  int calls_ = 0;
};

BackwardRunnerConfig small_config(Backend* device) {
  BackwardRunnerConfig cfg;
  cfg.batch = 16;
  cfg.features = 3;
  cfg.seed = 5;
  cfg.device = device;
  cfg.skip_reason = "no GPU (test)";
  return cfg;
}

std::vector<BackwardRowResult> run_all(Backend* device) {
  BackwardRunner runner(small_config(device));
  std::vector<BackwardRowResult> out;
  const auto rows = enumerate_backward_rows();
  for (std::size_t i = 0; i < rows.size(); ++i) out.push_back(runner.run(rows[i], i));
  return out;
}

bool failed_check(const BackwardRowResult& r, const std::string& prefix) {
  return std::any_of(r.row.checks.begin(), r.row.checks.end(), [&](const Check& c) {
    return !c.passed && c.name.rfind(prefix, 0) == 0;
  });
}
bool failed_exactly(const BackwardRowResult& r, const std::string& name) {
  return std::any_of(r.row.checks.begin(), r.row.checks.end(),
                     [&](const Check& c) { return !c.passed && c.name == name; });
}

}  // namespace

TEST_CASE("backward rows: the design covers every optimizer, rounding, route and axis value",
          "[verify][backward]") {
  const auto rows = enumerate_backward_rows();
  REQUIRE(rows.size() == 48);
  std::set<std::string> labels;
  int sr = 0, nondet = 0, adagrad_l2 = 0, decoupled = 0, weighted = 0, vbe = 0, shared = 0,
      none_pool = 0, i32 = 0, bf16 = 0, f32 = 0, own = 0, saved = 0;
  for (const auto& a : rows) {
    labels.insert(backward_row_label(a));
    sr += a.stochastic_rounding;
    nondet += !a.deterministic;
    adagrad_l2 += a.weight_decay == WeightDecayMode::L2;
    decoupled += a.weight_decay == WeightDecayMode::Decoupled;
    weighted += a.weighted;
    vbe += a.vbe;
    shared += a.shared_tables;
    none_pool += a.pooling == PoolingMode::None;
    i32 += a.index == DType::I32;
    bf16 += a.weights == DType::BF16;
    f32 += a.weights == DType::F32;
    if (a.stochastic_rounding) CHECK(a.weights != DType::F32);
    if (a.pooling == PoolingMode::None) CHECK_FALSE(a.weighted);
    own += a.histogram == BackwardHistogram::Own;
    saved += a.histogram == BackwardHistogram::Saved;
    if (a.histogram != BackwardHistogram::Off) {  // the path's shape: FP16, unweighted, no VBE
      CHECK(a.weights == DType::F16);
      CHECK_FALSE(a.weighted);
      CHECK_FALSE(a.vbe);
      CHECK(a.pooling != PoolingMode::None);
    }
  }
  CHECK(own == 4);
  CHECK(saved == 4);
  CHECK(labels.size() == rows.size());
  CHECK(std::any_of(rows.begin(), rows.end(), [](const auto& a) { return a.wide_rows; }));
  CHECK(std::any_of(rows.begin(), rows.end(), [](const auto& a) { return a.odd_rows; }));
  CHECK(std::none_of(rows.begin(), rows.end(), [](const auto& a) { return a.odd_rows && a.wide_rows; }));
  CHECK(std::any_of(rows.begin(), rows.end(), [](const auto& a) { return a.dense_rows; }));
  CHECK(std::none_of(rows.begin(), rows.end(),
                     [](const auto& a) { return a.dense_rows && (a.odd_rows || a.wide_rows); }));
  CHECK(sr == 24);
  CHECK(nondet == 16);
  CHECK(adagrad_l2 == 10);
  CHECK(decoupled == 10);
  CHECK(weighted > 0);
  CHECK(vbe > 0);
  CHECK(shared > 0);
  CHECK(none_pool > 0);
  CHECK(i32 > 0);
  CHECK(bf16 > 0);
  CHECK(f32 > 0);
}

TEST_CASE("backward rows: the schedule runs each row once, small-table rows first, then every "
          "optimizer and every route early",
          "[verify][backward]") {
  const std::vector<BackwardRowAxes> rows = enumerate_backward_rows();
  const std::vector<std::size_t> order = backward_row_schedule();
  REQUIRE(order.size() == rows.size());
  REQUIRE(std::set<std::size_t>(order.begin(), order.end()).size() == rows.size());
  std::size_t small = 0;
  for (const BackwardRowAxes& a : rows) small += a.histogram != BackwardHistogram::Off;
  for (std::size_t k = 0; k < order.size(); ++k)
    CHECK((rows[order[k]].histogram != BackwardHistogram::Off) == (k < small));
  // the next 8 cover every optimizer x weight decay x rounding
  std::set<std::tuple<int, int, bool>> kinds;
  for (std::size_t k = small; k < small + 8; ++k) {
    const BackwardRowAxes& a = rows[order[k]];
    kinds.insert({static_cast<int>(a.optimizer), static_cast<int>(a.weight_decay),
                  a.stochastic_rounding});
  }
  CHECK(kinds.size() == 8);
  // every 5 consecutive ones cover every route x determinism variant
  for (std::size_t k = small; k + 5 <= order.size(); ++k) {
    std::set<std::pair<int, bool>> routes;
    for (std::size_t j = k; j < k + 5; ++j)
      routes.insert({static_cast<int>(rows[order[j]].route), rows[order[j]].deterministic});
    CHECK(routes.size() == 5);
  }
}

TEST_CASE("backward rows: no GPU, the CPU fallback passes the oracle on every row",
          "[verify][backward]") {
  const auto results = run_all(nullptr);
  for (const auto& r : results) {
    INFO(r.label << ": " << r.row.reason);
    CHECK(r.row.target == Target::SelfCheck);
    CHECK(r.row.verdict == Verdict::Passed);
    // Every check but the route counters runs on the CPU fallback too.
    const auto has = [&](const std::string& name) {
      return std::any_of(r.row.checks.begin(), r.row.checks.end(),
                         [&](const Check& c) { return c.name == name; });
    };
    CHECK_FALSE(has("counters"));
    CHECK(has("deterministic") == r.axes.deterministic);
    CHECK(has("c12.sr") == r.axes.stochastic_rounding);
    CHECK(has("forward.oracle") == (r.axes.histogram != BackwardHistogram::Off));
  }
  CHECK(backward_paths_missing(results).empty());  // no device: nothing required
  const BackwardTotals t = count_backward_rows(results);
  CHECK(t.passed == 48);
  CHECK(t.failed == 0);
}

TEST_CASE("backward rows: a correct routed backend passes and exercises every path",
          "[verify][backward]") {
  RoutingStandIn dev(BwdFault::None);
  const auto results = run_all(&dev);
  for (const auto& r : results) {
    INFO(r.label << ": " << r.row.reason);
    CHECK(r.row.target == Target::Device);
    CHECK(r.row.verdict == Verdict::Passed);
  }
  const std::vector<std::string> missing = backward_paths_missing(results);
  std::string missing_list;
  for (const std::string& m : missing) missing_list += m + " ";
  INFO("missing paths: " << missing_list);
  CHECK(missing.empty());
  std::ostringstream os;
  print_backward_results(os, results, true, "test slice", "tbe-verify --rows backward --batch 16");
  CHECK(os.str().find("backward: 48 passed, 0 failed, 0 skipped") != std::string::npos);
  const auto j = backward_to_json(results);
  CHECK(j.size() == 48);
  CHECK(j[47]["histogram"] == "saved");
}

TEST_CASE("backward rows: faulty backends are caught", "[verify][backward]") {
  SECTION("round to nearest where stochastic rounding was asked") {
    RoutingStandIn dev(BwdFault::NearestInsteadOfStochastic);
    const auto results = run_all(&dev);
    int caught = 0;
    for (const auto& r : results)
      if (r.axes.stochastic_rounding) {
        INFO(r.label);
        CHECK(failed_exactly(r, "c12.sr"));
        caught += r.row.verdict == Verdict::Failed;
      } else {
        CHECK(r.row.verdict == Verdict::Passed);
      }
    CHECK(caught == 24);
  }
  SECTION("one touched row left without its update") {
    RoutingStandIn dev(BwdFault::SkipOneRow);
    const auto results = run_all(&dev);
    for (const auto& r : results) {
      INFO(r.label);
      CHECK(failed_check(r, "oracle."));
    }
    std::ostringstream os;
    print_backward_results(os, results, true, "test slice", "tbe-verify --rows backward --batch 16");
    CHECK(os.str().find("replay: tbe-verify --rows backward --batch 16 --backward-row 40") !=
          std::string::npos);
  }
  SECTION("a second call that differs in one bit") {
    RoutingStandIn dev(BwdFault::FlipBitOnSecondCall);
    int caught = 0;
    for (const auto& r : run_all(&dev)) caught += failed_check(r, "deterministic");
    CHECK(caught > 0);
  }
  SECTION("the small-table tables never updated from the histogram") {
    RoutingStandIn dev(BwdFault::NoHistogram);
    const auto results = run_all(&dev);
    for (const auto& r : results) {
      INFO(r.label);
      CHECK(failed_check(r, "small_table.path") == (r.axes.histogram != BackwardHistogram::Off));
    }
    const auto missing = backward_paths_missing(results);
    for (const char* path :
         {"forward.small_table.mma", "bwd.small_table", "bwd.small_table.saved_counts",
          "bwd.small_table.no_sort"})
      CHECK(std::find(missing.begin(), missing.end(), path) != missing.end());
  }
  SECTION("stochastic rounding that ignores sr_offset") {
    RoutingStandIn dev(BwdFault::SrOffsetIgnored);
    int caught = 0;
    for (const auto& r : run_all(&dev)) {
      INFO(r.label);
      CHECK(failed_exactly(r, "c12.sr_offset") == r.axes.stochastic_rounding);
      CHECK_FALSE(failed_exactly(r, "c12.sr"));  // the draws still round stochastically
      caught += r.row.verdict == Verdict::Failed;
    }
    CHECK(caught == 24);
  }
  SECTION("the small-table backward without the lo part of grad_output") {
    RoutingStandIn dev(BwdFault::HistogramLoDropped);
    for (const auto& r : run_all(&dev)) {
      INFO(r.label);
      CHECK(failed_check(r, "hilo.") == (r.axes.histogram != BackwardHistogram::Off));
    }
  }
  SECTION("long runs never routed to a long path") {
    RoutingStandIn dev(BwdFault::NoLongRoute);
    const auto results = run_all(&dev);
    for (const auto& r : results)
      if (r.axes.route != BackwardRoute::Short) CHECK(failed_check(r, "counters"));
    const auto missing = backward_paths_missing(results);
    CHECK(std::find(missing.begin(), missing.end(), "bwd.long.fused") != missing.end());
    CHECK(count_backward_rows(results).failed > 0);
  }
}

TEST_CASE("backward rows: a failing row is saved as a backward case folder that check and replay "
          "reproduce", "[verify][backward][cases]") {
  namespace fs = std::filesystem;
  const fs::path dir = tbe::test::scratch_dir("test_backward_rows", "saved");
  BackwardRunnerConfig cfg = small_config(nullptr);
  cfg.save_failures_dir = dir.string();
  cfg.save_failures_max = 2;
  const auto rows = enumerate_backward_rows();
  SECTION("an update left out: the row's problem with the faulty outputs") {
    RoutingStandIn bad(BwdFault::SkipOneRow);
    cfg.device = &bad;
    BackwardRunner runner(cfg);
    std::vector<BackwardRowResult> results;
    for (std::size_t i = 0; i < 3; ++i) results.push_back(runner.run(rows[i], i));
    REQUIRE(results[0].row.verdict == Verdict::Failed);
    REQUIRE(results[0].saved_case == (dir / "backward-row-1").string());
    CHECK(results[1].saved_case == (dir / "backward-row-2").string());
    CHECK(results[2].saved_case.empty());
    CHECK_THAT(results[2].save_note, Catch::Contains("--save-failures-max 2"));
    const io::BackwardCaseFile saved = io::read_backward_case(results[0].saved_case);
    REQUIRE(saved.recorded.has_value());
    CHECK(saved.recorded->implementation == "routing-stand-in");
    CHECK(saved.strategy.has_value());
    CHECK_THAT(saved.provenance, Catch::Contains(results[0].label));
    std::ostringstream check_out;
    CHECK(check_case(results[0].saved_case, check_out) == kExitFailed);  // fails as it did
    CHECK_THAT(check_out.str(), Catch::Contains("oracle worst element (weights): table "));
    RoutingStandIn good(BwdFault::None);
    std::ostringstream replay_good, replay_bad;
    CHECK(replay_case(results[0].saved_case, replay_good, &good) == kExitOk);
    CHECK(replay_case(results[0].saved_case, replay_bad, &bad) == kExitFailed);
    std::ostringstream report;
    print_backward_results(report, results, true, "test slice", "");
    CHECK_THAT(report.str(), Catch::Contains("replay case: tbe-verify replay " + results[0].saved_case));
    CHECK_THAT(report.str(), Catch::Contains("tbe-verify check " + results[0].saved_case));
  }
  SECTION("round to nearest under SR: the C12 problem when only its checks failed") {
    RoutingStandIn bad(BwdFault::NearestInsteadOfStochastic);
    cfg.device = &bad;
    BackwardRunner runner(cfg);
    const auto sr_row = std::find_if(rows.begin(), rows.end(),
                                     [](const BackwardRowAxes& a) { return a.stochastic_rounding; });
    const std::size_t i = static_cast<std::size_t>(sr_row - rows.begin());
    const BackwardRowResult r = runner.run(*sr_row, i);
    REQUIRE(r.row.verdict == Verdict::Failed);
    REQUIRE_FALSE(r.saved_case.empty());
    const bool only_c12 = std::none_of(r.row.checks.begin(), r.row.checks.end(), [](const Check& c) {
      return !c.passed && c.name.rfind("c12.", 0) != 0;
    });
    CHECK((r.saved_case.size() > 4 && r.saved_case.substr(r.saved_case.size() - 4) == "-c12") ==
          only_c12);
    std::ostringstream check_out;
    CHECK(check_case(r.saved_case, check_out) == kExitFailed);
    INFO(check_out.str());
    CHECK_THAT(check_out.str(), Catch::Contains("disagreement: sr: stochastic rounding z-test"));
  }
  fs::remove_all(dir);
}
