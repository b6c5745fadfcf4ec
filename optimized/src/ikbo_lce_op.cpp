// Host side of the device-level IKBO LCE operator: can_implement, plan, workspace layout, cuBLAS
// GEMMs, enqueue (no sync), finish (map check verdict). Kernels: optimized/kernels/ikbo_lce_*.cu.
//
// cuBLAS is column-major: a row-major X [r, c] is the column-major X^T [c, r] with ld = c. So
//   out[b] (row-major M×N) = W · E[b]   is   out[b]^T (N×M) = E[b]^T (N×K, ld N) · W^T (K×M, ld ld_w)
// i.e. cublasGemmStridedBatchedEx(m = N, n = M, k = K, A = E (stride K·N), B = W (stride 0: the
// weights are shared by the whole batch), C (stride M·N)), FP32 compute (CUBLAS_COMPUTE_32F).
#include "tbe/cuda/ikbo_lce.h"

#include <algorithm>
#include <climits>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "dispatch/dispatch.h"
#include "dispatch/tuning.h"
#include "kernels/ikbo_lce_launch.h"
#include "src/ikbo_map_check.h"
#include "tbe/cuda/check.h"
#include "tbe/cuda/workspace.h"
#include "tbe/errors.h"

namespace tbe::cuda {

namespace {

std::int64_t round_up8(std::int64_t x) { return (x + 7) / 8 * 8; }

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw DeviceError(std::string("cuBLAS error in ") + what + ": " + cublasGetStatusName(s) +
                      " (" + cublasGetStatusString(s) + ")");
}

/// The cuBLAS type of a storage type or of FP32 (the GEMMs' operands and results).
cudaDataType cuda_type(DType t) { return dispatch::data_type(t, "lce.policy.storage"); }

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

/// Largest power of two dividing x, at most kWorkspaceAlignment = 256 (cudaMalloc's; x = 0:
/// 256): the alignment in bytes of an address or a byte stride as cuBLASLt's MIN_ALIGNMENT
/// preferences count it.
std::uint32_t pow2_align(std::uint64_t x) {
  constexpr std::uint32_t kMax = kWorkspaceAlignment;
  if (x == 0) return kMax;
  const std::uint64_t a = x & (~x + 1);
  return a > kMax ? kMax : static_cast<std::uint32_t>(a);
}
std::uint32_t pow2_align(const void* p) { return pow2_align(reinterpret_cast<std::uintptr_t>(p)); }

}  // namespace

std::string to_string(LceStage s) {
  switch (s) {
    case LceStage::Decomposed: return "decomposed";
    case LceStage::PaddedK: return "padded-k";
    case LceStage::FusedEpilogue: return "fused-epilogue";
    case LceStage::L2Chunked: return "l2-chunked";
    case LceStage::LtEpilogue: return "lt-epilogue";
  }
  return "?";
}

/// One GEMM operand pair (W [M, K] rows of `ld`, E [batch, K, N]) as the GEMMs read it: the
/// caller's tensors, or padded copies in the workspace.
struct LceOperands {
  const void* w = nullptr;  ///< caller's W
  const void* e = nullptr;  ///< caller's E
  std::int64_t K = 0;       ///< the problem's K
  std::int64_t batch = 0;   ///< B or U
  std::int64_t src_k = 0;   ///< K of the caller's storage (its pad, or K)
  std::int64_t k = 0;       ///< K the GEMM runs over (= row stride of W and rows per E item)
  bool copy_w = false, copy_e = false;
  std::size_t ws_w = 0, ws_e = 0;  ///< workspace offsets of the copies
};

