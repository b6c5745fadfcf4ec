// tbe-fuzz's IKBO cases (tbe/ikbo.h, docs/ikbo.md): linear compression (LCE) and cross attention
// on small random shapes biased to the edges (B = 0 and 1, K not a multiple of 8, K_u = 0, N and
// S around 64/256, every candidate-to-user map kind, FP16/BF16/FP32 storage, every LCE rounding,
// dense and jagged attention with empty users) with a few bad maps (a value = U or -1), run on an
// IkboBackend (the CUDA one runs LCE on the GPU in the LceStage the case draws, and attention on
// whatever its attention() runs: the GPU kernel once there is one, the CPU reference until then)
// and judged by the IKBO oracle, with canaries and error agreement.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/generate.h"
#include "fuzz/shrink.h"
#include "fuzz/verdict.h"
#include "tbe/ikbo.h"
#include "tbe/ikbo_workloads.h"

namespace tbe::fuzz {

/// A bad map value planted after generation (validate_map must reject it, both backends naming
/// cand_to_user[i], nothing written).
enum class BadMap : std::uint8_t { None, ValueU, Negative };
const char* to_string(BadMap b);  ///< "none", "value-u", "negative"

/// One IKBO fuzz case: the operator, its shape (U as requested: map_users may change it), the
/// policy, the map kind, the data seed (tensors from ikbo::make_lce_case /
/// make_attention_case), the bad map value and the backend variant `stage` (an index the campaign
/// maps onto its list of IKBO backends, e.g. the CUDA LceStages).
struct IkboFuzzCase {
  bool attention = false;
  ikbo::LceShape lce;
  ikbo::AttentionShape att;  ///< jagged: lengths drawn by make_attention_case from data_seed
  ikbo::IkboPolicy policy;
  ikbo::MapKind map = ikbo::MapKind::Sorted;
  std::uint64_t data_seed = 0;
  BadMap bad = BadMap::None;
  std::int64_t bad_at = 0;  ///< candidate whose map value is bad (< B)
  int stage = 0;
};

/// IKBO case `case_index` of campaign `seed` (Rng(seed, "ikbo" + case_index) alone): LCE when
/// !attention, else attention.
IkboFuzzCase generate_ikbo_case(std::uint64_t seed, std::uint64_t case_index, bool attention,
                                Shapes shapes = Shapes::Small);

/// The host call of `c`: exactly one of lce / attention is set (the bad map value applied).
/// Throws InvalidArgument when the shape cannot be generated (never for generated cases).
struct BuiltIkbo {
  std::optional<ikbo::LceCase> lce;
  std::optional<ikbo::AttentionCase> attention;
};
BuiltIkbo build(const IkboFuzzCase& c);

/// One line: operator, shape, policy, map, bad map value, stage.
std::string describe(const IkboFuzzCase& c);

/// The judgement of one IKBO call: the verdict and, for the case folder, the output the backend
/// wrote or the error it raised ("invalid_argument", "device_error").
struct IkboJudgement {
  Verdict verdict;
  bool expected_invalid = false;
  bool backend_limit = false;  ///< valid for the reference, outside the backend's documented limits
  std::optional<std::vector<std::byte>> output;
  std::optional<std::string> error;
};

/// Judges dev.lce(p) / dev.attention(p): InvalidArgument agreement with ikbo::validate and
/// validate_map (argument named, output untouched), canaries past the output, the IKBO oracle
/// (oracle::judge_lce / judge_attention). Never throws for a backend's misbehaviour.
IkboJudgement judge_lce_call(ikbo::IkboBackend& dev, const ikbo::LceProblem& p);
IkboJudgement judge_attention_call(ikbo::IkboBackend& dev, const ikbo::AttentionProblem& p);
/// build + the judge of the case's operator; a case that cannot be built fails "generator".
IkboJudgement judge_ikbo_case(ikbo::IkboBackend& dev, const IkboFuzzCase& c);

struct IkboShrinkResult {
  IkboFuzzCase shrunk;
  Verdict verdict;
  int steps = 0, runs = 0;
};
/// Greedy shape shrinking (B, U, M, N, K_c, K_u; attention: B, n_seed, H, Dh, S, dense; the
/// Sorted map, no bad value), data regenerated from the same seed; a candidate is kept only when
/// it fails the same check. Deterministic while max_seconds does not stop it.
IkboShrinkResult shrink_ikbo(const IkboFuzzCase& failing, const Verdict& first,
                             const std::function<Verdict(const IkboFuzzCase&)>& judge,
                             const ShrinkLimits& limits = {});

}  // namespace tbe::fuzz
