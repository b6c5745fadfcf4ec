// A case folder of any operator (docs/case-files.md): one reader that dispatches on case.json's
// "operator", for tools that judge whatever folder they are given.
#pragma once

#include <string>
#include <variant>

#include "tbe/io/backward_case_file.h"
#include "tbe/io/case_file.h"
#include "tbe/io/ikbo_case_file.h"

namespace tbe::io {

/// The case of one operator: forward (CaseFile), backward, ikbo-lce, ikbo-attention.
using AnyCaseFile = std::variant<CaseFile, BackwardCaseFile, LceCaseFile, AttentionCaseFile>;

/// Reads a case folder of any operator: case.json is parsed once and handed to the reader its
/// "operator" names (read_case, read_backward_case, read_lce_case, read_attention_case; a folder
/// whose operator is missing or unknown is read as a forward case, which reports that error in
/// its usual order). Throws InvalidArgument naming the file, the key and the bad value.
AnyCaseFile read_any_case(const std::string& dir);
/// Writes the case with the writer of its operator.
void write_case(const std::string& dir, const AnyCaseFile& c);
/// The operator of the case held.
CaseOperator case_operator(const AnyCaseFile& c);
/// Same operator and bitwise_equal.
bool bitwise_equal(const AnyCaseFile& a, const AnyCaseFile& b);

}  // namespace tbe::io
