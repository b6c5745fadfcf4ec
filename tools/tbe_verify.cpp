// tbe-verify: the verification matrix of the TBE forward (precision policy x weighted x index
// width x pooling x bounds-check mode x VBE) on the seed-large workload, the CUDA backend against
// the FP64 reference through the enclosure oracle; then the IKBO rows (LCE and attention on the
// IKBO backend, judged by the IKBO oracle). With no GPU it says so and runs the reference
// self-checks instead, reporting every GPU row as skipped. See --help (cli/verify_args.cpp).
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "cli/host_allocator.h"
#include "cli/verify_args.h"
#include "tbe/backend.h"
#include "tbe/select_backend.h"
#include "tbe/errors.h"
#include "tbe/judge/backward_rows.h"
#include "tbe/judge/case_commands.h"
#include "tbe/judge/fail_line.h"
#include "tbe/judge/ikbo_rows.h"
#include "tbe/judge/large_table.h"
#include "tbe/judge/matrix.h"
#include "tbe/judge/path_coverage.h"
#include "tbe/judge/report.h"
#include "tbe/judge/runner.h"
#include "tbe/judge/section_times.h"
#include "tbe/judge/watchdog.h"

namespace {

using namespace tbe::judge;
using namespace tbe::verify;

constexpr std::int64_t kDefaultBatch = 8192;
constexpr std::int64_t kFullBatch = 131072;
constexpr std::int64_t kCpuBackwardBatch = 1024;  // backward rows' B when they run on the CPU  // T·B·L stays far below 2^31 for int32 indices

/// A command line that fails once the run starts (--only matches no case, --json cannot be
/// written): reported like a parse error, exit 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The IKBO rows' configuration and backend (the reference for --backend cpu; else the CUDA IKBO
/// backend, or none with the reason when this build or machine has no GPU).
struct IkboSetup {
  std::vector<std::unique_ptr<tbe::ikbo::IkboBackend>> inner;     ///< the backends
  std::vector<std::unique_ptr<tbe::ikbo::IkboBackend>> backends;  ///< what the rows call: `inner`, watched on a device
  IkboConfig cfg;
};

/// The watchdog of the device calls (--call-timeout), or none: 0, or the CPU reference under test.
std::unique_ptr<CallWatchdog> make_watchdog(const VerifyArgs& args) {
  if (args.call_timeout <= 0 || args.backend == "cpu") return nullptr;
  std::string replay = " --seed " + std::to_string(args.seed);
  if (args.full) replay += " --full";
  if (args.batch) replay += " --batch " + std::to_string(*args.batch);
  return std::make_unique<CallWatchdog>(args.call_timeout, replay);
}

IkboSetup make_ikbo_setup(const VerifyArgs& args, CallWatchdog* wd) {
  IkboSetup s;
  if (args.backend == "cpu") {
    s.backends = tbe::select_ikbo_backends(tbe::BackendKind::Cpu);
  } else {
    try {
      s.inner = tbe::select_ikbo_backends(tbe::BackendKind::Cuda);  // 5 stages + 1 variant
    } catch (const tbe::Error& e) {
      s.cfg.skip_reason = std::string("no GPU (") + e.what() + ")";
    }
    for (auto& b : s.inner)
      s.backends.push_back(wd != nullptr ? watched(*b, *wd) : std::move(b));
  }
  // LCE on each; attention on the first (AttentionKernel::Auto: the wgmma kernel on compute
  // capability 9.0) and on the last, whose map is checked on the device only and which runs the
  // mma.sync attention kernel (select_ikbo_backends)
  s.cfg.device = s.backends.empty() ? nullptr : s.backends.front().get();
  if (args.backend != "cpu") {
    for (const auto& b : s.backends) s.cfg.lce_devices.push_back(b.get());
    if (s.backends.size() > 1)
      s.cfg.attention_devices = {s.backends.front().get(), s.backends.back().get()};
  }
  s.cfg.seed = args.seed;
  s.cfg.lce_rounding = args.ikbo_rounding;
  s.cfg.save_failures_dir = args.save_failures;
  s.cfg.save_failures_max = args.save_failures_max;
  // fp32 rows where the CPU reference runs them (it supports fp32 storage with FP64 accumulation).
  s.cfg.include_fp32 = s.backends.empty() || s.backends.front()->name() == "cpu-reference";
  return s;
}

/// Wall time (steady_clock) of each section of a run, seconds; 0 for a section that did not run.
struct SectionSeconds {
  double forward = 0, backward = 0, ikbo = 0;  ///< running the section's rows
  double total = 0;  ///< the whole run up to its last table (>= the sum of the sections)
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// "time: forward 1.23 s, backward 4.56 s, ikbo 7.89 s; total 13.80 s" (the sections that ran).
void print_times(std::ostream& os, const Sections& rows, const SectionSeconds& s) {
  std::ostringstream line;
  line << std::fixed << std::setprecision(2) << "time:";
  const char* sep = " ";
  for (const auto& [ran, name, seconds] : {std::tuple{rows.forward, "forward", s.forward},
                                           std::tuple{rows.backward, "backward", s.backward},
                                           std::tuple{rows.ikbo, "ikbo", s.ikbo}}) {
    if (!ran) continue;
    line << sep << name << " " << seconds << " s";
    sep = ", ";
  }
  line << "; total " << s.total << " s\n";
  os << line.str();
}

/// The JSON "totals": each section's counts and seconds, and "all" (the sums of the counts;
/// seconds: the whole run). The "summary" of to_json counts the forward matrix only.
nlohmann::json totals_json(const Totals& f, const BackwardTotals& b, const IkboTotals& i,
                           const SectionSeconds& s) {
  auto section = [](std::int64_t p, std::int64_t fl, std::int64_t sk, double seconds) {
    return nlohmann::json{{"passed", p}, {"failed", fl}, {"skipped", sk}, {"seconds", seconds}};
  };
  return {{"forward", section(f.passed, f.failed, f.skipped, s.forward)},
          {"backward", section(b.passed, b.failed, b.skipped, s.backward)},
          {"ikbo", section(i.passed, i.failed, i.skipped, s.ikbo)},
          {"all", section(f.passed + b.passed + i.passed, f.failed + b.failed + i.failed,
                          f.skipped + b.skipped + i.skipped, s.total)}};
}

/// Prints the machine-readable fail lines of a row on stderr, at once (tbe/judge/fail_line.h).
void print_fail_lines(const std::vector<FailLine>& lines) {
  for (const FailLine& f : lines) std::cerr << format_fail_line(f) << "\n" << std::flush;
}

/// Runs and prints the IKBO rows; returns them.
std::vector<IkboRowResult> run_ikbo(const IkboConfig& cfg) {
  std::vector<IkboRowResult> out;
  const std::vector<IkboRowSpec> specs = ikbo_row_specs(cfg.include_fp32);
  std::int64_t saved = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::cerr << "ikbo [" << i + 1 << "/" << specs.size() << "] " << ikbo_label(specs[i])
              << " ... " << std::flush;
    out.push_back(run_ikbo_row(cfg, specs[i], &saved));
    std::cerr << to_string(out.back().verdict()) << "\n";
    print_fail_lines(fail_lines(cfg, out.back()));
  }
  return out;
}

int run(const VerifyArgs& args) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t batch = args.batch ? *args.batch : (args.full ? kFullBatch : kDefaultBatch);
  const std::unique_ptr<CallWatchdog> watchdog = make_watchdog(args);
  if (!args.rows.forward && !args.rows.backward) {  // --rows ikbo
    IkboSetup ik = make_ikbo_setup(args, watchdog.get());
    if (args.list) {
      for (const IkboRowSpec& s : ikbo_row_specs(ik.cfg.include_fp32))
        std::cout << ikbo_label(s) << "\n";
      return 0;
    }
    SectionSeconds seconds;
    const auto t_ikbo = std::chrono::steady_clock::now();
    const std::vector<IkboRowResult> rows = run_ikbo(ik.cfg);
    seconds.ikbo = seconds_since(t_ikbo);
    print_ikbo_rows(std::cout, ik.cfg, rows);
    seconds.total = seconds_since(t0);
    print_times(std::cout, args.rows, seconds);
    const IkboTotals t = count_ikbo_rows(rows);
    if (!args.json_path.empty()) {
      std::ofstream f(args.json_path);
      if (!f) throw UsageError("--json: cannot write '" + args.json_path + "'");
      nlohmann::json j;
      j["tool"] = "tbe-verify";
      j["seed"] = args.seed;
      j["ikbo"] = ikbo_rows_json(ik.cfg, rows);
      j["totals"] = totals_json(Totals{}, BackwardTotals{}, t, seconds);
      f << j.dump(2) << "\n";
      if (!f) throw std::runtime_error("--json: writing '" + args.json_path + "' failed");
    }
    if (t.failed != 0) return 1;
    if (args.require_gpu && !(!ik.backends.empty() && ik.backends.front()->name() != "cpu-reference")) {
      std::cerr << "tbe-verify: --require-gpu: no GPU row was verified (" << ik.cfg.skip_reason
                << ")\n";
      return 4;
    }
    return 0;
  }

