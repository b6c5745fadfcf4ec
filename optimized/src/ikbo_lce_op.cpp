// Host side of the device-level IKBO LCE operator: validation, plan, workspace layout, cuBLAS
// GEMMs, enqueue (no sync), finish (map check verdict). Kernels: optimized/kernels/ikbo_lce_*.cu.
//
// cuBLAS is column-major: a row-major X [r, c] is the column-major X^T [c, r] with ld = c. So
//   out[b] (row-major M×N) = W · E[b]   is   out[b]^T (N×M) = E[b]^T (N×K, ld N) · W^T (K×M, ld ld_w)
// i.e. cublasGemmStridedBatchedEx(m = N, n = M, k = K, A = E (stride K·N), B = W (stride 0: the
// weights are shared by the whole batch), C (stride M·N)), FP32 compute (CUBLAS_COMPUTE_32F).
#include "tbe/cuda/ikbo_lce.h"

#include <algorithm>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include <cublas_v2.h>

#include "kernels/ikbo_lce_launch.h"
#include "src/cuda_check.h"
#include "tbe/errors.h"

namespace tbe::cuda {

using detail::cuda_check;

namespace {

constexpr std::size_t kAlign = 256;
std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }
std::int64_t round_up8(std::int64_t x) { return (x + 7) / 8 * 8; }

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw DeviceError(std::string("cuBLAS error in ") + what + ": " + cublasGetStatusName(s) +
                      " (" + cublasGetStatusString(s) + ")");
}

cudaDataType cuda_type(DType t) {
  switch (t) {
    case DType::F16: return CUDA_R_16F;
    case DType::BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
  }
}

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

}  // namespace

std::string to_string(LceStage s) {
  switch (s) {
    case LceStage::Decomposed: return "decomposed";
    case LceStage::PaddedK: return "padded-k";
    case LceStage::FusedEpilogue: return "fused-epilogue";
  }
  return "?";
}

struct LceOp::Plan {
  ikbo::LceProblem p;
  LceStage stage{};
  DType storage{};
  bool round_once = true;
  std::size_t esz = 2;     ///< storage element bytes
  DType part_type{};       ///< type of the user / candidate GEMM results (FP32 or storage)
  // weights as the GEMMs read them: the caller's or padded copies in the workspace
  std::int64_t ld_wc = 0, ld_wu = 0;
  bool pad_wc = false, pad_wu = false;
  std::int64_t src_ld_wc = 0, src_ld_wu = 0;
  // workspace layout (byte offsets)
  std::size_t ws_wc = 0, ws_wu = 0, ws_user = 0, ws_cand = 0, ws_total = 0;
  cublasHandle_t handle = nullptr;
  std::vector<std::string> paths;
  // last run
  cudaStream_t stream = nullptr;
  bool ran = false;
  unsigned long long* map_error = nullptr;

  ~Plan() {
    if (handle != nullptr) cublasDestroy(handle);
  }
  char* base(void* ws) const { return static_cast<char*>(ws); }
  const void* w_c(void* ws) const { return pad_wc ? base(ws) + ws_wc : p.w_c; }
  const void* w_u(void* ws) const { return pad_wu ? base(ws) + ws_wu : p.w_u; }
  void* user(void* ws) const { return p.K_u > 0 ? base(ws) + ws_user : nullptr; }
  void* cand(void* ws) const { return base(ws) + ws_cand; }