/// The LtEpilogue stage's cuBLASLt objects (pointer-array batched matmul, C = user rows (FP32 for
/// RoundOnce, which this toolkit's heuristic rejects; the storage type for UserRounded), D =
/// output in the storage type).
struct LceLtPlan {
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulAlgo_t algo{};
  std::size_t ws_bytes = 0;
  bool ok = false;
  std::string why;  ///< why not ok
  ~LceLtPlan() {
    if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
      if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
    if (op != nullptr) cublasLtMatmulDescDestroy(op);
    if (handle != nullptr) cublasLtDestroy(handle);
  }
  /// Builds the descriptors and asks the heuristic for one algorithm; false (with `why`) if this
  /// toolkit cannot run the configuration. align: the alignment in bytes that every batch pointer
  /// of A, B, C, D has (pointer arrays: cuBLASLt cannot see the pointers, and its default
  /// preference assumes 256).
  bool setup(DType storage, DType c_type, std::int64_t B, std::int64_t M, std::int64_t N,
             std::int64_t k, bool pointer_array, const std::uint32_t (&align)[4]) {
    auto fail = [&](const char* what, cublasStatus_t st) {
      why = std::string(what) + ": " + cublasGetStatusName(st);
      return false;
    };
    cublasStatus_t st;
    if ((st = cublasLtCreate(&handle)) != CUBLAS_STATUS_SUCCESS) return fail("cublasLtCreate", st);
    if ((st = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F)) != CUBLAS_STATUS_SUCCESS)
      return fail("matmul desc", st);
    const int32_t count = static_cast<int32_t>(B);
    const uint32_t mode = pointer_array ? CUBLASLT_BATCH_MODE_POINTER_ARRAY : CUBLASLT_BATCH_MODE_STRIDED;
    struct L { cublasLtMatrixLayout_t* l; cudaDataType t; std::int64_t rows, cols, ld, stride; };
    // column-major views: E[b] N×k (ld N), W k×M (ld k, shared), C/D N×M (ld N)
    for (const L& x : {L{&a, cuda_type(storage), N, k, N, k * N}, L{&b, cuda_type(storage), k, M, k, 0},
                       L{&c, cuda_type(c_type), N, M, N, 0}, L{&d, cuda_type(storage), N, M, N, M * N}}) {
      if ((st = cublasLtMatrixLayoutCreate(x.l, x.t, x.rows, x.cols, x.ld)) != CUBLAS_STATUS_SUCCESS)
        return fail("matrix layout", st);
      if ((st = cublasLtMatrixLayoutSetAttribute(*x.l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                 sizeof count)) != CUBLAS_STATUS_SUCCESS)
        return fail("batch count", st);
      if ((st = cublasLtMatrixLayoutSetAttribute(*x.l, CUBLASLT_MATRIX_LAYOUT_BATCH_MODE, &mode,
                                                 sizeof mode)) != CUBLAS_STATUS_SUCCESS)
        return fail("batch mode", st);
      if (!pointer_array) {
        const int64_t stride = x.stride;
        if ((st = cublasLtMatrixLayoutSetAttribute(*x.l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                   &stride, sizeof stride)) != CUBLAS_STATUS_SUCCESS)
          return fail("batch stride", st);
      }
    }
    if ((st = cublasLtMatmulPreferenceCreate(&pref)) != CUBLAS_STATUS_SUCCESS) return fail("preference", st);
    const std::size_t max_ws = tuning::LceStages::kLtMaxWorkspaceBytes;
    if ((st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                   &max_ws, sizeof max_ws)) != CUBLAS_STATUS_SUCCESS)
      return fail("preference workspace", st);
    const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      if ((st = cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i],
                                                     sizeof align[i])) != CUBLAS_STATUS_SUCCESS)
        return fail("preference alignment", st);
    // Split-K partial sums only in the compute type (FP32): the in-place and output-type schemes
    // would round partial sums to 16 bits, which no policy admits.
    const uint32_t reduction = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    if ((st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                                                   &reduction, sizeof reduction)) !=
        CUBLAS_STATUS_SUCCESS)
      return fail("preference reduction scheme", st);
    cublasLtMatmulHeuristicResult_t res{};
    int found = 0;
    st = cublasLtMatmulAlgoGetHeuristic(handle, op, a, b, c, d, pref, 1, &res, &found);
    if (st != CUBLAS_STATUS_SUCCESS) return fail("heuristic", st);
    if (found < 1) {
      why = "heuristic: no algorithm";
      return false;
    }
    algo = res.algo;
    ws_bytes = res.workspaceSize;
    ok = true;
    return true;
  }
};

