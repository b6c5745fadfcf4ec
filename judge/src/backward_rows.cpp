// tbe-verify's backward rows (verify/backward_rows.h).
#include "tbe/judge/backward_rows.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <map>
#include <numeric>
#include <stdexcept>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>

#include <omp.h>

#include "tbe/errors.h"
#include "tbe/host_case.h"
#include "tbe/io/backward_case_file.h"
#include "tbe/judge/case_commands.h"
#include "tbe/judge/path_coverage.h"
#include "tbe/judge/runner.h"
#include "tbe/oracle/backward_oracle.h"
#include "tbe/oracle/forward_oracle.h"

namespace tbe::judge {
namespace {

constexpr std::uint64_t kGradStream = 0x6772'6164'0000'0000ULL;      // "grad"
constexpr std::uint64_t kMomentumStream = 0x6d6f'6d00'0000'0000ULL;  // "mom"

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string lower_bool(bool b) { return b ? "1" : "0"; }

bool has_path(const std::vector<std::string>& paths, const std::string& path) {
  return std::find(paths.begin(), paths.end(), path) != paths.end();
}

// The host state of one backward call: the case (tables before), grad_output, momentum.
struct BackwardInputs {
  ForwardCase fc;
  std::vector<std::byte> grad_output;
  std::vector<float> momentum;  // [Σ E_t] (Adagrad) or empty
  BackwardProblem problem;      // views into the above
  /// Points the problem's views at this object's buffers: after building it, and after copying
  /// it (a copy's views still point into the original).
  void rebind() {
    problem.forward = fc.view();
    problem.grad_output = grad_output.data();
    problem.momentum = momentum.empty() ? nullptr : momentum.data();
  }
};

std::int64_t total_rows(const ForwardCase& fc) {
  std::int64_t n = 0;
  for (std::int64_t e : fc.rows) n += e;
  return n;
}

// Segment lengths laid out in the last feature's table, rows 0..9 (docs/backward.md "Routing"):
// SL 255 / 256 / 257 around the default long-run threshold, 511..513 and 767..769 around the
// chunk boundaries of 256, and one run of 4097 (17 chunks: many arrivals at the fused route's
// fence). The feature's other lookups cycle over rows 10, 11, ... A slice too small for all of
// them keeps the first ones that fit.
constexpr std::int64_t kEdgeLengths[] = {255, 256, 257, 511, 512, 513, 767, 768, 769, 4097};

void lay_segment_length_edges(ForwardCase& c) {
  const std::int64_t T = c.num_features();
  std::int64_t first_bag = (T - 1) * c.batch_size;
  if (c.vbe_ranks > 0) {
    first_bag = 0;
    for (std::int64_t i = 0; i < (T - 1) * c.vbe_ranks; ++i) first_bag += c.vbe_batch_sizes[i];
  }
  const std::int64_t K = static_cast<std::int64_t>(std::size(kEdgeLengths));
  const std::int64_t E = c.rows[c.feature_table_map[T - 1]];
  std::int64_t q = c.offsets[first_bag];
  const std::int64_t end = c.offsets.back();
  for (std::int64_t k = 0; k < K; ++k)
    for (std::int64_t j = 0; j < kEdgeLengths[k] && q < end; ++j) c.indices[q++] = k;
  for (std::int64_t i = 0; q < end; ++q, ++i) c.indices[q] = K + i % (E - K);
}

// set(i, u) for i in [0, n), u the (i+1)-th uniform() of stream (seed, key): fixed chunks, each
// starting its stream at its first element (Rng::advance), so the values are those of a serial
// loop for any thread count.
template <class Set>
void fill_uniform(std::uint64_t seed, std::uint64_t key, std::int64_t n, Set&& set) {
  constexpr std::int64_t kChunk = 1 << 16;
  const std::int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
  for (std::int64_t c = 0; c < chunks; ++c) {
    Rng g(seed, key);
    g.advance(static_cast<std::uint64_t>(c * kChunk));
    const std::int64_t end = std::min(n, (c + 1) * kChunk);
    for (std::int64_t i = c * kChunk; i < end; ++i) set(i, g.uniform());
  }
}

// Builds the row's problem from the seed-large slice.
void build_inputs(BackwardInputs& in, const BackwardRunnerConfig& cfg, const BackwardRowAxes& a,
                  std::uint64_t row_seed) {
  const bool small = a.histogram != BackwardHistogram::Off;
  WorkloadSpec spec = named_workload(small ? "small-table" : cfg.workload, cfg.batch);
  spec.T = small ? 3 : std::max<std::int64_t>(2, cfg.features);
  // Tables scale with the batch so small runs stay small (seed-large keeps E = 100000 at B = 8192).
  spec.E = std::min<std::int64_t>(spec.E, std::max<std::int64_t>(1024, spec.B * spec.L));
  // dense_rows: mean SL 8; at least 65 rows, past the small-table path's E <= 64 (docs/small-table.md)
  if (a.dense_rows) spec.E = std::max<std::int64_t>(65, spec.B * spec.L / 8);
  spec.feature_table_map.clear();
  spec.table_rows.clear();
  spec.table_dims.clear();
  spec.feature_L.clear();
  if (a.wide_rows) spec.D = 256;  // D > 128: the GPU's block-per-run groups
  if (a.odd_rows) spec.D = 125;   // D % 4 != 0: the column tail of the run kernels
  if (small) {  // BackwardRowAxes::histogram: two small-table features beside a generic one
    spec.table_rows = {48, 64, spec.E};
    spec.table_dims = {96, 128, 128};
    spec.feature_L = {128, 64, 20};
  }
  if (a.shared_tables) {
    // T >= 4: features 0 and 2 share table 0 (one update per row for both) with feature 1's table
    // 1 between them: the lookups of a row of table 0 come before and after table 1's in bag
    // order, so a sort that ignores the high key bits (Σ E_t needs more than max E_t) splits its
    // run. The last feature keeps a table of its own (its rows 0..9 carry the SL edges). Smaller
    // slices: features 0 and 1 share table 0.
    for (std::int64_t f = 0; f < spec.T; ++f) {
      const std::int64_t t = spec.T >= 4 ? (f == 2 ? 0 : f < 2 ? f : f - 1) : std::max<std::int64_t>(0, f - 1);
      spec.feature_table_map.push_back(static_cast<std::int32_t>(t));
    }
  }
  spec.weighted = a.weighted;
  spec.vbe_ranks = a.vbe ? 3 : 0;
  spec.index_dtype = a.index;
  spec.seed = cfg.seed;
  spec.options.pooling = a.pooling;
  spec.options.bounds_check = BoundsCheckMode::None;
  const DType out = DType::F32;
  spec.options.policy = make_policy(
      a.policy, a.weights, out,
      a.stochastic_rounding ? RoundingMode::Stochastic : RoundingMode::Nearest);
  in.fc = generate(spec);
  lay_segment_length_edges(in.fc);
  ForwardProblem fp = in.fc.view();

  const OutputLayout layout = make_output_layout(fp);
  in.grad_output.assign(static_cast<std::size_t>(layout.numel) * dtype_size(out), std::byte{0});
  fill_uniform(row_seed, kGradStream, layout.numel, [&](std::int64_t i, double u) {
    store_from_double(out, in.grad_output.data(), i, 2.0 * u - 1.0);
  });

  BackwardProblem& p = in.problem;
  OptimizerConfig& o = p.options.optimizer;
  o.kind = a.optimizer;
  o.weight_decay_mode = a.weight_decay;
  o.learning_rate = a.optimizer == OptimizerKind::ExactSgd ? 0.01 : 0.05;
  o.eps = 1e-8;
  o.weight_decay = a.weight_decay == WeightDecayMode::None ? 0.0 : 0.01;
  o.max_norm = a.max_norm ? 5.0 : 0.0;
  o.max_gradient = a.clip_gradient ? 0.5 : 0.0;
  p.options.sr_seed = row_seed;
  p.options.sr_offset = (row_seed >> 44) | 1;  // a later call's offset (never 0)
  if (a.optimizer == OptimizerKind::ExactRowwiseAdagrad) {
    in.momentum.assign(static_cast<std::size_t>(total_rows(in.fc)), 0.0f);
    if (a.momentum_nonzero)
      fill_uniform(row_seed, kMomentumStream, static_cast<std::int64_t>(in.momentum.size()),
                   [&](std::int64_t i, double u) { in.momentum[i] = static_cast<float>(0.5 * u); });
  }
  in.rebind();
}

// The C12 shape (docs/edge-cases.md): FP16/BF16 rows of ones, each looked up once, grad -1,
// Adagrad with lr a quarter ulp of 1: SR moves about 25% of the elements up, RNE none.
void build_c12(BackwardInputs& in, DType weights, std::uint64_t seed) {
  ForwardCase& c = in.fc;
  const std::int64_t E = 1024, D = 4;
  c.set_tables(weights, {E}, {static_cast<std::int32_t>(D)});
  c.feature_table_map = {0};
  for (std::int64_t r = 0; r < E; ++r)
    for (std::int64_t d = 0; d < D; ++d) c.set_weight(0, r, d, 1.0);
  c.index_dtype = DType::I64;
  c.indices.resize(E);
  c.offsets.resize(E + 1);
  for (std::int64_t r = 0; r <= E; ++r) {
    if (r < E) c.indices[r] = r;
    c.offsets[r] = r;
  }
  c.batch_size = E;
  c.options.pooling = PoolingMode::Sum;
  c.options.bounds_check = BoundsCheckMode::None;
  c.options.policy =
      make_policy(PolicyKind::SeedDefault, weights, DType::F32, RoundingMode::Stochastic);
  in.grad_output.assign(static_cast<std::size_t>(E * D) * sizeof(float), std::byte{0});
  for (std::int64_t i = 0; i < E * D; ++i) store_from_double(DType::F32, in.grad_output.data(), i, -1.0);
  in.momentum.assign(static_cast<std::size_t>(E), 0.0f);
  in.rebind();
  const double ulp_of_one = 2.0 * float_traits(weights).unit_roundoff;
  BackwardProblem& p = in.problem;
  p.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  p.options.optimizer.learning_rate = ulp_of_one / 4.0;
  p.options.optimizer.eps = 1e-10;
  p.options.sr_seed = seed;
}

// The hi/lo probe of the small-table rows (docs/backward.md): one small-table feature (E = 48,
// D = 128, B = 72 bags of L = 64, every row looked up exactly 96 times: SL above the histogram
// path's minimum run, 42 + tiles + blocks = 48 here) with zero FP16 weights, SGD at lr 1 and RNE, so each updated
// row is the negated FP32 gradient sum of its 96 lookups, rounded once to FP16. grad_output has
// full FP32 mantissas: the lo part of the path's FP16 split moves each sum by about 0.2 of an
// FP16 ulp, well beyond that sum's enclosure (~0.07 ulp), so a backward that drops lo misses
// about one element in eight.
void build_hilo_probe(BackwardInputs& in, PolicyKind policy, std::uint64_t seed) {
  ForwardCase& c = in.fc;
  const std::int64_t E = 48, D = 128, B = 72, L = 64;  // B·L = 96·E
  c.set_tables(DType::F16, {E}, {static_cast<std::int32_t>(D)});  // zero rows
  c.feature_table_map = {0};
  c.index_dtype = DType::I64;
  c.indices.resize(B * L);
  c.offsets.resize(B + 1);
  Rng g(seed, 0x68696c6fULL);  // "hilo"
  for (std::int64_t i = 0; i < B * L; ++i) c.indices[i] = i % E;
  for (std::int64_t i = B * L - 1; i > 0; --i)  // Fisher-Yates: rows spread over the bags
    std::swap(c.indices[i], c.indices[g.uniform_int(i + 1)]);
  for (std::int64_t b = 0; b <= B; ++b) c.offsets[b] = b * L;
  c.batch_size = B;
  c.options.pooling = PoolingMode::Sum;
  c.options.bounds_check = BoundsCheckMode::None;
  c.options.policy = make_policy(policy, DType::F16, DType::F32, RoundingMode::Nearest);
  in.grad_output.assign(static_cast<std::size_t>(B * D) * sizeof(float), std::byte{0});
  for (std::int64_t i = 0; i < B * D; ++i)
    store_from_double(DType::F32, in.grad_output.data(), i, 2.0 * g.uniform() - 1.0);
  in.momentum.clear();
  in.rebind();
  BackwardProblem& p = in.problem;
  p.options.optimizer.kind = OptimizerKind::ExactSgd;
  p.options.optimizer.learning_rate = 1.0;
  p.options.sr_seed = seed;
}

struct BackwardResultBuffers {
  std::vector<std::byte> weights;
  std::vector<float> momentum;
  std::vector<float> psw_grad;
  BackwardOutputs outputs() {
    BackwardOutputs o;
    o.weights = weights.data();
    o.momentum = momentum.empty() ? nullptr : momentum.data();
    o.per_sample_weight_grad = psw_grad.empty() ? nullptr : psw_grad.data();
    return o;
  }
  oracle::BackwardResultView view() const {
    return {weights.data(), momentum.empty() ? nullptr : momentum.data(),
            psw_grad.empty() ? nullptr : psw_grad.data()};
  }
};

// Outputs start as copies of the state before the call (in place, as FBGEMM updates).
BackwardResultBuffers fresh_outputs(const BackwardInputs& in) {
  BackwardResultBuffers r;
  r.weights = in.fc.weights;
  r.momentum = in.momentum;
  if (in.problem.forward.lookups.weighted())
    r.psw_grad.assign(static_cast<std::size_t>(in.fc.indices.size()), -7.0f);  // poison
  return r;
}

// The route's strategy; long routes lower the threshold when the slice's longest run is short.
BackwardStrategy strategy_for(const BackwardRowAxes& a, std::int64_t max_sl) {
  BackwardStrategy s;
  s.deterministic = a.deterministic;
  if (a.route == BackwardRoute::Short) {
    s.long_run_threshold = 1 << 20;
    return s;
  }
  s.long_runs = a.route == BackwardRoute::Chunked ? BackwardStrategy::LongRuns::Chunked
                                                  : BackwardStrategy::LongRuns::Fused;
  if (max_sl < 512) {
    s.long_run_threshold = static_cast<std::int32_t>(std::max<std::int64_t>(1, max_sl / 2));
    s.chunk_size = 32;
  }
  return s;
}

void add_report_checks(RowResult& row, const oracle::BackwardCheckReport& rep, const std::string& prefix) {
  for (const oracle::CheckReport& r : rep.reports) {
    Check c{prefix + r.check, r.passed(), r.summary(), r};
    row.checks.push_back(std::move(c));
  }
}

/// One backward call of a row, kept so a failing row can be saved as a case folder: the inputs,
/// the outputs it wrote or the error it raised (as a case folder names it).
// One backward call of a row. Small-table rows (BackwardRowAxes::histogram) run the forward too:
// saved counts as one training step, own counts as forward() then backward(); `fwd_out` gets the
// forward's output and `fwd_paths` its paths.
BackwardStats backward_step(Backend& dev, const BackwardProblem& p, BackwardResultBuffers& o,
                            const BackwardStrategy& strategy, BackwardHistogram histogram,
                            std::vector<std::byte>& fwd_out, std::vector<std::string>& fwd_paths) {
  if (histogram == BackwardHistogram::Off) return dev.backward(p, o.outputs(), strategy);
  fwd_out.assign(static_cast<std::size_t>(make_output_layout(p.forward).numel) *
                     dtype_size(p.forward.options.policy.output),
                 std::byte{0});
  if (histogram == BackwardHistogram::Saved) {
    TrainingStepStats st = dev.training_step(p, fwd_out.data(), o.outputs(), strategy);
    fwd_paths = st.forward.paths;
    return st.backward;
  }
  fwd_paths = dev.forward(p.forward, fwd_out.data()).paths;
  return dev.backward(p, o.outputs(), strategy);
}

struct JudgedCall {
  const BackwardInputs* in = nullptr;
  BackwardResultBuffers* out = nullptr;
  BackwardStrategy strategy;
  BackwardHistogram histogram = BackwardHistogram::Off;
  bool ran = false;
  BackwardStats stats;
  std::vector<std::byte> forward_output;   ///< small-table rows: the forward's output
  std::vector<std::string> forward_paths;  ///< small-table rows: the forward's paths
  std::optional<std::string> error;  ///< "bounds_check", "invalid_argument" or "device_error"
  /// backward_step on *in into *out (a fresh copy); records the error it raises, then rethrows.
  BackwardStats run(Backend& dev) {
    ran = true;
    try {
      stats = backward_step(dev, in->problem, *out, strategy, histogram, forward_output,
                            forward_paths);
      return stats;
    } catch (const BoundsCheckError&) {
      error = "bounds_check";
      throw;
    } catch (const InvalidArgument&) {
      error = "invalid_argument";
      throw;
    } catch (...) {
      error = "device_error";
      throw;
    }
  }
};

/// Writes the call as a backward case folder with its outputs (or error) recorded, expect pass.
void write_backward_case(const std::string& dir, const JudgedCall& call, const std::string& name,
                         const std::string& provenance, std::uint64_t seed,
                         const std::string& implementation) {
  io::BackwardCaseFile cf;
  cf.name = name;
  cf.provenance = provenance;
  cf.seed = seed;
  cf.problem.forward = call.in->fc;
  cf.problem.grad_output = call.in->grad_output;
  cf.problem.momentum = call.in->momentum;
  cf.problem.options = call.in->problem.options;
  cf.strategy = io::BackwardStrategyRecord{call.strategy, false};
  io::BackwardRecordedOutputs r;
  r.implementation = implementation;
  if (call.error) {
    r.error = call.error;
  } else {
    r.weights = call.out->weights;
    if (!call.out->momentum.empty()) r.momentum = call.out->momentum;
    if (!call.out->psw_grad.empty()) r.per_sample_weight_grad = call.out->psw_grad;
    r.warnings = call.stats.warnings;
  }
  cf.recorded = std::move(r);
  cf.expect = io::Expectation{"pass", ""};  // what the suite requires of the backend
  io::write_case(dir, cf);
}

}  // namespace

std::string to_string(BackwardRoute r) {
  switch (r) {
    case BackwardRoute::Short: return "short";
    case BackwardRoute::Chunked: return "chunked";
    case BackwardRoute::Fused: return "fused";
  }
  return "?";
}

std::string to_string(BackwardHistogram h) {
  switch (h) {
    case BackwardHistogram::Off: return "off";
    case BackwardHistogram::Own: return "own";
    case BackwardHistogram::Saved: return "saved";
  }
  return "?";
}

// Route / determinism variants per (optimizer, weight decay, rounding): the innermost axis of the
// seed-large rows (enumerate_backward_rows, backward_row_schedule).
struct RouteDet {
  BackwardRoute route;
  bool det;
};
constexpr RouteDet kRouteVariants[] = {{BackwardRoute::Short, true},   {BackwardRoute::Chunked, true},
                                       {BackwardRoute::Chunked, false}, {BackwardRoute::Fused, true},
                                       {BackwardRoute::Fused, false}};

std::vector<BackwardRowAxes> enumerate_backward_rows() {
  struct Opt {
    OptimizerKind k;
    WeightDecayMode wd;
  };
  const Opt opts[] = {{OptimizerKind::ExactSgd, WeightDecayMode::None},
                      {OptimizerKind::ExactRowwiseAdagrad, WeightDecayMode::None},
                      {OptimizerKind::ExactRowwiseAdagrad, WeightDecayMode::L2},
                      {OptimizerKind::ExactRowwiseAdagrad, WeightDecayMode::Decoupled}};
  const PoolingMode poolings[] = {PoolingMode::Sum, PoolingMode::Mean, PoolingMode::None};
  std::vector<BackwardRowAxes> rows;
  std::size_t i = 0;
  for (const Opt& o : opts)
    for (bool sr : {false, true})
      for (const RouteDet& rd : kRouteVariants) {
        BackwardRowAxes a;
        a.optimizer = o.k;
        a.weight_decay = o.wd;
        a.stochastic_rounding = sr;
        a.route = rd.route;
        a.deterministic = rd.det;
        // Rotated axes (co-prime cycles so combinations spread).
        a.policy = (i % 2 == 0) ? PolicyKind::SeedDefault : PolicyKind::FbgemmCuda;
        if (sr) a.weights = (i / 2) % 2 == 0 ? DType::F16 : DType::BF16;
        else a.weights = i % 3 == 0 ? DType::F32 : (i % 3 == 1 ? DType::F16 : DType::BF16);
        a.pooling = poolings[i % 3];
        a.weighted = a.pooling != PoolingMode::None && (i / 3) % 2 == 0;
        a.index = (i / 2) % 2 == 0 ? DType::I64 : DType::I32;
        a.vbe = a.pooling != PoolingMode::None && i % 5 == 2;
        a.shared_tables = i % 4 == 1;
        a.max_norm = i % 7 == 3;
        a.clip_gradient = i % 6 == 4;
        a.momentum_nonzero = o.k == OptimizerKind::ExactRowwiseAdagrad && i % 2 == 1;
        a.wide_rows = i % 5 == 3;
        a.odd_rows = i % 10 == 5;  // route short, among the first rows of the schedule
        a.dense_rows = i % 4 == 3 && !a.odd_rows && !a.wide_rows;
        rows.push_back(a);
        ++i;
      }
  // Small-table rows: FP16 weights (the path's storage type), unweighted, not VBE, own tables;
  // pooling, policy, index width, max_norm, clipping and momentum rotate.
  std::size_t k = 0;
  for (OptimizerKind opt : {OptimizerKind::ExactSgd, OptimizerKind::ExactRowwiseAdagrad})
    for (bool sr : {false, true})
      for (BackwardHistogram h : {BackwardHistogram::Own, BackwardHistogram::Saved}) {
        BackwardRowAxes a;
        a.optimizer = opt;
        a.stochastic_rounding = sr;
        a.histogram = h;
        a.weights = DType::F16;
        a.policy = k % 2 == 0 ? PolicyKind::SeedDefault : PolicyKind::FbgemmCuda;
        a.pooling = (k / 2) % 2 == 0 ? PoolingMode::Sum : PoolingMode::Mean;
        a.index = k % 3 == 0 ? DType::I32 : DType::I64;
        a.max_norm = k % 4 == 3;
        a.clip_gradient = k % 3 == 1;
        a.momentum_nonzero = opt == OptimizerKind::ExactRowwiseAdagrad && k % 2 == 1;
        rows.push_back(a);
        ++k;
      }
  return rows;
}

std::vector<std::size_t> backward_row_schedule() {
  const std::vector<BackwardRowAxes> rows = enumerate_backward_rows();
  std::vector<std::size_t> order, large;
  for (std::size_t i = 0; i < rows.size(); ++i)
    (rows[i].histogram != BackwardHistogram::Off ? order : large).push_back(i);
  // large[g·R + r]: optimizer variant g (G of them), route variant r (R). Position p runs
  // (g, r) = (p mod G, p mod R): G and R coprime, so the first G positions hold every optimizer
  // variant, every R consecutive ones every route, and all G·R pairs appear once (CRT).
  constexpr std::size_t R = std::size(kRouteVariants);
  const std::size_t G = large.size() / R;
  if (G * R != large.size() || std::gcd(G, R) != 1)
    throw std::logic_error("backward_row_schedule: " + std::to_string(G) +
                           " optimizer variants x " + std::to_string(R) +
                           " routes must be coprime and cover the rows");
  for (std::size_t p = 0; p < large.size(); ++p) order.push_back(large[(p % G) * R + p % R]);
  return order;
}

std::string backward_row_label(const BackwardRowAxes& a) {
  std::ostringstream os;
  os << "bwd:opt=" << to_string(a.optimizer) << ",wd=" << to_string(a.weight_decay)
     << ",round=" << (a.stochastic_rounding ? "sr" : "rne") << ",route=" << to_string(a.route)
     << ",det=" << lower_bool(a.deterministic) << ",policy=" << to_string(a.policy)
     << ",w=" << to_string(a.weights) << ",weighted=" << lower_bool(a.weighted)
     << ",pooling=" << to_string(a.pooling) << ",index=" << to_string(a.index)
     << ",vbe=" << lower_bool(a.vbe) << ",shared=" << lower_bool(a.shared_tables)
     << ",max_norm=" << lower_bool(a.max_norm) << ",clip=" << lower_bool(a.clip_gradient)
     << ",momentum="
     << (a.optimizer == OptimizerKind::ExactSgd ? "none" : a.momentum_nonzero ? "random" : "zero")
     << ",D=" << (a.wide_rows ? 256 : a.odd_rows ? 125 : 128);
  if (a.dense_rows) os << ",rows=dense";
  if (a.histogram != BackwardHistogram::Off)
    os << ",small_table=48x96+64x128,counts=" << to_string(a.histogram);
  return os.str();
}

BackwardRunner::BackwardRunner(BackwardRunnerConfig cfg) : cfg_(std::move(cfg)) {
  if (cfg_.device) device_ = std::make_unique<SerializedBackend>(*cfg_.device, device_mutex_);
}

BackwardRowResult BackwardRunner::run(const BackwardRowAxes& a, std::size_t row_index) {
  const auto t0 = std::chrono::steady_clock::now();
  BackwardRowResult res;
  res.axes = a;
  res.index = row_index;
  res.label = backward_row_label(a);
  RowResult& row = res.row;
  SectionTimes times;  // this row's, added to the runner's at the end
  row.target = cfg_.device ? Target::Device : Target::SelfCheck;
  const std::uint64_t row_seed = stable_hash(res.label) ^ (cfg_.seed * 0x9E3779B97F4A7C15ULL);
  // What a failing row is saved from: the judged calls' inputs, outputs or errors.
  BackwardInputs in, c12, hilo;
  BackwardResultBuffers out, out12, out_hilo;
  JudgedCall main_call, c12_call, hilo_call;
  main_call.in = &in;
  main_call.out = &out;
  c12_call.in = &c12;
  c12_call.out = &out12;
  hilo_call.in = &hilo;
  hilo_call.out = &out_hilo;
  std::string implementation;
  try {
    times.time("generation", [&] { build_inputs(in, cfg_, a, row_seed); });
    const BackwardProblem& p = in.problem;
    BackwardReference fp64 = times.time("reference", [&] { return backward_reference_fp64(p); });
    const oracle::BackwardEnclosures enc = times.time(
        "enclosures", [&] { return oracle::compute_backward_enclosures(p, std::move(fp64)); });
    const BackwardReference& ref = enc.reference;
    for (std::int64_t sl : ref.transpose.run_lengths)
      res.max_segment_length = std::max(res.max_segment_length, sl);
    const BackwardStrategy strategy = strategy_for(a, res.max_segment_length);
    res.long_run_threshold = strategy.long_run_threshold;
    res.chunk_size = strategy.chunk_size;

    // Without a device the CPU fallback runs every check but the route counters (it has one
    // path): oracle, determinism, SR z-test and C12.
    std::unique_ptr<Backend> cpu;
    if (!cfg_.device) cpu = make_reference_backend();
    Backend& dev = cfg_.device ? static_cast<Backend&>(*device_) : *cpu;
    implementation = dev.name();
    main_call.strategy = c12_call.strategy = strategy;
    main_call.histogram = a.histogram;
    const bool small = a.histogram != BackwardHistogram::Off;
    out = fresh_outputs(in);
    res.stats = times.time("backend", [&] { return main_call.run(dev); });
    row.paths = res.stats.paths;
    const std::vector<std::byte>& fwd_out = main_call.forward_output;
    if (small) {
      const oracle::CheckReport fr = times.time(
          "judge", [&] { return oracle::check_forward(p.forward, fwd_out.data()); });
      row.checks.push_back(Check{"forward.oracle", fr.passed(), fr.summary(), fr});
      for (const std::string& path : main_call.forward_paths)
        if (std::find(row.paths.begin(), row.paths.end(), path) == row.paths.end())
          row.paths.push_back(path);
    }
    times.time("judge", [&] {
      add_report_checks(row, oracle::judge_backward(p, enc, out.view()), "oracle.");
    });

    // Counters: the intended route ran, and the paths together covered every run and lookup.
    const BackwardPathCounters& c = res.stats.counters;
    if (cfg_.device) {
    const std::int64_t runs = static_cast<std::int64_t>(ref.transpose.linear_ids.size());
    const std::int64_t lookups = static_cast<std::int64_t>(ref.transpose.sorted_positions.size());
    {
      std::ostringstream os;
      os << "short " << c.short_runs << " runs/" << c.short_lookups << " lookups, chunked "
         << c.chunked_runs << "/" << c.chunked_lookups << ", fused " << c.fused_runs << "/"
         << c.fused_lookups << ", chunks " << c.chunks << "; reference " << runs << " runs/"
         << lookups << " lookups (max SL " << res.max_segment_length << ", threshold "
         << strategy.long_run_threshold << ")";
      // The rows the small-table histogram updated leave the generic counters; together they
      // cover every run and lookup of the reference transpose once.
      const std::int64_t hist_runs = c.histogram_runs + c.histogram_exact_runs;
      const std::int64_t hist_lookups = c.histogram_lookups + c.histogram_exact_lookups;
      const bool sums =
          c.short_runs + c.chunked_runs + c.fused_runs + hist_runs == runs &&
          c.short_lookups + c.chunked_lookups + c.fused_lookups + hist_lookups == lookups &&
          res.stats.runs == runs && res.stats.lookups == lookups && (small || hist_runs == 0);
      const std::int64_t routed = a.route == BackwardRoute::Short     ? c.short_runs
                                  : a.route == BackwardRoute::Chunked ? c.chunked_runs
                                                                      : c.fused_runs;
      if (small)
        os << "; small-table histogram " << hist_runs << " runs/" << hist_lookups << " lookups";
      row.checks.push_back(agreement("counters", sums && routed > 0,
                                     os.str() + (sums ? "" : ": counters do not add up") +
                                         (routed > 0 ? "" : ": the route never ran")));
      if (small) {
        auto has = [&](const char* path) { return has_path(row.paths, path); };
        const bool saved = a.histogram == BackwardHistogram::Saved;
        const bool ran = hist_runs > 0 && has("forward.small_table.mma") &&
                         has("bwd.small_table") && saved == has("bwd.small_table.saved_counts");
        std::ostringstream hs;
        hs << hist_runs << " rows updated from the histogram; paths forward.small_table.mma "
           << lower_bool(has("forward.small_table.mma")) << ", bwd.small_table "
           << lower_bool(has("bwd.small_table")) << ", bwd.small_table.saved_counts "
           << lower_bool(has("bwd.small_table.saved_counts")) << " (expected "
           << lower_bool(saved) << ")";
        row.checks.push_back(agreement("small_table.path", ran,
                                       hs.str() + (ran ? "" : ": the histogram path did not run as asked")));
      }
    }
    }
    if (a.deterministic) {
      BackwardResultBuffers again = fresh_outputs(in);
      std::vector<std::byte> again_fwd;
      std::vector<std::string> again_paths;
      times.time("backend", [&] {
        backward_step(dev, p, again, strategy, a.histogram, again_fwd, again_paths);
      });
      const bool same = again.weights == out.weights && again.momentum == out.momentum &&
                        again.psw_grad == out.psw_grad && again_fwd == fwd_out;
      row.checks.push_back(agreement("deterministic", same,
                                     same ? "second call bitwise identical"
                                          : "second call differs bitwise"));
    }
    if (a.stochastic_rounding) {
      const auto t_sr = std::chrono::steady_clock::now();
      const auto z = oracle::stochastic_rounding_test(p, enc, out.weights.data());
      row.checks.push_back(agreement("sr.z_test", z.passed(), z.summary()));
      build_c12(c12, a.weights, row_seed);
      const oracle::BackwardEnclosures enc12 = oracle::compute_backward_enclosures(c12.problem);
      out12 = fresh_outputs(c12);
      const BackwardStats st12 = c12_call.run(dev);
      for (const auto& path : st12.paths)
        if (std::find(row.paths.begin(), row.paths.end(), path) == row.paths.end())
          row.paths.push_back(path);
      add_report_checks(row, oracle::judge_backward(c12.problem, enc12, out12.view()), "c12.");
      const auto z12 = oracle::stochastic_rounding_test(c12.problem, enc12, out12.weights.data());
      std::int64_t moved = 0;
      const std::int64_t n = 1024 * 4;
      for (std::int64_t i = 0; i < n; ++i)
        moved += load_as_double(a.weights, out12.weights.data(), i) != 1.0;
      const double frac = static_cast<double>(moved) / static_cast<double>(n);
      std::ostringstream os;
      os << z12.summary() << "; " << moved << "/" << n << " elements moved (" << frac
         << ", expected 0.22..0.28)";
      row.checks.push_back(agreement("c12.sr", z12.passed() && frac >= 0.22 && frac <= 0.28,
                                     os.str()));
      // The draws depend on sr_offset (the Philox counter a caller advances between calls): the
      // same problem at the next offset moves an independent ~25% of the elements, so the two
      // results differ in 2·0.25·0.75 = 37.5% of them (σ ≈ 0.8% at 4096; the same draws: 0%).
      BackwardInputs c12_next = c12;
      c12_next.rebind();
      c12_next.problem.options.sr_offset = c12.problem.options.sr_offset + 1;
      BackwardResultBuffers out12_next = fresh_outputs(c12_next);
      dev.backward(c12_next.problem, out12_next.outputs(), strategy);
      std::int64_t differ = 0;
      for (std::int64_t i = 0; i < n; ++i)
        differ += load_as_double(a.weights, out12.weights.data(), i) !=
                  load_as_double(a.weights, out12_next.weights.data(), i);
      const double dfrac = static_cast<double>(differ) / static_cast<double>(n);
      std::ostringstream od;
      od << "sr_offset " << c12.problem.options.sr_offset << " vs "
         << c12_next.problem.options.sr_offset << ": " << differ << "/" << n
         << " elements rounded differently (" << dfrac << ", expected 0.30..0.45)";
      row.checks.push_back(agreement("c12.sr_offset", dfrac >= 0.30 && dfrac <= 0.45, od.str()));
      times.add("sr tests", seconds_since(t_sr));
    }
    if (small) {
      // The hi/lo probe: the histogram backward's lo part of grad_output is visible.
      const auto t_probe = std::chrono::steady_clock::now();
      build_hilo_probe(hilo, a.policy, row_seed);
      const oracle::BackwardEnclosures enc_hilo = oracle::compute_backward_enclosures(hilo.problem);
      out_hilo = fresh_outputs(hilo);
      hilo_call.strategy = strategy;
      const BackwardStats st_hilo = hilo_call.run(dev);
      for (const auto& path : st_hilo.paths)  // its no-sort backward counts for path coverage
        if (std::find(row.paths.begin(), row.paths.end(), path) == row.paths.end())
          row.paths.push_back(path);
      add_report_checks(row, oracle::judge_backward(hilo.problem, enc_hilo, out_hilo.view()),
                        "hilo.");
      if (cfg_.device) {
        // one small-table feature alone: the backward also skips the sort (docs/small-table.md
        // "Without the sort")
        const bool ran = st_hilo.counters.histogram_runs > 0 &&
                         has_path(st_hilo.paths, "bwd.small_table") &&
                         has_path(st_hilo.paths, "bwd.small_table.no_sort");
        row.checks.push_back(agreement(
            "hilo.path", ran,
            std::to_string(st_hilo.counters.histogram_runs) +
                " rows updated from the histogram, bwd.small_table.no_sort " +
                lower_bool(has_path(st_hilo.paths, "bwd.small_table.no_sort")) +
                (ran ? "" : ": the probe did not take the small-table path without the sort")));
      }
      times.add("probes", seconds_since(t_probe));
    }
    finish_row(row);
  } catch (const std::exception& e) {
    row.checks.push_back(agreement("error", false, std::string("unexpected error: ") + e.what()));
    finish_row(row);
  }
  // A slot among the save_failures_max saved rows is claimed under the lock (given back when
  // the case cannot be written).
  auto claim_slot = [&] {
    const std::lock_guard<std::mutex> lock(state_mutex_);
    if (saved_failures_ >= cfg_.save_failures_max) return false;
    ++saved_failures_;
    return true;
  };
  if (row.verdict == Verdict::Failed && !cfg_.save_failures_dir.empty()) {
    if (!claim_slot()) {
      res.save_note = "not saved (--save-failures-max " + std::to_string(cfg_.save_failures_max) +
                      " reached)";
    } else {
      // A probe's problem (C12, hi/lo) when only its checks failed (or its call raised), else
      // the row's.
      struct Probe {
        const JudgedCall* call;
        const char* prefix;  ///< its checks' names
        const char* suffix;  ///< of the case folder
        const char* note;    ///< in the provenance
      };
      const Probe probes[] = {{&c12_call, "c12.", "-c12", " (its C12 problem)"},
                              {&hilo_call, "hilo.", "-hilo", " (its hi/lo probe)"}};
      Probe chosen{&main_call, "", "", ""};
      for (const Probe& pr : probes) {
        bool only = pr.call->ran;
        for (const Check& ck : row.checks)
          if (!ck.passed && ck.name.rfind(pr.prefix, 0) != 0 &&
              !(ck.name == "error" && pr.call->error))
            only = false;
        if (only) {
          chosen = pr;
          break;
        }
      }
      const JudgedCall& judged = *chosen.call;
      const std::string probe_suffix = chosen.suffix, probe_note = chosen.note;
      if (!judged.ran) {
        res.save_note = "not saved (the row failed before its backward call)";
        const std::lock_guard<std::mutex> lock(state_mutex_);
        --saved_failures_;
      } else {
        const std::string dir = cfg_.save_failures_dir + "/backward-row-" +
                                std::to_string(row_index + 1) + probe_suffix;
        std::string failed;
        for (const Check& ck : row.checks)
          if (!ck.passed) failed += (failed.empty() ? "" : ", ") + ck.name;
        std::ostringstream prov;
        prov << "tbe-verify --rows backward: workload " << cfg_.workload << " slice T="
             << cfg_.features << " B=" << cfg_.batch << " seed=" << cfg_.seed << ", row "
             << row_index + 1 << " " << res.label << probe_note
             << ", " << to_string(row.target) << " row failed: " << failed;
        try {
          write_backward_case(dir, judged, res.label, prov.str(), cfg_.seed, implementation);
          res.saved_case = dir;
        } catch (const std::exception& e) {
          res.save_note = std::string("saving the case failed: ") + e.what();
          const std::lock_guard<std::mutex> lock(state_mutex_);
          --saved_failures_;
        }
      }
    }
  }
  row.seconds = seconds_since(t0);
  {
    const std::lock_guard<std::mutex> lock(state_mutex_);
    times_.add(times);
  }
  return res;
}

SectionTimes BackwardRunner::section_times() const {
  const std::lock_guard<std::mutex> lock(state_mutex_);
  return times_;
}

int default_backward_jobs() { return std::clamp(omp_get_max_threads() / 5, 1, 4); }

std::vector<BackwardRowResult> BackwardRunner::run_rows(
    const std::vector<std::size_t>& row_indices, int jobs,
    const std::function<void(const BackwardRowResult&)>& on_done) {
  const std::vector<BackwardRowAxes> all = enumerate_backward_rows();
  for (std::size_t i : row_indices)
    if (i >= all.size())
      throw InvalidArgument("row_indices", "row_indices: " + std::to_string(i) +
                                               " is past the " + std::to_string(all.size()) +
                                               " backward rows");
  std::vector<BackwardRowResult> out;
  out.reserve(row_indices.size());
  if (jobs <= 1 || row_indices.size() <= 1) {
    for (std::size_t i : row_indices) {
      out.push_back(run(all[i], i));
      if (on_done) on_done(out.back());
    }
    return out;
  }
  jobs = std::min<int>(jobs, static_cast<int>(row_indices.size()));
  const int inner = std::max(1, omp_get_max_threads() / jobs);
  std::vector<std::optional<BackwardRowResult>> slots(row_indices.size());
  std::atomic<std::size_t> next{0};
  std::mutex m;
  std::condition_variable cv;
  auto work = [&] {
    omp_set_num_threads(inner);  // this thread's OpenMP regions
    for (std::size_t k; (k = next.fetch_add(1)) < row_indices.size();) {
      const std::size_t i = row_indices[k];
      BackwardRowResult r;
      try {
        r = run(all[i], i);
      } catch (const std::exception& e) {  // run() reports its own errors; this is a last resort
        r.axes = all[i];
        r.index = i;
        r.label = backward_row_label(all[i]);
        r.row.checks.push_back(agreement("error", false, std::string("unexpected error: ") + e.what()));
        finish_row(r.row);
      }
      {
        const std::lock_guard<std::mutex> lock(m);
        slots[k] = std::move(r);
      }
      cv.notify_all();
    }
  };
  std::vector<std::thread> pool;
  for (int j = 0; j < jobs; ++j) pool.emplace_back(work);
  for (std::size_t k = 0; k < row_indices.size(); ++k) {
    std::unique_lock<std::mutex> lock(m);
    cv.wait(lock, [&] { return slots[k].has_value(); });
    out.push_back(std::move(*slots[k]));
    lock.unlock();
    if (on_done) on_done(out.back());
  }
  for (std::thread& t : pool) t.join();
  return out;
}

std::vector<std::string> backward_paths_missing(const std::vector<BackwardRowResult>& rows) {
  const std::vector<std::string>& required = required_paths(PathFamily::Backward);
  std::set<std::string> seen;
  bool any_device = false;
  for (const BackwardRowResult& r : rows) {
    if (r.row.target != Target::Device || r.row.verdict == Verdict::Skipped) continue;
    any_device = true;
    seen.insert(r.row.paths.begin(), r.row.paths.end());
  }
  std::vector<std::string> missing;
  // The requirement is on the whole design (a replayed single row exercises one route).
  if (!any_device || rows.size() != enumerate_backward_rows().size()) return missing;
  for (const std::string& p : required)
    if (!seen.count(p)) missing.push_back(p);
  return missing;
}

BackwardTotals count_backward_rows(const std::vector<BackwardRowResult>& rows) {
  BackwardTotals t;
  for (const BackwardRowResult& r : rows) {
    switch (r.row.verdict) {
      case Verdict::Passed:
        ++t.passed;
        if (r.row.target == Target::Device) ++t.device_passed;
        break;
      case Verdict::Failed: ++t.failed; break;
      case Verdict::Skipped: ++t.skipped; break;
    }
  }
  t.failed += static_cast<std::int64_t>(backward_paths_missing(rows).size());
  return t;
}

namespace {
std::string pad(const std::string& s, std::size_t w, bool right = false) {
  if (s.size() >= w) return s;
  return right ? std::string(w - s.size(), ' ') + s : s + std::string(w - s.size(), ' ');
}
std::string fmt(double v, int prec = 2) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(prec);
  os << v;
  return os.str();
}
// Largest |position| over the row's oracle reports.
double worst_position(const RowResult& row) {
  double w = 0.0;
  for (const Check& c : row.checks)
    if (c.report && c.report->elements > 0) w = std::max(w, std::abs(c.report->worst.position));
  return w;
}
}  // namespace

