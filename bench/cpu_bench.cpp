// tbe-bench cpu: timing of the CPU fallback (the FP64 reference backend, OpenMP) on a named
// workload (docs/workloads.md). Makes no CUDA call: it runs on machines without a GPU and in
// TBE_CUDA=OFF builds.
//
//   tbe-bench cpu [--workload W] [--batch B] [--iters N] [--threads N] [--json FILE]
//                 [--dump-npy DIR]   (bench_args.cpp)
//
// Variants, all on the workload's index stream, pooling and bounds-check mode (seed-default
// policy, FP32 output): forward with FP32 and FP16 weights; backward + exact SGD and + exact
// rowwise Adagrad (lr 0.01, eps 1e-8, no weight decay) with FP32 and FP16 weights, in place (the
// outputs alias the weights and the momentum, as FBGEMM updates). One make_reference_backend()
// object serves every call, so a workspace it owns persists across calls.
// Inputs: the workload's tables (FP16 = RNE of the FP32 values) in 64-byte aligned buffers (as
// PyTorch allocates tensors); grad_output uniform in [-1, 1) (seeded); momentum 0.
// Timing: std::chrono::steady_clock around Backend::forward / Backend::backward, 1 warm-up call,
// median / min / max over --iters; lookups/s = N / median.
// Traffic model (bytes per call; U = unique (table, row) pairs, D their width):
//   forward  = Σ_U D · sizeof(W) + indices + offsets + output           (compulsory)
//   backward = Σ_lookups D · 4 (one grad_output row per lookup) + Σ_U D · sizeof(W) · 2 (row read
//              and written) + Adagrad U · 8 (momentum read and written) + indices + offsets
// reported as GB/s and as % of the host copy bandwidth measured in the same run (memcpy of
// 512 MiB split over the same OpenMP threads: bytes read + written per second).
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench_args.h"
#include "bench_timing.h"
#include "tbe/backend.h"
#include "tbe/backward.h"
#include "tbe/io/npy.h"
#include "tbe/precision.h"
#include "tbe/workloads.h"

namespace tbe::bench {
namespace {

/// Bytes read + written per second by a memcpy of 512 MiB split over the OpenMP threads.
double host_copy_gbps() {
  const std::size_t bytes = std::size_t{512} << 20;
  std::vector<std::byte> src(bytes, std::byte{1}), dst(bytes, std::byte{0});  // pages touched
  const std::int64_t chunks = 256;
  const std::size_t chunk = bytes / chunks;
  const Timing t = time_host(
      [&] {
#pragma omp parallel for schedule(static)
        for (std::int64_t k = 0; k < chunks; ++k)
          std::memcpy(dst.data() + k * chunk, src.data() + k * chunk, chunk);
      },
      5, 1);
  return 2.0 * static_cast<double>(bytes) / (t.median_ms * 1e-3) / 1e9;
}

/// Element counts of the traffic model: Σ_U D over the unique (table, row) pairs and Σ D over the
/// lookups inside bags.
struct Footprint {
  std::int64_t unique_rows = 0, unique_elements = 0, lookup_elements = 0;
};

Footprint footprint(const ForwardProblem& p, const ForwardCase& c) {
  const OutputLayout layout = make_output_layout(p);
  std::vector<std::int64_t> row0(c.rows.size() + 1, 0);
  for (std::size_t t = 0; t < c.rows.size(); ++t) row0[t + 1] = row0[t] + c.rows[t];
  std::vector<char> seen(static_cast<std::size_t>(row0.back()), 0);
  Footprint fp;
  for (std::int64_t f = 0; f < layout.num_features; ++f) {
    const std::int32_t t = c.feature_table_map[f];
    const std::int64_t D = c.dims[t];
    for (std::int64_t k = layout.feature_bag_offset[f]; k < layout.feature_bag_offset[f + 1]; ++k)
      for (std::int64_t q = c.offsets[k]; q < c.offsets[k + 1]; ++q) {
        fp.lookup_elements += D;
        char& s = seen[row0[t] + c.indices[q]];
        if (!s) fp.unique_rows += 1, fp.unique_elements += D;
        s = 1;
      }
  }
  return fp;
}

/// A host buffer aligned to 64 bytes (a cache line), as PyTorch's CPU allocator aligns tensors, so
/// that rows of 2^k >= 64 bytes span whole cache lines on both sides of the comparison.
using AlignedBytes = std::unique_ptr<std::byte[], decltype(&std::free)>;

/// The case's tables as `t` (RNE of each value; a copy when t is their own type).
AlignedBytes tables_as(DType t, const ForwardCase& c) {
  const std::int64_t n = static_cast<std::int64_t>(c.weights.size() / dtype_size(c.weights_dtype));
  const std::size_t bytes = (static_cast<std::size_t>(n) * dtype_size(t) + 63) / 64 * 64;
  AlignedBytes w(static_cast<std::byte*>(std::aligned_alloc(64, std::max<std::size_t>(bytes, 64))),
                 &std::free);
  if (!w) throw std::bad_alloc();
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i)
    store_from_double(t, w.get(), i, load_as_double(c.weights_dtype, c.weights.data(), i));
  return w;
}

struct Variant {
  std::string name;
  DType weights;
  bool backward;
  OptimizerKind optimizer = OptimizerKind::ExactSgd;
};

}  // namespace

