// Replayable case files: a folder with case.json (operator, every scalar argument, the precision
// policy, seeds, provenance) plus one .npy per tensor, optionally with the outputs an
// implementation produced and what the suite expects the oracle to say about them.
// Format: docs/case-files.md. This header: the operators, the forward case (`operator:
// "forward"`). Other operators: tbe/io/backward_case_file.h ("backward"),
// tbe/io/ikbo_case_file.h ("ikbo-lce", "ikbo-attention"); any of them: tbe/io/any_case_file.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tbe/errors.h"
#include "tbe/host_case.h"

namespace tbe::io {

/// The operator a case folder holds (case.json "operator").
enum class CaseOperator : std::uint8_t {
  Forward,        ///< "forward": CaseFile, read_case
  Backward,       ///< "backward": BackwardCaseFile, read_backward_case
  IkboLce,        ///< "ikbo-lce": LceCaseFile, read_lce_case
  IkboAttention,  ///< "ikbo-attention": AttentionCaseFile, read_attention_case
};
/// "forward", "backward", "ikbo-lce", "ikbo-attention".
std::string to_string(CaseOperator op);
/// Inverse of to_string(CaseOperator); throws InvalidArgument naming `what`, the text and the
/// known names.
CaseOperator parse_case_operator(const std::string& s, const char* what = "operator");
/// The operator of the case folder `dir`: reads case.json (size, depth and JSON syntax checked as
/// the readers do) and its keys format, version and operator only. Throws InvalidArgument naming
/// the file and the key (no folder, no case.json, wrong format or version, unknown operator).
CaseOperator read_case_operator(const std::string& dir);

/// Outputs an implementation produced for the case's inputs (all optional).
struct RecordedOutputs {
  std::string implementation;            ///< e.g. "torch 2.11 F.embedding_bag (cuda)"
  DType output_dtype = DType::F32;
  std::vector<std::byte> output;         ///< make_output_layout(p).numel elements, or empty
  std::optional<std::int64_t> warnings;  ///< bounds-check warning count, if it reports one
  std::optional<std::string> error;      ///< "bounds_check" / "invalid_argument" if it raised
                                         ///< ((addition) "device_error": any other failure)
};

/// What the suite expects when judging the recorded outputs (cases recorded from implementations
/// nobody here wrote may legitimately disagree with our semantics).
struct Expectation {
  std::string verdict = "pass";  ///< "pass" or "fail"
  std::string rule;              ///< when "fail": which rule of docs/semantics.md differs
  bool operator==(const Expectation&) const = default;
};

/// A forward case plus metadata.
struct CaseFile {
  std::string name;
  std::string provenance;            ///< free text: generator/seed, fuzz campaign, bug report id
  std::uint64_t seed = 0;            ///< the generator / property seed, if any
  ForwardCase problem;               ///< inputs and options
  std::optional<RecordedOutputs> recorded;
  std::optional<Expectation> expect;
};

/// (addition) An owning copy of a problem held in host memory (e.g. a view a tool built from its
/// own buffers), for write_case: tables are repacked in table order at the prefix offsets of E·D
/// (the layout the format stores; same semantics), indices/offsets widened to int64 masters.
/// Throws InvalidArgument if validate(p) fails.
ForwardCase copy_case(const ForwardProblem& p);

/// Writes `dir`/case.json and the .npy files (creates `dir`; fixed tensor names of any operator
/// that this case does not write are removed). Throws InvalidArgument on I/O errors, int32
/// indices/offsets that do not fit, or recorded output and error together.
void write_case(const std::string& dir, const CaseFile& c);
/// Reads and validates a forward case folder: JSON schema (types, required keys, known enum
/// names), tensor shapes and dtypes against the scalars, then tbe::validate on the resulting
/// problem. Errors name the file, the key and the bad value (a case of another operator: the key
/// `operator`). A case file is untrusted input.
CaseFile read_case(const std::string& dir);
/// True when both cases hold the same data bit for bit: metadata, every input (per-sample weights
/// compared by their bits, so NaN and -0 count), options, recorded outputs and expectation.
bool bitwise_equal(const CaseFile& a, const CaseFile& b);

}  // namespace tbe::io