void print_backward_results(std::ostream& os, const std::vector<BackwardRowResult>& rows,
                            bool device_present, const std::string& workload_line,
                            const std::string& replay_prefix) {
  os << "Backward + exact optimizer (" << workload_line << "; "
     << (device_present ? "gpu rows: the backend under test"
                        : "no GPU: the CPU fallback runs every check but the route counters; the "
                          "route and det axes are not exercised")
     << ")\nworst = largest |position| over the row's oracle reports, in enclosure radii (<= 1 "
        "inside; the element and its (table, row, column) are in the failure details and the "
        "JSON)\n";
  const std::string head = pad("#", 4, true) + "  " + pad("optimizer", 16) + pad("wd", 10) +
                           pad("round", 6) + pad("route", 8) + pad("det", 4) + pad("w", 5) +
                           pad("pool", 5) + pad("wtd", 4) + pad("vbe", 4) + pad("shr", 4) +
                           pad("hist", 6) + pad("verdict", 8) + pad("worst", 7, true) + "  runs short/chunked/fused";
  os << head << "\n" << std::string(head.size(), '-') << "\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const BackwardRowResult& r = rows[i];
    const BackwardRowAxes& a = r.axes;
    const BackwardPathCounters& c = r.stats.counters;
    os << pad(std::to_string(r.index + 1), 4, true) << "  " << pad(to_string(a.optimizer), 16)
       << pad(to_string(a.weight_decay), 10) << pad(a.stochastic_rounding ? "sr" : "rne", 6)
       << pad(to_string(a.route), 8) << pad(lower_bool(a.deterministic), 4)
       << pad(to_string(a.weights), 5) << pad(to_string(a.pooling), 5)
       << pad(lower_bool(a.weighted), 4) << pad(lower_bool(a.vbe), 4)
       << pad(lower_bool(a.shared_tables), 4) << pad(to_string(a.histogram), 6)
       << pad(to_string(r.row.verdict), 8)
       << pad(fmt(worst_position(r.row)), 7, true) << "  " << c.short_runs << "/" << c.chunked_runs
       << "/" << c.fused_runs << "\n";
  }
  // Paths.
  std::map<std::string, std::int64_t> paths;
  for (const BackwardRowResult& r : rows)
    for (const auto& p : r.row.paths) ++paths[p];
  os << "\nBackward kernel paths exercised (rows that reported each):\n";
  for (const auto& [p, n] : paths) os << "  " << pad(p, 40) << pad(std::to_string(n), 6, true) << "\n";
  const std::vector<std::string> missing = backward_paths_missing(rows);
  for (const std::string& m : missing)
    os << "  FAILED: path " << m << " was never exercised by any backward row\n";
  // Failures.
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const BackwardRowResult& r = rows[i];
    if (r.row.verdict != Verdict::Failed) continue;
    os << "\nFAILED backward row " << r.index + 1 << ": " << r.label << "\n";
    for (const Check& c : r.row.checks)
      if (!c.passed) os << "  " << c.name << ": " << c.detail << "\n";
    if (!replay_prefix.empty())
      os << "  replay: " << replay_prefix << " --backward-row " << r.index + 1 << "\n";
    if (!r.saved_case.empty())
      os << "  replay case: " << replay_case_command(r.saved_case)
         << "   (judge the saved outputs: " << check_case_command(r.saved_case) << ")\n";
    else if (!r.save_note.empty())
      os << "  case file: " << r.save_note << "\n";
  }
  const BackwardTotals t = count_backward_rows(rows);
  os << "\nbackward: " << t.passed << " passed, " << t.failed << " failed, " << t.skipped
     << " skipped (" << (device_present ? "gpu" : "cpu self-check, no GPU verified") << ")\n";
}

