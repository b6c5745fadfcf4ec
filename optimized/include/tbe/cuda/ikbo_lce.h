// Device-level IKBO linear compression (LCE) operator (CUTLASS-style lifecycle, like ForwardOp,
// tbe/cuda/validated.h): can_implement (validate, no device needed), construct (validate once +
// plan + cuBLAS handle), query the workspace, run(stream) without host sync, finish() to sync and
// report. Semantics: docs/ikbo.md "LCE", reference/include/tbe/ikbo.h;
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
// workspace. finish() then throws tbe::ikbo::validate_map's InvalidArgument on the downloaded
// map (argument "cand_to_user[b]" of the first offender, message "cand_to_user[7]: 15 outside
// [0, U=15)"), and `out` is bitwise untouched. No kernel ever reads E_u or the user result at an
// out-of-range user.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "tbe/cuda/validated.h"
#include "tbe/errors.h"
#include "tbe/ikbo.h"

namespace tbe::cuda {

/// The published optimization stages of IKBO LCE (docs/ikbo.md "LCE stages"), each selectable so that
/// tbe-bench ikbo-lce can show its effect. Semantics (the policy's rounding points) never depend
/// on the stage. optimized/README.md ("IKBO LCE") has the measurements; the default, PaddedK, was
/// the fastest on H200 at the published shape and across both sweeps.
enum class LceStage : std::uint8_t {
  /// (1) user GEMM at batch U and candidate GEMM at batch B (cuBLAS strided batched, W shared:
  /// stride 0 on the W operand) on the tensors as given (K as the layout says), into workspace
  /// buffers [B, M, N]; then a gather-add kernel writes out[b] = cand[b] + user[u(b)] with the
  /// policy's rounding (every LceRounding: Published, RoundOnce, UserRounded).
  Decomposed,
  /// (2) as (1) with K padded to a multiple of 8 (zero padding: exact same sums). cuBLAS picks
  /// its fast (TMA/wgmma) kernels only when K % 8 == 0: padding the weights' rows alone (K kept)
  /// was measured no faster. Padded tensors come from the caller (LceLayout: the model keeps its
  /// weights and activations padded, so nothing is copied) or else the op pads W and E into the
  /// workspace inside run() (a copy of E_c: measured, tbe-bench variant "padded-k").
  PaddedK,
  /// (3a) the gather-add fused into the candidate GEMM's epilogue: a tensor-core (mma.sync
  /// m16n8k16) kernel over (candidate, 64-row M tile, 256-column N tile) whose epilogue adds row
  /// u(b) of the user GEMM's result (cuBLAS, workspace) with the policy's rounding. Any map: the
  /// user row is addressed per candidate, no sorting or grouping. Needs no padded E (K tail
  /// zero-filled in shared memory); W is padded into the workspace unless the layout is.
  /// 16-bit storage only (F32 runs PaddedK, reported in paths()).
  FusedEpilogue,
  /// (3b) the gather-add fused at the level of L2: PaddedK's cuBLAS candidate GEMM runs on chunks
  /// of candidates whose result buffer (double-buffered, LceTuning) stays in L2, and the
  /// gather-add of a chunk runs right after its GEMM, on a second stream, overlapping the next
  /// chunk's GEMM. The [B, M, N] intermediate never reaches DRAM as a whole. Any map; exact
  /// policy rounding (the epilogue of cuBLAS(Lt) cannot express either policy: it rounds
  /// alpha·acc + beta·C once with C in the output type, see the README).
  L2Chunked,
  /// (3c) the gather-add in cuBLASLt's epilogue: the user GEMM (cuBLAS, batch U) first, then one
  /// pointer-array batched matmul (K padded as in PaddedK) with C[b] = row u(b) of the user
  /// result, beta = 1, and D[b] = out[b]: D = round_st(fl32(acc + C)). With C in the storage type
  /// that is exactly UserRounded (the user result rounded once to storage, one FP32 add, one
  /// rounding to storage): the policy this stage is for. With an FP32 C it would be RoundOnce,
  /// but cuBLASLt 13.1's heuristic rejects FP32 C with a 16-bit D. Any map (pointers per
  /// candidate, built on the device after the map check; on a bad map every D points at a
  /// workspace scratch and every C at user row 0, so `out` is untouched). Published cannot be
  /// expressed by an epilogue that rounds once (it rounds the candidate part first); it, F32
  /// storage, and configurations the heuristic rejects run PaddedK, reported in paths()
  /// ("lce.lt-epilogue.unsupported(...)"). run() requires d_out and d_workspace aligned as the
  /// batch pointers' strides allow (up to 256 bytes: cudaMalloc's), InvalidArgument otherwise.
  LtEpilogue,
};
/// Every LCE stage, in the order above (tbe-verify's LCE rows and tbe-fuzz run each).
inline constexpr LceStage kLceStages[] = {LceStage::Decomposed, LceStage::PaddedK,
                                          LceStage::FusedEpilogue, LceStage::L2Chunked,
                                          LceStage::LtEpilogue};

/// "decomposed", "padded-k", "fused-epilogue", "l2-chunked", "lt-epilogue"
std::string to_string(LceStage s);

/// Storage layout the caller already has: K padded with zeros (the model keeps padded tensors).
struct LceLayout {
  /// 0: dense tensors. Else a multiple of 8 >= K_c: w_c is [M, k_c_pad] with columns
  /// [K_c, k_c_pad) zero and e_c is [B, k_c_pad, N] with rows [K_c, k_c_pad) zero.
  std::int64_t k_c_pad = 0;
  /// Same for w_u [M, k_u_pad] and e_u [U, k_u_pad, N] (ignored when K_u = 0).
  std::int64_t k_u_pad = 0;
};

/// Knobs of the L2Chunked stage (semantics unchanged; tbe-bench compares them). The stages' other
/// constants are optimized/dispatch/tuning.h (LceStages), which reads these defaults.
struct LceTuning {
  /// Candidates per chunk; 0: as many as fit 2 result buffers in 24 MiB (L2 is 50-60 MB).
  std::int64_t chunk_candidates = 0;
  /// Gather-add of chunk i on a second stream while chunk i+1's GEMM runs (else one stream).
  bool overlap = true;
};

/// One IKBO LCE on device memory.
///   Status st = LceOp::can_implement(problem);     // optional: the checks, without throwing
///   LceOp op(problem, LceStage::FusedEpilogue);   // validate() -> InvalidArgument, plan, cuBLAS
///   void* ws = alloc(op.workspace_bytes());
///   op.run(d_out, ws, stream);                     // enqueue only (no host sync)
///   op.finish();                                   // sync; bad map -> InvalidArgument
/// d_out: B·M·N elements of policy.storage (device). The problem's device buffers must stay alive
/// and unchanged until finish() returns. Several run() calls may precede one finish().
class LceOp {
 public:
  /// Every check the constructor makes, as a Status (never throws, touches no device, reads no
  /// data pointer), first failure wins: tbe::ikbo::validate(p) (its Status unchanged), then the
  /// kernel limits: lce.policy.accumulation F32; lce.policy.storage F16, BF16 or F32; lce.M, lce.N,
  /// lce.K_c, lce.K_u, lce.B and the layout pads <= INT_MAX; layout.k_c_pad / layout.k_u_pad 0 or
  /// a multiple of 8 >= K; tuning.chunk_candidates >= 0. The stage has no invalid values.
  static Status can_implement(const ikbo::LceProblem& p, const LceLayout& layout = {},
                              const LceTuning& tuning = {});
  /// The host backend's check, with the map on the host (`host_cand_to_user`: [p.B] int32, read
  /// only once validate(p) passed; a device copy is still checked by run()): validate(p), then
  /// tbe::ikbo::validate_map on the host map and p.U, then the kernel limits as above: the order
  /// in which the host backend always reported errors.
  static Status can_implement(const ikbo::LceProblem& p, const std::int32_t* host_cand_to_user,
                              const LceLayout& layout = {}, const LceTuning& tuning = {});