  // Cases: the design, filtered by --only (falling back to the full product).
  RunInfo info;
  info.design = args.design;
  info.seed = args.seed;
  info.only = args.only;
  std::vector<CaseAxes> cases = enumerate_cases(args.design);
  info.design_cases = cases.size();
  if (!args.only.empty()) {
    const CaseFilter filter = CaseFilter::parse(args.only);
    auto select = [&](const std::vector<CaseAxes>& from) {
      std::vector<CaseAxes> out;
      for (const CaseAxes& c : from)
        if (filter.matches(c)) out.push_back(c);
      return out;
    };
    std::vector<CaseAxes> picked = select(cases);
    if (picked.empty()) {
      picked = select(enumerate_cases(Design::Full));
      info.only_from_full = true;
    }
    if (picked.empty())
      throw UsageError("--only: no case matches '" + args.only +
                       "' (out=fp16 exists only with policy=seed-default,w=fp16; out=bf16 only "
                       "with policy=fbgemm-cuda,w=bf16)");
    cases = std::move(picked);
  }
  info.coverage = pair_coverage(cases);

  // The backend under test.
  std::unique_ptr<tbe::Backend> device_inner, device;  // device may wrap device_inner: after it
  if (args.backend == "cpu") {
    device = tbe::make_reference_backend();
    info.device_is_cpu = true;
  } else {
    try {
      device_inner = tbe::select_backend(tbe::BackendKind::Cuda);
      device = watchdog ? watched(*device_inner, *watchdog) : std::move(device_inner);
    } catch (const tbe::Error& e) {
      info.skip_reason = e.what();
    }
  }
  info.device_present = device != nullptr;
  info.backend = device ? device->name() : "";
  if (device) {
    const std::string name = device->name();  // "cuda:<device name>" or "cpu-reference"
    info.device = name.rfind("cuda:", 0) == 0 ? name.substr(5) : name;
  } else {
    info.device = "no GPU";
  }
  info.threads = omp_get_max_threads();

