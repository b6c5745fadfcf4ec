// tbe-bench ikbo-fa: timing of the IKBO cross attention (tbe::cuda::AttentionOp) on the ikbo-fa
// shape (docs/workloads.md): B = 2048 candidates, H = 2, n_seed = 64, Dh = 128, 64 candidates per
// user (U = B / 64, sorted map), S in {512, ..., 16384}, BF16 and FP16.
//
//   tbe-bench ikbo-fa [--iters N] [--json FILE] [--batch B] [--seq S]... [--dtype T]...
//                     [--unsorted] [--dh D] [--kernel K] [--warmup-ms MS]   (bench_args.cpp)
//
// Variants (same device inputs, uniform [-1, 1) rounded to the storage type):
//   wgmma.kb128     AttentionKernel::Wgmma (the sm_90a kernel: TMA producer warpgroup, two wgmma
//                   consumer warpgroups; AttentionKernel::Auto picks it on H100 / H200) with the
//                   default tuning: each warpgroup in the serial order, the two unordered
//   wgmma.kb128.pingpong  AttentionTuning::pingpong: a job's first QKᵀ ordered between the
//                   warpgroups
//   wgmma.kb128.pingpong.pipelined  AttentionTuning::pipelined too (FA3's intra-warpgroup
//                   pipeline, the warpgroups taking turns every tile: the default before session
//                   18); wgmma.kb128.pipelined without the turns
//   wgmma.kb128.grouping-wide  the default after the CUB device-wide grouping instead of the
//                   one-CTA one (AttentionTuning::grouping; Auto: one CTA for B <= 4096): what
//                   the grouping's launches cost
//   wgmma.kb128.registers  the default with AttentionEpilogue::Registers: every thread stores
//                   its output fragments from registers instead of the default TMA-store
//                   epilogue (O staged in the job's Q buffer, written by TMA); what the stores cost
//   mma-sync.kbK    AttentionOp with AttentionTuning::key_block = K (64, 128): the whole op as a
//                   caller runs it (map check, the device grouping by user, the kernel)
//   mma-sync.kb128.qreg[.stages3]  key block 128 with AttentionTuning::q_in_registers (Q
//                   fragments held in registers across key tiles) and / or kv_stages = 3 (a
//                   3-stage K/V ring, one barrier per tile)
//   *.unsorted      the same on a shuffled map (--unsorted; any map, same speed?)
// Counting: FLOPs 4·B·H·n_seed·S·Dh (QKᵀ and PV; the softmax is not counted), TFLOP/s and % of the
// cuBLAS BF16 rate (8192³ GEMM, FP32 accumulation) measured in the same run. Timing: CUDA events
// around each call after 3 warm-ups (and, with --warmup-ms MS, MS milliseconds more of untimed
// calls: at large S the board runs at its power limit and the clock a row starts at depends on the
// row before it, bench/results/README.md "session 20"), L2 flushed (256 MiB write, untimed) before
// every iteration; median, min, max. Peers on the same shapes: bench/peer_ikbo_fa.py.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "bench_args.h"
#include "bench_common.h"
#include "bench_ikbo.cuh"
#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/ikbo_attention.h"
#include "tbe/ikbo.h"

using namespace tbe;
using tbe::cuda::DeviceBuffer;