nlohmann::json backward_to_json(const std::vector<BackwardRowResult>& rows) {
  nlohmann::json arr = nlohmann::json::array();
  for (const BackwardRowResult& r : rows) {
    nlohmann::json j;
    j["row"] = r.index + 1;
    j["label"] = r.label;
    j["target"] = to_string(r.row.target);
    j["verdict"] = to_string(r.row.verdict);
    j["seconds"] = r.row.seconds;
    j["paths"] = r.row.paths;
    j["max_segment_length"] = r.max_segment_length;
    j["long_run_threshold"] = r.long_run_threshold;
    j["chunk_size"] = r.chunk_size;
    j["histogram"] = to_string(r.axes.histogram);
    const BackwardPathCounters& c = r.stats.counters;
    j["counters"] = {{"short_runs", c.short_runs},     {"short_lookups", c.short_lookups},
                     {"chunked_runs", c.chunked_runs}, {"chunked_lookups", c.chunked_lookups},
                     {"fused_runs", c.fused_runs},     {"fused_lookups", c.fused_lookups},
                     {"chunks", c.chunks}};
    nlohmann::json checks = nlohmann::json::array();
    for (const Check& ch : r.row.checks)
      checks.push_back({{"name", ch.name}, {"passed", ch.passed}, {"detail", ch.detail}});
    j["checks"] = checks;
    if (!r.saved_case.empty()) j["replay_case"] = replay_case_command(r.saved_case);
    arr.push_back(j);
  }
  return arr;
}

}  // namespace tbe::judge