  RunnerConfig cfg;
  cfg.batch = batch;
  cfg.seed = args.seed;
  cfg.device = device.get();
  cfg.skip_reason = info.device_present ? "" : "no GPU (" + info.skip_reason + ")";
  cfg.save_failures_dir = args.save_failures;
  cfg.save_failures_max = args.save_failures_max;
  Runner runner(cfg);
  info.spec = runner.spec();
  info.sequence_samples = runner.sequence_samples();
  info.vbe_ranks = runner.vbe_ranks();

  if (args.list) {
    print_header(std::cout, info);
    if (args.rows.forward) print_list(std::cout, info, cases);
    if (args.rows.backward) {
      std::cout << "\nBackward rows (--rows backward):\n";
      for (const BackwardRowAxes& a : enumerate_backward_rows())
        std::cout << "  " << backward_row_label(a) << "\n";
    }
    if (args.rows.ikbo) {
      std::cout << "\nIKBO rows (--rows ikbo):\n";
      for (const IkboRowSpec& s : ikbo_row_specs(make_ikbo_setup(args, nullptr).cfg.include_fp32))
        std::cout << "  " << ikbo_label(s) << "\n";
    }
    return 0;
  }

  std::ofstream json_file;
  if (!args.json_path.empty()) {
    json_file.open(args.json_path);
    if (!json_file) throw UsageError("--json: cannot write '" + args.json_path + "'");
  }

