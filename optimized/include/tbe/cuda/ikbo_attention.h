// Device-level IKBO (in-kernel broadcast) cross-attention operator: the cross attention of
// FBGEMM fbgemm_gpu/experimental/ikbo (its stock-Triton IKBO FA is the peer timed by
// bench/peer_ikbo_fa.py). CUTLASS-style lifecycle, like LceOp (tbe/cuda/validated.h):
// can_implement (no device needed), construct (validate once + plan + upload k_offsets), query the
// workspace, run(stream) without host sync, finish() to sync and report. Semantics: docs/ikbo.md
// "Attention", reference/include/tbe/ikbo.h (AttentionProblem); design and measurements:
// optimized/README.md ("IKBO attention").
//
//   out[b·n_seed + i, h] = Σ_j softmax_j(scale·⟨q[b·n_seed + i, h], k[j, h]⟩) · v[j, h]
//   over the keys j of user u = cand_to_user[b]: [u·S, (u+1)·S) dense, [k_offsets[u],
//   k_offsets[u+1]) jagged; an empty range gives exact zeros.
//   q [B·n_seed, H, Dh], k, v [keys, H, Dh], out like q; FP16 or BF16 storage, FP32 accumulation.
//
// Memory spaces: q, k, v and cand_to_user of the AttentionProblem handed to AttentionOp are DEVICE
// pointers (never dereferenced on the host); k_offsets stays a HOST span (validate() reads it; the
// constructor uploads a device copy the op owns).
//
// Map check: run() enqueues a check first (its own kernel, or part of the one-CTA grouping) that
// records the first position b with cand_to_user[b] outside [0, U) in the workspace; the
// attention kernel reads it first and exits without writing. finish() then throws
// tbe::ikbo::validate_map's InvalidArgument on the downloaded map (argument "cand_to_user[b]" of
// the first offender, message "cand_to_user[7]: 15 outside [0, U=15)"; docs/ikbo.md
// "Candidate-to-user map") and `out` is bitwise untouched.
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

/// The attention kernels (AttentionTuning::kernel; optimized/README.md "IKBO attention").
enum class AttentionKernel {
  /// Wgmma on an sm_90 device (H100 / H200, which run the sm_90a code) when the keys fit TMA's
  /// 32-bit coordinates (total keys + 128 <= INT_MAX), else MmaSync. What ran: paths().
  Auto,
  /// FA2-style: 8 warps × 16 rows, mma.sync m16n8k16, a cp.async K/V ring (key_block,
  /// q_in_registers, kv_stages below select its variant). Any sm_90 device, any key count.
  MmaSync,
  /// FA3-style, sm_90a: a producer warpgroup streams K/V tiles of 128 keys with TMA into an
  /// mbarrier ring, two consumer warpgroups of 64 rows run QKᵀ and PV on wgmma with the softmax
  /// of one tile overlapping the PV of the previous one. The mma.sync knobs do not apply.
  Wgmma,
};
const char* to_string(AttentionKernel k);

/// How run() groups the candidates by user on the device before the attention kernel
/// (AttentionTuning::grouping). Both builds give the same grouping (the same sorted order, runs
/// and work list: bitwise the same output) and the same map check verdict.
enum class AttentionGroupingBuild {
  /// OneCta when B <= 4096 (dispatch/tuning.h AttentionGroupingOneCta), else DeviceWide.
  Auto,
  /// One launch of one CTA: block radix sort of the map in registers, runs, scans, work list and
  /// the map check. B <= 4096, else InvalidArgument naming tuning.grouping.
  OneCta,
  /// CUB device-wide radix sort, run-length encoding and scans (~14 launches, any B).
  DeviceWide,
};
const char* to_string(AttentionGroupingBuild g);

/// How the wgmma kernel writes out (AttentionTuning::epilogue). Placement only: bitwise the same
/// output either way.
enum class AttentionEpilogue {
  /// TmaStore with the wgmma kernel, Registers with mma.sync.
  Auto,
  /// Each thread stores its accumulator fragments (4-byte stores, 8 rows × 16 bytes per warp
  /// instruction) straight from registers. The only epilogue of the mma.sync kernel.
  Registers,
  /// Wgmma only: a consumer warpgroup whose 64 query rows are 64 consecutive rows of out (whole
  /// candidates of consecutive b; always the case for n_seed = 64 with a full row block) stages
  /// RN(O / l) in its job's Q buffer (free after the last QKᵀ) and writes it with asynchronous
  /// TMA stores, off the consumers' path; any other row block is written as Registers does.
  /// paths() after finish() says which ran ("attention.epilogue.tma-store" / ".registers").
  /// With MmaSync: InvalidArgument naming tuning.epilogue.
  TmaStore,
};
const char* to_string(AttentionEpilogue e);

