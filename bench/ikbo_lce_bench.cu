// tbe-bench ikbo-lce: timing of the IKBO linear compression stages (tbe::cuda::LceOp) against the
// broadcast baseline, on the ikbo-lce shape (docs/workloads.md) and its two sweeps.
//
//   tbe-bench ikbo-lce [--iters N] [--json FILE] [--no-sweeps] [--quick] [--sweeps-only]
//                      [--rounding R] [--sweep-rounding R]   (R: round-once|published|user-rounded;
//                      bench_args.cpp)
//
// Shapes: M=433, N=256, K_u=1178, K_c=866; published B=1024, U=15 (≈70 candidates per user, sorted
// map) in FP16 and BF16 under the three rounding policies (round-once, published, user-rounded;
// --rounding R: only R; --quick: FP16, round-once and user-rounded); sweep 1: B in {512, ..., 3072} at ≈70
// candidates per user (U = ceil(B/70)); sweep 2: B = 1024 with {2, 5, 10, 50, 100, 1000}
// candidates per user (U = ceil(1024/c)); sweeps in FP16 (RoundOnce unless --sweep-rounding).
// Variants, side by side on the same device inputs:
//   baseline      broadcast by index_select (a gather kernel builds E[b] = [E_u[u(b)]; E_c[b]],
//                 [B, K_u+K_c, N]) + one cuBLAS strided batched GEMM with W = [W_u | W_c]
//                 (built once, untimed): what a model without IKBO runs.
//   decomposed    LceStage::Decomposed (cuBLAS user + candidate GEMMs, gather-add kernel)
//   padded-k      LceStage::PaddedK on dense tensors (the op pads W and E into the workspace
//                 inside the timed run)
//   *.ld          the stage on caller-padded tensors (LceLayout; the model keeps its tensors
//                 padded: padded once, untimed)
//   fused         LceStage::FusedEpilogue (cuBLAS user GEMM, mma.sync candidate GEMM whose
//                 epilogue adds the user row)
//   l2-chunked    LceStage::L2Chunked (cuBLAS GEMM per chunk of candidates into an L2-resident
//                 buffer, gather-add overlapped on a second stream); .cN = N candidates per
//                 chunk, .serial = one stream
//   lt-epilogue   LceStage::LtEpilogue (cuBLASLt pointer-array matmul, C[b] = user row u(b) in the
//                 storage type, beta = 1: UserRounded; RoundOnce (FP32 C rejected by the
//                 heuristic) and Published run padded-k, see paths)
//   *.unsorted    the same on an unsorted map (published shape only: any map, same speed?)
//   cublas.cand-gemm.only  the cuBLAS candidate GEMM alone (K padded): the cuBLAS stages' floor
// plus the parts of `fused` and `l2-chunked.ld` (prologue + user GEMM alone; candidate part
// alone), the stage-4 input: the parts vs the whole show what a persistent kernel could save.
// Counting: FLOPs of the decomposed work 2·M·N·(B·K_c + U·K_u) for every variant (the baseline
// executes 2·M·N·B·(K_u+K_c)); TFLOP/s and % of the cuBLAS rate measured in the same run (8192³
// GEMM of the same dtype, FP32 accumulation). Timing: CUDA events around each call after 3
// warm-ups, L2 flushed (256 MiB write, untimed) before every iteration; median, min, max.
// Sanity: every variant's output is compared with the decomposed stage's (max |difference| in
// units of the largest |output|), printed, not asserted (the [ikbo] tests judge correctness).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nlohmann/json.hpp>

#include "bench_args.h"
#include "bench_common.h"
#include "bench_ikbo.cuh"
#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/ikbo_lce.h"
#include "tbe/ikbo.h"

using namespace tbe;
using tbe::cuda::DeviceBuffer;