  if (args.rows.forward) {
    print_header(std::cout, info);
  } else {
    std::cout << "tbe-verify: device " << info.device
              << (info.device_present ? " (" + info.backend + ")" : " (" + info.skip_reason + ")")
              << ", seed " << args.seed << ", B " << batch << "; sections:"
              << (args.rows.backward ? " backward" : "") << (args.rows.ikbo ? " ikbo" : "")
              << "\n";
  }
  std::cout << std::flush;
  // --full: the large-table rows (E·D >= 2^31, int32 indices) when the device has the memory,
  // first (a few seconds; the only rows that reach 32-bit offset bugs), printed after the others.
  std::vector<LargeTableRow> large;
  if (args.full && (args.rows.forward || args.rows.backward)) {
    LargeTableConfig lcfg;
    lcfg.device = info.device_is_cpu ? nullptr : device.get();
    lcfg.skip_reason = info.device_is_cpu ? "--backend cpu (a device row)" : cfg.skip_reason;
    lcfg.device_free_bytes = lcfg.device ? tbe::cuda_free_bytes() : 0;
    lcfg.seed = args.seed;
    std::cerr << "large table ... " << std::flush;
    large = run_large_table_rows(lcfg);
    std::cerr << "done\n";
    for (const LargeTableRow& r : large) print_fail_lines(fail_lines(r, args.seed));
  }
  SectionSeconds seconds;
  const auto t_forward = std::chrono::steady_clock::now();
  std::vector<CaseResult> results;
  if (!args.rows.forward) cases.clear();
  results.reserve(cases.size());
  Progress progress(std::cerr, cases.size(), isatty(STDERR_FILENO) == 1);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    progress.begin(i, cases[i]);
    results.push_back(runner.run(cases[i]));
    progress.end(i, results.back());
    print_fail_lines(fail_lines(info, results.back()));
  }
  progress.finish();
  if (args.rows.forward) seconds.forward = seconds_since(t_forward);

  info.seconds_forward = seconds.forward;
  info.seconds_generation = runner.generation_seconds();
  if (args.rows.forward) print_results(std::cout, info, results);

  // Backward + exact optimizer rows (tbe/judge/backward_rows.h): their own table and count line.
  std::vector<BackwardRowResult> backward;
  SectionTimes backward_sections;
  int backward_jobs = 1;
  if (args.rows.backward) {
    BackwardRunnerConfig bcfg;
    // Without a GPU the CPU fallback and the oracle run every row on the CPU: B is capped at
    // kCpuBackwardBatch so a laptop run stays in minutes (the GPU rows use the full B), unless
    // --batch asks for a B (e.g. to time the CPU side of a GPU run).
    const bool backward_on_cpu = info.device_is_cpu || !device;
    bcfg.batch = backward_on_cpu && !args.batch ? std::min(batch, kCpuBackwardBatch) : batch;
    bcfg.seed = args.seed;
    // --backend cpu tests this tool: the backward rows then run as CPU self-checks (the reference
    // backend has no kernel routes to count).
    bcfg.device = info.device_is_cpu ? nullptr : device.get();
    bcfg.skip_reason = cfg.skip_reason;
    bcfg.save_failures_dir = args.save_failures;
    bcfg.save_failures_max = args.save_failures_max;
    const auto t_backward = std::chrono::steady_clock::now();
    BackwardRunner brunner(bcfg);
    std::ostringstream replay;
    replay << "tbe-verify --rows backward --batch " << batch << " --seed " << args.seed
           << (args.backend == "cpu" ? " --backend cpu" : "");
    const std::size_t num_rows = enumerate_backward_rows().size();
    std::vector<std::size_t> todo;
    for (std::size_t i : backward_row_schedule())
      if (args.backward_row == 0 || static_cast<std::int64_t>(i) + 1 == args.backward_row)
        todo.push_back(i);
    const int jobs = args.jobs > 0 ? static_cast<int>(args.jobs) : default_backward_jobs();
    backward_jobs = jobs;
    if (jobs > 1 && todo.size() > 1)
      std::cerr << "backward: " << todo.size() << " rows, " << jobs << " at a time\n";
    // Progress in schedule order (rows run `jobs` at a time; each is reported when it and the
    // rows scheduled before it are done); the table below is in row order.
    backward = brunner.run_rows(todo, jobs, [&](const BackwardRowResult& r) {
      std::cerr << "backward [" << r.index + 1 << "/" << num_rows << "] ... "
                << to_string(r.row.verdict) << "\n";
      print_fail_lines(fail_lines(r, replay.str()));
    });
    std::sort(backward.begin(), backward.end(),
              [](const BackwardRowResult& a, const BackwardRowResult& b) { return a.index < b.index; });
    seconds.backward = seconds_since(t_backward);
    backward_sections = brunner.section_times();
    std::ostringstream wl;
    wl << bcfg.workload << " slice: T=" << bcfg.features << ", B=" << bcfg.batch
       << (bcfg.batch != batch ? " (capped without a GPU)" : "") << ", seed " << args.seed;
    std::cout << "\n";
    // A single replayed row keeps the path requirement off (it needs every row).
    if (args.backward_row != 0) std::cout << "(--backward-row " << args.backward_row << " only)\n";
    print_backward_results(std::cout, backward, bcfg.device != nullptr, wl.str(),
                           args.backward_row == 0 ? replay.str() : "");
  }

  // IKBO rows (their own table and count line).
  IkboSetup ik;
  std::vector<IkboRowResult> ikbo_rows;
  if (args.rows.ikbo) {
    const auto t_ikbo = std::chrono::steady_clock::now();
    ik = make_ikbo_setup(args, watchdog.get());
    ikbo_rows = run_ikbo(ik.cfg);
    seconds.ikbo = seconds_since(t_ikbo);
    std::cout << "\n";
    print_ikbo_rows(std::cout, ik.cfg, ikbo_rows);
  }
  if (!large.empty()) {
    std::cout << "\nLarge table (--full: one FP16 table, E=" << kLargeTableRows
              << " D=" << kLargeTableDim << ", E*D >= 2^31, int32 indices):\n";
    for (const LargeTableRow& r : large) {
      std::cout << "  " << r.name << ": " << to_string(r.row.verdict);
      if (!r.row.reason.empty()) std::cout << " (" << r.row.reason << ")";
      std::cout << "\n";
    }
  }

  // Path coverage: every reachable kernel path of each family that ran whole on the device.
  std::vector<FamilyPaths> families;
  if (args.rows.forward) {
    FamilyPaths fp;
    fp.family = PathFamily::Forward;
    fp.checked = info.device_present && !info.device_is_cpu && args.only.empty();
    fp.why_not = !info.device_present ? "no GPU"
                 : info.device_is_cpu ? "--backend cpu"
                                      : "--only filters the matrix";
    for (const CaseResult& r : results)
      for (const RowResult& row : r.rows)
        if (row.target == Target::Device && row.verdict != Verdict::Skipped)
          fp.exercised.insert(row.paths.begin(), row.paths.end());
    families.push_back(std::move(fp));
  }
  if (args.rows.backward) {
    FamilyPaths fp;
    fp.family = PathFamily::Backward;
    fp.checked = info.device_present && !info.device_is_cpu && args.backward_row == 0;
    fp.why_not = !info.device_present ? "no GPU"
                 : info.device_is_cpu ? "--backend cpu"
                                      : "--backward-row runs one row";
    for (const BackwardRowResult& r : backward)
      if (r.row.target == Target::Device && r.row.verdict != Verdict::Skipped)
        fp.exercised.insert(r.row.paths.begin(), r.row.paths.end());
    families.push_back(std::move(fp));
  }
  if (args.rows.ikbo) {
    FamilyPaths fp;
    fp.family = PathFamily::Ikbo;
    fp.checked = ik.cfg.device != nullptr && ik.cfg.device->name() != "cpu-reference";
    fp.why_not = ik.cfg.device ? "--backend cpu" : ik.cfg.skip_reason;
    for (const IkboRowResult& r : ikbo_rows)
      for (const RowResult& row : r.rows)
        if (row.target == Target::Device && row.verdict != Verdict::Skipped)
          fp.exercised.insert(row.paths.begin(), row.paths.end());
    families.push_back(std::move(fp));
  }
  const RowResult coverage = path_coverage_row(families);
  std::cout << "\n";
  print_path_coverage(std::cout, coverage);

  seconds.total = seconds_since(t0);
  info.seconds_total = seconds.total;
  std::cout << "\n";
  print_times(std::cout, args.rows, seconds);
  if (args.rows.forward) std::cout << "  forward: " << runner.section_times().text() << "\n";
  if (args.rows.backward)
    std::cout << "  backward (summed over rows, " << backward_jobs << " at a time): "
              << backward_sections.text() << "\n";

  const Totals totals = count_rows(results);
  const BackwardTotals btotals = count_backward_rows(backward);
  const IkboTotals itotals = count_ikbo_rows(ikbo_rows);
  if (json_file.is_open()) {
    nlohmann::json j = to_json(info, results);
    if (args.rows.backward) j["backward"] = backward_to_json(backward);
    if (args.rows.ikbo) j["ikbo"] = ikbo_rows_json(ik.cfg, ikbo_rows);
    j["totals"] = totals_json(totals, btotals, itotals, seconds);
    j["totals"]["forward"]["sections"] = runner.section_times().to_json();
    j["totals"]["backward"]["sections"] = backward_sections.to_json();
    j["path_coverage"] = path_coverage_json(coverage);
    if (!large.empty()) {
      nlohmann::json lj = nlohmann::json::array();
      for (const LargeTableRow& r : large)
        lj.push_back({{"name", r.name}, {"verdict", to_string(r.row.verdict)},
                      {"reason", r.row.reason}, {"seconds", r.row.seconds}, {"paths", r.row.paths}});
      j["large_table"] = lj;
    }
    json_file << j.dump(2) << "\n";
    if (!json_file) throw std::runtime_error("--json: writing '" + args.json_path + "' failed");
  }
  bool large_failed = false;
  for (const LargeTableRow& r : large) large_failed = large_failed || r.row.verdict == Verdict::Failed;
  if (totals.failed != 0 || btotals.failed != 0 || itotals.failed != 0 ||
      coverage.verdict == Verdict::Failed || large_failed)
    return 1;
  if (args.require_gpu &&
      (info.device_is_cpu || totals.device_passed + btotals.device_passed == 0)) {
    std::cerr << "tbe-verify: --require-gpu: no GPU row was verified ("
              << (info.device_present ? info.backend : info.skip_reason) << ")\n";
    return 4;
  }
  return 0;
}

}  // namespace

