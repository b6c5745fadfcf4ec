// tbe-mutate's command line (mutate_args.h).
#include "mutate/mutate_args.h"

#include <cmath>
#include <exception>
#include <filesystem>
#include <sstream>
#include <string>

#include "cli/cli_parse.h"
#include "tbe/cuda/mutation.h"

namespace tbe::mutate {
namespace {

const char* const kDescription =
    "Mutation harness of the CUDA backend (docs/mutation.md): runs the main job (tbe-verify\n"
    "--require-gpu) of a mutation build (preset `mutation`, -DTBE_MUTATION=ON) once without a\n"
    "fault (the baseline, which must pass) and once per seeded fault (TBE_MUTANT=<name>), each\n"
    "stopped at its first failure or its budget, optionally also the GPU tests (test_optimized),\n"
    "and prints the kill table: which check killed each fault, when, the case folder and the\n"
    "replay command. Logs go to DIR/<fault>.log, case folders to DIR/<fault>/ (--cases).";

const char* const kFooter =
    "Exit status: 0 when the baseline passed and every fault was killed, 1 when a fault survived\n"
    "(or was not run: --total-budget), 2 for a bad command line, 3 when the baseline failed, a\n"
    "binary is not a mutation build, or a child could not be run.";

CLI::Validator positive_seconds() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::size_t used = 0;
        double x = 0;
        try {
          x = std::stod(text, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        if (text.empty() || used != text.size() || !(x > 0) || !std::isfinite(x))
          return "'" + text + "' is not a positive number of seconds";
        return "";
      },
      "");
}

/// The first of `candidates` that exists, else the first.
std::string first_existing(const std::vector<std::filesystem::path>& candidates) {
  for (const std::filesystem::path& p : candidates)
    if (std::filesystem::exists(p)) return p.string();
  return candidates.front().string();
}

}  // namespace

cli::Parsed<MutateOptions> parse_mutate_args(int argc, const char* const* argv) {
  MutateOptions o;
  const std::filesystem::path dir =
      argc > 0 ? std::filesystem::path(argv[0]).parent_path() : std::filesystem::path();
  const std::filesystem::path here = dir.empty() ? std::filesystem::path(".") : dir;
  o.verify = first_existing({here / "tbe-verify", here / ".." / "tools" / "tbe-verify"});
  o.tests = first_existing({here / ".." / "tests" / "test_optimized", here / "test_optimized"});

  CLI::App app(kDescription, "tbe-mutate");
  cli::set_conventions(app);
  app.footer(kFooter);
  app.set_help_flag("-h,--help", "this text");
  app.get_formatter()->column_width(24);
  app.add_flag("--list", o.list, "print the fault catalogue (name, where, what) and exit");
  std::vector<std::string> faults;
  app.add_option("--fault", faults,
                 "run only these faults (repeat the flag or separate names by commas; default: "
                 "every fault of --list)")
      ->type_name("NAME")
      ->delimiter(',')
      ->take_all()
      ->check(cli::parsed_by("--fault", [](const std::string& n) { return tbe::cuda::parse_fault(n); }));
  app.add_option("--verify", o.verify, "the mutation build's tbe-verify (default: next to tbe-mutate)")
      ->type_name("PATH")
      ->check(cli::non_empty("the path"));
  app.add_option("--tests", o.tests,
                 "the mutation build's test_optimized (default: <build>/tests/test_optimized)")
      ->type_name("PATH")
      ->check(cli::non_empty("the path"));
  app.add_flag("--with-tests", o.with_tests, "also run the GPU tests per fault");
  app.add_option("--budget", o.budget,
                 "seconds per fault for the main job, all its sections (default 60): not killed "
                 "within it = survived")
      ->type_name("S")
      ->check(positive_seconds());
  app.add_option("--tests-budget", o.tests_budget, "seconds per fault for the tests (default 120)")
      ->type_name("S")
      ->check(positive_seconds());
  app.add_option("--baseline-budget", o.baseline_budget,
                 "seconds for the baseline's main job (and tests) (default 600)")
      ->type_name("S")
      ->check(positive_seconds());
  app.add_option("--total-budget", o.total_budget,
                 "no fault starts after S seconds (the rest are reported not-run; default: none)")
      ->type_name("S")
      ->check(positive_seconds());
  bool no_baseline = false, one_run = false;
  CLI::Option* only = app.add_flag("--baseline-only", o.baseline_only,
                                   "run the baseline only (it takes the whole main job)");
  app.add_flag("--no-baseline", no_baseline,
               "skip the baseline (only when this build's baseline passed in an earlier call)");
  app.add_flag("--one-run", one_run,
               "run the main job as one child (forward, backward, ikbo in order) instead of one "
               "child per section with the fault's own section first");
  app.add_flag("--keep-going", o.keep_going,
               "let each child run to its end (full tables in the log) instead of stopping it at "
               "the first failure");
  app.add_option("--verify-arg", o.verify_args,
                 "an argument appended to tbe-verify's command line (repeatable, e.g. "
                 "--verify-arg=--batch --verify-arg=2048)")
      ->type_name("ARG")
      ->allow_extra_args(false)
      ->take_all();
  app.add_option("--tests-arg", o.tests_args,
                 "an argument appended to test_optimized's command line (repeatable, e.g. a "
                 "Catch2 tag filter)")
      ->type_name("ARG")
      ->allow_extra_args(false)
      ->take_all();
  app.add_option("--out", o.out, "logs and case folders (default tbe-mutate-out)")
      ->type_name("DIR")
      ->check(cli::non_empty("the folder name"));
  app.add_option("--cases", o.cases,
                 "case folders of the failing rows: DIR/<fault>/<case label> (default: --out; a "
                 "seed-large case holds ~2 GB, tbe-verify saves one per child)")
      ->type_name("DIR")
      ->check(cli::non_empty("the folder name"));
  bool no_cases = false;
  app.add_flag("--no-cases", no_cases, "save no case folders (the replay commands remain)");
  app.add_option("--json", o.json, "also write the kill table as JSON")
      ->type_name("FILE")
      ->check(cli::non_empty("the file name"));
  if (std::optional<cli::Exit> exit = cli::parse(app, argc, argv)) return *exit;
  if (only->count() > 0 && (no_baseline || !faults.empty()))
    return cli::usage_error(app, "--baseline-only: not with --no-baseline or --fault");
  o.faults = faults;
  o.save_cases = !no_cases;
  o.baseline = !no_baseline;
  o.own_section_first = !one_run;
  return o;
}

}  // namespace tbe::mutate