struct LceOp::Plan {
  ikbo::LceProblem p;
  LceStage stage{};
  LceTuning tuning;
  DType storage{};
  detail::LceAdd add = detail::LceAdd::RoundOnce;  ///< the policy's rounding points
  std::size_t esz = 2;     ///< storage element bytes
  DType part_type{};       ///< type of the candidate GEMM's result (FP32 or storage)
  std::size_t part_sz = 4;
  DType user_type{};       ///< type of the user GEMM's result (FP32 or storage)
  std::size_t user_sz = 4;
  LceOperands cand, user;
  std::int64_t chunk = 0;  ///< L2Chunked: candidates per chunk
  // workspace layout (byte offsets)
  std::size_t ws_user = 0, ws_cand = 0, ws_total = 0;
  cublasHandle_t handle = nullptr;
  cudaStream_t side = nullptr;  ///< L2Chunked overlap: the gather-add stream
  cudaEvent_t ev_gemm[2] = {nullptr, nullptr}, ev_add[2] = {nullptr, nullptr}, ev_join = nullptr;
  std::unique_ptr<LceLtPlan> lt;  ///< LtEpilogue
  std::size_t ws_lt = 0, ws_ptrs = 0, ws_scratch = 0;
  std::uint32_t lt_out_align = 1, lt_ws_align = 1;  ///< what run() requires of d_out, d_workspace
  std::vector<std::string> paths;
  // last run
  cudaStream_t stream = nullptr;
  bool ran = false;
  unsigned long long* map_error = nullptr;

  ~Plan() {
    if (handle != nullptr) cublasDestroy(handle);
    for (cudaEvent_t e : {ev_gemm[0], ev_gemm[1], ev_add[0], ev_add[1], ev_join})
      if (e != nullptr) cudaEventDestroy(e);
    if (side != nullptr) cudaStreamDestroy(side);
  }
  char* base(void* ws) const { return static_cast<char*>(ws); }
  const void* w(const LceOperands& o, void* ws) const { return o.copy_w ? base(ws) + o.ws_w : o.w; }
  const void* e(const LceOperands& o, void* ws) const { return o.copy_e ? base(ws) + o.ws_e : o.e; }
  void* user_result(void* ws) const { return p.K_u > 0 ? base(ws) + ws_user : nullptr; }
  void* cand_result(void* ws, int buf = 0) const {
    return base(ws) + ws_cand + static_cast<std::size_t>(buf) * static_cast<std::size_t>(chunk * p.M * p.N) * part_sz;
  }