/// `tbe-verify replay DIR`: the reference and, when a GPU is visible, the CUDA backends (TBE and
/// IKBO).
int replay_with_gpu(const std::string& dir) {
  std::unique_ptr<tbe::Backend> gpu;
  std::unique_ptr<tbe::ikbo::IkboBackend> gpu_ikbo;
  tbe::judge::ReplayDevices devices;
  try {
    gpu = tbe::select_backend(tbe::BackendKind::Cuda);
    gpu_ikbo = tbe::select_ikbo_backend(tbe::BackendKind::Cuda);
  } catch (const tbe::Error& e) {
    devices.skip_reason = e.what();
  }
  devices.tbe = gpu.get();
  devices.ikbo = gpu_ikbo.get();
  return tbe::judge::replay_case(dir, std::cout, devices);
}

int main(int argc, char** argv) {
  tbe::cli::retain_freed_memory();
  try {
    const tbe::cli::Parsed<VerifyCommand> parsed = parse_verify_args(argc, argv);
    if (const tbe::cli::Exit* exit = std::get_if<tbe::cli::Exit>(&parsed))
      return tbe::cli::finish(*exit);
    const VerifyCommand& cmd = std::get<VerifyCommand>(parsed);
    switch (cmd.kind) {
      case VerifyCommand::Kind::Replay:
        return replay_with_gpu(cmd.case_dirs.front());
      case VerifyCommand::Kind::Check:
        return tbe::judge::check_cases(cmd.case_dirs, std::cout);
      case VerifyCommand::Kind::Run:
        break;
    }
    return run(cmd.args);
  } catch (const UsageError& e) {
    std::cerr << "tbe-verify: " << e.what() << "\n(see tbe-verify --help)\n";
    return tbe::cli::kUsageError;
  } catch (const std::exception& e) {
    std::cerr << "tbe-verify: error: " << e.what() << "\n";
    return 3;
  }
}
