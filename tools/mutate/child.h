// tbe-mutate's child processes (POSIX): a program run with TBE_MUTANT set (or unset), its stdout and
// stderr captured through one pipe, stopped (SIGTERM to its process group, SIGKILL 5 s later) at
// its time budget or as soon as a line shows the first failure.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "mutate/kill_table.h"

namespace tbe::mutate {

struct ChildSpec {
  std::vector<std::string> argv;  ///< argv[0]: the program's path
  std::string fault;              ///< TBE_MUTANT's value; "" leaves it unset
  double budget_seconds = 60.0;   ///< > 0
  /// Called with each complete output line; returning true marks the first failure (its time is
  /// ChildResult::kill_seconds) and, with stop_at_kill, stops the child.
  std::function<bool(std::string_view)> is_failure;
  bool stop_at_kill = true;
};

/// Runs the child to its end, its budget or its first failure. Throws std::runtime_error when it
/// cannot be started (the program does not exist or is not executable: exec's error).
ChildResult run_child(const ChildSpec& spec);

}  // namespace tbe::mutate
