// tbe-bench backward: timing of the CUDA TBE backward + exact optimizer (tbe::cuda::BackwardOp) on
// a named workload's lookups (default seed-large; tbe::named_workload_names()) with FP32 weights
// (SGD and rowwise Adagrad) and FP16 weights (rowwise Adagrad), the transpose done inside backward
// or hoisted (TransposeOp), and forward + backward totals (hoisted: the TransposeOp runs on a
// second stream concurrently with forward). Mixed-D workloads (prod-mixed) are timed the same
// way; every lookup counts its table's D.
//
//   tbe-bench backward [--workload W] [--batch B] [--iters N] [--bounds warning|none]
//                      [--json FILE] [--dump-npy DIR]   (bench_args.cpp)
//
// Timing: CUDA events after 3 warm-up calls, L2 flushed (256 MiB write) before every iteration,
// median / min / max over --iters. Split (phase events inside BackwardOp::run, medians over the
// same iterations): preprocessing (bounds check + linearize + sort + RLE + scan), routing,
// per-sample-weight gradient (none here: unweighted), short runs (gather + accumulate + apply),
// long-run chunks (gather + accumulate; fused: + apply of the last chunk), long-run apply. Where
// short runs and chunks take one launch (cuda::BackwardTuning::RunLaunch; path
// "bwd.runs.interleaved") its time is the short runs' column and the chunks' column is zero.
// Traffic model (bytes per call):
//   grad gathered = Σ_lookups D_t · sizeof(grad_output)  (one grad row per lookup, sorted order)
//   rows          = Σ_unique rows D_t · sizeof(W) · 2 + R · 8 (Adagrad momentum read + write)
//   sort traffic  = linearize (indices + 8 B/lookup written) + radix passes · 16 B/lookup
//                   (keys + values read and written; passes = ceil(key bits / 8)) + RLE 4 B/lookup
//                   + scan 8 B/lookup + sorted values read 4 B/lookup
// reported as GB and as % of the device copy bandwidth measured in the same run.
// Inputs: the workload's indices/offsets; weights uniform in [-1, 1); grad_output uniform in
// [-1, 1) from a device hash (seeded); momentum 0. Outputs are separate buffers (the inputs stay
// the same every iteration).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "bench_args.h"
#include "bench_common.h"
#include "tbe/backward_case.h"
#include "tbe/cuda/backward.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/forward.h"
#include "tbe/io/npy.h"
#include "tbe/precision.h"
#include "tbe/rng.h"
#include "tbe/workloads.h"

namespace tbe::bench {
namespace {

using tbe::cuda::DeviceBuffer;

__global__ void fill_uniform(float* p, std::int64_t n, std::uint64_t seed) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    // draw i of Rng::from_state(seed): splitmix64's mixer, on the device (relaxed constexpr)
    const std::uint64_t z = splitmix64_mix(seed + kSplitMix64Gamma * static_cast<std::uint64_t>(i + 1));
    p[i] = static_cast<float>(static_cast<double>(z >> 11) * 0x1p-53 * 2.0 - 1.0);
  }
}

__global__ void to_half(const float* in, __half* out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    out[i] = __float2half_rn(in[i]);
}

struct Variant {
  std::string name;
  DType weights;
  OptimizerKind optimizer;
  bool hoisted;
  /// the short-run kernel instance (".short-registers" / ".short-staged" force one; the others Auto)
  cuda::BackwardTuning::ShortRuns short_runs = cuda::BackwardTuning::ShortRuns::Auto;
  /// the chunk-order sort (".chunk-device-wide" forces cub::DeviceRadixSort; the others Auto)
  cuda::BackwardTuning::ChunkOrder chunk_order = cuda::BackwardTuning::ChunkOrder::Auto;
  /// how the chunk kernel takes its chunks (".chunk-static": a fixed stride; the others Dynamic)
  cuda::BackwardTuning::ChunkSchedule chunk_schedule = cuda::BackwardTuning::ChunkSchedule::Dynamic;
  /// short runs and chunks in two launches (".separate"; the others Auto: one launch where the
  /// staged short-run instance runs)
  cuda::BackwardTuning::RunLaunch run_launch = cuda::BackwardTuning::RunLaunch::Auto;
  /// the short-run group sizes (".widest": one launch at the widest table's group; the others
  /// Auto: one launch per group size where the tables' D differ)
  cuda::BackwardTuning::ShortGroups short_groups = cuda::BackwardTuning::ShortGroups::Auto;
};

}  // namespace