namespace {

using tbe::bench::check;
using tbe::bench::time_it;
using tbe::bench::Timing;
using namespace tbe::bench::ikbo_inputs;

constexpr std::int64_t kH = 2, kNSeed = 64;
constexpr std::int64_t kCandidatesPerUser = tbe::bench::kIkboFaCandidatesPerUser;  // 64

struct Ctx {
  cudaStream_t stream = nullptr;
  DeviceBuffer flush;
  std::size_t flush_bytes = 256ull << 20;
  int iters = 20;
  std::int64_t dh = 128;        ///< --dh
  std::string kernel = "all";   ///< --kernel
  double warmup_ms = 0;         ///< --warmup-ms
  double gemm_bf16 = 0;
  nlohmann::json results = nlohmann::json::array();
};

void run_shape(Ctx& c, std::int64_t B, std::int64_t S, DType t, bool unsorted) {
  const std::int64_t U = B / kCandidatesPerUser;  // B: a multiple of it (bench_args.cpp)
  const std::int64_t Dh = c.dh;
  const std::int64_t HD = kH * Dh;
  const double flops = 4.0 * B * kH * kNSeed * static_cast<double>(S) * Dh;
  DeviceBuffer q(B * kNSeed * HD * 2), k(U * S * HD * 2), v(U * S * HD * 2), out(B * kNSeed * HD * 2);
  fill(t, q.get(), B * kNSeed * HD, 31);
  fill(t, k.get(), U * S * HD, 32);
  fill(t, v.get(), U * S * HD, 33);
  std::vector<std::pair<std::string, std::vector<std::int32_t>>> maps = {{"", sorted_map(B, U)}};
  if (unsorted) maps.push_back({".unsorted", shuffled(maps[0].second, 99)});
  for (const auto& [map_name, hmap] : maps) {
    DeviceBuffer map(hmap.data(), hmap.size() * 4);
    ikbo::AttentionProblem p;
    p.B = B;
    p.U = U;
    p.n_seed = kNSeed;
    p.H = kH;
    p.Dh = Dh;
    p.S = S;
    p.q = q.get();
    p.k = k.get();
    p.v = v.get();
    p.cand_to_user = map.as<const std::int32_t>();
    p.policy = {t, DType::F32, ikbo::LceRounding::RoundOnce};
    struct Variant {
      int kb;
      bool qreg;
      int stages;
      cuda::AttentionKernel kernel = cuda::AttentionKernel::MmaSync;
      bool pingpong = false;
      cuda::AttentionGroupingBuild grouping = cuda::AttentionGroupingBuild::Auto;
      cuda::AttentionEpilogue epilogue = cuda::AttentionEpilogue::Auto;
      bool pipelined = false;
    };
    constexpr auto kWide = cuda::AttentionGroupingBuild::DeviceWide;
    constexpr auto kAutoGrouping = cuda::AttentionGroupingBuild::Auto;
    constexpr auto kRegisters = cuda::AttentionEpilogue::Registers;
    constexpr auto kAutoEpilogue = cuda::AttentionEpilogue::Auto;
    for (const Variant& kv : {Variant{64, false, 2}, {128, false, 2}, {128, true, 2},
                              {128, false, 3}, {128, true, 3},
                              {128, false, 2, cuda::AttentionKernel::Wgmma},
                              {128, false, 2, cuda::AttentionKernel::Wgmma, true},
                              {128, false, 2, cuda::AttentionKernel::Wgmma, true, kAutoGrouping,
                               kAutoEpilogue, true},
                              {128, false, 2, cuda::AttentionKernel::Wgmma, false, kAutoGrouping,
                               kAutoEpilogue, true},
                              {128, false, 2, cuda::AttentionKernel::Wgmma, false, kWide},
                              {128, false, 2, cuda::AttentionKernel::Wgmma, false, kAutoGrouping,
                               kRegisters}}) {
      if (c.kernel != "all" && c.kernel != cuda::to_string(kv.kernel)) continue;
      cuda::AttentionTuning tuning;
      tuning.kernel = kv.kernel;
      tuning.pingpong = kv.pingpong;
      tuning.pipelined = kv.pipelined;
      tuning.key_block = kv.kb;
      tuning.q_in_registers = kv.qreg;
      tuning.kv_stages = kv.stages;
      tuning.grouping = kv.grouping;
      tuning.epilogue = kv.epilogue;
      cuda::AttentionOp op(p, tuning);
      DeviceBuffer ws(op.workspace_bytes());
      const Timing tm = time_it([&] { op.run(out.get(), ws.get(), c.stream); }, c.iters, c.stream,
                                c.flush.get(), c.flush_bytes, c.warmup_ms);
      op.finish();
      const std::string variant =
          kv.kernel == cuda::AttentionKernel::Wgmma
              ? std::string("wgmma.kb128") + (kv.pingpong ? ".pingpong" : "") +
                    (kv.pipelined ? ".pipelined" : "") +
                    (kv.grouping == kWide ? ".grouping-wide" : "") +
                    (kv.epilogue == kRegisters ? ".registers" : "") + map_name
              : "mma-sync.kb" + std::to_string(kv.kb) + (kv.qreg ? ".qreg" : "") +
                    (kv.stages == 3 ? ".stages3" : "") + map_name;
      const double tflops = flops / (tm.median_ms * 1e-3) / 1e12;
      const double pct = 100.0 * tflops / c.gemm_bf16;
      std::string paths;
      for (const auto& x : op.paths()) paths += x + " ";
      std::printf("%-6s %6lld %5lld %-31s %8.3f %8.3f %8.3f %8.1f %7.1f%%  %s\n",
                  to_string(t).c_str(), static_cast<long long>(S), static_cast<long long>(U),
                  variant.c_str(), tm.median_ms, tm.min_ms, tm.max_ms, tflops, pct, paths.c_str());
      std::fflush(stdout);
      c.results.push_back({{"dtype", to_string(t)}, {"B", B}, {"U", U}, {"S", S}, {"H", kH},
                           {"n_seed", kNSeed}, {"Dh", Dh}, {"variant", variant},
                           {"median_ms", tm.median_ms}, {"min_ms", tm.min_ms},
                           {"max_ms", tm.max_ms}, {"iters", c.iters}, {"flops", flops},
                           {"tflops", tflops}, {"pct_of_cublas_bf16", pct}, {"paths", op.paths()}});
    }
  }
}

}  // namespace

