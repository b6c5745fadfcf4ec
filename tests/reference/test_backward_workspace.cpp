// The CPU fallback's backward as a long-lived operator: the bytes it writes do not depend on the
// OpenMP thread count (1, 2, 8 threads on problems large enough to run in parallel), a reused
// BackwardWorkspace (and the reference backend that owns one) gives the same bytes as a fresh
// call, also after a larger problem and then a smaller one, and the radix-sort transpose equals
// the stable sort of (linearized id, position) pairs on every key width.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "backward_test_support.h"
#include "tbe/bounds_check.h"

using namespace tbe;
using namespace tbe_test;

namespace {

/// One variant of a generated backward case.
struct Variant {
  const char* name;
  PoolingMode pooling = PoolingMode::Sum;
  bool weighted = false;
  bool vbe = false;
  DType weights = DType::F32;
  DType output = DType::F32;
  OptimizerKind optimizer = OptimizerKind::ExactRowwiseAdagrad;
  WeightDecayMode decay = WeightDecayMode::None;
  bool stochastic = false;
  double max_norm = 0, max_gradient = 0;
  bool bad_indices = false;  ///< a few out-of-range indices (WARNING repairs them)
  DType index = DType::I64;
  std::int64_t batch = 1536;  ///< N > 2^16: the transpose's radix passes run in parallel too
};

const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = [] {
    std::vector<Variant> r;
    r.push_back({"sum adagrad fp32"});
    Variant sgd{"sum sgd fp16 weights, int32 indices"};
    sgd.optimizer = OptimizerKind::ExactSgd;
    sgd.weights = DType::F16;
    sgd.index = DType::I32;
    r.push_back(sgd);
    Variant mean{"mean weighted l2 max_norm clip, bf16 out"};
    mean.pooling = PoolingMode::Mean;
    mean.weighted = true;
    mean.decay = WeightDecayMode::L2;
    mean.max_norm = 0.5;
    mean.max_gradient = 0.25;
    mean.output = DType::BF16;
    r.push_back(mean);
    Variant none{"none decoupled, fp16 out"};
    none.pooling = PoolingMode::None;
    none.decay = WeightDecayMode::Decoupled;
    none.output = DType::F16;
    r.push_back(none);
    Variant vbe{"vbe weighted, bf16 weights, stochastic rounding"};
    vbe.vbe = true;
    vbe.weighted = true;
    vbe.weights = DType::BF16;
    vbe.stochastic = true;
    r.push_back(vbe);
    Variant bad{"repaired indices, fp16 weights, stochastic rounding"};
    bad.bad_indices = true;
    bad.weights = DType::F16;
    bad.stochastic = true;
    r.push_back(bad);
    return r;
  }();
  return v;
}

/// Three tables of mixed D (NONE: one D) shared by four features, Zipf rows with hot ones, large
/// enough that every parallel loop of the fallback runs on several threads.
BackwardCase make_case(const Variant& v, std::uint64_t seed) {
  WorkloadSpec s;
  s.name = v.name;
  s.T = 4;
  s.table_rows = {3000, 1200, 257};
  s.table_dims = v.pooling == PoolingMode::None ? std::vector<std::int32_t>{24, 24, 24}
                                                : std::vector<std::int32_t>{64, 17, 128};
  s.feature_table_map = {0, 1, 2, 0};
  s.L = 12;
  s.B = v.batch;
  s.distribution = IndexDistribution::Zipf;
  s.lengths = LengthDistribution::Uniform;
  s.length_spread = 6;
  s.vbe_ranks = v.vbe ? 3 : 0;
  s.weighted = v.weighted;
  s.index_dtype = v.index;
  s.seed = seed;
  s.options.pooling = v.pooling;
  s.options.bounds_check = BoundsCheckMode::Warning;
  s.options.policy = make_policy(PolicyKind::SeedDefault, v.weights, v.output);
  if (v.stochastic) s.options.policy.write_back = RoundingMode::Stochastic;
  BackwardCase c;
  c.forward = generate(s);
  if (v.bad_indices)
    for (std::size_t q = 3; q < c.forward.indices.size(); q += 997)
      c.forward.indices[q] = q % 2 ? -1 : 5000;
  c.options.optimizer.kind = v.optimizer;
  c.options.optimizer.learning_rate = 0.05;
  c.options.optimizer.weight_decay_mode = v.decay;
  c.options.optimizer.weight_decay = v.decay == WeightDecayMode::None ? 0.0 : 0.01;
  c.options.optimizer.max_norm = v.max_norm;
  c.options.optimizer.max_gradient = v.max_gradient;
  c.options.sr_seed = seed * 7 + 1;
  c.options.sr_offset = 3;
  c.resize_grad_output();
  Rng rng(seed, 99);
  const std::int64_t numel =
      static_cast<std::int64_t>(c.grad_output.size() / dtype_size(v.output));
  for (std::int64_t i = 0; i < numel; ++i) c.set_grad(i, rng.uniform() - 0.5);
  c.reset_momentum();
  for (float& m : c.momentum) m = static_cast<float>(rng.uniform());
  return c;
}

