// The tbe-fuzz campaign: generate case after case of the operators asked for (forward: generate.h,
// backward: backward.h, IKBO LCE and attention: ikbo_case.h), judge each on the backend under
// test, count coverage and kernel paths, shrink and save failures as case folders
// (docs/case-files.md), report progress, the final summary and the path-coverage table.
//
// Speed: cases are judged in batches, in parallel over the cases of a batch (OpenMP, --threads):
// generation, the reference, the oracle and the comparison of independent cases run on every
// core while the calls into the backend under test are serialised (one at a time, as the GPU
// runs them). Every case depends on (seed, index, operators, shapes) alone, so verdicts, counts
// and the failures found do not depend on the thread count; the failures of a batch are printed,
// shrunk and saved in case order on one thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fuzz/generate.h"
#include "fuzz/verdict.h"
#include "tbe/backend.h"
#include "tbe/ikbo.h"

namespace tbe::fuzz {

/// The operators tbe-fuzz fuzzes. Case i of a campaign is of operator ops[i % ops.size()].
enum class Operator : std::uint8_t { Forward, Backward, Lce, Attention };
std::string to_string(Operator op);  ///< "forward", "backward", "lce", "attention"
/// "forward,backward,lce,attention"
std::string to_string(const std::vector<Operator>& ops);

/// tbe-fuzz's options (its command line: command_line.h).
struct CampaignOptions {
  double seconds = 0;  ///< campaign length (> 0), when have_seconds
  bool have_seconds = false;
  std::uint64_t seed = 1;
  std::string out = "tbe-fuzz-out";  ///< failures go to out/failure-<n>/
  std::string backend = "cuda";      ///< cuda, cpu or cpu-faulty
  std::vector<Operator> ops = {Operator::Forward, Operator::Backward, Operator::Lce,
                               Operator::Attention};
  Shapes shapes = Shapes::Small;
  int threads = 0;                         ///< cases judged at once (0: OpenMP's default)
  std::optional<std::uint64_t> only_case;  ///< --case I: run only case I
  double report_every = 30;                ///< seconds between progress lines
  /// -1: on the cuda backend 20000 (small shapes) or 1000 (large), 0 (off) on the CPU backends
  std::int64_t huge_every = -1;
  int max_saved = 10;            ///< failures shrunk and saved at most
  std::int64_t max_failures = 0;  ///< stop after this many failures (0: never)
  std::int64_t list = 0;          ///< --list N: describe the first N cases and exit
};

/// The huge-table period of a campaign: options.huge_every, or its default for the backend.
std::int64_t huge_every(const CampaignOptions& options, bool gpu);

/// --list: "case i: <operator> <describe>" for the first options.list cases (huge-table cases are
/// only named, not allocated).
void list_cases(const CampaignOptions& options, std::ostream& os);

/// The backends under test (not owned). `ikbo`: the IKBO backends a case may run on (an IKBO
/// case runs on ikbo[case.stage % ikbo.size()]; the CUDA build passes select_ikbo_backends':
/// one per LceStage and the chunked device-map-check variant). `gpu`:
/// the TBE backend is the CUDA one (huge cases by default, the backward path counters checked).
struct Devices {
  Backend* tbe = nullptr;
  std::vector<ikbo::IkboBackend*> ikbo;
  bool gpu = false;
};

/// What one judged case leaves behind (in memory only; a failure is regenerated from its index
/// to be shrunk and saved).
struct CaseRecord {
  std::uint64_t index = 0;
  Operator op = Operator::Forward;
  Verdict verdict;
  std::vector<std::pair<std::string, std::string>> coverage;  ///< (axis, value)
  std::vector<std::string> paths;                             ///< kernel paths it exercised
  /// Seconds spent inside the backends' calls (wall clock, not compared by ==): what bounds the
  /// campaign when it comes close to the wall time divided by the threads.
  double device_seconds = 0;
  /// Equal verdicts, coverage and paths (device_seconds ignored).
  bool operator==(const CaseRecord&) const;
};

/// Generates and judges cases [first, first + count) of the campaign, options.threads at a time
/// (calls into the backends serialised); the records come back in case order and do not depend
/// on the thread count.
std::vector<CaseRecord> judge_cases(const CampaignOptions& options, const Devices& dev,
                                    std::uint64_t first, std::uint64_t count);

/// One campaign on the backends `dev`, reporting to `os`.
class Campaign {
 public:
  Campaign(CampaignOptions options, Devices dev, std::ostream& os);

  /// Runs the campaign (batches of cases for options.seconds, or only options.only_case) and
  /// prints the final report. Returns the exit status: 0 no failure, 1 a case failed, 3 an error
  /// stopped it.
  int run();

  std::int64_t cases() const { return cases_; }
  std::int64_t failures() const { return failures_; }
  /// Folders saved so far (out/failure-<n>), in order.
  const std::vector<std::string>& saved_folders() const { return saved_dirs_; }

 private:
  using Counts = std::map<std::string, std::map<std::string, std::int64_t>>;
  double elapsed() const;
  /// Counts `r`; prints, shrinks and saves a failure. False when the campaign must stop.
  bool take(const CaseRecord& r);
  void save_failure(const CaseRecord& r);
  std::string rerun_command(std::uint64_t index) const;
  void print_counts() const;
  void print_paths() const;
  void progress_line();
  void final_report();

  CampaignOptions options_;
  Devices dev_;
  std::ostream& os_;
  Counts coverage_;
  std::map<std::string, std::int64_t> paths_;
  std::map<Operator, std::int64_t> per_op_;
  double device_seconds_ = 0;
  std::int64_t cases_ = 0, failures_ = 0;
  int saved_ = 0;
  std::vector<std::string> failure_lines_, saved_dirs_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
};

}  // namespace tbe::fuzz
