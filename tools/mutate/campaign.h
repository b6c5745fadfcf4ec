// tbe-mutate's campaign (docs/mutation.md): a baseline run without a fault, then per fault of the
// catalogue (tbe/cuda/mutation.h) the main job and optionally the GPU tests as child processes with
// TBE_MUTANT set, each stopped at its first failure or its budget; the kill table.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "mutate/kill_table.h"

namespace tbe::mutate {

/// The sections of tbe-verify (--rows) a fault is run through, in order: its own first (fwd_,
/// seq_, bounds_: forward; bwd_: backward; lce_: ikbo), then the others; a kill in any ends it.
std::vector<std::string> section_order(const std::string& fault);

/// tbe-mutate's options (the command line's, mutate_args.h).
struct MutateOptions {
  bool list = false;                ///< --list: print the catalogue and exit
  std::vector<std::string> faults;  ///< --fault (repeated or comma-separated), empty: all
  std::string verify;               ///< --verify: the mutation build's tbe-verify
  std::string tests;                ///< --tests: the mutation build's test_optimized
  bool with_tests = false;          ///< --with-tests
  double budget = 60.0;             ///< --budget S: per fault, the main job (all its sections)
  double tests_budget = 120.0;      ///< --tests-budget S: per fault, the tests
  double baseline_budget = 600.0;   ///< --baseline-budget S
  double total_budget = 0.0;        ///< --total-budget S: no fault starts after it (0: none)
  bool baseline = true;             ///< --no-baseline turns it off
  bool baseline_only = false;       ///< --baseline-only: no fault runs
  bool own_section_first = true;    ///< --one-run: the main job as one child, all sections
  bool keep_going = false;          ///< --keep-going: children run to the end (full tables)
  std::vector<std::string> verify_args;  ///< --verify-arg, appended to tbe-verify's command
  std::vector<std::string> tests_args;   ///< --tests-arg, appended to test_optimized's command
  std::string out = "tbe-mutate-out";    ///< --out DIR: logs (DIR/<fault>.log)
  /// --cases DIR: case folders (DIR/<fault>/...; "" = --out); tbe-verify saves at most one per
  /// child (--save-failures-max 1: a seed-large case folder holds ~2 GB of tables).
  std::string cases;
  bool save_cases = true;                ///< --no-cases: none (--save-failures-max 0)
  std::string json;                      ///< --json FILE
};

/// Prints the catalogue: name, where, what (one fault per line, tab-separated).
void print_catalogue(std::ostream& os);

/// Runs the campaign, prints progress on `log` and the kill table on `os`. Exit status: 0 (baseline
/// passed, every fault killed; --baseline-only: the baseline passed), 1 (a fault survived or was not
/// run), 3 (the baseline failed, or a binary is not a mutation build: the table would mean
/// nothing).
int run_campaign(const MutateOptions& o, std::ostream& os, std::ostream& log);

}  // namespace tbe::mutate