/// The kernel AttentionOp runs for `requested` (AttentionTuning::kernel) on the current CUDA device
/// with `total_keys` rows of k and v (AttentionProblem::total_keys(); 0 asks about a problem whose
/// keys fit): Auto is Wgmma on compute capability 9.0 when total_keys + 128 <= INT_MAX, else
/// MmaSync; MmaSync and Wgmma are returned as they are. Throws InvalidArgument("tuning.kernel")
/// for Wgmma on a device that is not 9.0, DeviceError without a device. The one place Auto is
/// resolved (AttentionOp, the CUDA IKBO backend's name()).
AttentionKernel resolve_attention_kernel(AttentionKernel requested, std::int64_t total_keys = 0);

/// Kernel knobs of AttentionOp (semantics unchanged: any kernel and key block gives results in the
/// same enclosure, docs/ikbo.md; each value is bitwise stable run to run). The other constants are
/// optimized/dispatch/tuning.h (AttentionMmaSync), which reads this default.
struct AttentionTuning {
  /// Which kernel runs (Auto: the fastest the device and shape allow). Wgmma on a device that is
  /// not sm_90, or with total keys + 128 > INT_MAX: InvalidArgument naming tuning.kernel (the
  /// key count before any device query, the device in the constructor).
  AttentionKernel kernel = AttentionKernel::Auto;
  /// Wgmma only: the two consumer warpgroups take turns issuing their MMAs (named barriers), so
  /// one's softmax overlaps the other's tensor-core work (FA3's "ping-pong" schedule; with
  /// pipelined = false only a job's first QKᵀ is ordered). Placement only: bitwise the same
  /// output either way. Off by default: the unordered warpgroups measured faster (H100, session 18,
  /// bench/results/README.md).
  bool pingpong = false;
  /// Wgmma only: the order inside a consumer warpgroup. true: FlashAttention-3's software
  /// pipeline (tile t's QKᵀ issued before tile t − 1's PV, that PV in flight during tile t's
  /// softmax); false (default): CUTLASS example 88's serial order (QKᵀ, wait, softmax, PV issued
  /// without a wait; the other warpgroup fills the tensor cores). Against the pipelined order with
  /// ping-pong (the default before), measured on the H100 at Dh = 128: +0-7% at S >= 4096 and
  /// +10% at every S for Dh = 64; at S <= 1024 up to 7% slower in one call and level in another
  /// (bench/results/README.md, session 18), so a caller with short key ranges may try
  /// pipelined = pingpong = true. Bitwise the same
  /// output either way.
  bool pipelined = false;
  /// Keys per shared-memory K/V tile (and per online-softmax step): 64 or 128. The default is
  /// the fastest variant measured on the H200 (key block 128, Q in registers, 3 K/V stages:
  /// bench/results/README.md "IKBO attention"); key block 64 needs q_in_registers = false and
  /// kv_stages = 2.
  int key_block = 128;
  /// Hold each warp's Q fragments in registers across key tiles instead of reading them from
  /// shared memory per tile (bitwise the same output); key_block 128 only (one CTA per SM at
  /// Dh = 128, so the registers are free), else InvalidArgument naming tuning.q_in_registers.
  bool q_in_registers = true;
  /// K/V tiles in the kernel's shared-memory ring: 2, or 3 with key_block 128 (one barrier per
  /// tile instead of two, one more tile in flight; 224 KB of shared memory at Dh = 128); else
  /// InvalidArgument naming tuning.kv_stages. Bitwise the same output.
  int kv_stages = 3;
  /// The device grouping of the candidates (AttentionGroupingBuild; paths() names the one run).
  AttentionGroupingBuild grouping = AttentionGroupingBuild::Auto;
  /// How the wgmma kernel writes out (AttentionEpilogue; bitwise the same output).
  AttentionEpilogue epilogue = AttentionEpilogue::Auto;
};