  /// out[i] (row-major M×N of out_type) = W (M×k, ld k) · E[first + i] (k×N), i < count: FP32
  /// accumulation, one rounding to out_type.
  void gemm(const LceOperands& o, void* ws, std::int64_t first, std::int64_t count, void* out,
            DType out_type, cudaStream_t s, const char* what) const {
    if (count <= 0) return;
    cublas_check(cublasSetStream(handle, s), "cublasSetStream");
    const float one = 1.0f, zero = 0.0f;
    const int m = static_cast<int>(p.N), n = static_cast<int>(p.M), k = static_cast<int>(o.k);
    const char* e0 = static_cast<const char*>(e(o, ws)) + static_cast<std::size_t>(first * o.k * p.N) * esz;
    cublas_check(cublasGemmStridedBatchedEx(
                     handle, CUBLAS_OP_N, CUBLAS_OP_N, m, n, k, &one, e0, cuda_type(storage), m,
                     static_cast<long long>(o.k) * p.N, w(o, ws), cuda_type(storage), k, 0LL,
                     &zero, out, cuda_type(out_type), m, static_cast<long long>(p.M) * p.N,
                     static_cast<int>(count), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 what);
  }

  void gather_add(const void* cand, std::int64_t first, std::int64_t count, void* out, void* ws,
                  cudaStream_t s) const {
    detail::LceGatherAddArgs g;
    g.cand = cand;
    g.user = user_result(ws);
    g.cand_to_user = p.cand_to_user + (TBE_MUTANT_HOST(kLceChunkMapNotAdvanced) ? 0 : first);
    g.out = static_cast<char*>(out) + static_cast<std::size_t>(first * p.M * p.N) * esz;
    g.B = count;
    g.MN = p.M * p.N;
    g.map_error = map_error;
    detail::launch_lce_gather_add(storage, add, g, s);
  }

  /// LtEpilogue: the batch pointers must have the alignment the algorithm was chosen for
  /// (setup); InvalidArgument naming out / workspace, before any launch.
  void check_lt_alignment(const void* d_out, const void* d_ws) const {
    if (!lt) return;
    auto need = [](const char* name, const void* ptr, std::uint32_t a) {
      if (pow2_align(ptr) < a)
        throw InvalidArgument(name, std::string(name) + ": address " +
                                        std::to_string(reinterpret_cast<std::uintptr_t>(ptr)) +
                                        " is not " + std::to_string(a) +
                                        "-byte aligned (lt-epilogue stage; cudaMalloc gives 256)");
    };
    need("out", d_out, lt_out_align);
    need("workspace", d_ws, lt_ws_align);
  }

  void pad_copies(const LceOperands& o, void* ws, cudaStream_t s) const {
    if (o.copy_w)  // [M, K] of rows src_k -> rows k, columns >= K zero
      detail::launch_lce_pad_rows(o.w, o.src_k, base(ws) + o.ws_w, o.k, p.M, o.K, esz, s);
    if (o.copy_e)  // [batch, K, N] of items src_k·N -> items k·N, rows >= K zero
      detail::launch_lce_pad_rows(o.e, o.src_k * p.N, base(ws) + o.ws_e, o.k * p.N, o.batch,
                                  o.K * p.N, esz, s);
  }
};

namespace {

/// Plans one operand pair. padded_layout: the caller's pad (0: dense). need: how the stage wants
/// it: 0 = as given, 1 = W rows 16-byte aligned (fused kernel), 2 = K % 8 == 0 for W and E (cuBLAS
/// fast kernels).
void plan_operands(LceOperands& o, const void* w, const void* e, std::int64_t K, std::int64_t batch,
                   std::int64_t padded_layout, int need) {
  o.w = w;
  o.e = e;
  o.K = K;
  o.batch = batch;
  o.src_k = padded_layout > 0 ? padded_layout : K;
  o.k = o.src_k;
  if (K == 0) return;
  const bool w_aligned = aligned16(w);
  if (padded_layout > 0) {
    if (need >= 1 && !w_aligned) o.copy_w = true;  // same pad, aligned copy
    return;
  }
  if (need == 1 && (K % 8 != 0 || !w_aligned)) {
    o.copy_w = true;
    o.k = round_up8(K);
    o.src_k = K;
    // E stays as given: the kernel reads E items of K rows (zero-filled K tail)
  } else if (need == 2 && K % 8 != 0) {
    o.copy_w = o.copy_e = true;
    o.k = round_up8(K);
  }
}

}  // namespace

namespace {

/// The kernel limits of LceOp beyond ikbo::validate(p) (LceOp::can_implement's second part).
Status check_limits(const ikbo::LceProblem& p, const LceLayout& layout, const LceTuning& tuning) {
  const ikbo::IkboPolicy& pol = p.policy;
  if (pol.accumulation != DType::F32)
    return Status::Invalid("lce.policy.accumulation",
                           "lce.policy.accumulation: " + to_string(pol.accumulation) +
                               " is not supported by the CUDA backend (fp32)");
  if (!dispatch::contains(dispatch::kStorageTypes, pol.storage))
    return Status::Invalid("lce.policy.storage", "lce.policy.storage: " + to_string(pol.storage) +
                                                     " is not supported by the CUDA backend "
                                                     "(fp16, bf16 or fp32)");
  for (auto [name, v] : {std::pair<const char*, std::int64_t>{"lce.M", p.M}, {"lce.N", p.N},
                         {"lce.K_c", p.K_c}, {"lce.K_u", p.K_u}, {"lce.B", p.B},
                         {"layout.k_c_pad", layout.k_c_pad}, {"layout.k_u_pad", layout.k_u_pad}})
    if (v > INT_MAX)
      return Status::Invalid(name, std::string(name) + ": " + std::to_string(v) +
                                       " exceeds the CUDA backend's limit " +
                                       std::to_string(INT_MAX));
  auto check_pad = [](const char* name, std::int64_t pad, std::int64_t K) {
    if (pad != 0 && (pad < K || pad % 8 != 0))
      return Status::Invalid(name, std::string(name) + ": " + std::to_string(pad) +
                                       " must be 0 (dense) or a multiple of 8 >= " +
                                       std::to_string(K));
    return Status::Ok();
  };
  if (Status s = check_pad("layout.k_c_pad", layout.k_c_pad, p.K_c); !s.ok()) return s;
  if (p.K_u > 0)
    if (Status s = check_pad("layout.k_u_pad", layout.k_u_pad, p.K_u); !s.ok()) return s;
  if (tuning.chunk_candidates < 0)
    return Status::Invalid("tuning.chunk_candidates", "tuning.chunk_candidates: " +
                                                          std::to_string(tuning.chunk_candidates) +
                                                          " must be >= 0");
  return Status::Ok();
}

}  // namespace

Status LceOp::can_implement(const ikbo::LceProblem& p, const LceLayout& layout,
                            const LceTuning& tuning) {
  if (Status s = ikbo::validate(p); !s.ok()) return s;
  return check_limits(p, layout, tuning);
}

Status LceOp::can_implement(const ikbo::LceProblem& p, const std::int32_t* host_cand_to_user,
                            const LceLayout& layout, const LceTuning& tuning) {
  if (Status s = ikbo::validate(p); !s.ok()) return s;
  const std::span map(host_cand_to_user, static_cast<std::size_t>(p.B));  // B >= 0: validated
  if (Status s = ikbo::validate_map(map, p.U); !s.ok()) return s;
  return check_limits(p, layout, tuning);
}

namespace {
/// p, after LceOp::can_implement passed (else InvalidArgument).
const ikbo::LceProblem& implementable(const ikbo::LceProblem& p, const LceLayout& layout,
                                      const LceTuning& tuning) {
  throw_if_error(LceOp::can_implement(p, layout, tuning));
  return p;
}
}  // namespace

LceOp::LceOp(const ikbo::LceProblem& p, LceStage stage, const LceLayout& layout,
             const LceTuning& tuning)
    : LceOp(implementable(p, layout, tuning), kValidated, stage, layout, tuning) {}

LceOp::LceOp(const ikbo::LceProblem& p, Validated, LceStage stage, const LceLayout& layout,
             const LceTuning& tuning)
    : plan_(std::make_unique<Plan>()) {
  const ikbo::IkboPolicy& pol = p.policy;
  Plan& P = *plan_;
  P.p = p;
  P.tuning = tuning;
  P.storage = pol.storage;
  P.add = pol.lce_rounding == ikbo::LceRounding::Published     ? detail::LceAdd::Published
          : pol.lce_rounding == ikbo::LceRounding::UserRounded ? detail::LceAdd::UserRounded
                                                               : detail::LceAdd::RoundOnce;
  P.esz = dtype_size(P.storage);
  // Candidate part: storage under Published (rounded before the add), else FP32. User part:
  // FP32 under RoundOnce only; Published and UserRounded store it once in the storage type.
  P.part_type = P.add == detail::LceAdd::Published ? P.storage : DType::F32;
  P.part_sz = dtype_size(P.part_type);
  P.user_type = P.add == detail::LceAdd::RoundOnce ? DType::F32 : P.storage;
  P.user_sz = dtype_size(P.user_type);
  P.stage = (stage == LceStage::FusedEpilogue && P.storage == DType::F32) ? LceStage::PaddedK : stage;
  // Operands: LtEpilogue needs what PaddedK needs (K % 8 == 0), so its fallback keeps them.
  const int need_c = P.stage == LceStage::Decomposed ? 0 : P.stage == LceStage::FusedEpilogue ? 1 : 2;  // Lt: 2
  const int need_u = P.stage == LceStage::Decomposed ? 0 : 2;
  plan_operands(P.cand, p.w_c, p.e_c, p.K_c, p.B, layout.k_c_pad, need_c);
  plan_operands(P.user, p.w_u, p.e_u, p.K_u, p.U, p.K_u > 0 ? layout.k_u_pad : 0, need_u);
  std::string lt_unsupported;
  if (P.stage == LceStage::LtEpilogue) {
    // The epilogue computes D = RN_D(fl32(acc + C)): UserRounded with C in the storage type
    // (what this toolkit's cuBLASLt accepts), RoundOnce with an FP32 C (rejected by its
    // heuristic on 13.1: then PaddedK runs); Published rounds acc first, no epilogue can.
    if (P.add == detail::LceAdd::Published || P.storage == DType::F32) {
      lt_unsupported = P.add == detail::LceAdd::Published ? "published rounding" : "fp32 storage";
    } else if (p.B > 0) {
      // Batch pointers (lce_lt_pointers_kernel): A = E[b], B = W, C = user row u(b) (or the
      // scratch), D = out[b] (or the scratch); workspace pieces are 256-aligned, run() checks
      // that d_workspace and d_out have the alignment assumed here (cudaMalloc gives 256).
      const std::int64_t k = P.cand.k, MN = p.M * p.N;
      constexpr std::uint32_t ws_piece = kWorkspaceAlignment;
      const std::uint32_t a_base = P.cand.copy_e ? ws_piece : pow2_align(p.e_c);
      const std::uint32_t align[4] = {
          std::min(a_base, pow2_align(static_cast<std::uint64_t>(k * p.N) * P.esz)),
          P.cand.copy_w ? ws_piece : pow2_align(p.w_c),
          p.K_u > 0 ? std::min(ws_piece, pow2_align(static_cast<std::uint64_t>(MN) * P.user_sz))
                    : ws_piece,
          pow2_align(static_cast<std::uint64_t>(MN) * P.esz)};
      P.lt_out_align = align[3];
      P.lt_ws_align = std::max({P.cand.copy_e ? align[0] : 1u, P.cand.copy_w ? align[1] : 1u,
                                align[2], align[3]});  // scratch serves C and D on a bad map
      const std::uint32_t least = std::min({align[0], align[1], align[2], align[3]});
      if (least < tuning::LceStages::kLtMinAlignment) {
        // cuBLASLt cannot check pointer-array entries; below 16 bytes (TMA's need) the stage is
        // not worth the risk of an algorithm that assumes more: PaddedK runs.
        lt_unsupported = "batch pointers " + std::to_string(least) + "-byte aligned (< " +
                         std::to_string(tuning::LceStages::kLtMinAlignment) + ")";
      } else {
        P.lt = std::make_unique<LceLtPlan>();
        if (!P.lt->setup(P.storage, P.user_type, p.B, p.M, p.N, k, true, align))
          lt_unsupported = P.lt->why;
      }
    }
    if (!lt_unsupported.empty()) {
      P.stage = LceStage::PaddedK;
      P.lt.reset();
    }
  }

  const std::int64_t MN = p.M * p.N;
  if (P.stage == LceStage::L2Chunked) {
    const std::int64_t per = std::max<std::int64_t>(1, MN * static_cast<std::int64_t>(P.part_sz));
    P.chunk = tuning.chunk_candidates > 0 ? tuning.chunk_candidates
                                          : std::max<std::int64_t>(
                                                1, static_cast<std::int64_t>(
                                                       tuning::LceStages::kL2ChunkBudgetBytes) /
                                                       2 / per);
    P.chunk = std::min(P.chunk, std::max<std::int64_t>(p.B, 1));
  } else if (P.stage != LceStage::FusedEpilogue && P.stage != LceStage::LtEpilogue) {
    P.chunk = std::max<std::int64_t>(p.B, 0);
  }

  // --- workspace: map flag | copies | user result | candidate result(s) ---
  WorkspaceLayout ws;
  ws.add(sizeof(unsigned long long));  // the map flag, at 0
  for (LceOperands* o : {&P.cand, &P.user}) {
    if (o->copy_w) o->ws_w = ws.add(static_cast<std::size_t>(p.M * o->k) * P.esz);
    if (o->copy_e) o->ws_e = ws.add(static_cast<std::size_t>(o->batch * o->k * p.N) * P.esz);
  }
  P.ws_user = ws.add(p.K_u > 0 ? static_cast<std::size_t>(p.U * MN) * P.user_sz : 0);
  const int buffers = P.stage == LceStage::L2Chunked && tuning.overlap ? 2 : 1;
  P.ws_cand = ws.add(static_cast<std::size_t>(buffers * P.chunk * MN) * P.part_sz);
  if (P.lt) {  // Lt workspace | 4 pointer arrays [B] | scratch [M, N] FP32 (>= one D or C block)
    P.ws_lt = ws.add(P.lt->ws_bytes);
    P.ws_ptrs = ws.add(4 * static_cast<std::size_t>(p.B) * sizeof(void*));
    P.ws_scratch = ws.add(static_cast<std::size_t>(MN) * 4);
  }
  P.ws_total = ws.total;

  // --- paths ---
  P.paths.push_back("lce." + to_string(P.stage));
  if (P.cand.copy_w || P.user.copy_w) P.paths.push_back("lce.pad-weights.workspace");
  if (P.cand.copy_e || P.user.copy_e) P.paths.push_back("lce.pad-activations.workspace");
  if (layout.k_c_pad > 0 || (p.K_u > 0 && layout.k_u_pad > 0)) P.paths.push_back("lce.layout.padded");
  if (p.K_u > 0) P.paths.push_back("lce.user-gemm.cublas");
  if (!lt_unsupported.empty()) P.paths.push_back("lce.lt-epilogue.unsupported(" + lt_unsupported + ")");
  if (P.stage == LceStage::LtEpilogue) {
    P.paths.push_back("lce.candidate-gemm.cublaslt.pointer-array.epilogue-c");
  } else if (P.stage == LceStage::FusedEpilogue) {
    detail::LceFusedArgs a;
    a.e_c = p.e_c;
    a.N = p.N;
    P.paths.push_back(detail::lce_fused_vectorized(a) ? "lce.candidate-gemm.mma-sync.vec8"
                                                      : "lce.candidate-gemm.mma-sync.scalar-e");
  } else {
    P.paths.push_back("lce.candidate-gemm.cublas");
    P.paths.push_back("lce.gather-add");
  }
  if (P.stage == LceStage::L2Chunked) {
    P.paths.push_back("lce.chunk=" + std::to_string(P.chunk));
    if (tuning.overlap) P.paths.push_back("lce.overlap");
  }

  cublas_check(cublasCreate(&P.handle), "cublasCreate");
  cublas_check(cublasSetPointerMode(P.handle, CUBLAS_POINTER_MODE_HOST), "cublasSetPointerMode");
  // gemm() promises FP32 accumulation and ONE rounding to out_type. cuBLAS's default math mode
  // lets a split-K GEMM reduce its partial sums in the output type (FP16/BF16: one rounding per
  // partial, then another of their sum), which the oracle's one-rounding model rightly rejects
  // (a 1-ulp miss at M = 6, N = 2, K_u = 97, BF16); reductions in the compute type only. The
  // cuBLASLt stage asks the same through CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK.
  cublas_check(cublasSetMathMode(P.handle, static_cast<cublasMath_t>(
                                               CUBLAS_DEFAULT_MATH |
                                               CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)),
               "cublasSetMathMode");
  if (P.stage == LceStage::L2Chunked && tuning.overlap) {
    cuda_check(cudaStreamCreateWithFlags(&P.side, cudaStreamNonBlocking), "lce: side stream");
    for (cudaEvent_t* e : {&P.ev_gemm[0], &P.ev_gemm[1], &P.ev_add[0], &P.ev_add[1], &P.ev_join})
      cuda_check(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "lce: event");
  }
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
  P.pad_copies(P.cand, d_workspace, stream);
  if (P.p.K_u > 0) P.pad_copies(P.user, d_workspace, stream);
}

void LceOp::run_user_gemm(void* d_workspace, cudaStream_t stream) {
  const Plan& P = *plan_;
  if (P.p.K_u > 0)
    P.gemm(P.user, d_workspace, 0, P.p.U, P.user_result(d_workspace), P.user_type, stream,
           "lce user GEMM");
}

void LceOp::run_candidates(void* d_out, void* d_workspace, cudaStream_t stream) {
  Plan& P = *plan_;
  P.map_error = reinterpret_cast<unsigned long long*>(d_workspace);
  if (P.p.B <= 0) return;
  if (P.stage == LceStage::FusedEpilogue) {
    detail::LceFusedArgs a;
    a.w_c = P.w(P.cand, d_workspace);
    a.ld_w = P.cand.k;
    a.e_c = P.e(P.cand, d_workspace);
    a.user = P.user_result(d_workspace);
    a.cand_to_user = P.p.cand_to_user;
    a.out = d_out;
    a.B = P.p.B;
    a.M = P.p.M;
    a.N = P.p.N;
    // E items of src_k rows (dense: K_c with the tail zero-filled; padded layout: its zero pad)
    a.K = P.cand.copy_e ? P.cand.k : P.cand.src_k;
    a.map_error = P.map_error;
    detail::launch_lce_fused(P.storage, P.add, a, stream);
    return;
  }
  if (P.stage == LceStage::LtEpilogue) {
    P.check_lt_alignment(d_out, d_workspace);
    char* base = P.base(d_workspace);
    const void** arrays = reinterpret_cast<const void**>(base + P.ws_ptrs);
    const std::size_t B = static_cast<std::size_t>(P.p.B);
    detail::LceLtPointersArgs a;
    a.e = P.e(P.cand, d_workspace);
    a.e_stride = static_cast<std::size_t>(P.cand.k * P.p.N) * P.esz;
    a.w = P.w(P.cand, d_workspace);
    a.user = P.user_result(d_workspace);
    a.user_stride = static_cast<std::size_t>(P.p.M * P.p.N) * P.user_sz;
    a.out = d_out;
    a.out_stride = static_cast<std::size_t>(P.p.M * P.p.N) * P.esz;
    a.cand_to_user = P.p.cand_to_user;
    a.B = P.p.B;
    a.map_error = P.map_error;
    a.scratch = base + P.ws_scratch;
    a.a = arrays;
    a.b = arrays + B;
    a.c = arrays + 2 * B;
    a.d = const_cast<void**>(arrays + 3 * B);
    detail::launch_lce_lt_pointers(a, stream);
    const float one = 1.0f, beta = P.p.K_u > 0 ? 1.0f : 0.0f;
    const LceLtPlan& L = *P.lt;
    cublas_check(cublasLtMatmul(L.handle, L.op, &one, a.a, L.a, a.b, L.b, &beta, a.c, L.c, a.d,
                                L.d, &L.algo, base + P.ws_lt, L.ws_bytes, stream),
                 "lce cuBLASLt candidate matmul");
    return;
  }
  if (P.stage != LceStage::L2Chunked) {
    P.gemm(P.cand, d_workspace, 0, P.p.B, P.cand_result(d_workspace), P.part_type, stream,
           "lce candidate GEMM");
    P.gather_add(P.cand_result(d_workspace), 0, P.p.B, d_out, d_workspace, stream);
    return;
  }
  const std::int64_t chunks = (P.p.B + P.chunk - 1) / P.chunk;
  for (std::int64_t i = 0; i < chunks; ++i) {
    const std::int64_t first = i * P.chunk, count = std::min(P.chunk, P.p.B - first);
    if (!P.tuning.overlap) {
      P.gemm(P.cand, d_workspace, first, count, P.cand_result(d_workspace), P.part_type, stream,
             "lce candidate GEMM (chunk)");
      P.gather_add(P.cand_result(d_workspace), first, count, d_out, d_workspace, stream);
      continue;
    }
    const int buf = static_cast<int>(i & 1);
    // the gather-add of chunk i - 2 (same buffer) must be done before the GEMM overwrites it
    if (i >= 2) cuda_check(cudaStreamWaitEvent(stream, P.ev_add[buf], 0), "lce: wait buffer");
    P.gemm(P.cand, d_workspace, first, count, P.cand_result(d_workspace, buf), P.part_type,
           stream, "lce candidate GEMM (chunk)");
    cuda_check(cudaEventRecord(P.ev_gemm[buf], stream), "lce: record GEMM");
    cuda_check(cudaStreamWaitEvent(P.side, P.ev_gemm[buf], 0), "lce: side waits GEMM");
    P.gather_add(P.cand_result(d_workspace, buf), first, count, d_out, d_workspace, P.side);
    cuda_check(cudaEventRecord(P.ev_add[buf], P.side), "lce: record gather-add");
  }
  if (P.tuning.overlap) {  // join: later work on `stream` waits for every gather-add
    cuda_check(cudaEventRecord(P.ev_join, P.side), "lce: record join");
    cuda_check(cudaStreamWaitEvent(stream, P.ev_join, 0), "lce: join");
  }
}
void LceOp::run(void* d_out, void* d_workspace, cudaStream_t stream) {
  plan_->check_lt_alignment(d_out, d_workspace);  // before any launch
  run_prologue(d_workspace, stream);
  run_user_gemm(d_workspace, stream);
  run_candidates(d_out, d_workspace, stream);
}

void LceOp::finish() {
  Plan& P = *plan_;
  if (!P.ran) throw DeviceError("LceOp::finish: run() was not called");
  cuda_check(cudaStreamSynchronize(P.stream), "lce (stream synchronize)");
  cuda_check(cudaGetLastError(), "lce (kernels)");
  detail::throw_if_map_error(P.map_error, P.p.cand_to_user, P.p.B, P.p.U, "lce");
}

}  // namespace tbe::cuda
