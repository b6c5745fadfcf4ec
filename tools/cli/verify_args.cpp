// tbe-verify's command line on CLI11 (see verify_args.h).
#include "cli/verify_args.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "cli/cli_parse.h"

namespace tbe::verify {
using judge::CaseFilter;
using judge::parse_design;

namespace {

constexpr const char* kDescription =
    "Runs the TBE forward verification matrix on bases derived from seed-large (E=100000, L=20,\n"
    "zipf 1.15, B = 8192): per weight type 12 features over 10 tables with D in {1, 3, 33, 127,\n"
    "128, 264, 1000, 1025, 2047, 2048}, shared and permuted tables, mixed bag lengths\n"
    "(docs/workloads.md): the CUDA backend against the FP64 reference, judged by\n"
    "the enclosure oracle, with warning counts and errors compared. With no GPU it says so, reports\n"
    "every GPU row as SKIPPED and runs the CPU self-checks (oracle vs reference and policy\n"
    "emulations, reference invariants) on the same workload instead. Then the backward rows and\n"
    "the IKBO rows (--rows).\n";

constexpr const char* kFooter =
    "Axes (use these names in --only):\n"
    "  policy   seed-default | fbgemm-cuda       w   fp32 | fp16 | bf16     out  fp32 | fp16 | bf16\n"
    "  weighted 0 | 1       index int32 | int64   pooling sum | mean | none\n"
    "  bounds   none | warning | ignore | fatal  vbe 0 | 1\n"
    "  (policy, w and out form 8 precision levels; weighted=1 with pooling=none is not applicable)\n"
    "\n"
    "Exit status: 0 when nothing failed (GPU rows skipped without a GPU count as skipped, never as\n"
    "passed), 1 when a case failed, 2 for a bad command line, 3 for an error that stopped the run,\n"
    "4 with --require-gpu when no GPU row was verified.";

/// The run's options on `app` (the root), stored in `a`.
void add_run_options(CLI::App& app, VerifyArgs& a) {
  cli::add_decimal(app, "--batch", "B", a.batch, std::int64_t{1}, kMaxVerifyBatch,
                   "batch size B (default 8192; without a GPU the backward rows use 1024 unless --batch is given)");
  app.add_flag("--full", a.full, "seed-large at its full B = 131072 (--batch overrides)");
  cli::add_decimal(app, "--seed", "S", a.seed, std::uint64_t{0},
                   std::numeric_limits<std::uint64_t>::max(),
                   "workload seed, an unsigned 64-bit integer (default 1)");
  cli::add_parsed(app, "--design", a.design, parse_design,
                  "pairwise (default: every pair of axis values at least once) or full")
      ->type_name("D");
  app.add_option("--only", a.only,
                 "run only cases matching axis=value[|value][,axis=value...], e.g.\n"
                 "--only policy=fbgemm-cuda,w=fp16,pooling=mean. Filters the design;\n"
                 "if no case of the design matches, the full product is filtered\n"
                 "instead.")
      ->type_name("FILTER")
      ->check(cli::parsed_by("--only", CaseFilter::parse));
  app.add_option("--json", a.json_path,
                 "write every case (axes, verdict, worst element, warnings, paths,\n"
                 "seconds) and each section's totals and seconds")
      ->type_name("FILE")
      ->check(cli::non_empty("the file name"));
  app.add_option("--backend", a.backend,
                 "cuda (default) or cpu: cpu runs the GPU rows against the CPU\n"
                 "reference backend (tests this tool; it does not verify a GPU)")
      ->type_name("K")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_flag("--require-gpu", a.require_gpu,
               "exit 4 (after the run) when no GPU was verified: for CI gates on\n"
               "GPU runners, so a machine without a device cannot go green");
  app.add_flag("--list", a.list, "print the cases of the design (after --only) and exit");
  app.add_option("--save-failures", a.save_failures,
                 "write each failing case (inputs + the backend's outputs) to\n"
                 "DIR/<case label> as a case folder (docs/case-files.md; default\n"
                 "./tbe-verify-failures)")
      ->type_name("DIR")
      ->check(cli::non_empty("the folder name"));
  cli::add_parsed(
         app, "--save-failures-max", a.save_failures_max,
         [](const std::string& text) {  // any unsigned count; above 2^30 it is clamped
           const std::uint64_t n = cli::parse_decimal(text, std::uint64_t{0},
                                                      std::numeric_limits<std::uint64_t>::max());
           return static_cast<std::int64_t>(std::min<std::uint64_t>(n, 1u << 30));
         },
         "write at most N failing cases (default 4; 0 writes none):\n"
         "seed-large tables are large (up to 1.6 GB per case for fp32)")
      ->type_name("N");
  cli::add_parsed(app, "--rows", a.rows, parse_sections,
                  "sections to run, comma-separated (default all):\n"
                  "forward   the TBE forward matrix above\n"
                  "backward  backward + exact optimizer rows (optimizer x weight\n"
                  "          decay x rounding x route x deterministic, 40 rows) on\n"
                  "          a seed-large slice (T=8, same B; at most 1024 without\n"
                  "          a GPU), then 8 small-table histogram rows; every\n"
                  "          kernel path must be exercised\n"
                  "          (docs/backward.md)\n"
                  "ikbo      IKBO rows (op lce | attention x dtype fp16 | bf16\n"
                  "          (+ fp32 on the CPU reference) x map sorted | unsorted\n"
                  "          | users-without-candidates | one-user | u-eq-b), on\n"
                  "          ikbo-lce at B = 16 and ikbo-fa at B = 32, U = 8,\n"
                  "          S = 320 (docs/ikbo.md); the IKBO backend follows\n"
                  "          --backend\n"
                  "all       the three")
      ->type_name("LIST");
  cli::add_decimal(app, "--backward-row", "N", a.backward_row, std::int64_t{1}, std::int64_t{48},
                   "run only backward row N (the replay command of a failing row)");
  app.add_option("--call-timeout", a.call_timeout,
                 "a device backend call running longer than S seconds\n"
                 "fails the run as hung (exit 1, a fail line naming the\n"
                 "call; default 30, far above any healthy call; 0: off,\n"
                 "e.g. under compute-sanitizer)")
      ->type_name("S")
      ->check(CLI::Range(0.0, 86400.0));
  cli::add_decimal(app, "--jobs", "N", a.jobs, std::int64_t{1}, std::int64_t{64},
                   "backward rows judged at once on host threads (default: OpenMP's thread\n"
                   "count / 5, 1 to 4; the device's calls run one at a time; the results do\n"
                   "not depend on it)");
  cli::add_parsed(
         app, "--ikbo-rounding", a.ikbo_rounding,
         [](const std::string& s) { return tbe::ikbo::parse_lce_rounding(s, "--ikbo-rounding"); },
         "LCE rounding policy of the IKBO rows: round-once (default),\n"
         "published or user-rounded (docs/ikbo.md)")
      ->type_name("R");
}

/// `replay` / `check` on `app`, each with its required CASE_DIR(s) stored in `dirs` (`several`:
/// the help says folders).
CLI::App* add_case_command(CLI::App& app, const char* name, const char* description,
                           std::vector<std::string>& dirs, bool several) {
  CLI::App* sub = app.add_subcommand(name, description);
  sub->add_option("CASE_DIR", dirs,
                  several ? "the case folders (docs/case-files.md), judged in order"
                          : "the case folder (docs/case-files.md)")
      ->required()
      ->expected(-1)  // CLI11: at least one (replay: exactly one, checked after parsing)
      ->check(cli::non_empty("the case folder name"));
  return sub;
}

}  // namespace

Sections parse_sections(const std::string& text) {
  Sections s{false, false, false};
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = text.find(',', start);
    const std::string part =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (part == "forward") s.forward = true;
    else if (part == "backward") s.backward = true;
    else if (part == "ikbo") s.ikbo = true;
    else if (part == "all") s = Sections{};
    else
      throw std::invalid_argument("'" + part +
                                  "' is not a section (allowed: forward, backward, ikbo, all)");
    if (comma == std::string::npos) return s;
    start = comma + 1;
  }
}

