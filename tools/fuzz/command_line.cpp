// tbe-fuzz's command line (command_line.h).
#include "fuzz/command_line.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "cli/cli_parse.h"
#include "tbe/errors.h"

namespace tbe::fuzz {
namespace {

const char* const kDescription =
    "Fuzz campaign of the TBE forward, the backward + exact optimizer and the IKBO operators\n"
    "(LCE, attention): random cases biased to the edges, run through a backend, each judged by\n"
    "the enclosure oracles, tbe::repair (warning count, repaired offsets/indices),\n"
    "tbe::find_first_violation (FATAL errors) and tbe::validate (InvalidArgument), with canaries\n"
    "past every output; backward cases also by the GPU's path counters against the reference\n"
    "transpose, a bitwise second call (deterministic strategy) and the SR z-test. Case i is of\n"
    "operator i % (number of --ops). A failing case is shrunk (drop features, halve B, drop\n"
    "lookups, shrink D and E, drop faults; simpler optimizer options; smaller IKBO shapes) and\n"
    "saved with its recorded outputs as DIR/failure-<n>/ (replay with tbe-verify replay).\n"
    "Cases are judged --threads at a time (the backend's calls one at a time); the verdicts do\n"
    "not depend on the thread count.";

const char* const kFooter =
    "Exit status: 0 when no case failed, 1 when a case failed, 2 for a bad command line, 3 for an\n"
    "error that stopped the campaign (e.g. no GPU for --backend cuda).";

// A positive, finite number of seconds.
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

// "forward,backward,lce,attention" (or "all") -> operators, in the order given, no repeats.
std::vector<Operator> parse_ops(const std::string& text) {
  if (text == "all")
    return {Operator::Forward, Operator::Backward, Operator::Lce, Operator::Attention};
  std::vector<Operator> ops;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string name = text.substr(at, comma - at);
    std::optional<Operator> op;
    for (Operator o : {Operator::Forward, Operator::Backward, Operator::Lce, Operator::Attention})
      if (name == to_string(o)) op = o;
    if (!op)
      throw InvalidArgument("--ops", "--ops: '" + name +
                                         "' is not an operator (forward, backward, lce, "
                                         "attention, or all)");
    if (std::find(ops.begin(), ops.end(), *op) != ops.end())
      throw InvalidArgument("--ops", "--ops: '" + name + "' is given twice");
    ops.push_back(*op);
    at = comma + 1;
  }
  return ops;
}

}  // namespace

cli::Parsed<CampaignOptions> parse_command_line(int argc, const char* const* argv) {
  constexpr std::uint64_t kU64 = std::numeric_limits<std::uint64_t>::max();
  constexpr std::int64_t kI64 = std::numeric_limits<std::int64_t>::max();
  constexpr int kInt = std::numeric_limits<int>::max();
  CampaignOptions o;
  CLI::App app(kDescription, "tbe-fuzz");
  cli::set_conventions(app);
  app.footer(kFooter);
  app.set_help_flag("-h,--help", "this text");
  app.get_formatter()->column_width(22);
  CLI::Option* seconds =
      app.add_option("--seconds", o.seconds,
                     "campaign length in seconds (required unless --case or --list)")
          ->type_name("S")
          ->check(positive_seconds());
  cli::add_decimal(app, "--seed", "X", o.seed, std::uint64_t{0}, kU64,
                   "campaign seed, an unsigned 64-bit integer (default 1); case i is generated "
                   "from (X, i) alone, so a campaign is reproducible case by case");
  app.add_option("--out", o.out,
                 "where failures are saved (default tbe-fuzz-out); created on the first failure")
      ->type_name("DIR")
      ->check(cli::non_empty("the folder name"));
  app.add_option("--backend", o.backend,
                 "cuda (default); cpu: the CPU reference backend (tests this tool, finds no GPU "
                 "bug); cpu-faulty: the reference with planted bugs (forward: element 0 off by "
                 "one when a pooled bag has >= 256 lookups; backward: element 0 of a row with SL "
                 ">= 256; lce: the last element when K_c % 8 != 0; attention: a user with > 64 "
                 "keys): the failure path, the shrinkers, the saved cases")
      ->type_name("K")
      ->check(CLI::IsMember({"cuda", "cpu", "cpu-faulty"}));
  std::string ops_text = "all";
  app.add_option("--ops", ops_text,
                 "operators to fuzz, comma-separated: forward, backward, lce, attention, or all "
                 "(default); case i is of operator i % (their number)")
      ->type_name("LIST")
      ->check(CLI::Validator(
          [](std::string& t) -> std::string {
            try {
              parse_ops(t);
            } catch (const InvalidArgument& e) {
              return e.what();
            }
            return "";
          },
          ""));
  std::string shapes_text = "small";
  app.add_option("--shapes", shapes_text,
                 "small (default: N <= 6000, E*D <= 2^16 per table, B <= 64, small IKBO shapes; "
                 "every edge value still drawn) or large (N <= 250000, E*D <= 2^22, B <= 512)")
      ->type_name("P")
      ->check(CLI::IsMember({"small", "large"}));
  cli::add_decimal(app, "--threads", "N", o.threads, 0, 4096,
                   "cases judged at once (default 0: OpenMP's thread count, OMP_NUM_THREADS); "
                   "the backend's calls run one at a time");
  cli::add_decimal(app, "--case", "I", o.only_case, std::uint64_t{0}, kU64,
                   "run only case I of the seed (replays one case of a campaign, shrinks and "
                   "saves it if it fails)");
  app.add_option("--report-every", o.report_every, "seconds between progress lines (default 30)")
      ->type_name("S")
      ->check(positive_seconds());
  cli::add_decimal(app, "--huge-every", "K", o.huge_every, std::int64_t{0}, kI64,
                   "every K-th case (i % K == K/2) has a table with E*D just above 2^31 elements "
                   "(host and device memory up to ~9 GiB each); 0 turns it off (default on the cuda "
                   "backend: 20000 with --shapes small, 1000 with large; off on the CPU backends)");
  cli::add_decimal(app, "--max-saved", "K", o.max_saved, 0, kInt,
                   "save (and shrink) at most K failures (default 10); later ones are counted");
  cli::add_decimal(app, "--max-failures", "K", o.max_failures, std::int64_t{0}, kI64,
                   "stop the campaign after K failures (default 0: never)");
  cli::add_decimal(app, "--list", "N", o.list, std::int64_t{0}, kI64,
                   "print the first N cases of the seed (one line each) and exit");
  if (std::optional<cli::Exit> exit = cli::parse(app, argc, argv)) return *exit;
  o.have_seconds = seconds->count() > 0;
  o.ops = parse_ops(ops_text);
  o.shapes = shapes_text == "large" ? Shapes::Large : Shapes::Small;
  if (!o.have_seconds && !o.only_case && o.list == 0)
    return cli::usage_error(app, "--seconds S is required (or --case I to run one case)");
  return o;
}

}  // namespace tbe::fuzz
