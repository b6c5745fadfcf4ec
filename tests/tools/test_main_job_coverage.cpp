// The main job's coverage: the forward matrix bases (mixed and odd D rotating over features and
// weight groups, tables of different E, permuted and shared feature_table_maps, mixed bag
// lengths; the forward routes they reach, computed from the generated specs by the routing rule
// of optimized/dispatch/tuning.h), the backward rows' segment-length edges, the path coverage row
// and the --full large-table rows' memory skip.
#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "tbe/backend.h"
#include "tbe/backward.h"
#include "tbe/judge/backward_rows.h"
#include "tbe/judge/large_table.h"
#include "tbe/judge/matrix.h"
#include "tbe/judge/matrix_workload.h"
#include "tbe/judge/path_coverage.h"
#include "tbe/judge/runner.h"
#include "tbe/workloads.h"

using namespace tbe;
using namespace tbe::judge;

namespace {

// 16-byte vector width in elements (tuning::PooledGather::kVectorBytes) and the widest group.
int vec_of(DType w) { return w == DType::F32 ? 4 : 8; }
constexpr int kMaxGroup = 32;

// The forward path names a pooled feature of dim D in a 16-byte aligned table takes (16-bit
// weights that do not fit 16-byte vectors take 8-byte ones of 4 elements where D and the offset
// allow: ForwardTuning::narrow_vectors, on by default).
std::set<std::string> pooled_paths(DType w, std::int32_t D, std::int64_t table_offset) {
  const int vec = vec_of(w);
  const bool v = D % vec == 0 && table_offset % vec == 0;
  const bool narrow = !v && w != DType::F32 && D % 4 == 0 && table_offset % 4 == 0;
  const int width = v ? vec : narrow ? 4 : 1;
  std::set<std::string> out = {v        ? "forward.pooled.vec" + std::to_string(vec)
                               : narrow ? std::string("forward.pooled.narrow_vec4")
                                        : std::string("forward.pooled.scalar")};
  if (D > kMaxGroup * width) out.insert("forward.pooled.column_chunks");
  return out;
}

std::vector<std::int64_t> table_offsets(const WorkloadSpec& s) {
  std::vector<std::int64_t> off;
  std::int64_t o = 0;
  for (std::size_t t = 0; t < s.table_rows.size(); ++t) {
    off.push_back(o);
    o += s.table_rows[t] * s.table_dims[t];
  }
  return off;
}

}  // namespace

