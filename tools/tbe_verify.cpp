// tbe-verify: the verification matrix of the TBE forward (precision policy x weighted x index
// width x pooling x bounds-check mode x VBE) on the seed-large workload, the CUDA backend against
// the FP64 reference through the enclosure oracle; then the IKBO rows (LCE and attention on the
// IKBO backend, judged by the IKBO oracle). With no GPU it says so and runs the reference
// self-checks instead, reporting every GPU row as skipped. See --help.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tbe/select_backend.h"
#include "tbe/errors.h"
#include "verify/backward_rows.h"
#include "verify/case_commands.h"
#include "verify/ikbo_rows.h"
#include "verify/matrix.h"
#include "verify/report.h"
#include "verify/runner.h"

namespace {

using namespace tbe::verify;

constexpr std::int64_t kDefaultBatch = 8192;
constexpr std::int64_t kFullBatch = 131072;
constexpr std::int64_t kMaxBatch = 1048576;
constexpr std::int64_t kCpuBackwardBatch = 1024;  // backward rows' B when they run on the CPU  // T·B·L stays far below 2^31 for int32 indices
constexpr int kUsageError = 2;

const char* const kHelp = R"(usage: tbe-verify [options]
       tbe-verify replay CASE_DIR
       tbe-verify check CASE_DIR

Runs the TBE forward verification matrix on the seed-large workload (T=32, E=100000, D=128, L=20,
zipf 1.15) scaled to B = 8192: the CUDA backend against the FP64 reference, judged by the
enclosure oracle, with warning counts and errors compared. With no GPU it says so, reports every
GPU row as SKIPPED and runs the CPU self-checks (oracle vs reference and policy emulations,
reference invariants) on the same workload instead.

Axes (use these names in --only):
  policy   seed-default | fbgemm-cuda       w   fp32 | fp16 | bf16     out  fp32 | fp16 | bf16
  weighted 0 | 1       index int32 | int64   pooling sum | mean | none
  bounds   none | warning | ignore | fatal  vbe 0 | 1
  (policy, w and out form 8 precision levels; weighted=1 with pooling=none is not applicable)

Options:
  --batch B          batch size B (1 .. 1048576; default 8192)
  --full             seed-large at its full B = 131072 (--batch overrides)
  --seed S           workload seed, an unsigned integer (default 1)
  --design D         pairwise (default: every pair of axis values at least once) or full
  --only FILTER      run only cases matching axis=value[|value][,axis=value...], e.g.
                     --only policy=fbgemm-cuda,w=fp16,pooling=mean. Filters the design; if no
                     case of the design matches, the full product is filtered instead.
  --json FILE        write every case (axes, verdict, worst element, warnings, paths, seconds)
  --backend K        cuda (default) or cpu: cpu runs the GPU rows against the CPU reference
                     backend (tests this tool; it does not verify a GPU)
  --require-gpu      exit 4 (after the run) when no GPU was verified: for CI gates on GPU
                     runners, so a machine without a device cannot go green
  --list             print the cases of the design (after --only) and exit
  --save-failures DIR
                     write each failing case (inputs + the backend's outputs) to DIR/<case label>
                     as a case folder (docs/case-files.md; default ./tbe-verify-failures)
  --save-failures-max N
                     write at most N failing cases (default 4; 0 writes none): seed-large
                     tables are large (up to 1.6 GB per case for fp32)
  --rows LIST        sections to run, comma-separated (default all):
                     forward   the TBE forward matrix above
                     backward  backward + exact optimizer rows (optimizer x weight decay x
                               rounding x route x deterministic, 40 rows) on a seed-large slice
                               (T=8, same B; at most 1024 without a GPU); every kernel
                               path must be exercised (docs/backward.md)
                     ikbo      IKBO rows (op lce | attention x dtype fp16 | bf16 (+ fp32 on the
                               CPU reference) x map sorted | unsorted | users-without-candidates
                               | one-user | u-eq-b), on ikbo-lce at B = 16 and ikbo-fa at B = 32,
                               U = 8, S = 128 (docs/ikbo.md); the IKBO backend follows --backend
                     all       the three
  --backward-row N   run only backward row N (1 .. 40; the replay command of a failing row)
  --ikbo-rounding R  LCE rounding policy of the IKBO rows: round-once (default), published or
                     user-rounded (docs/ikbo.md)
  --help, -h         this text

Case folders (docs/case-files.md):
  replay CASE_DIR    rerun the case on the reference and on CUDA (both bounds-check strategies)
                     and judge every output through the oracle, with warnings and error
                     agreement; with no GPU the GPU side is reported as skipped. Exit 0 when the
                     CPU side is fine and the GPU side passed or was skipped.
  check CASE_DIR     judge the outputs recorded in the case (another implementation's, or a
                     failing backend's) through the oracle, no GPU needed. Exit 0 when the
                     verdict equals the case's expect.verdict (default pass), 1 otherwise.

Exit status: 0 when nothing failed (GPU rows skipped without a GPU count as skipped, never as
passed), 1 when a case failed, 2 for a bad command line, 3 for an error that stopped the run,
4 with --require-gpu when no GPU row was verified.
)";

struct Args {
  std::optional<std::int64_t> batch;
  bool full = false;
  std::uint64_t seed = 1;
  Design design = Design::Pairwise;
  std::string only;
  std::string json_path;
  bool require_gpu = false;  ///< exit 4 when no GPU row was verified
  std::string backend = "cuda";
  std::string save_failures = "tbe-verify-failures";
  std::int64_t save_failures_max = 4;
  bool list = false;
  bool help = false;
  /// Sections of the run (--rows): forward matrix, backward rows, IKBO rows.
  bool forward_rows = true;
  bool backward_rows = true;
  bool ikbo_rows = true;
  std::int64_t backward_row = 0;  ///< --backward-row N (1-based): only that backward row
  tbe::ikbo::LceRounding ikbo_rounding = tbe::ikbo::LceRounding::RoundOnce;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::uint64_t parse_unsigned(const std::string& flag, const std::string& text,
                             const std::string& allowed) {
  std::size_t used = 0;
  unsigned long long v = 0;
  bool ok = !text.empty() && text[0] != '-' && text[0] != '+';
  if (ok) {
    try {
      v = std::stoull(text, &used, 10);
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || used != text.size()) throw UsageError(flag + ": '" + text + "' is not " + allowed);
  return v;
}

Args parse_args(int argc, char** argv) {
  Args a;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (flag.rfind("--", 0) == 0) {
      const std::size_t eq = flag.find('=');
      if (eq != std::string::npos) {
        inline_value = flag.substr(eq + 1);
        flag = flag.substr(0, eq);
      }
    }
    auto value = [&](const char* what) -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw UsageError(flag + ": missing value (expected " + what + ")");
      return args[++i];
    };
    auto no_value = [&] {
      if (inline_value) throw UsageError(flag + ": takes no value (got '" + *inline_value + "')");
    };
    if (flag == "--help" || flag == "-h") {
      no_value();
      a.help = true;
    } else if (flag == "--full") {
      no_value();
      a.full = true;
    } else if (flag == "--list") {
      no_value();
      a.list = true;
    } else if (flag == "--batch") {
      const std::string v = value("a batch size B");
      const std::string allowed =
          "a batch size (allowed: an integer 1 .. " + std::to_string(kMaxBatch) + ")";
      const std::uint64_t b = parse_unsigned("--batch", v, allowed);
      if (b < 1 || b > static_cast<std::uint64_t>(kMaxBatch))
        throw UsageError("--batch: '" + v + "' is not " + allowed);
      a.batch = static_cast<std::int64_t>(b);
    } else if (flag == "--seed") {
      a.seed =
          parse_unsigned("--seed", value("a seed"), "a seed (allowed: an unsigned 64-bit integer)");
    } else if (flag == "--design") {
      const std::string v = value("pairwise or full");
      try {
        a.design = parse_design(v);
      } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--design: ") + e.what());
      }
    } else if (flag == "--only") {
      a.only = value("axis=value[,axis=value...]");
      try {
        (void)CaseFilter::parse(a.only);
      } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--only: ") + e.what());
      }
    } else if (flag == "--json") {
      a.json_path = value("a file name");
      if (a.json_path.empty()) throw UsageError("--json: the file name is empty");
    } else if (flag == "--rows") {
      const std::string v = value("a list of sections");
      a.forward_rows = a.backward_rows = a.ikbo_rows = false;
      std::size_t start = 0;
      while (true) {
        const std::size_t comma = v.find(',', start);
        const std::string part =
            v.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (part == "forward") a.forward_rows = true;
        else if (part == "backward") a.backward_rows = true;
        else if (part == "ikbo") a.ikbo_rows = true;
        else if (part == "all") a.forward_rows = a.backward_rows = a.ikbo_rows = true;
        else
          throw UsageError("--rows: '" + part +
                           "' is not a section (allowed: forward, backward, ikbo, all)");
        if (comma == std::string::npos) break;
        start = comma + 1;
      }
    } else if (flag == "--ikbo-rounding") {
      const std::string v = value("round-once, published or user-rounded");
      try {
        a.ikbo_rounding = tbe::ikbo::parse_lce_rounding(v, "--ikbo-rounding");
      } catch (const tbe::InvalidArgument& e) {
        throw UsageError(e.what());
      }
    } else if (flag == "--backward-row") {
      a.backward_row = static_cast<std::int64_t>(parse_unsigned(
          "--backward-row", value("a row number"), "a backward row number (allowed: 1 .. 40)"));
      if (a.backward_row < 1 || a.backward_row > 40)
        throw UsageError("--backward-row: " + std::to_string(a.backward_row) +
                         " is not a backward row number (allowed: 1 .. 40)");
    } else if (flag == "--require-gpu") {
      a.require_gpu = true;
    } else if (flag == "--backend") {
      a.backend = value("cuda or cpu");
      if (a.backend != "cuda" && a.backend != "cpu")
        throw UsageError("--backend: '" + a.backend + "' is not a backend (allowed: cuda, cpu)");
    } else if (flag == "--save-failures") {
      a.save_failures = value("a folder");
      if (a.save_failures.empty()) throw UsageError("--save-failures: the folder name is empty");
    } else if (flag == "--save-failures-max") {
      a.save_failures_max = static_cast<std::int64_t>(std::min<std::uint64_t>(
          parse_unsigned("--save-failures-max", value("a count"),
                         "a count (allowed: an unsigned integer)"),
          1u << 30));
    } else {
      throw UsageError("unknown argument '" + args[i] +
                       "' (allowed: --batch B, --full, --seed S, --design pairwise|full, "
                       "--only FILTER, --json FILE, --backend cuda|cpu, --require-gpu, --save-failures DIR, "
                       "--save-failures-max N, --list, --rows LIST, --ikbo-rounding R, "
                       "--help; subcommands: replay CASE_DIR, "
                       "check CASE_DIR)");
    }
  }
  if (!a.forward_rows && !a.only.empty())
    throw UsageError("--only filters the TBE forward matrix; --rows must include forward");
  return a;
}