cli::Parsed<VerifyCommand> parse_verify_args(int argc, const char* const* argv) {
  VerifyCommand cmd;
  CLI::App app(kDescription, "tbe-verify");
  cli::set_conventions(app);
  add_run_options(app, cmd.args);
  CLI::App* replay = add_case_command(
      app, "replay",
      "rerun the case (any operator: forward, backward, ikbo-lce,\n"
      "ikbo-attention) on the reference and on CUDA (forward: both\n"
      "bounds-check strategies) and judge every output through the oracle,\n"
      "with warnings and error agreement; with no GPU the GPU side is\n"
      "reported as skipped. Exit 0 when the CPU side is fine and the GPU\n"
      "side passed or was skipped.",
      cmd.case_dirs, false);
  CLI::App* check = add_case_command(
      app, "check",
      "judge the outputs recorded in each case (any operator; another\n"
      "implementation's, or a failing backend's) through the oracle, no GPU\n"
      "needed. Exit 0 when every verdict equals its case's expect.verdict\n"
      "(default pass), 1 when one differs, 3 when a case cannot be read or\n"
      "judged (e.g. it records no outputs: use replay).",
      cmd.case_dirs, true);
  app.footer(kFooter);  // after the subcommands, which would inherit it
  app.require_subcommand(0, 1);
  if (std::optional<cli::Exit> exit = cli::parse(app, argc, argv)) return *exit;

  if (replay->parsed() || check->parsed()) {
    cmd.kind = replay->parsed() ? VerifyCommand::Kind::Replay : VerifyCommand::Kind::Check;
    for (const CLI::Option* o : app.get_options())
      if (o->count() > 0)
        return cli::usage_error(app, std::string(replay->parsed() ? "replay" : "check") +
                                         " takes only CASE_DIR (got " + o->get_name() + ")");
    if (cmd.kind == VerifyCommand::Kind::Replay && cmd.case_dirs.size() != 1)
      return cli::usage_error(app, "replay takes exactly one CASE_DIR (got " +
                                       std::to_string(cmd.case_dirs.size()) + ")");
    return cmd;
  }
  if (!cmd.args.rows.forward && !cmd.args.only.empty())
    return cli::usage_error(app,
                            "--only filters the TBE forward matrix; --rows must include forward");
  return cmd;
}

}  // namespace tbe::verify