TEST_CASE("matrix bases: mixed D rotating over features and groups, E, maps, bag lengths",
          "[verify][matrix][coverage]") {
  const WorkloadSpec named = named_workload("seed-large", 8192);
  const std::set<std::int32_t> all_dims(kMatrixDims.begin(), kMatrixDims.end());
  std::map<std::int64_t, std::set<std::int32_t>> dims_of_feature;  // across groups
  std::set<std::string> routes;
  for (DType w : {DType::F32, DType::F16, DType::BF16}) {
    INFO(to_string(w));
    const MatrixBase mb = matrix_base(named, w);
    const WorkloadSpec& s = mb.spec;
    REQUIRE(static_cast<std::int64_t>(s.feature_table_map.size()) == s.T);
    // Every D of the list in every group; tables of several E; 16-byte aligned tables.
    std::set<std::int32_t> dims, dims_seen;
    for (std::int32_t d : s.table_dims) dims.insert(d);
    CHECK(dims == all_dims);
    const std::set<std::int64_t> es(s.table_rows.begin(), s.table_rows.end());
    CHECK(es.size() >= 5);
    CHECK(*es.begin() <= 64);  // a small table: duplicates in every bag
    const auto off = table_offsets(s);
    for (std::int64_t o : off) CHECK(o % 8 == 0);
    // The map: not the identity on the first 10 features, every table used, some shared.
    std::map<std::int32_t, int> uses;
    bool identity = true;
    for (std::int64_t f = 0; f < s.T; ++f) {
      const std::int32_t t = s.feature_table_map[f];
      ++uses[t];
      identity = identity && (f >= 10 || t == f);
      dims_seen.insert(s.table_dims[t]);
      dims_of_feature[f].insert(s.table_dims[t]);
      const auto p = pooled_paths(w, s.table_dims[t], off[t]);
      routes.insert(p.begin(), p.end());
    }
    CHECK_FALSE(identity);
    CHECK(uses.size() == s.table_dims.size());
    CHECK(std::any_of(uses.begin(), uses.end(), [](const auto& u) { return u.second >= 2; }));
    CHECK(dims_seen == all_dims);
    // Sequence features: >= 2 features sharing one table; its D picks the group's sequence path.
    REQUIRE(mb.sequence_features.size() >= 2);
    const std::int32_t seq_t = s.feature_table_map[mb.sequence_features[0]];
    for (std::int32_t f : mb.sequence_features) CHECK(s.feature_table_map[f] == seq_t);
    const std::int32_t seq_d = s.table_dims[seq_t];
    const bool seq_vec = seq_d % vec_of(w) == 0 && off[seq_t] % vec_of(w) == 0;
    routes.insert(seq_vec ? "forward.sequence.vec" + std::to_string(vec_of(w))
                          : std::string("forward.sequence.scalar"));
    // Bag lengths: empty bags and bags of 64 + 3 lookups in one generated base (small B).
    WorkloadSpec small = s;
    small.B = 64;
    small.options.policy = make_policy(PolicyKind::SeedDefault, w, DType::F32);
    const ForwardCase c = generate(small);
    std::int64_t min_len = 1 << 30, max_len = 0;
    for (std::size_t k = 0; k + 1 < c.offsets.size(); ++k) {
      min_len = std::min(min_len, c.offsets[k + 1] - c.offsets[k]);
      max_len = std::max(max_len, c.offsets[k + 1] - c.offsets[k]);
    }
    CHECK(min_len == 0);
    CHECK(max_len >= 61);
  }
  // Some feature sees a different D in each group (the rotation over cases).
  CHECK(std::any_of(dims_of_feature.begin(), dims_of_feature.end(),
                    [](const auto& f) { return f.second.size() == 3; }));
  // The forward routes of the required list that depend on the tables are all reached.
  for (const char* p : {"forward.pooled.vec4", "forward.pooled.vec8", "forward.pooled.scalar",
                        "forward.pooled.column_chunks", "forward.sequence.vec4",
                        "forward.sequence.vec8", "forward.sequence.scalar"}) {
    INFO(p);
    CHECK(routes.count(p) == 1);
  }
  // D > 32·VEC (the column-chunk fault's shape) appears for FP32 and 16-bit rows.
  CHECK(std::count_if(all_dims.begin(), all_dims.end(), [](std::int32_t d) { return d > 32 * 8; }) >= 4);
}

TEST_CASE("matrix: bounds modes that repair run both the fused and the separate strategy",
          "[verify][matrix][coverage]") {
  std::set<bool> fused;
  for (const CaseAxes& c : enumerate_cases(Design::Pairwise))
    if (applicable(c) &&
        (c.bounds == BoundsCheckMode::Warning || c.bounds == BoundsCheckMode::Ignore))
      fused.insert(((stable_hash(case_label(c)) >> 8) & 1) == 0);
  CHECK(fused.size() == 2);
}

namespace {
// Records the run lengths of every backward problem it gets; the reference does the work.
class RunLengthRecorder : public Backend {
 public:
  std::string name() const override { return "run-length-recorder"; }
  ForwardStats forward(const ForwardProblem& p, void* out, const ForwardStrategy& s) override {
    return ref_->forward(p, out, s);
  }
  RepairResult repair(const ForwardProblem& p) override { return ref_->repair(p); }
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& s) override {
    for (std::int64_t sl : backward_reference_fp64(p).transpose.run_lengths) lengths.insert(sl);
    return ref_->backward(p, out, s);
  }
  std::set<std::int64_t> lengths;