/// The IKBO rows' configuration and backend (the reference for --backend cpu; else the CUDA IKBO
/// backend, or none with the reason when this build or machine has no GPU).
struct IkboSetup {
  std::unique_ptr<tbe::ikbo::IkboBackend> backend;
  IkboConfig cfg;
};
IkboSetup make_ikbo_setup(const Args& args) {
  IkboSetup s;
  if (args.backend == "cpu") {
    s.backend = tbe::select_ikbo_backend(tbe::BackendKind::Cpu);
  } else {
    try {
      s.backend = tbe::select_ikbo_backend(tbe::BackendKind::Cuda);
    } catch (const tbe::Error& e) {
      s.cfg.skip_reason = std::string("no GPU (") + e.what() + ")";
    }
  }
  s.cfg.device = s.backend.get();
  s.cfg.seed = args.seed;
  s.cfg.lce_rounding = args.ikbo_rounding;
  // fp32 rows where the CPU reference runs them (it supports fp32 storage with FP64 accumulation).
  s.cfg.include_fp32 = !s.backend || s.backend->name() == "cpu-reference";
  return s;
}

/// Runs and prints the IKBO rows; returns them.
std::vector<IkboRowResult> run_ikbo(const IkboConfig& cfg) {
  std::vector<IkboRowResult> out;
  const std::vector<IkboRowSpec> specs = ikbo_row_specs(cfg.include_fp32);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::cerr << "ikbo [" << i + 1 << "/" << specs.size() << "] " << ikbo_label(specs[i])
              << " ... " << std::flush;
    out.push_back(run_ikbo_row(cfg, specs[i]));
    std::cerr << to_string(out.back().verdict()) << "\n";
  }
  return out;
}