int tbe::bench::ikbo_fa_main(const IkboFaArgs& args) {
  Ctx c;
  c.iters = args.iters;
  c.dh = args.dh;
  c.kernel = args.kernel;
  c.warmup_ms = args.warmup_ms;
  cudaDeviceProp prop{};
  if (!first_device(prop)) return kNoDeviceExit;
  check(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking), "stream");
  cublasHandle_t handle = nullptr;
  check(cublasCreate(&handle), "cublasCreate");
  c.flush = DeviceBuffer(c.flush_bytes);
  c.gemm_bf16 = cublas_gemm_tflops(handle, DType::BF16, c.stream, std::max(5, c.iters / 2));
  std::printf("device %s; cuBLAS 8192^3 BF16 GEMM (FP32 accumulation): %.0f TFLOP/s\n"
              "ikbo-fa: B=%lld H=%lld n_seed=%lld Dh=%lld, %lld candidates per user; FLOPs "
              "4*B*H*n_seed*S*Dh; warm-up per row: 3 calls + %g ms\n\n",
              prop.name, c.gemm_bf16, static_cast<long long>(args.batch),
              static_cast<long long>(kH), static_cast<long long>(kNSeed),
              static_cast<long long>(c.dh), static_cast<long long>(kCandidatesPerUser),
              c.warmup_ms);
  std::printf("%-6s %6s %5s %-31s %8s %8s %8s %8s %8s  %s\n", "dtype", "S", "U", "variant",
              "med_ms", "min_ms", "max_ms", "TFLOP/s", "%cuBLAS", "paths");
  for (DType t : args.dtypes)
    for (std::int64_t S : args.seqs) run_shape(c, args.batch, S, t, args.unsorted);
  if (!args.json_path.empty()) {
    nlohmann::json j = {{"device", prop.name}, {"benchmark", "ikbo-fa"}, {"iters", c.iters},
                        {"warmup_ms", c.warmup_ms},
                        {"flops_model", "4*B*H*n_seed*S*Dh"},
                        {"cublas_gemm_8192_bf16_tflops", c.gemm_bf16}, {"results", c.results}};
    std::ofstream(args.json_path) << j.dump(2) << "\n";
  }
  cublasDestroy(handle);
  return 0;
}