/// Runs the fallback (through `ws`, or a fresh workspace when null) and returns its outputs.
BackwardRun run_with(BackwardCase& c, BackwardWorkspace* ws) {
  BackwardRun r;
  r.weights = c.forward.weights;
  r.momentum = c.momentum;
  if (!c.forward.per_sample_weights.empty())
    r.psw_grad.assign(c.forward.indices.size(), std::nanf(""));
  BackwardOutputs out;
  out.weights = r.weights.data();
  out.momentum = r.momentum.empty() ? nullptr : r.momentum.data();
  out.per_sample_weight_grad = r.psw_grad.empty() ? nullptr : r.psw_grad.data();
  const BackwardProblem p = c.view();
  r.stats = ws ? backward_reference(p, out, *ws) : backward_reference(p, out);
  return r;
}

template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

void check_same(const BackwardRun& a, const BackwardRun& b) {
  CHECK(same_bytes(a.weights, b.weights));
  CHECK(same_bytes(a.momentum, b.momentum));
  CHECK(same_bytes(a.psw_grad, b.psw_grad));
  CHECK(a.stats.runs == b.stats.runs);
  CHECK(a.stats.lookups == b.stats.lookups);
  CHECK(a.stats.warnings == b.stats.warnings);
}

/// Sets the OpenMP thread count for a scope.
class Threads {
 public:
  explicit Threads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(saved_); }

 private:
  int saved_;
};

/// The transpose by its definition: std::stable_sort of (id, position) pairs in position order.
Transpose transpose_by_definition(const ForwardProblem& p, const RepairResult& rr) {
  const OutputLayout layout = make_output_layout(p);
  std::vector<std::int64_t> row0(p.tables.rows.size(), 0);
  for (std::size_t t = 1; t < row0.size(); ++t) row0[t] = row0[t - 1] + p.tables.rows[t - 1];
  Transpose tr;
  tr.position_bag.assign(static_cast<std::size_t>(p.lookups.num_indices), -1);
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
  for (std::int64_t k = 0; k < layout.num_bags; ++k)
    for (std::int64_t q = rr.offsets[k]; q < rr.offsets[k + 1]; ++q) {
      tr.position_bag[q] = k;
      const std::int64_t t = p.tables.feature_table_map[layout.feature_of_bag(k)];
      pairs.emplace_back(row0[t] + rr.indices[q], q);
    }
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  tr.run_offsets.push_back(0);
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    tr.sorted_positions.push_back(pairs[i].second);
    if (i > 0 && pairs[i].first == pairs[i - 1].first) continue;
    if (i > 0) tr.run_offsets.push_back(static_cast<std::int64_t>(i));
    tr.linear_ids.push_back(pairs[i].first);
  }
  if (!pairs.empty()) tr.run_offsets.push_back(static_cast<std::int64_t>(pairs.size()));
  for (std::size_t r = 0; r < tr.linear_ids.size(); ++r)
    tr.run_lengths.push_back(tr.run_offsets[r + 1] - tr.run_offsets[r]);
  return tr;
}

void check_transpose(const Transpose& a, const Transpose& b) {
  CHECK(a.linear_ids == b.linear_ids);
  CHECK(a.run_lengths == b.run_lengths);
  CHECK(a.run_offsets == b.run_offsets);
  CHECK(a.sorted_positions == b.sorted_positions);
  CHECK(a.position_bag == b.position_bag);
}

}  // namespace