int run(const Args& args) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t batch = args.batch ? *args.batch : (args.full ? kFullBatch : kDefaultBatch);
  if (!args.forward_rows && !args.backward_rows) {  // --rows ikbo
    IkboSetup ik = make_ikbo_setup(args);
    if (args.list) {
      for (const IkboRowSpec& s : ikbo_row_specs(ik.cfg.include_fp32))
        std::cout << ikbo_label(s) << "\n";
      return 0;
    }
    const std::vector<IkboRowResult> rows = run_ikbo(ik.cfg);
    print_ikbo_rows(std::cout, ik.cfg, rows);
    if (!args.json_path.empty()) {
      std::ofstream f(args.json_path);
      if (!f) throw UsageError("--json: cannot write '" + args.json_path + "'");
      nlohmann::json j;
      j["tool"] = "tbe-verify";
      j["seed"] = args.seed;
      j["ikbo"] = ikbo_rows_json(ik.cfg, rows);
      f << j.dump(2) << "\n";
      if (!f) throw std::runtime_error("--json: writing '" + args.json_path + "' failed");
    }
    const IkboTotals t = count_ikbo_rows(rows);
    if (t.failed != 0) return 1;
    if (args.require_gpu && !(ik.backend && ik.backend->name() != "cpu-reference")) {
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
  std::unique_ptr<tbe::Backend> device;
  if (args.backend == "cpu") {
    device = tbe::make_reference_backend();
    info.device_is_cpu = true;
  } else {
    try {
      device = tbe::select_backend(tbe::BackendKind::Cuda);
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
    if (args.forward_rows) print_list(std::cout, info, cases);
    if (args.backward_rows) {
      std::cout << "\nBackward rows (--rows backward):\n";
      for (const BackwardRowAxes& a : enumerate_backward_rows())
        std::cout << "  " << backward_row_label(a) << "\n";
    }
    if (args.ikbo_rows) {
      std::cout << "\nIKBO rows (--rows ikbo):\n";
      for (const IkboRowSpec& s : ikbo_row_specs(make_ikbo_setup(args).cfg.include_fp32))
        std::cout << "  " << ikbo_label(s) << "\n";
    }
    return 0;
  }

  std::ofstream json_file;
  if (!args.json_path.empty()) {
    json_file.open(args.json_path);
    if (!json_file) throw UsageError("--json: cannot write '" + args.json_path + "'");
  }

  if (args.forward_rows) {
    print_header(std::cout, info);
  } else {
    std::cout << "tbe-verify: device " << info.device
              << (info.device_present ? " (" + info.backend + ")" : " (" + info.skip_reason + ")")
              << ", seed " << args.seed << ", B " << batch << "; sections:"
              << (args.backward_rows ? " backward" : "") << (args.ikbo_rows ? " ikbo" : "")
              << "\n";
  }
  std::cout << std::flush;
  std::vector<CaseResult> results;
  if (!args.forward_rows) cases.clear();
  results.reserve(cases.size());
  Progress progress(std::cerr, cases.size(), isatty(STDERR_FILENO) == 1);
  for (std::size_t i = 0; i < cases.size(); ++i) {
    progress.begin(i, cases[i]);
    results.push_back(runner.run(cases[i]));
    progress.end(i, results.back());
  }
  progress.finish();

  info.seconds_generation = runner.generation_seconds();
  if (args.forward_rows) print_results(std::cout, info, results);

  // Backward + exact optimizer rows (verify/backward_rows.h): their own table and count line.
  std::vector<BackwardRowResult> backward;
  if (args.backward_rows) {
    BackwardRunnerConfig bcfg;
    // Without a GPU the CPU fallback and the oracle run every row on the CPU: B is capped at
    // kCpuBackwardBatch so a laptop run stays in minutes (the GPU rows use the full B).
    const bool backward_on_cpu = info.device_is_cpu || !device;
    bcfg.batch = backward_on_cpu ? std::min(batch, kCpuBackwardBatch) : batch;
    bcfg.seed = args.seed;
    // --backend cpu tests this tool: the backward rows then run as CPU self-checks (the reference
    // backend has no kernel routes to count).
    bcfg.device = info.device_is_cpu ? nullptr : device.get();
    bcfg.skip_reason = cfg.skip_reason;
    BackwardRunner brunner(bcfg);
    const std::vector<BackwardRowAxes> rows = enumerate_backward_rows();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (args.backward_row != 0 && static_cast<std::int64_t>(i) + 1 != args.backward_row)
        continue;
      std::cerr << "backward [" << i + 1 << "/" << rows.size() << "] ... " << std::flush;
      backward.push_back(brunner.run(rows[i], i));
      std::cerr << to_string(backward.back().row.verdict) << "\n";
    }
    std::ostringstream wl, replay;
    wl << bcfg.workload << " slice: T=" << bcfg.features << ", B=" << bcfg.batch
       << (bcfg.batch != batch ? " (capped without a GPU)" : "") << ", seed " << args.seed;
    replay << "tbe-verify --rows backward --batch " << batch << " --seed " << args.seed
           << (args.backend == "cpu" ? " --backend cpu" : "");
    std::cout << "\n";
    // A single replayed row keeps the path requirement off (it needs every row).
    if (args.backward_row != 0) std::cout << "(--backward-row " << args.backward_row << " only)\n";
    print_backward_results(std::cout, backward, bcfg.device != nullptr, wl.str(),
                           args.backward_row == 0 ? replay.str() : "");
  }

  // IKBO rows (their own table and count line).
  IkboSetup ik;
  std::vector<IkboRowResult> ikbo_rows;
  if (args.ikbo_rows) {
    ik = make_ikbo_setup(args);
    ikbo_rows = run_ikbo(ik.cfg);
    std::cout << "\n";
    print_ikbo_rows(std::cout, ik.cfg, ikbo_rows);
  }
  info.seconds_total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  const Totals totals = count_rows(results);
  const BackwardTotals btotals = count_backward_rows(backward);
  const IkboTotals itotals = count_ikbo_rows(ikbo_rows);
  if (json_file.is_open()) {
    nlohmann::json j = to_json(info, results);
    if (args.backward_rows) j["backward"] = backward_to_json(backward);
    if (args.ikbo_rows) j["ikbo"] = ikbo_rows_json(ik.cfg, ikbo_rows);
    // Every section's counts ("summary" above counts the forward matrix only).
    auto section = [](std::int64_t p, std::int64_t f, std::int64_t s) {
      return nlohmann::json{{"passed", p}, {"failed", f}, {"skipped", s}};
    };
    j["totals"] = {
        {"forward", section(totals.passed, totals.failed, totals.skipped)},
        {"backward", section(btotals.passed, btotals.failed, btotals.skipped)},
        {"ikbo", section(itotals.passed, itotals.failed, itotals.skipped)},
        {"all", section(totals.passed + btotals.passed + itotals.passed,
                        totals.failed + btotals.failed + itotals.failed,
                        totals.skipped + btotals.skipped + itotals.skipped)}};
    json_file << j.dump(2) << "\n";
    if (!json_file) throw std::runtime_error("--json: writing '" + args.json_path + "' failed");
  }
  if (totals.failed != 0 || btotals.failed != 0 || itotals.failed != 0) return 1;
  if (args.require_gpu &&
      (info.device_is_cpu || totals.device_passed + btotals.device_passed == 0)) {
    std::cerr << "tbe-verify: --require-gpu: no GPU row was verified ("
              << (info.device_present ? info.backend : info.skip_reason) << ")\n";
    return 4;
  }
  return 0;
}

}  // namespace