int backward_main(const BackwardArgs& args) {
  cudaDeviceProp prop{};
  if (!first_device(prop)) return kNoDeviceExit;

  constexpr auto kRegisters = cuda::BackwardTuning::ShortRuns::Registers;
  constexpr auto kStaged = cuda::BackwardTuning::ShortRuns::Staged;
  constexpr auto kAutoShort = cuda::BackwardTuning::ShortRuns::Auto;
  constexpr auto kDeviceWide = cuda::BackwardTuning::ChunkOrder::DeviceWide;
  constexpr auto kAutoOrder = cuda::BackwardTuning::ChunkOrder::Auto;
  constexpr auto kStatic = cuda::BackwardTuning::ChunkSchedule::Static;
  constexpr auto kDynamic = cuda::BackwardTuning::ChunkSchedule::Dynamic;
  constexpr auto kSeparate = cuda::BackwardTuning::RunLaunch::Separate;
  constexpr auto kAutoLaunch = cuda::BackwardTuning::RunLaunch::Auto;
  constexpr auto kWidest = cuda::BackwardTuning::ShortGroups::Widest;
  const std::optional<std::vector<Variant>> variants = only_variants<Variant>({
      {"fp32.sgd", DType::F32, OptimizerKind::ExactSgd, false},
      {"fp32.sgd.hoisted", DType::F32, OptimizerKind::ExactSgd, true},
      {"fp32.adagrad", DType::F32, OptimizerKind::ExactRowwiseAdagrad, false},
      {"fp32.adagrad.hoisted", DType::F32, OptimizerKind::ExactRowwiseAdagrad, true},
      {"fp16.adagrad", DType::F16, OptimizerKind::ExactRowwiseAdagrad, false},
      {"fp16.adagrad.hoisted", DType::F16, OptimizerKind::ExactRowwiseAdagrad, true},
      {"fp32.sgd.hoisted.short-registers", DType::F32, OptimizerKind::ExactSgd, true, kRegisters},
      {"fp32.sgd.hoisted.short-staged", DType::F32, OptimizerKind::ExactSgd, true, kStaged},
      {"fp32.adagrad.hoisted.short-registers", DType::F32, OptimizerKind::ExactRowwiseAdagrad, true, kRegisters},
      {"fp32.adagrad.hoisted.short-staged", DType::F32, OptimizerKind::ExactRowwiseAdagrad, true, kStaged},
      {"fp16.adagrad.hoisted.short-registers", DType::F16, OptimizerKind::ExactRowwiseAdagrad, true, kRegisters},
      {"fp16.adagrad.hoisted.short-staged", DType::F16, OptimizerKind::ExactRowwiseAdagrad, true, kStaged},
      {"fp32.sgd.hoisted.chunk-device-wide", DType::F32, OptimizerKind::ExactSgd, true, kAutoShort, kDeviceWide},
      {"fp32.adagrad.hoisted.chunk-device-wide", DType::F32, OptimizerKind::ExactRowwiseAdagrad, true, kAutoShort, kDeviceWide},
      {"fp16.adagrad.hoisted.chunk-device-wide", DType::F16, OptimizerKind::ExactRowwiseAdagrad, true, kAutoShort, kDeviceWide},
      {"fp32.sgd.hoisted.chunk-static", DType::F32, OptimizerKind::ExactSgd, true, kAutoShort, kAutoOrder, kStatic},
      {"fp32.adagrad.hoisted.chunk-static", DType::F32, OptimizerKind::ExactRowwiseAdagrad, true, kAutoShort, kAutoOrder, kStatic},
      {"fp16.adagrad.hoisted.chunk-static", DType::F16, OptimizerKind::ExactRowwiseAdagrad, true, kAutoShort, kAutoOrder, kStatic},
      {"fp32.sgd.separate", DType::F32, OptimizerKind::ExactSgd, false, kAutoShort, kAutoOrder, kDynamic, kSeparate},
      {"fp32.sgd.hoisted.separate", DType::F32, OptimizerKind::ExactSgd, true, kAutoShort, kAutoOrder, kDynamic, kSeparate},
      {"fp32.adagrad.separate", DType::F32, OptimizerKind::ExactRowwiseAdagrad, false, kAutoShort, kAutoOrder, kDynamic, kSeparate},
      {"fp32.adagrad.hoisted.separate", DType::F32, OptimizerKind::ExactRowwiseAdagrad, true, kAutoShort, kAutoOrder, kDynamic, kSeparate},
      {"fp16.adagrad.separate", DType::F16, OptimizerKind::ExactRowwiseAdagrad, false, kAutoShort, kAutoOrder, kDynamic, kSeparate},
      {"fp16.adagrad.hoisted.separate", DType::F16, OptimizerKind::ExactRowwiseAdagrad, true, kAutoShort, kAutoOrder, kDynamic, kSeparate},
      {"fp32.sgd.hoisted.widest", DType::F32, OptimizerKind::ExactSgd, true, kAutoShort, kAutoOrder, kDynamic, kAutoLaunch, kWidest},
      {"fp32.adagrad.hoisted.widest", DType::F32, OptimizerKind::ExactRowwiseAdagrad, true, kAutoShort, kAutoOrder, kDynamic, kAutoLaunch, kWidest},
      {"fp16.adagrad.hoisted.widest", DType::F16, OptimizerKind::ExactRowwiseAdagrad, true, kAutoShort, kAutoOrder, kDynamic, kAutoLaunch, kWidest},
  }, args.only, "backward");
  if (!variants) return 2;  // --only named an unknown variant (checked before the workload)

  const auto t0 = std::chrono::steady_clock::now();
  WorkloadSpec spec = named_workload(args.workload, args.batch);
  spec.options.bounds_check = args.bounds;
  if (!args.npy_dir.empty() &&
      refuse_mixed_d_dump(spec, "backward", "bench/peer_backward.py takes one D"))
    return 2;
  ForwardCase c = generate(spec);
  const WorkloadStats ws = workload_stats(c);
  const double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::int64_t T = c.num_features(), N = static_cast<std::int64_t>(c.indices.size());
  const FeatureDims dims(c.dims);
  const std::int32_t D = dims.d;
  std::int64_t K = 0;
  for (auto e : c.rows) K += e;
  std::printf("workload %s: T=%lld B=%lld D=%s N=%lld lookup elements=%lld unique rows=%lld "
              "max SL=%lld bounds=%s (generated in %.1f s)\n",
              spec.name.c_str(), (long long)T, (long long)c.batch_size, dims.text.c_str(), (long long)N,
              (long long)ws.lookup_elements, (long long)ws.unique_rows,
              (long long)ws.max_segment_length, to_string(args.bounds).c_str(), gen_s);
  if (!args.npy_dir.empty()) {
    std::vector<std::int64_t> feature_row_offset(T);
    std::vector<std::int64_t> row0(c.rows.size());
    for (std::size_t t = 1; t < c.rows.size(); ++t) row0[t] = row0[t - 1] + c.rows[t - 1];
    for (std::int64_t f = 0; f < T; ++f) feature_row_offset[f] = row0[c.feature_table_map[f]];
    io::write_npy(args.npy_dir + "/indices.npy", io::make_npy(DType::I64, {N}, c.indices.data()));
    io::write_npy(args.npy_dir + "/offsets.npy",
                  io::make_npy(DType::I64, {(std::int64_t)c.offsets.size()}, c.offsets.data()));
    io::write_npy(args.npy_dir + "/feature_row_offset.npy",
                  io::make_npy(DType::I64, {T}, feature_row_offset.data()));
    std::ofstream(args.npy_dir + "/meta.json") << nlohmann::json{{"workload", spec.name}, {"T", T},
        {"B", c.batch_size}, {"D", D}, {"N", N}, {"total_rows", K}}.dump(2);
    std::printf("wrote .npy files to %s (weights and grad_output are drawn by the peer)\n",
                args.npy_dir.c_str());
  }

  // stream: forward and backward; stream2: the hoisted TransposeOp beside the forward (--priority
  // gives one of them the device's greatest priority)
  int least = 0, greatest = 0;
  check(cudaDeviceGetStreamPriorityRange(&least, &greatest), "priority range");
  cudaStream_t stream, stream2;
  check(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking,
                                     args.priority == "forward" ? greatest : least), "stream");
  check(cudaStreamCreateWithPriority(&stream2, cudaStreamNonBlocking,
                                     args.priority == "transpose" ? greatest : least), "stream");
  const double copy_gbps = copy_bandwidth_gbps(stream);
  std::printf("device copy bandwidth: %.0f GB/s (read + written)\n", copy_gbps);
  const std::size_t flush_bytes = 256ull << 20;
  DeviceBuffer flush(flush_bytes);

  // --- device inputs ---
  const ForwardProblem host = c.view();
  const std::size_t isz = dtype_size(c.index_dtype);
  DeviceBuffer d_idx(host.lookups.indices, N * isz), d_off(host.lookups.offsets, c.offsets.size() * isz);
  const std::int64_t welems = total_weight_elements(host.tables);  // Σ E_t · D_t
  DeviceBuffer d_w32(welems * 4), d_w16(welems * 2), d_wout(welems * 4), d_m(K * 4), d_mout(K * 4);
  const std::int64_t gelems = make_output_layout(host).numel;       // B · Σ_f D_f
  DeviceBuffer d_grad(gelems * 4), d_fwd_out(gelems * 4);
  fill_uniform<<<4096, 256, 0, stream>>>(d_w32.as<float>(), welems, 1);
  to_half<<<4096, 256, 0, stream>>>(d_w32.as<float>(), d_w16.as<__half>(), welems);
  fill_uniform<<<4096, 256, 0, stream>>>(d_grad.as<float>(), gelems, 2);
  check(cudaMemsetAsync(d_m.get(), 0, K * 4, stream), "momentum");
  check(cudaStreamSynchronize(stream), "fill");

  const char* phase_names[6] = {"preprocess", "route", "psw_grad", "short", "long_chunks", "long_apply"};
  nlohmann::json results = nlohmann::json::array();
  std::printf("\n%-36s %9s %9s %9s | %8s %8s %8s %8s %8s | %9s %9s | %7s %6s | %s\n", "variant",
              "bwd_ms", "min", "max", "prep", "route", "short", "lchunk", "lapply", "fwd_ms",
              "fwd+bwd", "GB", "%copy", "counters");
  for (const Variant& v : *variants) {
    ForwardProblem fp = host;
    fp.tables.dtype = v.weights;
    fp.tables.weights = v.weights == DType::F32 ? d_w32.get() : d_w16.get();
    fp.lookups.indices = d_idx.get();
    fp.lookups.offsets = d_off.get();
    fp.options.policy = make_policy(PolicyKind::SeedDefault, v.weights, DType::F32);
    BackwardProblem bp;
    bp.forward = fp;
    bp.grad_output = d_grad.get();
    bp.options.optimizer.kind = v.optimizer;
    bp.options.optimizer.learning_rate = 0.01;
    bp.momentum = v.optimizer == OptimizerKind::ExactRowwiseAdagrad ? d_m.as<const float>() : nullptr;
    BackwardOutputs out;
    out.weights = d_wout.get();
    out.momentum = bp.momentum != nullptr ? d_mout.as<float>() : nullptr;
    cuda::BackwardTuning knobs;
    knobs.short_runs = v.short_runs;
    knobs.chunk_order = v.chunk_order;
    knobs.chunk_schedule = v.chunk_schedule;
    knobs.run_launch = v.run_launch;
    knobs.short_groups = v.short_groups;
    if (args.interleave_chunk_every > 0) knobs.interleave_chunk_every = args.interleave_chunk_every;
    knobs.transpose.keys = args.transpose_keys == "row-bits"     ? cuda::TransposeTuning::Keys::RowBits
                           : args.transpose_keys == "linear-ids" ? cuda::TransposeTuning::Keys::LinearIds
                                                                 : cuda::TransposeTuning::Keys::Auto;
    BackwardStrategy strategy;
    if (args.long_threshold > 0) strategy.long_run_threshold = args.long_threshold;
    if (args.chunk_size > 0) strategy.chunk_size = args.chunk_size;
    cuda::BackwardOp op(bp, strategy, knobs);
    cuda::TransposeOp tr(fp, knobs.transpose);
    cuda::ForwardOp fwd(fp);
    DeviceBuffer bws(op.workspace_bytes(v.hoisted)), tws(v.hoisted ? tr.workspace_bytes() : 0),
        fws(fwd.workspace_bytes());
    cudaEvent_t tr_done;
    check(cudaEventCreateWithFlags(&tr_done, cudaEventDisableTiming), "event");
    cudaEvent_t fork;
    check(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), "event");
    auto backward_only = [&] {  // hoisted: the transpose is done before (untimed here)
      op.run(out, bws.get(), stream, v.hoisted ? tr.sorted() : cuda::SortedLookups{});
    };
    if (v.hoisted) {
      tr.run(tws.get(), stream);
      check(cudaStreamSynchronize(stream), "transpose");
    }
    // phase split over the timed iterations
    cudaEvent_t ev[cuda::BackwardOp::kPhaseEvents];
    for (auto& e : ev) check(cudaEventCreate(&e), "event");
    std::vector<std::vector<float>> phase_ms(6);
    const Timing tb = time_it([&] { backward_only(); }, args.iters, stream, flush.get(), flush_bytes);
    op.set_phase_events(ev);  // a second series of calls, split by phase events
    for (int i = 0; i < args.iters; ++i) {
      check(cudaMemsetAsync(flush.get(), i & 0xff, flush_bytes, stream), "flush");
      backward_only();
      check(cudaStreamSynchronize(stream), "phase run");
      for (int k = 0; k < 6; ++k) {
        float ms = 0;
        check(cudaEventElapsedTime(&ms, ev[k], ev[k + 1]), "phase elapsed");
        phase_ms[k].push_back(ms);
      }
    }
    op.set_phase_events(nullptr);
    const BackwardStats st = op.finish();
    double phase_med[6];
    for (int k = 0; k < 6; ++k) phase_med[k] = summarize(phase_ms[k]).median_ms;
    // hoisted: the transpose alone (it runs with forward)
    Timing tt{};
    if (v.hoisted) tt = time_it([&] { tr.run(tws.get(), stream); }, args.iters, stream, flush.get(), flush_bytes);
    // forward alone and forward + backward
    const Timing tf = time_it([&] { fwd.run(d_fwd_out.get(), fws.get(), stream); }, args.iters, stream,
                              flush.get(), flush_bytes);
    const Timing ttot = time_it([&] {
      if (v.hoisted) {  // transpose on stream2 concurrently with forward on stream
        check(cudaEventRecord(fork, stream), "fork");
        check(cudaStreamWaitEvent(stream2, fork, 0), "wait fork");
        tr.run(tws.get(), stream2);
        check(cudaEventRecord(tr_done, stream2), "record");
        fwd.run(d_fwd_out.get(), fws.get(), stream);
        check(cudaStreamWaitEvent(stream, tr_done, 0), "wait");
        op.run(out, bws.get(), stream, tr.sorted());
      } else {
        fwd.run(d_fwd_out.get(), fws.get(), stream);
        op.run(out, bws.get(), stream);
      }
    }, args.iters, stream, flush.get(), flush_bytes);
    fwd.finish();
    op.finish();
    for (auto& e : ev) cudaEventDestroy(e);
    cudaEventDestroy(tr_done);
    cudaEventDestroy(fork);

    // traffic model
    const double wsz = static_cast<double>(dtype_size(v.weights));
    const double R = static_cast<double>(st.runs);
    int key_bits = 1;
    while ((std::int64_t{1} << key_bits) <= K) ++key_bits;
    const int passes = (key_bits + 7) / 8;
    const double grad_bytes = static_cast<double>(ws.lookup_elements) * 4.0;
    const double row_bytes = static_cast<double>(ws.unique_row_elements) * wsz * 2 +
                             (bp.momentum ? R * 8.0 : 0.0);
    const double sort_bytes = static_cast<double>(N) * (isz + 8 + passes * 16.0 + 4 + 8 + 4);
    const double total_bytes = grad_bytes + row_bytes + (v.hoisted ? static_cast<double>(N) * 4 : sort_bytes);
    const double pct = 100.0 * total_bytes / (tb.median_ms * 1e-3) / 1e9 / copy_gbps;
    const BackwardPathCounters& k = st.counters;
    char counters[256];
    std::snprintf(counters, sizeof counters, "runs=%lld short=%lld/%lld long=%lld/%lld chunks=%lld",
                  (long long)st.runs, (long long)k.short_runs, (long long)k.short_lookups,
                  (long long)(k.fused_runs + k.chunked_runs),
                  (long long)(k.fused_lookups + k.chunked_lookups), (long long)k.chunks);
    std::printf("%-36s %9.3f %9.3f %9.3f | %8.3f %8.3f %8.3f %8.3f %8.3f | %9.3f %9.3f | %7.2f %5.1f%% | %s\n",
                v.name.c_str(), tb.median_ms, tb.min_ms, tb.max_ms, phase_med[0], phase_med[1],
                phase_med[3], phase_med[4], phase_med[5], tf.median_ms, ttot.median_ms,
                total_bytes / 1e9, pct, counters);
    if (v.hoisted)
      std::printf("%-36s transpose alone %.3f ms (runs with forward on a second stream)\n", "",
                  tt.median_ms);
    std::string paths;
    for (auto& p : st.paths) paths += p + " ";
    std::printf("%-36s paths: %s\n", "", paths.c_str());
    nlohmann::json phases;
    for (int q = 0; q < 6; ++q) phases[phase_names[q]] = phase_med[q];
    results.push_back({{"variant", v.name}, {"policy", to_string(fp.options.policy)},
                       {"optimizer", to_string(v.optimizer)}, {"hoisted", v.hoisted},
                       {"long_run_threshold", strategy.long_run_threshold},
                       {"chunk_size", strategy.chunk_size},
                       // the warp share where short runs and chunks took one launch (else null)
                       {"interleave_chunk_every",
                        std::find(st.paths.begin(), st.paths.end(), "bwd.runs.interleaved") != st.paths.end()
                            ? nlohmann::json(knobs.interleave_chunk_every) : nlohmann::json(nullptr)},
                       {"stream_priority", args.priority},
                       {"transpose_keys", args.transpose_keys},
                       {"bounds_check", to_string(args.bounds)},
                       {"backward_median_ms", tb.median_ms}, {"backward_min_ms", tb.min_ms},
                       {"backward_max_ms", tb.max_ms}, {"phases_median_ms", phases},
                       {"transpose_alone_ms", tt.median_ms},
                       {"forward_median_ms", tf.median_ms},
                       {"forward_backward_median_ms", ttot.median_ms},
                       {"forward_backward_min_ms", ttot.min_ms},
                       {"forward_backward_max_ms", ttot.max_ms},
                       {"bytes", {{"grad_gathered", grad_bytes}, {"rows", row_bytes},
                                  {"sort", v.hoisted ? 0.0 : sort_bytes}, {"total", total_bytes}}},
                       {"pct_of_copy_bw", pct}, {"iters", args.iters},
                       {"runs", st.runs}, {"lookups", st.lookups},
                       {"counters", {{"short_runs", k.short_runs}, {"short_lookups", k.short_lookups},
                                     {"fused_runs", k.fused_runs}, {"fused_lookups", k.fused_lookups},
                                     {"chunked_runs", k.chunked_runs},
                                     {"chunked_lookups", k.chunked_lookups}, {"chunks", k.chunks}}},
                       {"paths", st.paths}});
  }
  if (!args.json_path.empty()) {
    nlohmann::json j = {{"device", prop.name}, {"workload", spec.name}, {"T", T},
                        {"B", c.batch_size}, {"D", dims.one ? nlohmann::json(D) : nlohmann::json(c.dims)},
                        {"N", N}, {"lookup_elements", ws.lookup_elements},
                        {"unique_row_elements", ws.unique_row_elements}, {"unique_rows", ws.unique_rows},
                        {"max_segment_length", ws.max_segment_length}, {"copy_GBps", copy_gbps},
                        {"results", results}};
    std::ofstream(args.json_path) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace tbe::bench