TEST_CASE("backward fallback: the same bytes with 1, 2 and 8 OpenMP threads",
          "[backward][workspace][threads]") {
  for (const Variant& v : variants()) {
    INFO(v.name);
    BackwardCase c = make_case(v, 11);
    REQUIRE(c.forward.indices.size() > (1u << 16));  // every parallel loop opens a region
    BackwardRun one;
    BackwardReference ref1;
    {
      const Threads t(1);
      one = run_with(c, nullptr);
      ref1 = backward_reference_fp64(c.view());
    }
    if (v.bad_indices) CHECK(one.stats.warnings > 0);
    for (int n : {2, 8}) {
      INFO(n << " threads");
      const Threads t(n);
      REQUIRE(omp_get_max_threads() == n);
      check_same(one, run_with(c, nullptr));
      const BackwardReference ref = backward_reference_fp64(c.view());
      check_transpose(ref.transpose, ref1.transpose);
      CHECK(same_bytes(ref.row_grad, ref1.row_grad));
      CHECK(same_bytes(ref.updated, ref1.updated));
      CHECK(same_bytes(ref.momentum, ref1.momentum));
      CHECK(same_bytes(ref.per_sample_weight_grad, ref1.per_sample_weight_grad));
    }
  }
}

TEST_CASE("backward fallback: a reused workspace gives the bytes of a fresh call",
          "[backward][workspace]") {
  // Small, then larger, then small again (and another pooling mode), through one workspace and
  // through the reference backend (which owns one); each against a fresh call.
  Variant small = variants()[0], large = variants()[2], other = variants()[3];
  small.batch = 64;
  large.batch = 512;
  other.batch = 128;
  BackwardCase cs = make_case(small, 3), cl = make_case(large, 4), co = make_case(other, 5);
  const BackwardRun fresh_s = run_with(cs, nullptr), fresh_l = run_with(cl, nullptr),
                    fresh_o = run_with(co, nullptr);

  BackwardWorkspace ws;
  CHECK(ws.bytes() == 0);
  check_same(run_with(cs, &ws), fresh_s);
  const std::size_t after_small = ws.bytes();
  CHECK(after_small > 0);
  check_same(run_with(cl, &ws), fresh_l);
  const std::size_t after_large = ws.bytes();
  CHECK(after_large > after_small);
  check_same(run_with(cs, &ws), fresh_s);
  check_same(run_with(co, &ws), fresh_o);
  CHECK(ws.bytes() == after_large);  // buffers only grow: nothing allocated again
  check_same(run_with(cl, &ws), fresh_l);
  ws.release();
  CHECK(ws.bytes() == 0);
  check_same(run_with(cs, &ws), fresh_s);

  auto be = make_reference_backend();
  for (BackwardCase* c : {&cs, &cl, &cs, &co})
    check_same(run_backward(*c, be.get()), c == &cs ? fresh_s : c == &cl ? fresh_l : fresh_o);
}

TEST_CASE("transpose: the radix sort equals the stable sort on every key width",
          "[backward][transpose]") {
  // Σ E_t of 1 (no key bits), 40 (one pass), 3000 + 1200 + 257 (two), 2^23 + 3 (three passes).
  for (const std::vector<std::int64_t>& rows :
       {std::vector<std::int64_t>{1}, std::vector<std::int64_t>{40},
        std::vector<std::int64_t>{3000, 1200, 257},
        std::vector<std::int64_t>{(std::int64_t{1} << 23) + 3}}) {
    for (int threads : {1, 3}) {
      INFO("tables " << rows.size() << ", rows[0] " << rows[0] << ", threads " << threads);
      const Threads t(threads);
      WorkloadSpec s;
      s.T = 3;
      s.table_rows = rows;
      s.table_dims.assign(rows.size(), 1);
      s.feature_table_map.assign(3, 0);
      if (rows.size() == 3) s.feature_table_map = {2, 0, 1};
      s.L = 20;
      s.B = 1500;
      s.distribution = rows[0] > 100 ? IndexDistribution::Zipf : IndexDistribution::Uniform;
      s.lengths = LengthDistribution::Normal;
      s.length_spread = 8;
      s.seed = 17;
      ForwardCase fc = generate(s);
      const ForwardProblem p = fc.view();
      const RepairResult rr = repair(p);
      check_transpose(transpose_lookups(p, rr), transpose_by_definition(p, rr));
    }
  }
}
