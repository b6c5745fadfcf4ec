// tbe-fuzz's command line (command_line.h).
#include "fuzz/command_line.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdint>
#include <limits>

namespace tbe::fuzz {
namespace {

const char* const kDescription =
    "Fuzz campaign of the TBE forward: random cases biased to the edges, run through a backend,\n"
    "each judged by the enclosure oracle (output), tbe::repair (warning count, repaired\n"
    "offsets/indices), tbe::find_first_violation (FATAL errors) and tbe::validate\n"
    "(InvalidArgument), with canaries past the output. A failing case is shrunk (drop features,\n"
    "halve B, drop lookups, shrink D and E, drop faults) and saved with its recorded output as\n"
    "DIR/failure-<n>/ (replay with tbe-verify replay).";

const char* const kFooter =
    "Exit status: 0 when no case failed, 1 when a case failed, 2 for a bad command line, 3 for an\n"
    "error that stopped the campaign (e.g. no GPU for --backend cuda).";

// An unsigned decimal integer in [0, max]; rewritten to its canonical decimal form so that the
// typed conversion never reads a leading 0 as octal or 0x as hex.
CLI::Validator unsigned_integer(std::uint64_t max) {
  return CLI::Validator(
      [max](std::string& text) -> std::string {
        const std::string bad = "'" + text + "' is not an unsigned integer" +
                                (max == std::numeric_limits<std::uint64_t>::max()
                                     ? std::string()
                                     : " in [0, " + std::to_string(max) + "]");
        if (text.empty()) return bad;
        std::uint64_t v = 0;
        for (char c : text) {
          if (c < '0' || c > '9') return bad;
          const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
          if (v > (max - digit) / 10) return bad;
          v = 10 * v + digit;
        }
        text = std::to_string(v);
        return "";
      },
      "");
}

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

CommandLine usage_error(const std::string& what) {
  CommandLine r;
  r.exit_code = 2;
  r.text = "tbe-fuzz: " + what + "\n(see tbe-fuzz --help)\n";
  return r;
}

}  // namespace

CommandLine parse_command_line(int argc, const char* const* argv) {
  constexpr std::uint64_t kU64 = std::numeric_limits<std::uint64_t>::max();
  constexpr std::uint64_t kI64 = std::numeric_limits<std::int64_t>::max();
  constexpr std::uint64_t kInt = std::numeric_limits<int>::max();
  CampaignOptions o;
  std::uint64_t only_case = 0;
  CLI::App app(kDescription, "tbe-fuzz");
  app.footer(kFooter);
  app.set_help_flag("-h,--help", "this text");
  app.get_formatter()->column_width(22);
  CLI::Option* seconds =
      app.add_option("--seconds", o.seconds,
                     "campaign length in seconds (required unless --case or --list)")
          ->type_name("S")
          ->check(positive_seconds());
  app.add_option("--seed", o.seed,
                 "campaign seed, an unsigned 64-bit integer (default 1); case i is generated from "
                 "(X, i) alone, so a campaign is reproducible case by case")
      ->type_name("X")
      ->transform(unsigned_integer(kU64));
  app.add_option("--out", o.out,
                 "where failures are saved (default tbe-fuzz-out); created on the first failure")
      ->type_name("DIR")
      ->check(CLI::Validator(
          [](std::string& s) { return s.empty() ? std::string("the folder name is empty") : ""; },
          ""));
  app.add_option("--backend", o.backend,
                 "cuda (default); cpu: the CPU reference backend (tests this tool, finds no GPU "
                 "bug); cpu-faulty: the reference with a planted bug (element 0 off by one when a "
                 "pooled bag has >= 256 lookups): the failure path, the shrinker, the saved case")
      ->type_name("K")
      ->check(CLI::IsMember({"cuda", "cpu", "cpu-faulty"}));
  CLI::Option* case_option =
      app.add_option("--case", only_case,
                     "run only case I of the seed (replays one case of a campaign, shrinks and "
                     "saves it if it fails)")
          ->type_name("I")
          ->transform(unsigned_integer(kU64));
  app.add_option("--report-every", o.report_every, "seconds between progress lines (default 30)")
      ->type_name("S")
      ->check(positive_seconds());
  app.add_option("--huge-every", o.huge_every,
                 "every K-th case (i % K == K/2) has a table with E*D just above 2^31 elements "
                 "(host and device memory up to ~9 GiB each); 0 turns it off (default: 1000 on "
                 "the cuda backend, off on the CPU backends)")
      ->type_name("K")
      ->transform(unsigned_integer(kI64));
  app.add_option("--max-saved", o.max_saved,
                 "save (and shrink) at most K failures (default 10); later ones are counted")
      ->type_name("K")
      ->transform(unsigned_integer(kInt));
  app.add_option("--max-failures", o.max_failures,
                 "stop the campaign after K failures (default 0: never)")
      ->type_name("K")
      ->transform(unsigned_integer(kI64));
  app.add_option("--list", o.list, "print the first N cases of the seed (one line each) and exit")
      ->type_name("N")
      ->transform(unsigned_integer(kI64));
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    CommandLine r;
    r.text = app.help();
    if (r.text.empty() || r.text.back() != '\n') r.text += '\n';
    return r;
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  }
  o.have_seconds = seconds->count() > 0;
  if (case_option->count() > 0) o.only_case = only_case;
  if (!o.have_seconds && !o.only_case && o.list == 0)
    return usage_error("--seconds S is required (or --case I to run one case)");
  CommandLine r;
  r.options = std::move(o);
  return r;
}

}  // namespace tbe::fuzz