/// One IKBO cross attention on device memory.
///   Status st = AttentionOp::can_implement(problem);  // optional: the checks, without throwing
///   AttentionOp op(problem);                         // validate -> InvalidArgument, plan
///   void* ws = alloc(op.workspace_bytes());
///   op.run(d_out, ws, stream);                       // enqueue only (no host sync)
///   op.finish();                                     // sync; bad map -> InvalidArgument
/// d_out: B·n_seed·H·Dh elements of policy.storage (device). The problem's device buffers must
/// stay alive and unchanged until finish() returns. Several run() calls may precede one finish().
///
/// Kernels (optimized/README.md "IKBO attention"): the candidates are grouped by user on the device
/// (radix sort of the map, run-length encoding, scans: a work list of (user, block of 128 query
/// rows), one 16-byte item each; one CTA for B <= 4096, CUB device-wide above); the CTA that takes a job (work item, head: one per job for
/// mma.sync, one per SM looping over the jobs for wgmma) streams that user's K/V once for all of
/// its rows: online softmax in FP32 (exp2 with scale·log2 e folded into one FMA, running maximum
/// per key tile in ascending key order), QKᵀ and PV on tensor cores (AttentionKernel: wgmma or
/// mma.sync m16n8k16, FP32 accumulation), P rounded to the storage type before PV, l summed from
/// the FP32 P, out = RN(acc · (1/l)). No split over keys: one pass, as the attention oracle models
/// it. Rows never depend on which other rows share their CTA, so a candidate with a private copy of
/// its user's K/V gets bitwise the same output.
class AttentionOp {
 public:
  /// Every check the constructor makes, as a Status (never throws, touches no device, reads no
  /// device pointer), first failure wins: tbe::ikbo::validate(p) (its Status unchanged), then the
  /// kernel limits: attention.policy.storage F16 or BF16; attention.policy.accumulation F32;
  /// attention.Dh 64 or 128; attention.H <= 65535; attention.B·n_seed and attention.U <= INT_MAX;
  /// attention.B: ceil(B·n_seed / 128) + min(U, B) work items <= INT_MAX (the grid); tuning.kernel
  /// Wgmma: total keys + 128 <= INT_MAX; tuning.key_block 64 or 128 (and its companions);
  /// tuning.epilogue TmaStore only with the wgmma kernel (MmaSync requested: here; Auto resolved
  /// to MmaSync: the constructor).
  static Status can_implement(const ikbo::AttentionProblem& p, const AttentionTuning& tuning = {});
  /// The host backend's check, with the map on the host (`host_cand_to_user`: [p.B] int32, read
  /// only once validate(p) passed): validate(p), then tbe::ikbo::validate_map, then the limits.
  static Status can_implement(const ikbo::AttentionProblem& p,
                              const std::int32_t* host_cand_to_user,
                              const AttentionTuning& tuning = {});

  /// Runs can_implement(p, tuning) (InvalidArgument(status) naming the argument, before any
  /// launch), plans the workspace (CUB size queries: needs a device) and uploads k_offsets.
  explicit AttentionOp(const ikbo::AttentionProblem& p, const AttentionTuning& tuning = {});
  /// The same without the checks: can_implement must have returned ok() for these arguments.
  AttentionOp(const ikbo::AttentionProblem& p, Validated, const AttentionTuning& tuning = {});
  ~AttentionOp();
  AttentionOp(const AttentionOp&) = delete;
  AttentionOp& operator=(const AttentionOp&) = delete;
  AttentionOp(AttentionOp&&) noexcept;
  AttentionOp& operator=(AttentionOp&&) noexcept;

  /// Device workspace needed by run() (bytes, 256-aligned pieces inside): the map flag, the
  /// grouping (sorted candidates, runs, work list: about 36·B bytes plus 16 bytes per work item)
  /// and CUB's temporary storage.
  std::size_t workspace_bytes() const;

  /// Enqueues the map check, the grouping and the attention kernel on `stream`. Throws
  /// InvalidArgument("out" / "q" / "k" / "v", ...) before any launch if a pointer is not 16-byte
  /// aligned (the kernel's 16-byte copies; cudaMalloc gives 256). No host synchronization, no
  /// allocation. B = 0: only the reset of the map flag is enqueued.
  void run(void* d_out, void* d_workspace, cudaStream_t stream = nullptr);

  /// Synchronizes the stream of the last run(). Throws InvalidArgument ("cand_to_user[b]", the
  /// validate_map message, b the first offender) if the map had a value outside [0, U) (out
  /// untouched; "cand_to_user" and the flagged position if the map no longer has one, i.e. it
  /// changed since run()), DeviceError on a CUDA error.
  void finish();

  /// The kernel that runs (Auto resolved for this device and problem).
  AttentionKernel kernel() const;

  /// What runs, e.g. {"attention.wgmma.dh128.kb128.stages2" or
  /// "attention.mma-sync.dh128.kb128.qreg.stages3",
  /// "attention.grouping.cub-sort-rle", "attention.jagged"}; after finish(), for the wgmma
  /// kernel, the epilogues that wrote row blocks in the last run ("attention.epilogue.tma-store",
  /// "attention.epilogue.registers": device counters, epilogue_blocks()).
  const std::vector<std::string>& paths() const;

  /// Row blocks of 64 query rows (one consumer warpgroup's share of a job) the wgmma kernel wrote
  /// in the last run, read back by finish(): by TMA store and from registers (a block with 1..64
  /// rows). {0, 0} before finish() and for the mma.sync kernel.
  struct EpilogueBlocks {
    std::uint64_t tma_store = 0;
    std::uint64_t registers = 0;
  };
  EpilogueBlocks epilogue_blocks() const;

  struct Plan;

 private:
  std::unique_ptr<Plan> plan_;
};

}  // namespace tbe::cuda
