// The tbe-fuzz campaign (campaign.h).
#include "fuzz/campaign.h"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <utility>

#include "fuzz/generate.h"
#include "fuzz/judge.h"
#include "fuzz/shrink.h"
#include "tbe/io/case_file.h"
#include "tbe/judge/case_commands.h"
#include "tbe/judge/forward_call.h"

namespace tbe::fuzz {

using judge::ForwardJudgement;
namespace {

std::string dim_class(std::int32_t d) {
  if (d == 1) return "1";
  if (d == 2048) return "2048";
  if (d > 1024) return "1025..2047";
  if (d % 2 == 1) return "odd";
  if (d % 4 != 0) return "even,%4!=0";
  return "%4==0";
}

void count_coverage(std::map<std::string, std::map<std::string, std::int64_t>>& cov,
                    const FuzzCase& fc, const ForwardJudgement& j) {
  auto add = [&](const std::string& axis, const std::string& v) { ++cov[axis][v]; };
  add("pooling", to_string(fc.pooling));
  add("bounds", to_string(fc.bounds));
  const bool malformed = !fc.faults.empty() || j.expected_violation || j.expected_warnings > 0;
  add("malformed", malformed ? "1" : "0");
  add("weighted", fc.weighted ? "1" : "0");
  add("index", to_string(fc.index_dtype));
  add("w", to_string(fc.tables->dtype));
  add("out", to_string(fc.policy.output));
  add("policy", to_string(fc.policy.kind));
  add("vbe", fc.R ? "1" : "0");
  add("fused", fc.fused ? "1" : "0");
  add("fill", fc.fill);
  add("lead", fc.lead.empty() ? "0" : ">0");
  add("B=0", (fc.R == 0 && fc.B == 0) ? "1" : "0");
  add("huge(E·D>=2^31)", fc.huge ? "1" : "0");
  add("invalid", to_string(fc.invalid));
  add("outcome", j.expected_invalid ? "invalid_argument"
                 : j.expected_violation ? "bounds_error" : "output");
  std::map<std::string, bool> dims, lens;
  bool e1 = false;
  for (std::size_t t = 0; t < fc.tables->rows.size(); ++t) {
    dims[dim_class(fc.tables->dims[t])] = true;
    e1 = e1 || fc.tables->rows[t] == 1;
  }
  for (auto& [k, v] : dims) add("D (cases with)", k);
  add("E=1 (cases with)", e1 ? "1" : "0");
  for (const Bag& b : fc.bags) {
    const std::size_t L = b.idx.size();
    if (L == 0 || L == 1 || (L >= 255 && L <= 257)) lens[std::to_string(L)] = true;
    else if (L > 257) lens[">257"] = true;
    else lens["2..254"] = true;
  }
  for (auto& [k, v] : lens) add("L (cases with)", k);
}

}  // namespace

std::int64_t huge_every(const CampaignOptions& options, bool gpu) {
  return options.huge_every >= 0 ? options.huge_every : (gpu ? 1000 : 0);
}

void list_cases(const CampaignOptions& options, std::ostream& os) {
  const std::int64_t every = huge_every(options, options.backend == "cuda");
  for (std::int64_t i = 0; i < options.list; ++i) {
    const auto index = static_cast<std::uint64_t>(i);
    os << "case " << i << ": "
       << (is_huge_case(index, every) ? std::string("(a huge-table case)")
                                      : describe(generate_case(options.seed, index, every)))
       << "\n";
  }
}

Campaign::Campaign(CampaignOptions options, Backend& dev, bool gpu, std::ostream& os)
    : options_(std::move(options)), dev_(dev), gpu_(gpu), os_(os) {}

double Campaign::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

void Campaign::save_failure(std::uint64_t index, const FuzzCase& original,
                            const ForwardJudgement& first) {
  FuzzCase cur = original;
  ForwardJudgement jj = first;
  int steps = 0, runs = 0;
  if (!first.device_lost) {
    ShrinkLimits limits;
    // at most 60 s, and not much past the end of the campaign
    if (!options_.only_case)
      limits.max_seconds = std::clamp(options_.seconds - elapsed() + 15.0, 5.0, 60.0);
    ShrinkResult r =
        shrink(original, first, [&](const FuzzCase& c) { return judge_case(dev_, c); }, limits);
    cur = std::move(r.shrunk);
    jj = std::move(r.judgement);
    steps = r.steps;
    runs = r.runs;
  }
  const int n = ++saved_;
  const std::string dir = options_.out + "/failure-" + std::to_string(n);
  os_ << "  shrunk in " << steps << " steps (" << runs << " runs): " << describe(cur)
      << "\n  now: [" << jj.check << "] " << jj.detail << "\n";
  try {
    io::CaseFile cf;
    cf.name = "tbe-fuzz-failure-" + std::to_string(n);
    std::ostringstream prov;
    prov << "tbe-fuzz --seed " << options_.seed << " --case " << index << " --backend "
         << options_.backend << " (" << dev_.name() << "); failed check '" << jj.check
         << "': " << jj.detail << "; shrunk in " << steps << " steps";
    cf.provenance = prov.str();
    cf.seed = options_.seed;
    Built bt;
    build(cur, bt);
    cf.problem = bt.c;
    cf.problem.weights = cur.tables->weights;
    cf.recorded = judge::recorded_outputs(jj.call, jj.output, cur.policy.output,
                                          "tbe-fuzz backend " + dev_.name());
    std::filesystem::create_directories(dir);
    io::write_case(dir, cf);
    const std::string replay = judge::replay_case_command(dir);
    os_ << "  saved " << dir << "\n  replay: " << replay << "\n";
    failure_lines_.push_back("failure-" + std::to_string(n) + " (case " + std::to_string(index) +
                             ", " + jj.check + "): " + replay);
  } catch (const std::exception& e) {
    os_ << "  could not save the case to " << dir << ": " << e.what() << "\n";
    failure_lines_.push_back("case " + std::to_string(index) + " (" + jj.check +
                             "): not saved (" + e.what() + ")");
  }
}

bool Campaign::run_case(std::uint64_t index) {
  FuzzCase fc = generate_case(options_.seed, index, huge_every(options_, gpu_));
  ForwardJudgement j = judge_case(dev_, fc);
  ++cases_;
  count_coverage(coverage_, fc, j);
  for (const auto& p : j.call.stats.paths) ++paths_[p];
  if (!j.failed) return true;
  ++failures_;
  os_ << "FAIL case " << index << " [" << j.check << "]: " << j.detail << "\n  case: "
      << describe(fc) << "\n  rerun: tbe-fuzz --backend " << options_.backend << " --seed "
      << options_.seed << " --case " << index << "\n";
  if (saved_ < options_.max_saved) save_failure(index, fc, j);
  else
    failure_lines_.push_back("case " + std::to_string(index) + " (" + j.check +
                             "): not saved (--max-saved)");
  os_.flush();
  if (j.device_lost) {
    os_ << "the device reported an error (the CUDA context may be lost): stopping\n";
    return false;
  }
  return true;
}

void Campaign::print_counts() const {
  for (const auto& [axis, values] : coverage_) {
    os_ << "  " << axis << ":";
    for (const auto& [v, n] : values) os_ << " " << v << "=" << n;
    os_ << "\n";
  }
}

void Campaign::print_paths() const {
  os_ << "kernel paths exercised (cases): ";
  if (paths_.empty()) os_ << "none";
  bool first = true;
  for (const auto& [p, n] : paths_) {
    os_ << (first ? "" : ", ") << p << "=" << n;
    first = false;
  }
  os_ << "\n";
}

void Campaign::progress_line() {
  const double t = elapsed();
  os_ << "[" << static_cast<long>(t) << " s] cases " << cases_ << " (" << std::fixed
      << std::setprecision(1) << (t > 0 ? static_cast<double>(cases_) / t : 0.0)
      << std::defaultfloat << "/s), failures " << failures_ << "\n";
  print_paths();
  print_counts();
  os_.flush();
}

void Campaign::final_report() {
  const double t = elapsed();
  os_ << "\n== tbe-fuzz report (seed " << options_.seed << ", backend " << dev_.name() << ")\n"
      << "cases run: " << cases_ << " in " << std::fixed << std::setprecision(1) << t << " s ("
      << (t > 0 ? static_cast<double>(cases_) / t : 0.0) << " cases/s)\n"
      << std::defaultfloat << "coverage (cases per axis value):\n";
  print_counts();
  print_paths();
  os_ << "failures found: " << failures_ << "\n";
  for (const auto& l : failure_lines_) os_ << "  " << l << "\n";
  os_ << (failures_ == 0 ? "PASS" : "FAIL") << ": " << cases_ << " cases, " << failures_
      << " failures (seed " << options_.seed << ")" << std::endl;
}

int Campaign::run() {
  os_ << "tbe-fuzz: seed " << options_.seed << ", backend " << dev_.name() << ", ";
  if (options_.only_case) os_ << "case " << *options_.only_case << " only";
  else os_ << options_.seconds << " s";
  os_ << ", failures to " << options_.out << "/ (rerun: tbe-fuzz --seed " << options_.seed
      << " --backend " << options_.backend << " --seconds S)" << std::endl;
  try {
    if (options_.only_case) {
      run_case(*options_.only_case);
    } else {
      double next_report = options_.report_every;
      for (std::uint64_t i = 0; elapsed() < options_.seconds; ++i) {
        if (!run_case(i)) break;
        if (options_.max_failures > 0 && failures_ >= options_.max_failures) break;
        if (elapsed() >= next_report) {
          progress_line();
          while (next_report <= elapsed()) next_report += options_.report_every;
        }
      }
    }
  } catch (const std::exception& e) {
    os_ << "tbe-fuzz: stopped by an error: " << e.what() << "\n";
    final_report();
    return 3;
  }
  final_report();
  return failures_ == 0 ? 0 : 1;
}

}  // namespace tbe::fuzz
