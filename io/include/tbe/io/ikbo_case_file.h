// IKBO case folders (`operator: "ikbo-lce"` and `"ikbo-attention"`): one linear-compression or
// cross-attention call (tbe/ikbo.h, tbe/ikbo_workloads.h; semantics docs/ikbo.md) as case.json
// plus fixed-name .npy tensors, optionally with the output an implementation produced and what the
// suite expects when judging it. Format: docs/case-files.md "IKBO".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tbe/ikbo_workloads.h"
#include "tbe/io/case_file.h"

namespace tbe::io {

/// The output an implementation produced for an IKBO case, or the error it raised (exactly one).
struct IkboRecordedOutput {
  std::string implementation;  ///< e.g. "fbgemm_gpu ikbo (cuda)"
  /// The output of policy.storage: LCE [B, M, N], attention [B·n_seed, H, Dh] (row-major).
  std::optional<std::vector<std::byte>> output;
  std::optional<std::string> error;  ///< "invalid_argument" or "device_error"
};

/// An LCE case plus metadata. problem.map is the MapKind the map was generated with
/// (provenance: never checked against problem.cand_to_user).
struct LceCaseFile {
  std::string name;
  std::string provenance;
  std::uint64_t seed = 0;
  ikbo::LceCase problem;
  std::optional<IkboRecordedOutput> recorded;
  std::optional<Expectation> expect;
};

/// An attention case plus metadata. Jagged (problem.shape.jagged): problem.k_offsets [U + 1]
/// holds the key ranges; a read case has shape.lengths = the per-user lengths they give (the
/// generator's input `lengths` is not stored separately). Dense: k_offsets and lengths empty.
struct AttentionCaseFile {
  std::string name;
  std::string provenance;
  std::uint64_t seed = 0;
  ikbo::AttentionCase problem;
  std::optional<IkboRecordedOutput> recorded;
  std::optional<Expectation> expect;
};

/// Writes `dir`/case.json and the tensors w_c, w_u, e_c, e_u, cand_to_user (+ output) in their
/// shapes (creates `dir`; fixed tensor names this case does not write are removed). Throws
/// InvalidArgument for tensor sizes that do not match the shape, output and error together,
/// I/O errors.
void write_case(const std::string& dir, const LceCaseFile& c);
/// Reads and validates an LCE case folder (untrusted input): keys and types, shape scalars and
/// their products against int64 and the .npy limit, every tensor's dtype (policy.storage; the
/// map int32) and exact shape, then ikbo::validate and ikbo::validate_map (every map value in
/// [0, U)), the recorded output's element count. Errors are InvalidArgument naming the file, the
/// key and the bad value.
LceCaseFile read_lce_case(const std::string& dir);
/// True when both cases hold the same data bit for bit.
bool bitwise_equal(const LceCaseFile& a, const LceCaseFile& b);

/// Writes `dir`/case.json and q, k, v, cand_to_user (+ k_offsets when jagged, + output). Throws
/// InvalidArgument for tensor sizes that do not match the shape, a non-finite scale, jagged
/// k_offsets missing or disagreeing with shape.lengths, output and error together, I/O errors.
void write_case(const std::string& dir, const AttentionCaseFile& c);
/// Reads and validates an attention case folder (untrusted input): as read_lce_case, plus
/// k_offsets.npy ([U + 1] int64, from 0, non-decreasing) in jagged mode (present in dense mode:
/// an error), and the scale (finite, >= 0; 0 means 1/sqrt(Dh)).
AttentionCaseFile read_attention_case(const std::string& dir);
/// True when both cases hold the same data bit for bit (scale compared by its bits).
bool bitwise_equal(const AttentionCaseFile& a, const AttentionCaseFile& b);

}  // namespace tbe::io
