// IKBO (in-kernel broadcast) user x candidate operators: linear compression (LCE) and cross
// attention. Semantics: docs/ikbo.md (FBGEMM fbgemm_gpu/experimental/ikbo). The FP64
// reference (Eigen) defines them and is the CPU fallback; optimized/ implements both on the GPU
// (tbe/cuda/ikbo_lce.h, tbe/cuda/ikbo_attention.h). Semantic choices: docs/ikbo.md.
//
// Symbols: B candidates, U users, cand_to_user [B] int32 in [0, U) (any map: unsorted, users
// without candidates, U = 1, U = B).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "tbe/errors.h"
#include "tbe/types.h"

namespace tbe::ikbo {

/// Where the LCE result is rounded to the 16-bit output type.
enum class LceRounding : std::uint8_t {
  /// As published: candidate part and user part (FP32 accumulations) are each rounded to the
  /// storage type, added in the storage type (one more rounding), stored.
  Published,
  /// Better: both parts accumulate in FP32, the sum is rounded once to the storage type.
  RoundOnce,
  /// Between the two (what a cuBLASLt epilogue with C in the output type computes): the user part
  /// (FP32 accumulation at batch U) is stored once in the storage type; the candidate part
  /// accumulates in FP32 and the stored user value is added to it in FP32 (one FP32 rounding),
  /// then the sum is rounded once to the storage type. On exact parts C, U:
  /// RN_st(RN_acc(C + RN_st(U))). One 16-bit rounding fewer than Published (the candidate part is
  /// never rounded to 16 bits); one more than RoundOnce (the user part is). docs/ikbo.md.
  UserRounded,
};

/// Precision policy of an IKBO call: storage type of every input and of the output (F16, BF16 or
/// F32), accumulation type (F32 for 16-bit storage, F64 allowed for the reference), rounding
/// points of LCE.
struct IkboPolicy {
  DType storage = DType::F16;
  DType accumulation = DType::F32;
  LceRounding lce_rounding = LceRounding::RoundOnce;
  bool operator==(const IkboPolicy&) const = default;
};
/// e.g. "ikbo[storage=fp16,acc=fp32,lce=round-once]".
std::string to_string(const IkboPolicy& p);
std::string to_string(LceRounding r);  ///< "published", "round-once", "user-rounded"
/// Inverse of to_string(LceRounding); throws InvalidArgument naming `what`, the value and the
/// allowed names.
LceRounding parse_lce_rounding(const std::string& s, const char* what = "lce_rounding");

/// One linear-compression call (row-major tensors, all of dtype policy.storage):
///   w_c [M, K_c], w_u [M, K_u], e_c [B, K_c, N], e_u [U, K_u, N], cand_to_user int32 [B];
///   out [B, M, N]: out[b] = w_c · e_c[b] + w_u · e_u[cand_to_user[b]].
/// K_c >= 1, K_u >= 0 (K_u = 0: no user part), M, N >= 1, U >= 1, B >= 0.
/// Memory space: host for the reference; device for tbe::cuda::LceOp (cand_to_user too).
struct LceProblem {
  std::int64_t B = 0, U = 0, M = 0, N = 0, K_c = 0, K_u = 0;
  const void* w_c = nullptr;
  const void* w_u = nullptr;
  const void* e_c = nullptr;
  const void* e_u = nullptr;
  const std::int32_t* cand_to_user = nullptr;
  IkboPolicy policy;
};

/// Shapes, dtypes, null pointers (host metadata only; never dereferences data). Errors name the
/// argument, value and limit, e.g. "lce.K_c: 0 must be >= 1".
Status validate(const LceProblem& p);
/// (added) Elements of the LCE output: B·M·N.
std::int64_t lce_output_numel(const LceProblem& p);
/// (added) The output pointer of a host-level call (lce_reference, IkboBackend::lce): "out" when
/// `out` is null and the output has elements, e.g. "out: null pointer for B·M·N = 768 elements".
/// Precondition: validate(p) passed. Every backend checks it after validate(p) and before the map.
Status validate_output(const LceProblem& p, const void* out);
/// Map values (host pointer): "cand_to_user[7]: 15 outside [0, U=15)". Both backends check the
/// map before computing; nothing is written on error.
Status validate_map(std::span<const std::int32_t> cand_to_user, std::int64_t U);

/// FP64 LCE: both parts in FP64 (Eigen), per element. Order: every element sums its K products
/// (each exact in FP64) in ascending k, so the result does not depend on blocking or threads and
/// zero padding of K (a multiple of 8) leaves it unchanged (docs/ikbo.md).
struct LceReference {
  std::vector<double> candidate_part;  ///< [B, M, N] w_c · e_c[b]
  std::vector<double> user_part;       ///< [B, M, N] w_u · e_u[u(b)]
  std::vector<double> out;             ///< [B, M, N] their sum
};
/// Throws InvalidArgument (validate / validate_map).
LceReference lce_reference_fp64(const LceProblem& p);
/// The CPU fallback: lce_reference_fp64 rounded per policy.lce_rounding into `out` ([B, M, N] of
/// policy.storage, host). Nothing is written on error.
void lce_reference(const LceProblem& p, void* out);

/// One cross-attention call (candidates query their user's sequence), row-major, dtype
/// policy.storage: q [B·n_seed, H, Dh]; k, v [Σ_u S_u, H, Dh]; out like q.
/// Dense: k_offsets empty and S >= 1 (user u owns keys [u·S, (u+1)·S)).
/// Jagged: k_offsets [U + 1] non-decreasing from 0 (user u owns [k_offsets[u], k_offsets[u+1]));
///   an empty range gives zeros. scale = 0 means 1/sqrt(Dh).
/// Memory space: host for the reference (every pointer and k_offsets); device for
/// tbe::cuda::AttentionOp (q, k, v and cand_to_user), whose k_offsets stays a host span (the op
/// reads it on the host and uploads its own copy).
struct AttentionProblem {
  std::int64_t B = 0, U = 0, n_seed = 0, H = 0, Dh = 0, S = 0;
  std::span<const std::int64_t> k_offsets;
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const std::int32_t* cand_to_user = nullptr;
  double scale = 0.0;
  IkboPolicy policy;
  bool jagged() const { return !k_offsets.empty(); }
  std::int64_t total_keys() const { return jagged() ? k_offsets.back() : U * S; }
};

/// Shapes, dtypes, scale, null pointers and k_offsets (host metadata: k_offsets is read, the
/// tensors never). The map is checked by validate_map(std::span(p.cand_to_user, p.B), p.U).
/// Jagged mode ignores S (any S >= 0).
Status validate(const AttentionProblem& p);
/// (added) Elements of the attention output: B·n_seed·H·Dh.
std::int64_t attention_output_numel(const AttentionProblem& p);
/// (added) The same output check for attention: "out: null pointer for B·n_seed·H·Dh = N
/// elements". Precondition: validate(p) passed.
Status validate_output(const AttentionProblem& p, const void* out);
/// (added) The scale in effect: p.scale, or 1/sqrt(Dh) when p.scale == 0.
double attention_scale(const AttentionProblem& p);
/// (added) Key range [first, last) of user u: [u·S, (u+1)·S) dense, k_offsets[u..u+1] jagged.
/// Precondition, not checked: validate(p) passed and 0 <= u < p.U (a map value that passed
/// validate_map); any other u reads outside k_offsets (jagged) or names keys outside [0, U·S)
/// (dense).
std::pair<std::int64_t, std::int64_t> attention_key_range(const AttentionProblem& p,
                                                          std::int64_t u);

/// FP64 attention with a max-subtracted softmax: returns out [B·n_seed, H, Dh] (FP64). Throws
/// InvalidArgument, naming the argument, when validate(p) fails (shapes, dtypes, scale, null
/// pointers, k_offsets), then when validate_map does (a cand_to_user value outside [0, U)).
std::vector<double> attention_reference_fp64(const AttentionProblem& p);
/// The CPU fallback: attention_reference_fp64 rounded once (RNE) to policy.storage into `out`
/// ([B·n_seed, H, Dh] of policy.storage, host). Throws InvalidArgument, first failure wins:
/// validate(p); then "out" when `out` is null and B·n_seed·H·Dh > 0; then validate_map. Nothing
/// is written on error.
void attention_reference(const AttentionProblem& p, void* out);

/// The host-level IKBO operator interface that the reference (CPU fallback) and the CUDA backend
/// (tbe::cuda::make_cuda_ikbo_backend, optimized/) both implement. Every pointer of the problem
/// and `out` are HOST pointers; `out` holds lce_output_numel(p) / attention_output_numel(p)
/// elements of p.policy.storage. Each call runs validate(p), validate_output(p, out) and
/// validate_map first, in that order, and throws InvalidArgument on error; nothing is written to
/// `out` then.
class IkboBackend {
 public:
  virtual ~IkboBackend() = default;
  /// "cpu-reference"; a device backend names its device and kernels, e.g.
  /// "cuda:<device> (lce: padded-k; attention: mma-sync)".
  virtual std::string name() const = 0;
  virtual void lce(const LceProblem& p, void* out) = 0;
  virtual void attention(const AttentionProblem& p, void* out) = 0;
  /// Kernel paths the last successful lce() / attention() call exercised (e.g. "lce.padded-k",
  /// "attention.mma-sync.dh128.kb64": what tbe-verify's rows report and its path-coverage row
  /// requires); empty after a call that threw, and for a backend without path counters (the
  /// reference).
  virtual std::vector<std::string> last_paths() const { return {}; }
  /// The backend's own prechecks (e.g. the CUDA attention kernel: Dh in {64, 128}, FP16/BF16
  /// storage): the InvalidArgument status lce() / attention() raise, before any work, for a
  /// problem that passes validate(p); ok() when the backend runs it. A backend that checks the map
  /// on the host returns validate_map's status first; one that checks it only on the device
  /// (after these checks) does not look at the map. The reference has none. Lets a judge expect
  /// exactly the error the backend documents: validate(p), then this, then validate_map.
  virtual Status lce_limits(const LceProblem& p) const {
    (void)p;
    return Status::Ok();
  }
  virtual Status attention_limits(const AttentionProblem& p) const {
    (void)p;
    return Status::Ok();
  }
};

/// The CPU reference backend: lce_reference and attention_reference (OpenMP over candidates).
std::unique_ptr<IkboBackend> make_reference_ikbo_backend();

}  // namespace tbe::ikbo
