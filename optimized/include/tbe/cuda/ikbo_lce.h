// Device-level IKBO linear compression (LCE) operator (CUTLASS-style lifecycle, like ForwardOp):
// construct (validate once + plan + cuBLAS handle), query the workspace, run(stream) without host
// sync, finish() to sync and report. Semantics: ../shared/spec/ikbo.md, reference/include/tbe/ikbo.h;
// design and measurements: optimized/README.md ("IKBO LCE").
//
//   out[b] = W_c · E_c[b] + W_u · E_u[u(b)],   u = cand_to_user, b in [0, B)
//   w_c [M, K_c], w_u [M, K_u], e_c [B, K_c, N], e_u [U, K_u, N], out [B, M, N] (row-major)
//
// Memory spaces: every data pointer of the LceProblem handed to LceOp (w_c, w_u, e_c, e_u,
// cand_to_user) is a DEVICE pointer; the op never dereferences them on the host.
//
// Map check (cand_to_user values outside [0, U)): run() enqueues a check kernel first that records
// the first offending position in the workspace (atomicMin). Only the op's own kernels write `out`
// (the gather-add of the decomposed stages, the fused candidate GEMM), and each of them reads the
// flag first and exits without writing if it is set; the cuBLAS GEMMs write only into the
// workspace. finish() then throws InvalidArgument("cand_to_user", ...) with the same message as
// tbe::ikbo::validate_map ("cand_to_user[7]: 15 outside [0, U=15)"), and `out` is bitwise
// untouched. No kernel ever reads E_u or the user result at an out-of-range user.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "tbe/ikbo.h"

namespace tbe::cuda {

/// The published optimization stages of IKBO LCE (ikbo.md "Stages"), each selectable so that
/// tbe-bench ikbo-lce can show its effect. Semantics (the policy's rounding points) never depend
/// on the stage.
enum class LceStage : std::uint8_t {
  /// (1) user GEMM at batch U and candidate GEMM at batch B (cuBLAS strided batched, W shared:
  /// stride 0 on the W operand) on the tensors as given, into workspace buffers; then a
  /// gather-add kernel writes out[b] = cand[b] + user[u(b)] with the policy's rounding.
  Decomposed,
  /// (2) as (1) with the weights' rows padded to a multiple of 8 elements (16-byte aligned rows:
  /// TMA / 16-byte tile loads). Only the weights need it: E is [K, N] row-major, so its rows are
  /// N long and K is its outer dimension. The op copies W_c, W_u into the workspace with zero
  /// padding (≈ 0.8 MB at the published shape), unless LceLayout says they are already padded.
  PaddedK,
  /// (3) the gather-add fused into the candidate GEMM's epilogue: a tensor-core (mma.sync
  /// m16n8k16) kernel over (candidate, M tile, N tile) whose epilogue adds the user row u(b) of
  /// the user GEMM's result (cuBLAS, in the workspace) with the policy's rounding. Any map: the
  /// user row is addressed per candidate, no sorting or grouping. 16-bit storage only; F32 runs
  /// PaddedK (reported in paths()).
  FusedEpilogue,
};
std::string to_string(LceStage s);  ///< "decomposed", "padded-k", "fused-epilogue"

/// Storage layout the caller may already have (the model keeps padded weight tensors).
struct LceLayout {
  /// Row stride of w_c / w_u in elements (0: K_c / K_u, i.e. dense). A stride > K means the
  /// columns [K, stride) exist in memory (their values are never used); a stride that is a
  /// multiple of 8 lets PaddedK / FusedEpilogue use the weights as they are.
  std::int64_t w_c_ld = 0;
  std::int64_t w_u_ld = 0;
};

/// One IKBO LCE on device memory.
///   LceOp op(problem, LceStage::FusedEpilogue);   // validate() -> InvalidArgument, plan, cuBLAS
///   void* ws = alloc(op.workspace_bytes());
///   op.run(d_out, ws, stream);                     // enqueue only (no host sync)
///   op.finish();                                   // sync; bad map -> InvalidArgument
/// d_out: B·M·N elements of policy.storage (device). The problem's device buffers must stay alive
/// and unchanged until finish() returns. Several run() calls may precede one finish().
class LceOp {
 public:
  /// Validates `p` (tbe::ikbo::validate: InvalidArgument naming the argument, before any launch),
  /// checks the kernel limits (accumulation F32; storage F16, BF16 or F32; layout strides >= K),
  /// plans the launches and creates a cuBLAS handle. No device memory is touched.
  explicit LceOp(const ikbo::LceProblem& p, LceStage stage = LceStage::FusedEpilogue,
                 const LceLayout& layout = {});
  ~LceOp();
  LceOp(const LceOp&) = delete;
  LceOp& operator=(const LceOp&) = delete;
  LceOp(LceOp&&) noexcept;
  LceOp& operator=(LceOp&&) noexcept;

  /// Device workspace needed by run() (bytes, 256-aligned pieces inside): flag, padded weights,
  /// the user GEMM's result [U, M, N] (FP32 under RoundOnce, storage under Published) and, for the
  /// decomposed stages, the candidate GEMM's result [B, M, N] (same type).
  std::size_t workspace_bytes() const;

  /// Enqueues the map check, the weight padding (if planned), the user GEMM and the candidate
  /// GEMM (+ gather-add) on `stream`. No host synchronization, no allocation by the op.
  void run(void* d_out, void* d_workspace, cudaStream_t stream = nullptr);

  /// Synchronizes the stream of the last run(). Throws InvalidArgument ("cand_to_user", the
  /// validate_map message) if the map had a value outside [0, U) (out untouched), DeviceError on
  /// a CUDA or cuBLAS error.
  void finish();

  /// The stage that runs (FusedEpilogue on F32 storage runs PaddedK) and the kernels it uses, e.g.
  /// {"lce.fused-epilogue", "lce.user-gemm.cublas", "lce.candidate-gemm.mma-sync.vec8"}.
  const std::vector<std::string>& paths() const;
  LceStage stage() const;

  // --- parts, for the benchmark's cost breakdown (each enqueues on `stream`, no sync) ---
  /// Map check + weight padding only.
  void run_prologue(void* d_workspace, cudaStream_t stream = nullptr);
  /// User GEMM only (after run_prologue on the same workspace).
  void run_user_gemm(void* d_workspace, cudaStream_t stream = nullptr);
  /// Candidate GEMM (+ gather-add for the decomposed stages) only (after the two above).
  void run_candidates(void* d_out, void* d_workspace, cudaStream_t stream = nullptr);

  struct Plan;

 private:
  std::unique_ptr<Plan> plan_;
};

}  // namespace tbe::cuda
