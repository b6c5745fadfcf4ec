// tbe-bench small-table: the small-table histogram path (docs/small-table.md) against the generic
// path of the same operators on the same inputs, forward and forward + backward (exact rowwise
// Adagrad), on the `small-table` workload and on a sweep of one-feature problems
// E in {8, 32, 64} x L in {64, 128, 512} (D = 96, FP16 weights, uniform rows, fixed L).
//
//   tbe-bench small-table [--batch B] [--iters N] [--json FILE] [--dump-npy DIR] [--only CASES]
//
// "path" = SmallTableTuning Mode::Auto (eligible features take the histogram path; the forward
// saves its counts and the backward reuses them; a backward whose features all take it skips the
// sort), "sorted" = the same with BackwardTuning::Sort::Always (the backward sorts the lookups and
// the generic run kernels take the rows the histogram does not own), "block" = the path with the
// block split-K kernel (BackwardTuning::SplitK::Block; the default is Warp), "generic" =
// Mode::Off (every feature gathers).
// Timing as tbe-bench forward: CUDA events, 3 warm-up calls, a 256 MiB L2-flush write before every
// iteration (outside the timed region), median / min / max over --iters. Forward + backward is
// one timed region: ForwardOp::run then BackwardOp::run on one stream. The backward writes
// separate output buffers, so every iteration sees the same inputs. --dump-npy writes each case's
// inputs (DIR/<case>/: indices, offsets, FP32 copies of the FP16 weights, grad_output, meta.json)
// for bench/peer_small_table.py.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "bench_args.h"
#include "bench_common.h"
#include "tbe/cuda/backward.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/forward.h"
#include "tbe/io/npy.h"
#include "tbe/precision.h"
#include "tbe/rng.h"
#include "tbe/workloads.h"

using namespace tbe;
using tbe::bench::check;
using tbe::bench::Timing;
using tbe::bench::time_it;
using tbe::cuda::DeviceBuffer;

namespace {

struct Case {
  std::string name;
  WorkloadSpec spec;
};

std::vector<Case> cases(std::int64_t batch) {
  std::vector<Case> out;
  out.push_back({"small-table", named_workload("small-table", batch)});
  for (std::int64_t E : {8, 32, 64})
    for (std::int64_t L : {64, 128, 512}) {
      WorkloadSpec s;
      s.name = "E" + std::to_string(E) + ".L" + std::to_string(L);
      s.T = 1;
      s.E = E;
      s.D = 96;
      s.L = L;
      s.B = batch > 0 ? batch : 16384;
      s.distribution = IndexDistribution::Uniform;
      s.options.pooling = PoolingMode::Sum;
      s.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
      out.push_back({s.name, s});
    }
  return out;
}

void dump_case(const std::string& dir, const ForwardCase& c, const std::vector<float>& grad) {
  using tbe::io::make_npy;
  using tbe::io::write_npy;
  std::vector<float> w(c.weights.size() / dtype_size(c.weights_dtype));
  for (std::size_t i = 0; i < w.size(); ++i)
    w[i] = static_cast<float>(load_as_double(c.weights_dtype, c.weights.data(), static_cast<std::int64_t>(i)));
  std::vector<std::int64_t> idx(c.indices.begin(), c.indices.end());
  std::vector<std::int64_t> off(c.offsets.begin(), c.offsets.end());
  write_npy(dir + "/indices.npy", make_npy(DType::I64, {(std::int64_t)idx.size()}, idx.data()));
  write_npy(dir + "/offsets.npy", make_npy(DType::I64, {(std::int64_t)off.size()}, off.data()));
  write_npy(dir + "/weights.npy", make_npy(DType::F32, {(std::int64_t)w.size()}, w.data()));
  write_npy(dir + "/grad_output.npy", make_npy(DType::F32, {(std::int64_t)grad.size()}, grad.data()));
  std::ofstream(dir + "/meta.json") << nlohmann::json{
      {"B", c.batch_size}, {"rows", c.rows}, {"dims", c.dims},
      {"feature_table_map", c.feature_table_map}, {"learning_rate", 0.01}, {"eps", 1e-8},
      {"weights_dtype", to_string(c.weights_dtype)}}.dump(2);
}

}  // namespace

