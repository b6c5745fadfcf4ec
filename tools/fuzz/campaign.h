// The tbe-fuzz campaign: generate case after case (generate.h), judge each on the backend under
// test (judge.h), count coverage and kernel paths, shrink (shrink.h) and save failures as case
// folders (docs/case-files.md), report progress and the final summary.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/fuzz_case.h"
#include "tbe/backend.h"
#include "tbe/judge/forward_judgement.h"

namespace tbe::fuzz {

/// tbe-fuzz's options (its command line: command_line.h).
struct CampaignOptions {
  double seconds = 0;  ///< campaign length (> 0), when have_seconds
  bool have_seconds = false;
  std::uint64_t seed = 1;
  std::string out = "tbe-fuzz-out";  ///< failures go to out/failure-<n>/
  std::string backend = "cuda";      ///< cuda, cpu or cpu-faulty
  std::optional<std::uint64_t> only_case;  ///< --case I: run only case I
  double report_every = 30;                ///< seconds between progress lines
  std::int64_t huge_every = -1;  ///< -1: 1000 on the cuda backend, 0 (off) on the CPU backends
  int max_saved = 10;            ///< failures shrunk and saved at most
  std::int64_t max_failures = 0;  ///< stop after this many failures (0: never)
  std::int64_t list = 0;          ///< --list N: describe the first N cases and exit
};

/// The huge-table period of a campaign: options.huge_every, or its default for the backend.
std::int64_t huge_every(const CampaignOptions& options, bool gpu);

/// --list: "case i: <describe>" for the first options.list cases (huge-table cases are only
/// named, not allocated).
void list_cases(const CampaignOptions& options, std::ostream& os);

/// One campaign on one backend, reporting to `os`.
class Campaign {
 public:
  /// `dev` is the backend under test; `gpu` says it is the CUDA one (huge cases by default).
  Campaign(CampaignOptions options, Backend& dev, bool gpu, std::ostream& os);

  /// Runs the campaign (every case for options.seconds, or only options.only_case) and prints the
  /// final report. Returns the exit status: 0 no failure, 1 a case failed, 3 an error stopped it.
  int run();

  /// Generates, judges and counts case `index`; a failure is printed, shrunk and saved (up to
  /// max_saved). Returns false when the campaign must stop (the device is lost).
  bool run_case(std::uint64_t index);

  std::int64_t cases() const { return cases_; }
  std::int64_t failures() const { return failures_; }

 private:
  using Counts = std::map<std::string, std::map<std::string, std::int64_t>>;
  double elapsed() const;
  void save_failure(std::uint64_t index, const FuzzCase& original,
                    const judge::ForwardJudgement& first);
  void print_counts() const;
  void print_paths() const;
  void progress_line();
  void final_report();

  CampaignOptions options_;
  Backend& dev_;
  bool gpu_;
  std::ostream& os_;
  Counts coverage_;
  std::map<std::string, std::int64_t> paths_;
  std::int64_t cases_ = 0, failures_ = 0;
  int saved_ = 0;
  std::vector<std::string> failure_lines_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace tbe::fuzz