// `tbe-verify replay DIR` / `tbe-verify check DIR`.
int run_case_command(const std::string& cmd, const std::vector<std::string>& rest) {
  if (rest.size() == 1 && (rest[0] == "--help" || rest[0] == "-h")) {
    std::cout << kHelp;
    return 0;
  }
  if (rest.size() != 1 || rest[0].empty() || rest[0].rfind("--", 0) == 0)
    throw UsageError(cmd + ": expected exactly one argument, the case folder (got " +
                     std::to_string(rest.size()) + ")");
  if (cmd == "check") return tbe::verify::check_case(rest[0], std::cout);
  return tbe::verify::replay_case(rest[0], std::cout);
}

int main(int argc, char** argv) {
  try {
    if (argc >= 2 && (std::string(argv[1]) == "replay" || std::string(argv[1]) == "check"))
      return run_case_command(argv[1], std::vector<std::string>(argv + 2, argv + argc));
    const Args args = parse_args(argc, argv);
    if (args.help) {
      std::cout << kHelp;
      return 0;
    }
    return run(args);
  } catch (const UsageError& e) {
    std::cerr << "tbe-verify: " << e.what() << "\n(see tbe-verify --help)\n";
    return kUsageError;
  } catch (const std::exception& e) {
    std::cerr << "tbe-verify: error: " << e.what() << "\n";
    return 3;
  }
}