 private:
  std::unique_ptr<Backend> ref_ = make_reference_backend();
};
}  // namespace

TEST_CASE("backward rows: segment lengths at the threshold, chunk boundaries and a long run",
          "[verify][backward][coverage]") {
  RunLengthRecorder rec;
  BackwardRunnerConfig cfg;
  cfg.batch = 512;
  cfg.features = 2;
  cfg.device = &rec;
  BackwardRunner runner(cfg);
  const auto rows = enumerate_backward_rows();
  const BackwardRowResult r = runner.run(rows[3], 3);  // a fused row
  for (std::int64_t sl : {255, 256, 257, 511, 512, 513, 767, 768, 769, 4097}) {
    INFO("SL " << sl);
    CHECK(rec.lengths.count(sl) == 1);
  }
  CHECK(r.max_segment_length >= 4097);
  CHECK(r.long_run_threshold == BackwardStrategy{}.long_run_threshold);  // no lowering needed
}

TEST_CASE("path coverage row: a missing path fails, named; unchecked families are skipped",
          "[verify][coverage]") {
  std::vector<FamilyPaths> fams;
  for (PathFamily f : {PathFamily::Forward, PathFamily::Backward, PathFamily::Ikbo}) {
    FamilyPaths fp;
    fp.family = f;
    fp.checked = true;
    const auto& req = required_paths(f);
    fp.exercised.insert(req.begin(), req.end());
    fp.exercised.insert("bounds.fused.extra");
    fams.push_back(fp);
  }
  CHECK(path_coverage_row(fams).verdict == Verdict::Passed);
  for (PathFamily f : {PathFamily::Forward, PathFamily::Backward, PathFamily::Ikbo}) {
    for (const std::string& drop : required_paths(f)) {
      std::vector<FamilyPaths> fake = fams;
      fake[static_cast<int>(f)].exercised.erase(drop);
      const RowResult row = path_coverage_row(fake);
      INFO(drop);
      CHECK(row.verdict == Verdict::Failed);
      CHECK(row.reason.find("paths." + to_string(f)) == 0);
      CHECK(row.reason.find(drop) != std::string::npos);
      CHECK(missing_paths(fake[static_cast<int>(f)]) == std::vector<std::string>{drop});
    }
  }
  std::vector<FamilyPaths> none = fams;
  for (FamilyPaths& fp : none) {
    fp.checked = false;
    fp.why_not = "no GPU";
    fp.exercised.clear();
  }
  const RowResult skipped = path_coverage_row(none);
  CHECK(skipped.verdict == Verdict::Skipped);
  CHECK(skipped.reason == "forward: no GPU; backward: no GPU; ikbo: no GPU");
}

TEST_CASE("large-table rows: skipped with the memory they need, or without a device",
          "[verify][coverage]") {
  auto ref = make_reference_backend();
  LargeTableConfig cfg;
  cfg.device = ref.get();
  cfg.device_free_bytes = std::size_t{1} << 30;
  const auto rows = run_large_table_rows(cfg);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].name == "large.forward");
  CHECK(rows[1].name == "large.backward");
  for (const LargeTableRow& r : rows) {
    CHECK(r.row.verdict == Verdict::Skipped);
    CHECK(r.row.reason.rfind("needs ", 0) == 0);
    CHECK(r.row.reason.find(" GiB of free device memory, the device has 1.0 GiB free") !=
          std::string::npos);
  }
  CHECK(static_cast<double>(kLargeTableRows) * kLargeTableDim >= 2147483648.0);
  LargeTableConfig none;
  none.skip_reason = "no GPU (test)";
  for (const LargeTableRow& r : run_large_table_rows(none)) {
    CHECK(r.row.verdict == Verdict::Skipped);
    CHECK(r.row.reason == "no GPU (test)");
  }
}