  /// Runs can_implement(p, layout, tuning) (InvalidArgument(status) naming the argument, before
  /// any launch), plans the launches, creates a cuBLAS handle (and, for L2Chunked with overlap, a
  /// second stream and events). No device memory is touched.
  explicit LceOp(const ikbo::LceProblem& p, LceStage stage = LceStage::PaddedK,
                 const LceLayout& layout = {}, const LceTuning& tuning = {});
  /// The same without the checks: can_implement must have returned ok() for these arguments
  /// (tbe/cuda/validated.h).
  LceOp(const ikbo::LceProblem& p, Validated, LceStage stage = LceStage::PaddedK,
        const LceLayout& layout = {}, const LceTuning& tuning = {});
  ~LceOp();
  LceOp(const LceOp&) = delete;
  LceOp& operator=(const LceOp&) = delete;
  LceOp(LceOp&&) noexcept;
  LceOp& operator=(LceOp&&) noexcept;

  /// Device workspace needed by run() (bytes, 256-aligned pieces inside): flag, padded copies
  /// (weights; E for PaddedK / L2Chunked on a dense layout), the user GEMM's result [U, M, N]
  /// (FP32 under RoundOnce, storage under Published and UserRounded) and the candidate GEMM's
  /// result (storage under Published, else FP32):
  /// [B, M, N] for Decomposed / PaddedK, two chunks for L2Chunked, none for FusedEpilogue.
  std::size_t workspace_bytes() const;

  /// Enqueues the map check, the padding copies (if planned), the user GEMM and the candidate
  /// GEMM (+ gather-add) on `stream` (L2Chunked with overlap forks to the op's second stream and
  /// joins back: work enqueued on `stream` afterwards waits for all of it). No host
  /// synchronization, no allocation by the op.
  void run(void* d_out, void* d_workspace, cudaStream_t stream = nullptr);

  /// Synchronizes the stream of the last run(). Throws InvalidArgument ("cand_to_user[b]", the
  /// validate_map message, b the first offender) if the map had a value outside [0, U) (out
  /// untouched; "cand_to_user" and the flagged position if the map no longer has one, i.e. it
  /// changed since run()), DeviceError on a CUDA or cuBLAS error.
  void finish();

  /// The stage that runs (FusedEpilogue on F32 storage runs PaddedK) and what it uses, e.g.
  /// {"lce.fused-epilogue", "lce.user-gemm.cublas", "lce.candidate-gemm.mma-sync.vec8"} or
  /// {"lce.l2-chunked", ..., "lce.chunk=54", "lce.overlap"}.
  const std::vector<std::string>& paths() const;
  LceStage stage() const;

  // --- parts, for the benchmark's cost breakdown (each enqueues on `stream`, no sync) ---
  /// Map check + padding copies only.
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