int tbe::bench::small_table_main(const SmallTableArgs& args) {
  cudaDeviceProp prop{};
  if (!first_device(prop)) return kNoDeviceExit;
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream");
  const std::size_t flush_bytes = 256ull << 20;
  DeviceBuffer flush(flush_bytes);

  nlohmann::json results = nlohmann::json::array();
  std::printf("%-12s %8s %10s | %10s %10s %6s | %10s %10s %10s %10s %6s %6s %6s  small features\n",
              "case", "B", "lookups", "fwd path", "generic", "x", "f+b path", "block", "sorted",
              "generic", "x", "x blk", "x srt");
  const std::optional<std::vector<Case>> chosen =
      tbe::bench::only_variants<Case>(cases(args.batch), args.only, "small-table");
  if (!chosen) return 2;  // --only named an unknown case
  for (const Case& k : *chosen) {
    ForwardCase c = generate(k.spec);
    const ForwardProblem host = c.view();
    const std::int64_t N = static_cast<std::int64_t>(c.indices.size());
    const std::size_t isz = dtype_size(c.index_dtype);
    DeviceBuffer d_w(c.weights.data(), c.weights.size());
    DeviceBuffer d_idx(host.lookups.indices, N * isz);
    DeviceBuffer d_off(host.lookups.offsets, c.offsets.size() * isz);
    ForwardProblem p = host;
    p.tables.weights = d_w.get();
    p.lookups.indices = d_idx.get();
    p.lookups.offsets = d_off.get();
    p.options.bounds_check = BoundsCheckMode::None;
    const OutputLayout layout = make_output_layout(p);

    std::vector<float> grad(static_cast<std::size_t>(layout.numel));
    Rng g(k.spec.seed, 0x6772'6164'0000'0000ULL);  // "grad"
    for (float& v : grad) v = static_cast<float>(2.0 * g.uniform() - 1.0);
    if (!args.npy_dir.empty()) {
      const std::string dir = args.npy_dir + "/" + k.name;
      std::filesystem::create_directories(dir);
      dump_case(dir, c, grad);
    }
    DeviceBuffer d_grad(grad.data(), grad.size() * 4);
    std::int64_t K = 0;
    for (std::int64_t e : c.rows) K += e;
    DeviceBuffer d_m(K * 4), d_wout(c.weights.size()), d_mout(K * 4), d_out(layout.numel * 4);
    check(cudaMemset(d_m.get(), 0, K * 4), "momentum");

    BackwardProblem bp;
    bp.forward = p;
    bp.grad_output = d_grad.get();
    bp.momentum = d_m.as<const float>();
    bp.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
    bp.options.optimizer.learning_rate = 0.01;
    bp.options.optimizer.eps = 1e-8;
    BackwardOutputs bout;
    bout.weights = d_wout.get();
    bout.momentum = d_mout.as<float>();

    Timing fwd[4], both[4];
    std::string small_list;
    // 1: the histogram path, 3: the same with the block split-K, 2: sorted, 0: generic
    for (const int path : {1, 3, 2, 0}) {
      cuda::ForwardTuning tuning;
      tuning.small_table.mode = path ? cuda::SmallTableTuning::Mode::Auto : cuda::SmallTableTuning::Mode::Off;
      cuda::ForwardOp fop(p, {}, tuning);
      cuda::BackwardTuning bt{tuning.small_table};
      if (path == 2) bt.sort = cuda::BackwardTuning::Sort::Always;
      if (path == 3) bt.split_k = cuda::BackwardTuning::SplitK::Block;
      cuda::BackwardOp bop(bp, {}, bt);
      DeviceBuffer counts_buf(fop.small_table_counts_bytes());
      cuda::SmallTableCounts counts;
      if (path && fop.small_table_counts_bytes() > 0) {
        counts.data = counts_buf.get();
        counts.bytes = fop.small_table_counts_bytes();
        fop.save_small_table_counts(&counts, 1);
        bop.use_small_table_counts(&counts, 1);
      }
      if (path == 1)
        for (const cuda::SmallTableFeature& f : fop.small_table_features())
          if (f.eligible) small_list += std::to_string(f.feature) + " ";
      DeviceBuffer fws(fop.workspace_bytes()), bws(bop.workspace_bytes());
      fwd[path] = time_it([&] { fop.run(d_out.get(), fws.get(), stream); }, args.iters, stream,
                          flush.get(), flush_bytes);
      fop.finish();
      both[path] = time_it([&] {
        fop.run(d_out.get(), fws.get(), stream);
        bop.run(bout, bws.get(), stream);
      }, args.iters, stream, flush.get(), flush_bytes);
      const ForwardStats fs = fop.finish();
      const BackwardStats bs = bop.finish();
      const char* name = path == 1   ? "small_table"
                         : path == 3 ? "small_table.block"
                         : path == 2 ? "small_table.sorted"
                                     : "generic";
      results.push_back({{"case", k.name}, {"path", name},
                         {"B", c.batch_size}, {"lookups", N},
                         {"forward", {{"median_ms", fwd[path].median_ms}, {"min_ms", fwd[path].min_ms}, {"max_ms", fwd[path].max_ms}}},
                         {"forward_backward", {{"median_ms", both[path].median_ms}, {"min_ms", both[path].min_ms}, {"max_ms", both[path].max_ms}}},
                         {"iters", args.iters}, {"forward_paths", fs.paths}, {"backward_paths", bs.paths}});
    }
    std::printf("%-12s %8lld %10lld | %10.3f %10.3f %6.2f | %10.3f %10.3f %10.3f %10.3f %6.2f %6.2f %6.2f  %s\n",
                k.name.c_str(), (long long)c.batch_size, (long long)N, fwd[1].median_ms,
                fwd[0].median_ms, fwd[0].median_ms / fwd[1].median_ms, both[1].median_ms,
                both[3].median_ms, both[2].median_ms, both[0].median_ms,
                both[0].median_ms / both[1].median_ms, both[0].median_ms / both[3].median_ms,
                both[0].median_ms / both[2].median_ms, small_list.empty() ? "(none)" : small_list.c_str());
  }
  std::printf("\nms = medians over %d iterations; x = generic / path (target >= 2x for forward + "
              "backward); x blk = generic / block (SplitK::Block); x srt = generic / sorted (the path "
              "with BackwardTuning::Sort::Always)\n",
              args.iters);
  if (!args.json_path.empty())
    std::ofstream(args.json_path) << nlohmann::json{{"device", prop.name}, {"results", results}}.dump(2) << "\n";
  return 0;
}