  /// out[batch] (row-major M×N of `out_type`) = W (M×K, ld) · E[batch] (K×N), FP32 compute.
  void gemm(const void* e, const void* w, std::int64_t ld, std::int64_t K, std::int64_t batch,
            void* out, cudaStream_t s, const char* what) const {
    if (batch <= 0) return;
    cublas_check(cublasSetStream(handle, s), "cublasSetStream");
    const float one = 1.0f, zero = 0.0f;
    const int m = static_cast<int>(p.N), n = static_cast<int>(p.M), k = static_cast<int>(K);
    cublas_check(cublasGemmStridedBatchedEx(
                     handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, e, cuda_type(storage), m,
                     static_cast<long long>(K) * p.N, w, cuda_type(storage), static_cast<int>(ld),
                     0LL, &zero, out, cuda_type(part_type), m, static_cast<long long>(p.M) * p.N,
                     static_cast<int>(batch), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 what);
  }
};

LceOp::LceOp(const ikbo::LceProblem& p, LceStage stage, const LceLayout& layout)
    : plan_(std::make_unique<Plan>()) {
  throw_if_error(ikbo::validate(p));
  const ikbo::IkboPolicy& pol = p.policy;
  if (pol.accumulation != DType::F32)
    throw InvalidArgument("lce.policy.accumulation",
                          "lce.policy.accumulation: " + to_string(pol.accumulation) +
                              " is not supported by the CUDA backend (fp32)");
  if (pol.storage != DType::F16 && pol.storage != DType::BF16 && pol.storage != DType::F32)
    throw InvalidArgument("lce.policy.storage", "lce.policy.storage: " + to_string(pol.storage) +
                                                    " is not supported by the CUDA backend "
                                                    "(fp16, bf16 or fp32)");
  for (auto [name, v] : {std::pair<const char*, std::int64_t>{"lce.M", p.M}, {"lce.N", p.N},
                         {"lce.K_c", p.K_c}, {"lce.K_u", p.K_u}, {"lce.B", p.B}})
    if (v > INT_MAX)
      throw InvalidArgument(name, std::string(name) + ": " + std::to_string(v) +
                                      " exceeds the CUDA backend's limit " + std::to_string(INT_MAX));
  if (layout.w_c_ld != 0 && layout.w_c_ld < p.K_c)
    throw InvalidArgument("layout.w_c_ld", "layout.w_c_ld: " + std::to_string(layout.w_c_ld) +
                                               " must be 0 or >= K_c=" + std::to_string(p.K_c));
  if (layout.w_u_ld != 0 && layout.w_u_ld < p.K_u)
    throw InvalidArgument("layout.w_u_ld", "layout.w_u_ld: " + std::to_string(layout.w_u_ld) +
                                               " must be 0 or >= K_u=" + std::to_string(p.K_u));

  Plan& P = *plan_;
  P.p = p;
  P.storage = pol.storage;
  P.round_once = pol.lce_rounding == ikbo::LceRounding::RoundOnce;
  P.esz = dtype_size(P.storage);
  P.part_type = P.round_once ? DType::F32 : P.storage;
  P.stage = (stage == LceStage::FusedEpilogue && P.storage == DType::F32) ? LceStage::PaddedK : stage;
  P.src_ld_wc = layout.w_c_ld != 0 ? layout.w_c_ld : p.K_c;
  P.src_ld_wu = layout.w_u_ld != 0 ? layout.w_u_ld : p.K_u;
  P.ld_wc = P.src_ld_wc;
  P.ld_wu = P.src_ld_wu;
  if (P.stage != LceStage::Decomposed) {
    // 16-byte aligned weight rows: use the caller's if they already are, else pad into the
    // workspace (element bytes 2 -> multiple of 8 elements; FP32 -> multiple of 4 would do, 8 kept).
    if (P.src_ld_wc % 8 != 0 || !aligned16(p.w_c)) {
      P.pad_wc = true;
      P.ld_wc = round_up8(p.K_c);
    }
    if (p.K_u > 0 && (P.src_ld_wu % 8 != 0 || !aligned16(p.w_u))) {
      P.pad_wu = true;
      P.ld_wu = round_up8(p.K_u);
    }
  }

  // --- workspace: map flag | W_c padded | W_u padded | user result | candidate result ---
  const std::size_t part_sz = dtype_size(P.part_type);
  P.ws_wc = align_up(sizeof(unsigned long long));
  P.ws_wu = align_up(P.ws_wc + (P.pad_wc ? static_cast<std::size_t>(p.M * P.ld_wc) * P.esz : 0));
  P.ws_user = align_up(P.ws_wu + (P.pad_wu ? static_cast<std::size_t>(p.M * P.ld_wu) * P.esz : 0));
  P.ws_cand = align_up(P.ws_user + (p.K_u > 0 ? static_cast<std::size_t>(p.U * p.M * p.N) * part_sz : 0));
  P.ws_total = P.ws_cand;
  if (P.stage != LceStage::FusedEpilogue)
    P.ws_total = align_up(P.ws_cand + static_cast<std::size_t>(p.B * p.M * p.N) * part_sz);

  // --- paths ---
  P.paths.push_back("lce." + to_string(P.stage));
  if (P.pad_wc || P.pad_wu) P.paths.push_back("lce.pad-weights.workspace");
  if (p.K_u > 0) P.paths.push_back("lce.user-gemm.cublas");
  if (P.stage == LceStage::FusedEpilogue) {
    detail::LceFusedArgs a;
    a.e_c = p.e_c;
    a.N = p.N;
    P.paths.push_back(detail::lce_fused_vectorized(a) ? "lce.candidate-gemm.mma-sync.vec8"
                                                      : "lce.candidate-gemm.mma-sync.scalar-e");
  } else {
    P.paths.push_back("lce.candidate-gemm.cublas");
    P.paths.push_back("lce.gather-add");
  }

  cublas_check(cublasCreate(&P.handle), "cublasCreate");
  cublas_check(cublasSetPointerMode(P.handle, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
}

LceOp::~LceOp() = default;
LceOp::LceOp(LceOp&&) noexcept = default;
LceOp& LceOp::operator=(LceOp&&) noexcept = default;

std::size_t LceOp::workspace_bytes() const { return plan_->ws_total; }
const std::vector<std::string>& LceOp::paths() const { return plan_->paths; }
LceStage LceOp::stage() const { return plan_->stage; }

void LceOp::run_prologue(void* d_workspace, cudaStream_t stream) {
  Plan& P = *plan_;
  P.stream = stream;
  P.ran = true;
  P.map_error = reinterpret_cast<unsigned long long*>(d_workspace);
  cuda_check(cudaMemsetAsync(P.map_error, 0xff, sizeof(unsigned long long), stream),
             "lce: reset map flag");
  detail::launch_lce_map_check(P.p.cand_to_user, P.p.B, P.p.U, P.map_error, stream);
  if (P.pad_wc)
    detail::launch_lce_pad_rows(P.p.w_c, P.src_ld_wc, P.base(d_workspace) + P.ws_wc, P.ld_wc,
                                P.p.M, P.p.K_c, P.esz, stream);
  if (P.pad_wu)
    detail::launch_lce_pad_rows(P.p.w_u, P.src_ld_wu, P.base(d_workspace) + P.ws_wu, P.ld_wu,
                                P.p.M, P.p.K_u, P.esz, stream);
}

void LceOp::run_user_gemm(void* d_workspace, cudaStream_t stream) {
  const Plan& P = *plan_;
  if (P.p.K_u > 0)
    P.gemm(P.p.e_u, P.w_u(d_workspace), P.ld_wu, P.p.K_u, P.p.U, P.user(d_workspace), stream,
           "lce user GEMM");
}

void LceOp::run_candidates(void* d_out, void* d_workspace, cudaStream_t stream) {
  const Plan& P = *plan_;
  if (P.p.B <= 0) return;
  const unsigned long long* flag = reinterpret_cast<const unsigned long long*>(d_workspace);
  if (P.stage == LceStage::FusedEpilogue) {
    detail::LceFusedArgs a;
    a.w_c = P.w_c(d_workspace);
    a.ld_w = P.ld_wc;
    a.e_c = P.p.e_c;
    a.user = P.user(d_workspace);
    a.cand_to_user = P.p.cand_to_user;
    a.out = d_out;
    a.B = P.p.B;
    a.M = P.p.M;
    a.N = P.p.N;
    a.K = P.p.K_c;
    a.map_error = flag;
    detail::launch_lce_fused(P.storage, P.round_once, a, stream);
    return;
  }
  P.gemm(P.p.e_c, P.w_c(d_workspace), P.ld_wc, P.p.K_c, P.p.B, P.cand(d_workspace), stream,
         "lce candidate GEMM");
  detail::LceGatherAddArgs g;
  g.cand = P.cand(d_workspace);
  g.user = P.user(d_workspace);
  g.cand_to_user = P.p.cand_to_user;
  g.out = d_out;
  g.B = P.p.B;
  g.MN = P.p.M * P.p.N;
  g.map_error = flag;
  detail::launch_lce_gather_add(P.storage, P.round_once, g, stream);
}

void LceOp::run(void* d_out, void* d_workspace, cudaStream_t stream) {
  run_prologue(d_workspace, stream);
  run_user_gemm(d_workspace, stream);
  run_candidates(d_out, d_workspace, stream);
}

void LceOp::finish() {
  Plan& P = *plan_;
  if (!P.ran) throw DeviceError("LceOp::finish: run() was not called");
  cuda_check(cudaStreamSynchronize(P.stream), "lce (stream synchronize)");
  cuda_check(cudaGetLastError(), "lce (kernels)");
  unsigned long long bad = detail::kLceMapOk;
  cuda_check(cudaMemcpy(&bad, P.map_error, sizeof bad, cudaMemcpyDeviceToHost), "read map flag");
  if (bad == detail::kLceMapOk) return;
  // Same message as the reference: validate_map on the downloaded map names the first offender.
  std::vector<std::int32_t> map(static_cast<std::size_t>(P.p.B));
  cuda_check(cudaMemcpy(map.data(), P.p.cand_to_user, map.size() * sizeof(std::int32_t),
                        cudaMemcpyDeviceToHost),
             "download cand_to_user");
  const Status s = ikbo::validate_map(map, P.p.U);
  if (!s.ok()) throw InvalidArgument(s);
  throw InvalidArgument("cand_to_user", "cand_to_user[" + std::to_string(bad) +
                                            "]: outside [0, U=" + std::to_string(P.p.U) +
                                            ") during run() (the map changed since)");
}

}  // namespace tbe::cuda