namespace {

using tbe::bench::check;  // cudaError_t and cublasStatus_t (bench_ikbo.cuh)
using namespace tbe::bench::ikbo_inputs;
using tbe::bench::summarize;
using tbe::bench::time_it;
using tbe::bench::Timing;

/// Baseline broadcast: ecat[b] = [e_u[u(b)] (K_u rows); e_c[b] (K_c rows)], rows of N elements,
/// 16-byte copies when the row bytes allow (else 2-byte).
template <class V>
__global__ void broadcast_concat(const V* __restrict__ e_u, const V* __restrict__ e_c,
                                 const std::int32_t* __restrict__ map, V* __restrict__ ecat,
                                 std::int64_t B, std::int64_t ku_n, std::int64_t kc_n) {
  const std::int64_t per = ku_n + kc_n;  // vectors per candidate
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < B * per;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t b = i / per, j = i - b * per;
    ecat[i] = j < ku_n ? e_u[static_cast<std::int64_t>(map[b]) * ku_n + j] : e_c[b * kc_n + (j - ku_n)];
  }
}
/// W = [W_u | W_c] ([M, K_u + K_c]), built once.
__global__ void concat_weights(const std::uint16_t* w_u, const std::uint16_t* w_c, std::uint16_t* w,
                               std::int64_t M, std::int64_t K_u, std::int64_t K_c) {
  const std::int64_t K = K_u + K_c;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < M * K;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t m = i / K, k = i - m * K;
    w[i] = k < K_u ? w_u[m * K_u + k] : w_c[m * K_c + (k - K_u)];
  }
}
/// wp [rows, ld] = w [rows, K] with zero columns [K, ld) (weights; E items as rows of K·N).
__global__ void pad_rows(const std::uint16_t* w, std::uint16_t* wp, std::int64_t M, std::int64_t K,
                         std::int64_t ld) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < M * ld;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t m = i / ld, k = i - m * ld;
    wp[i] = k < K ? w[m * K + k] : 0;
  }
}



double to_double(DType t, const std::uint16_t bits) {
  float f;
  if (t == DType::F16) {
    __half_raw r;
    r.x = bits;
    f = __half2float(__half(r));
  } else {
    __nv_bfloat16_raw r;
    r.x = bits;
    f = __bfloat162float(__nv_bfloat16(r));
  }
  return f;
}

/// max |a - b| / max |b| over the outputs (host copies).
double relative_difference(DType t, const std::vector<std::uint16_t>& a,
                           const std::vector<std::uint16_t>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = to_double(t, a[i]), y = to_double(t, b[i]);
    num = std::max(num, std::fabs(x - y));
    den = std::max(den, std::fabs(y));
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
  }
  return den > 0 ? num / den : num;
}

struct Shape {
  std::string name;
  std::int64_t B, U, M = 433, N = 256, K_c = 866, K_u = 1178;
  double flops() const { return 2.0 * M * N * (double(B) * K_c + double(U) * K_u); }
};

struct Ctx {
  cudaStream_t stream;
  DeviceBuffer flush;
  std::size_t flush_bytes = 256ull << 20;
  int iters = 20;
  double gemm_tflops[2] = {0, 0};  // fp16, bf16
  nlohmann::json results = nlohmann::json::array();
  cublasHandle_t handle;
};

void report(Ctx& c, const Shape& s, DType t, ikbo::LceRounding r, const std::string& variant,
            const Timing& tm, double rel_diff, const std::vector<std::string>& paths) {
  const double tflops = s.flops() / (tm.median_ms * 1e-3) / 1e12;
  const double pct = 100.0 * tflops / c.gemm_tflops[t == DType::F16 ? 0 : 1];
  std::string p;
  for (const auto& x : paths) p += x + " ";
  std::printf("%-16s %-5s %-12s %-22s %8.3f %8.3f %8.3f %8.1f %6.1f%% %9.2e  %s\n", s.name.c_str(),
              to_string(t).c_str(), ikbo::to_string(r).c_str(), variant.c_str(), tm.median_ms,
              tm.min_ms, tm.max_ms, tflops, pct, rel_diff, p.c_str());
  std::fflush(stdout);
  c.results.push_back({{"shape", s.name}, {"B", s.B}, {"U", s.U}, {"M", s.M}, {"N", s.N},
                       {"K_c", s.K_c}, {"K_u", s.K_u}, {"dtype", to_string(t)},
                       {"rounding", ikbo::to_string(r)}, {"variant", variant},
                       {"median_ms", tm.median_ms}, {"min_ms", tm.min_ms}, {"max_ms", tm.max_ms},
                       {"iters", c.iters}, {"flops_decomposed", s.flops()}, {"tflops", tflops},
                       {"pct_of_cublas_rate", pct}, {"max_rel_diff_vs_decomposed", rel_diff},
                       {"paths", paths}});
}

