// Replayable case files: a folder with case.json (operator, every scalar argument, the precision
// policy, seeds, provenance) plus one .npy per tensor, optionally with the outputs an
// implementation produced and what the suite expects the oracle to say about them.
// Format: docs/case-files.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tbe/errors.h"
#include "tbe/host_case.h"

namespace tbe::io {

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

/// Writes `dir`/case.json and the .npy files (creates `dir`). Throws InvalidArgument on I/O errors.
void write_case(const std::string& dir, const CaseFile& c);
/// Reads and validates a case folder: JSON schema (types, required keys, known enum names),
/// tensor shapes and dtypes against the scalars, then tbe::validate on the resulting problem.
/// Errors name the file, the key and the bad value. A case file is untrusted input.
CaseFile read_case(const std::string& dir);

}  // namespace tbe::io