int cpu_main(const CpuArgs& args) {
  if (args.threads > 0) omp_set_num_threads(args.threads);
  const int threads = omp_get_max_threads();

  const auto t0 = std::chrono::steady_clock::now();
  const WorkloadSpec spec = named_workload(args.workload, args.batch);
  ForwardCase c = generate(spec);
  const WorkloadStats ws = workload_stats(c);
  const ForwardProblem base = c.view();
  const OutputLayout layout = make_output_layout(base);
  const Footprint fp = footprint(base, c);
  const double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::int64_t T = c.num_features(), N = static_cast<std::int64_t>(c.indices.size());
  std::printf("workload %s: T=%lld B=%lld N=%lld bags=%lld unique rows=%lld max SL=%lld "
              "pooling=%s bounds=%s (generated in %.1f s)\n",
              spec.name.c_str(), (long long)T, (long long)c.batch_size, (long long)N,
              (long long)ws.bags, (long long)ws.unique_rows, (long long)ws.max_segment_length,
              to_string(c.options.pooling).c_str(), to_string(c.options.bounds_check).c_str(),
              gen_s);

  // --- inputs: FP32 and FP16 tables, grad_output uniform in [-1, 1), momentum 0 ---
  const std::int64_t welems =
      static_cast<std::int64_t>(c.weights.size() / dtype_size(c.weights_dtype));
  const AlignedBytes w32 = tables_as(DType::F32, c), w16 = tables_as(DType::F16, c);
  c.weights = {};
  std::vector<float> grad(static_cast<std::size_t>(layout.numel));
  {
    Rng rng(spec.seed, 0x67726164);  // "grad"
    for (float& g : grad) g = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  }
  std::int64_t total_rows = 0;
  for (std::int64_t E : c.rows) total_rows += E;
  std::vector<float> momentum(static_cast<std::size_t>(total_rows), 0.0f);
  std::vector<float> output(static_cast<std::size_t>(layout.numel));
  std::vector<float> psw_grad(c.per_sample_weights.size());
  const double lr = 0.01, eps = 1e-8;

  if (!args.npy_dir.empty()) {
    using io::make_npy;
    using io::write_npy;
    std::filesystem::create_directories(args.npy_dir);
    write_npy(args.npy_dir + "/indices.npy", make_npy(DType::I64, {N}, c.indices.data()));
    write_npy(args.npy_dir + "/offsets.npy",
              make_npy(DType::I64, {(std::int64_t)c.offsets.size()}, c.offsets.data()));
    write_npy(args.npy_dir + "/weights.npy", DType::F32, welems, w32.get());
    write_npy(args.npy_dir + "/grad_output.npy", DType::F32, layout.numel, grad.data());
    if (!c.per_sample_weights.empty())
      write_npy(args.npy_dir + "/per_sample_weights.npy", DType::F32, N,
                c.per_sample_weights.data());
    std::ofstream(args.npy_dir + "/meta.json")
        << nlohmann::json{{"workload", spec.name}, {"T", T}, {"B", c.batch_size}, {"N", N},
                          {"rows", c.rows}, {"dims", c.dims},
                          {"table_offsets", c.table_offsets},
                          {"feature_table_map", c.feature_table_map},
                          {"vbe", !c.vbe_batch_sizes.empty()},
                          {"weighted", !c.per_sample_weights.empty()},
                          {"pooling", to_string(c.options.pooling)},
                          {"bounds_check", to_string(c.options.bounds_check)},
                          {"learning_rate", lr}, {"eps", eps}}
               .dump(2);
    std::printf("wrote .npy files to %s (weights FP32 [sum E*D], grad_output FP32 [%lld])\n",
                args.npy_dir.c_str(), (long long)layout.numel);
  }

  const double copy_gbps = host_copy_gbps();
  std::printf("host: %d OpenMP threads, copy bandwidth %.1f GB/s (read + written)\n", threads,
              copy_gbps);

  const std::vector<Variant> variants = {
      {"fwd.fp32", DType::F32, false},
      {"fwd.fp16", DType::F16, false},
      {"bwd.fp32.sgd", DType::F32, true, OptimizerKind::ExactSgd},
      {"bwd.fp32.adagrad", DType::F32, true, OptimizerKind::ExactRowwiseAdagrad},
      {"bwd.fp16.sgd", DType::F16, true, OptimizerKind::ExactSgd},
      {"bwd.fp16.adagrad", DType::F16, true, OptimizerKind::ExactRowwiseAdagrad},
  };
  std::unique_ptr<Backend> backend = make_reference_backend();
  const double io_bytes = static_cast<double>(N + c.offsets.size()) * dtype_size(c.index_dtype);
  nlohmann::json results = nlohmann::json::array();
  std::printf("\n%-18s %10s %10s %10s %12s %8s %8s %6s\n", "variant", "median_ms", "min_ms",
              "max_ms", "Mlookups/s", "GB", "GB/s", "%copy");
  for (const Variant& v : variants) {
    ForwardProblem p = base;
    p.tables.dtype = v.weights;
    p.tables.weights = v.weights == DType::F32 ? w32.get() : w16.get();
    p.options.policy = make_policy(PolicyKind::SeedDefault, v.weights, DType::F32);
    const double wsz = static_cast<double>(dtype_size(v.weights));
    double bytes = 0;
    Timing t;
    std::int64_t warnings = 0, runs = 0;
    if (!v.backward) {
      bytes = fp.unique_elements * wsz + io_bytes + layout.numel * 4.0;
      t = time_host([&] { warnings = backend->forward(p, output.data()).warnings; }, args.iters, 1);
    } else {
      BackwardProblem bp;
      bp.forward = p;
      bp.grad_output = grad.data();
      bp.options.optimizer.kind = v.optimizer;
      bp.options.optimizer.learning_rate = lr;
      bp.options.optimizer.eps = eps;
      const bool adagrad = v.optimizer == OptimizerKind::ExactRowwiseAdagrad;
      bp.momentum = adagrad ? momentum.data() : nullptr;
      BackwardOutputs out;
      out.weights = const_cast<void*>(p.tables.weights);  // in place
      out.momentum = adagrad ? momentum.data() : nullptr;
      out.per_sample_weight_grad = psw_grad.empty() ? nullptr : psw_grad.data();
      bytes = fp.lookup_elements * 4.0 + fp.unique_elements * wsz * 2 +
              (adagrad ? fp.unique_rows * 8.0 : 0.0) + io_bytes;
      t = time_host(
          [&] {
            const BackwardStats st = backend->backward(bp, out);
            warnings = st.warnings;
            runs = st.runs;
          },
          args.iters, 1);
    }
    const double secs = t.median_ms * 1e-3;
    const double gbps = bytes / secs / 1e9;
    std::printf("%-18s %10.1f %10.1f %10.1f %12.2f %8.3f %8.2f %5.1f%%\n", v.name.c_str(),
                t.median_ms, t.min_ms, t.max_ms, static_cast<double>(N) / secs / 1e6, bytes / 1e9,
                gbps, 100.0 * gbps / copy_gbps);
    nlohmann::json r = {{"variant", v.name}, {"operator", v.backward ? "backward" : "forward"},
                        {"weights", to_string(v.weights)}, {"policy", to_string(p.options.policy)},
                        {"median_ms", t.median_ms}, {"min_ms", t.min_ms}, {"max_ms", t.max_ms},
                        {"iters", args.iters}, {"lookups_per_s", static_cast<double>(N) / secs},
                        {"bytes", bytes}, {"GBps", gbps},
                        {"pct_of_copy_bw", 100.0 * gbps / copy_gbps},
                        {"warnings", warnings}};
    if (v.backward) {
      r["optimizer"] = to_string(v.optimizer);
      r["runs"] = runs;
    }
    results.push_back(r);
  }
  if (!args.json_path.empty()) {
    const nlohmann::json j = {{"device", "cpu"}, {"backend", backend->name()},
                              {"threads", threads}, {"workload", spec.name}, {"T", T},
                              {"B", c.batch_size}, {"N", N}, {"unique_rows", ws.unique_rows},
                              {"max_segment_length", ws.max_segment_length},
                              {"copy_GBps", copy_gbps}, {"results", results}};
    std::ofstream(args.json_path) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace tbe::bench