/// All variants of one (shape, dtype, policy). full: also the unsorted map, the parts of `fused`
/// and the output comparisons.
void run_shape(Ctx& c, const Shape& s, DType t, ikbo::LceRounding r, bool full) {
  const std::int64_t MN = s.M * s.N;
  DeviceBuffer w_c(s.M * s.K_c * 2), w_u(s.M * s.K_u * 2), e_c(s.B * s.K_c * s.N * 2),
      e_u(s.U * s.K_u * s.N * 2), out(s.B * MN * 2), ref(s.B * MN * 2);
  fill(t, w_c.get(), s.M * s.K_c, 11);
  fill(t, w_u.get(), s.M * s.K_u, 12);
  fill(t, e_c.get(), s.B * s.K_c * s.N, 13);
  fill(t, e_u.get(), s.U * s.K_u * s.N, 14);
  const std::vector<std::int32_t> hmap = sorted_map(s.B, s.U);
  DeviceBuffer map(hmap.data(), hmap.size() * 4);
  const std::vector<std::int32_t> hmap_u = shuffled(hmap, 99);
  DeviceBuffer map_u(hmap_u.data(), hmap_u.size() * 4);

  ikbo::LceProblem p;
  p.B = s.B; p.U = s.U; p.M = s.M; p.N = s.N; p.K_c = s.K_c; p.K_u = s.K_u;
  p.w_c = w_c.get(); p.w_u = w_u.get(); p.e_c = e_c.get(); p.e_u = e_u.get();
  p.cand_to_user = map.as<const std::int32_t>();
  p.policy.storage = t;
  p.policy.accumulation = DType::F32;
  p.policy.lce_rounding = r;

  std::vector<std::uint16_t> h_ref(full ? s.B * MN : 0), h_out(full ? s.B * MN : 0);
  auto download = [&](const DeviceBuffer& d, std::vector<std::uint16_t>& h) {
    check(cudaMemcpy(h.data(), d.get(), h.size() * 2, cudaMemcpyDeviceToHost), "download");
  };
  auto run_op = [&](const std::string& name, const ikbo::LceProblem& pp, cuda::LceStage st,
                    const cuda::LceLayout& layout, bool is_ref, cuda::LceTuning tuning = {}) {
    cuda::LceOp op(pp, st, layout, tuning);
    DeviceBuffer ws(op.workspace_bytes());
    const Timing tm = time_it([&] { op.run(is_ref ? ref.get() : out.get(), ws.get(), c.stream); },
                              c.iters, c.stream, c.flush.get(), c.flush_bytes);
    op.finish();
    double diff = 0;  // sweeps (full = false) skip the comparison: downloads cost seconds
    if (full && !is_ref) {
      download(out, h_out);
      diff = relative_difference(t, h_out, h_ref);
    } else if (full) {
      download(ref, h_ref);
    }
    report(c, s, t, r, name, tm, diff, op.paths());
    return tm;
  };

  // decomposed first: the comparison reference of the others
  run_op("decomposed", p, cuda::LceStage::Decomposed, {}, true);
  run_op("padded-k", p, cuda::LceStage::PaddedK, {}, false);
  // caller-padded tensors (zero K padding, built outside the timed region)
  const std::int64_t kcp = (s.K_c + 7) / 8 * 8, kup = (s.K_u + 7) / 8 * 8;
  DeviceBuffer w_cp(s.M * kcp * 2), w_up(s.M * kup * 2), e_cp(s.B * kcp * s.N * 2),
      e_up(s.U * kup * s.N * 2);
  pad_rows<<<4096, 256>>>(w_c.as<std::uint16_t>(), w_cp.as<std::uint16_t>(), s.M, s.K_c, kcp);
  pad_rows<<<4096, 256>>>(w_u.as<std::uint16_t>(), w_up.as<std::uint16_t>(), s.M, s.K_u, kup);
  pad_rows<<<4096, 256>>>(e_c.as<std::uint16_t>(), e_cp.as<std::uint16_t>(), s.B, s.K_c * s.N, kcp * s.N);
  pad_rows<<<4096, 256>>>(e_u.as<std::uint16_t>(), e_up.as<std::uint16_t>(), s.U, s.K_u * s.N, kup * s.N);
  check(cudaDeviceSynchronize(), "pad tensors");
  ikbo::LceProblem pp = p;
  pp.w_c = w_cp.get();
  pp.w_u = w_up.get();
  pp.e_c = e_cp.get();
  pp.e_u = e_up.get();
  const cuda::LceLayout padded{kcp, kup};
  run_op("padded-k.ld", pp, cuda::LceStage::PaddedK, padded, false);
  const Timing fused = run_op("fused", p, cuda::LceStage::FusedEpilogue, {}, false);
  run_op("fused.ld", pp, cuda::LceStage::FusedEpilogue, padded, false);
  run_op("l2-chunked", p, cuda::LceStage::L2Chunked, {}, false);
  run_op("l2-chunked.ld", pp, cuda::LceStage::L2Chunked, padded, false);
  run_op("lt-epilogue", p, cuda::LceStage::LtEpilogue, {}, false);
  run_op("lt-epilogue.ld", pp, cuda::LceStage::LtEpilogue, padded, false);

  if (full) {
    for (std::int64_t chunk : {32, 66, 132, 264})
      for (bool overlap : {true, false}) {
        cuda::LceTuning tu;
        tu.chunk_candidates = chunk;
        tu.overlap = overlap;
        run_op("l2-chunked.ld.c" + std::to_string(chunk) + (overlap ? "" : ".serial"), pp,
               cuda::LceStage::L2Chunked, padded, false, tu);
      }
    // any map: the same stages on a shuffled map (its own decomposed reference)
    ikbo::LceProblem pu = p;
    pu.cand_to_user = map_u.as<const std::int32_t>();
    run_op("decomposed.unsorted", pu, cuda::LceStage::Decomposed, {}, true);
    run_op("fused.unsorted", pu, cuda::LceStage::FusedEpilogue, {}, false);
    ikbo::LceProblem ppu = pp;
    ppu.cand_to_user = map_u.as<const std::int32_t>();
    run_op("l2-chunked.ld.unsorted", ppu, cuda::LceStage::L2Chunked, padded, false);
    run_op("lt-epilogue.ld.unsorted", ppu, cuda::LceStage::LtEpilogue, padded, false);
    run_op("decomposed", p, cuda::LceStage::Decomposed, {}, true);  // restore the reference

    // stage-4 input: the parts of `fused` and `l2-chunked.ld` timed alone
    for (auto [name, st, lay, prob] :
         {std::tuple{std::string("fused"), cuda::LceStage::FusedEpilogue, padded, pp},
          std::tuple{std::string("l2-chunked.ld"), cuda::LceStage::L2Chunked, padded, pp},
          std::tuple{std::string("lt-epilogue.ld"), cuda::LceStage::LtEpilogue, padded, pp}}) {
      cuda::LceOp op(prob, st, lay);
      DeviceBuffer ws(op.workspace_bytes());
      const Timing whole = time_it([&] { op.run(out.get(), ws.get(), c.stream); }, c.iters,
                                   c.stream, c.flush.get(), c.flush_bytes);
      const Timing user_part = time_it([&] {
        op.run_prologue(ws.get(), c.stream);
        op.run_user_gemm(ws.get(), c.stream);
      }, c.iters, c.stream, c.flush.get(), c.flush_bytes);
      const Timing cand_part = time_it([&] { op.run_candidates(out.get(), ws.get(), c.stream); },
                                       c.iters, c.stream, c.flush.get(), c.flush_bytes);
      op.finish();
      report(c, s, t, r, name + ".part.user", user_part, 0, {"map check + user GEMM (cuBLAS)"});
      report(c, s, t, r, name + ".part.cand", cand_part, 0, op.paths());
      std::printf("%-16s stage 4 input (%s): whole %.3f ms = user part %.3f + candidate part "
                  "%.3f %+.3f (whole minus parts: launch gap / overlap)\n",
                  s.name.c_str(), name.c_str(), whole.median_ms, user_part.median_ms,
                  cand_part.median_ms, whole.median_ms - user_part.median_ms - cand_part.median_ms);
      c.results.push_back({{"shape", s.name}, {"dtype", to_string(t)},
                           {"rounding", ikbo::to_string(r)}, {"stage4_input", name},
                           {"whole_ms", whole.median_ms}, {"user_part_ms", user_part.median_ms},
                           {"candidate_part_ms", cand_part.median_ms}});
    }
    // stage-3 finding, timed raw: the epilogue fusion cuBLASLt accepts (pointer-array batch, C[b]
    // = user row u(b) in the output type, beta = 1) -> D = round(fl32(acc + round(user))), the
    // UserRounded policy (LceStage::LtEpilogue runs it with the map check and the device-built
    // pointer arrays). Timed: the user GEMM (cuBLAS, 16-bit out) + the Lt matmul; the pointer
    // arrays are built once on the host, untimed. rel_diff is 0 under user-rounded up to the
    // GEMMs' summation orders.
    {
      cublasLtHandle_t lt;
      check(cublasLtCreate(&lt), "cublasLtCreate");
      cublasLtMatmulDesc_t op;
      check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
      cublasLtMatrixLayout_t L[4];
      const std::int64_t dims[4][3] = {{s.N, kcp, s.N}, {kcp, s.M, kcp}, {s.N, s.M, s.N}, {s.N, s.M, s.N}};
      const int32_t count = static_cast<int32_t>(s.B);
      const uint32_t mode = CUBLASLT_BATCH_MODE_POINTER_ARRAY;
      for (int i = 0; i < 4; ++i) {
        check(cublasLtMatrixLayoutCreate(&L[i], cuda_type(t), dims[i][0], dims[i][1], dims[i][2]), "layout");
        check(cublasLtMatrixLayoutSetAttribute(L[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, 4), "count");
        check(cublasLtMatrixLayoutSetAttribute(L[i], CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, 4), "mode");
      }
      cublasLtMatmulPreference_t pref;
      check(cublasLtMatmulPreferenceCreate(&pref), "pref");
      const std::size_t lt_ws = 32ull << 20;
      check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt_ws, sizeof lt_ws), "pref ws");
      cublasLtMatmulHeuristicResult_t res{};
      int found = 0;
      check(cublasLtMatmulAlgoGetHeuristic(lt, op, L[0], L[1], L[2], L[3], pref, 1, &res, &found), "heuristic");
      DeviceBuffer y16(s.U * MN * 2), ws(lt_ws);
      std::vector<const void*> ptrs(4 * s.B);
      for (std::int64_t b = 0; b < s.B; ++b) {
        ptrs[b] = e_cp.as<char>() + b * kcp * s.N * 2;
        ptrs[s.B + b] = w_cp.get();
        ptrs[2 * s.B + b] = y16.as<char>() + hmap[b] * MN * 2;
        ptrs[3 * s.B + b] = out.as<char>() + b * MN * 2;
      }
      DeviceBuffer d_ptrs(ptrs.data(), ptrs.size() * sizeof(void*));
      const void** dp = d_ptrs.as<const void*>();
      const float one = 1, zero = 0;
      check(cublasSetStream(c.handle, c.stream), "set stream");
      const Timing tm = time_it([&] {
        check(cublasGemmStridedBatchedEx(c.handle, CUBLAS_OP_N, CUBLAS_OP_N, s.N, s.M, kup, &one,
                                         e_up.get(), cuda_type(t), s.N, kup * s.N, w_up.get(),
                                         cuda_type(t), kup, 0, &zero, y16.get(), cuda_type(t), s.N,
                                         MN, s.U, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "user GEMM");
        check(cublasLtMatmul(lt, op, &one, dp, L[0], dp + s.B, L[1], &one, dp + 2 * s.B, L[2],
                             const_cast<void*>(static_cast<const void*>(dp + 3 * s.B)), L[3],
                             &res.algo, ws.get(), res.workspaceSize, c.stream),
              "Lt matmul");
      }, c.iters, c.stream, c.flush.get(), c.flush_bytes);
      download(out, h_out);
      report(c, s, t, r, "lt-c16.ld.raw", tm, relative_difference(t, h_out, h_ref),
             {"cuBLASLt pointer-array, C = round(user) in " + to_string(t) +
              ": round(acc + C) = user-rounded, host-built pointers"});
      cublasLtMatmulPreferenceDestroy(pref);
      for (auto& l : L) cublasLtMatrixLayoutDestroy(l);
      cublasLtMatmulDescDestroy(op);
      cublasLtDestroy(lt);
    }
    // the cuBLAS candidate GEMM alone (K padded), into the part type: the floor of the cuBLAS
    // stages
    {
      const DType part = r == ikbo::LceRounding::Published ? t : DType::F32;
      DeviceBuffer tmp(s.B * MN * dtype_size(part));
      const float one = 1, zero = 0;
      check(cublasSetStream(c.handle, c.stream), "set stream");
      const Timing tm = time_it([&] {
        check(cublasGemmStridedBatchedEx(c.handle, CUBLAS_OP_N, CUBLAS_OP_N, s.N, s.M, kcp, &one,
                                         e_cp.get(), cuda_type(t), s.N, kcp * s.N, w_cp.get(),
                                         cuda_type(t), kcp, 0, &zero, tmp.get(),
                                         part == DType::F32 ? CUDA_R_32F : cuda_type(t), s.N, MN,
                                         s.B, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              "candidate GEMM alone");
      }, c.iters, c.stream, c.flush.get(), c.flush_bytes);
      report(c, s, t, r, "cublas.cand-gemm.only", tm, 0, {"K padded, out " + to_string(part)});
    }
  }

  // baseline: broadcast + one GEMM on the concatenated K
  {
    const std::int64_t K = s.K_u + s.K_c;
    DeviceBuffer w(s.M * K * 2), ecat(s.B * K * s.N * 2);
    concat_weights<<<1024, 256>>>(w_u.as<std::uint16_t>(), w_c.as<std::uint16_t>(),
                                  w.as<std::uint16_t>(), s.M, s.K_u, s.K_c);
    check(cudaDeviceSynchronize(), "concat weights");
    const bool vec = s.N % 8 == 0;
    const float one = 1, zero = 0;
    check(cublasSetStream(c.handle, c.stream), "set stream");
    const Timing tm = time_it([&] {
      if (vec)
        broadcast_concat<<<8192, 256, 0, c.stream>>>(e_u.as<const uint4>(), e_c.as<const uint4>(),
                                                     map.as<const std::int32_t>(), ecat.as<uint4>(),
                                                     s.B, s.K_u * s.N / 8, s.K_c * s.N / 8);
      else
        broadcast_concat<<<8192, 256, 0, c.stream>>>(
            e_u.as<const std::uint16_t>(), e_c.as<const std::uint16_t>(),
            map.as<const std::int32_t>(), ecat.as<std::uint16_t>(), s.B, s.K_u * s.N, s.K_c * s.N);
      check(cublasGemmStridedBatchedEx(c.handle, CUBLAS_OP_N, CUBLAS_OP_N, s.N, s.M, K, &one,
                                       ecat.get(), cuda_type(t), s.N, K * s.N, w.get(),
                                       cuda_type(t), K, 0, &zero, out.get(), cuda_type(t), s.N,
                                       MN, s.B, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "baseline GEMM");
    }, c.iters, c.stream, c.flush.get(), c.flush_bytes);
    double diff = 0;
    if (full) {
      download(out, h_out);
      diff = relative_difference(t, h_out, h_ref);
    }
    report(c, s, t, r, "baseline", tm, diff,
           {"gather [B, K_u+K_c, N] + cuBLAS strided batched GEMM"});
  }
}

/// Stage 3 finding: which cuBLASLt epilogue configurations this toolkit's heuristic accepts for
/// the candidate matmul (column-major: D[b] (N×M) = E[b] (N×K) · W (K×M) + C[b]), batch B,
/// strided (C batch stride 0: one user's result broadcast) or pointer-array (C[b] = user row
/// u(b): any map), C in FP32 (RoundOnce exact) or in the output type (rounds the user part
/// first: UserRounded).
void probe_cublaslt(const Shape& s, DType t) {
  cublasLtHandle_t h;
  check(cublasLtCreate(&h), "cublasLtCreate");
  const std::int64_t k = (s.K_c + 7) / 8 * 8;
  for (bool ptr : {false, true})
    for (bool c32 : {true, false}) {
      cublasLtMatmulDesc_t op;
      check(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
      cublasLtMatrixLayout_t L[4];
      const cudaDataType ct = c32 ? CUDA_R_32F : cuda_type(t);
      const std::int64_t dims[4][4] = {{s.N, k, s.N, k * s.N}, {k, s.M, k, 0}, {s.N, s.M, s.N, 0},
                                       {s.N, s.M, s.N, s.M * s.N}};
      const cudaDataType types[4] = {cuda_type(t), cuda_type(t), ct, cuda_type(t)};
      const int32_t count = static_cast<int32_t>(s.B);
      const uint32_t mode = ptr ? CUBLASLT_BATCH_MODE_POINTER_ARRAY : CUBLASLT_BATCH_MODE_STRIDED;
      for (int i = 0; i < 4; ++i) {
        check(cublasLtMatrixLayoutCreate(&L[i], types[i], dims[i][0], dims[i][1], dims[i][2]), "layout");
        check(cublasLtMatrixLayoutSetAttribute(L[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, 4), "count");
        check(cublasLtMatrixLayoutSetAttribute(L[i], CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode, 4), "mode");
        if (!ptr)
          check(cublasLtMatrixLayoutSetAttribute(L[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                 &dims[i][3], 8), "stride");
      }
      cublasLtMatmulPreference_t pref;
      check(cublasLtMatmulPreferenceCreate(&pref), "pref");
      const std::size_t ws = 32ull << 20;
      check(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws), "pref ws");
      cublasLtMatmulHeuristicResult_t res[8];
      int found = 0;
      const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, L[0], L[1], L[2], L[3], pref, 8, res, &found);
      std::printf("cuBLASLt probe %s: %-13s C %-4s D %-4s -> %s, %d algorithms\n", to_string(t).c_str(),
                  ptr ? "pointer-array" : "strided", c32 ? "fp32" : to_string(t).c_str(),
                  to_string(t).c_str(), cublasGetStatusName(st), found);
      cublasLtMatmulPreferenceDestroy(pref);
      for (auto& l : L) cublasLtMatrixLayoutDestroy(l);
      cublasLtMatmulDescDestroy(op);
    }
  cublasLtDestroy(h);
}

}  // namespace

int tbe::bench::ikbo_lce_main(const IkboLceArgs& args) {
  using ::check;  // the cudaError_t and the cuBLAS overloads (tbe::bench::check hides the latter)
  Ctx c;
  c.iters = args.iters;
  cudaDeviceProp prop{};
  if (!first_device(prop)) return kNoDeviceExit;
  check(cudaStreamCreateWithFlags(&c.stream, cudaStreamNonBlocking), "stream");
  check(cublasCreate(&c.handle), "cublasCreate");
  c.flush = DeviceBuffer(c.flush_bytes);
  c.gemm_tflops[0] = cublas_gemm_tflops(c.handle, DType::F16, c.stream, std::max(5, c.iters / 2));
  c.gemm_tflops[1] = cublas_gemm_tflops(c.handle, DType::BF16, c.stream, std::max(5, c.iters / 2));
  std::printf("device %s; cuBLAS 8192^3 GEMM (FP32 accumulation): fp16 %.0f TFLOP/s, bf16 %.0f "
              "TFLOP/s\n\n", prop.name, c.gemm_tflops[0], c.gemm_tflops[1]);
  std::printf("%-16s %-5s %-12s %-22s %8s %8s %8s %8s %7s %9s  %s\n", "shape", "dtype", "rounding",
              "variant", "med_ms", "min_ms", "max_ms", "TFLOP/s", "%cuBLAS", "rel_diff", "paths");

  const Shape published{"ikbo-lce", 1024, 15};
  probe_cublaslt(published, DType::F16);
  probe_cublaslt(published, DType::BF16);
  const DType dtypes[] = {DType::F16, DType::BF16};
  for (DType t : dtypes) {
    if (args.sweeps_only) break;
    if (args.quick && t != DType::F16) continue;
    std::vector<ikbo::LceRounding> rs = args.roundings;
    if (rs.empty())
      rs = args.quick ? std::vector<ikbo::LceRounding>{ikbo::LceRounding::RoundOnce,
                                                  ikbo::LceRounding::UserRounded}
                 : std::vector<ikbo::LceRounding>{ikbo::LceRounding::RoundOnce,
                                                  ikbo::LceRounding::Published,
                                                  ikbo::LceRounding::UserRounded};
    for (ikbo::LceRounding r : rs) run_shape(c, published, t, r, true);
  }
  if (args.sweeps) {
    for (std::int64_t B : {512, 1024, 1536, 2048, 2560, 3072})
      run_shape(c, Shape{"B=" + std::to_string(B), B, (B + 69) / 70}, DType::F16,
                args.sweep_rounding, false);
    for (std::int64_t cpu : {2, 5, 10, 50, 100, 1000})
      run_shape(c, Shape{"cpu=" + std::to_string(cpu), 1024, (1024 + cpu - 1) / cpu}, DType::F16,
                args.sweep_rounding, false);
  }
  if (!args.json_path.empty()) {
    nlohmann::json j = {{"device", prop.name}, {"benchmark", "ikbo-lce"}, {"iters", c.iters},
                        {"cublas_gemm_8192_tflops", {{"fp16", c.gemm_tflops[0]}, {"bf16", c.gemm_tflops[1]}}},
                        {"results", c.results}};
    std::ofstream(args.json_path) << j.dump(2) << "\n";
  }
  cublasDestroy(c.handle);
  return 0;
}
