// tbe-fuzz's command line: the flags and their defaults, typed and range-checked values, usage
// errors naming the flag (exit status 2), --help generated from the definitions (exit status 0).
#include <catch2/catch.hpp>

#include <string>
#include <variant>
#include <vector>

#include "fuzz/command_line.h"

using namespace tbe;
using namespace tbe::fuzz;

namespace {

cli::Parsed<CampaignOptions> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tbe-fuzz");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

// The options of a good command line.
CampaignOptions options(const std::vector<std::string>& args) {
  const cli::Parsed<CampaignOptions> p = parse(args);
  if (const cli::Exit* e = std::get_if<cli::Exit>(&p))
    FAIL("unexpected exit " << e->status << ": " << e->text);
  return std::get<CampaignOptions>(p);
}

// The Exit of a command line that does not run.
cli::Exit exit_of(const std::vector<std::string>& args) {
  const cli::Parsed<CampaignOptions> p = parse(args);
  REQUIRE(std::holds_alternative<cli::Exit>(p));
  return std::get<cli::Exit>(p);
}

// A usage error: exit status 2, the message names `flag` and points at --help.
void require_usage_error(const std::vector<std::string>& args, const std::string& names) {
  const cli::Exit e = exit_of(args);
  INFO(e.text);
  CHECK(e.status == 2);
  CHECK_THAT(e.text, Catch::StartsWith("tbe-fuzz: "));
  CHECK_THAT(e.text, Catch::Contains(names));
  CHECK_THAT(e.text, Catch::EndsWith("(see tbe-fuzz --help)\n"));
}

}  // namespace

TEST_CASE("command line: defaults and every flag", "[fuzz][cli]") {
  const CampaignOptions d = options({"--seconds", "5"});
  CHECK(d.seconds == 5.0);
  CHECK(d.have_seconds);
  CHECK(d.seed == 1);
  CHECK(d.out == "tbe-fuzz-out");
  CHECK(d.backend == "cuda");
  CHECK_FALSE(d.only_case);
  CHECK(d.report_every == 30.0);
  CHECK(d.huge_every == -1);
  CHECK(d.max_saved == 10);
  CHECK(d.max_failures == 0);
  CHECK(d.list == 0);

  const CampaignOptions a =
      options({"--seconds=2.5", "--seed", "18446744073709551615", "--out", "dir/x", "--backend",
             "cpu-faulty", "--case", "42", "--report-every", "0.5", "--huge-every", "0",
             "--max-saved", "3", "--max-failures=7", "--list", "9"});
  CHECK(a.seconds == 2.5);
  CHECK(a.seed == 18446744073709551615ull);
  CHECK(a.out == "dir/x");
  CHECK(a.backend == "cpu-faulty");
  REQUIRE(a.only_case);
  CHECK(*a.only_case == 42);
  CHECK(a.report_every == 0.5);
  CHECK(a.huge_every == 0);
  CHECK(a.max_saved == 3);
  CHECK(a.max_failures == 7);
  CHECK(a.list == 9);
}

TEST_CASE("command line: --seconds may be left out with --case or --list", "[fuzz][cli]") {
  const CampaignOptions c = options({"--case", "3", "--backend", "cpu"});
  CHECK_FALSE(c.have_seconds);
  CHECK(*c.only_case == 3);
  const CampaignOptions l = options({"--list", "4"});
  CHECK(l.list == 4);
  require_usage_error({}, "--seconds S is required");
  require_usage_error({"--list", "0"}, "--seconds S is required");
}

TEST_CASE("command line: integers are decimal (a leading zero is not octal)", "[fuzz][cli]") {
  const CampaignOptions c = options({"--seconds", "1", "--seed", "010", "--case", "007"});
  CHECK(c.seed == 10);
  CHECK(*c.only_case == 7);
}

TEST_CASE("command line: a repeated option keeps its last value", "[fuzz][cli]") {
  const CampaignOptions c =
      options({"--seconds", "1", "--seconds", "2", "--seed", "3", "--seed", "4"});
  CHECK(c.seconds == 2.0);
  CHECK(c.seed == 4);
}

TEST_CASE("command line: bad values are usage errors naming the flag", "[fuzz][cli]") {
  require_usage_error({"--seconds", "0"}, "--seconds: '0' is not a positive number of seconds");
  require_usage_error({"--seconds", "-3"}, "--seconds");
  require_usage_error({"--seconds", "nan"}, "--seconds: 'nan'");
  require_usage_error({"--seconds", "inf"}, "--seconds: 'inf'");
  require_usage_error({"--seconds", "5s"}, "--seconds: '5s'");
  require_usage_error({"--seconds", "1", "--report-every", "0"}, "--report-every: '0'");
  require_usage_error({"--seconds", "1", "--seed", "-1"}, "--seed");
  require_usage_error({"--seconds", "1", "--seed", "+1"},
                      "--seed: '+1' is not a decimal integer (digits 0-9 only)");
  require_usage_error({"--seconds", "1", "--seed", "0x10"}, "--seed: '0x10'");
  require_usage_error({"--seconds", "1", "--seed", "18446744073709551616"},
                      "--seed: '18446744073709551616' is out of range [0, 18446744073709551615]");
  require_usage_error({"--seconds", "1", "--case", "1.5"}, "--case: '1.5'");
  require_usage_error({"--seconds", "1", "--max-saved", "2147483648"},
                      "--max-saved: '2147483648' is out of range [0, 2147483647]");
  require_usage_error({"--seconds", "1", "--huge-every", "9223372036854775808"}, "--huge-every");
  require_usage_error({"--seconds", "1", "--max-failures", "x"}, "--max-failures");
  require_usage_error({"--list", "-2"}, "--list");
  require_usage_error({"--seconds", "1", "--backend", "gpu"},
                      "--backend: gpu not in {cuda,cpu,cpu-faulty}");
  require_usage_error({"--seconds", "1", "--out", ""}, "--out: the folder name is empty");
  require_usage_error({"--seconds"}, "--seconds");
  require_usage_error({"--seconds", "1", "--seed"}, "--seed");
}

TEST_CASE("command line: unknown flags and stray arguments are usage errors", "[fuzz][cli]") {
  require_usage_error({"--seconds", "1", "--frobnicate"}, "--frobnicate");
  require_usage_error({"--seconds", "1", "extra"}, "extra");
}

TEST_CASE("command line: --help lists every flag and exits 0", "[fuzz][cli]") {
  for (const char* flag : {"--help", "-h"}) {
    const cli::Exit h = exit_of({flag});
    CHECK(h.status == 0);
    for (const char* f : {"--seconds S", "--seed X", "--out DIR", "--backend K", "--case I",
                          "--report-every S", "--huge-every K", "--max-saved K",
                          "--max-failures K", "--list N", "--ops LIST", "--shapes P",
                          "--threads N", "-h,--help"})
      CHECK_THAT(h.text, Catch::Contains(f));
    CHECK_THAT(h.text, Catch::Contains("Exit status: 0 when no case failed"));
  }
}

TEST_CASE("command line: --ops, --shapes and --threads", "[fuzz][cli]") {
  const CampaignOptions d = options({"--seconds", "5"});
  CHECK(d.ops == std::vector<Operator>{Operator::Forward, Operator::Backward, Operator::Lce,
                                       Operator::Attention});
  CHECK(d.shapes == Shapes::Small);
  CHECK(d.threads == 0);
  const CampaignOptions a = options(
      {"--seconds", "5", "--ops", "backward,lce", "--shapes", "large", "--threads", "3"});
  CHECK(a.ops == std::vector<Operator>{Operator::Backward, Operator::Lce});
  CHECK(a.shapes == Shapes::Large);
  CHECK(a.threads == 3);
  CHECK(options({"--seconds", "5", "--ops", "attention"}).ops ==
        std::vector<Operator>{Operator::Attention});
  CHECK(options({"--seconds", "5", "--ops", "all"}).ops.size() == 4);
  require_usage_error({"--seconds", "5", "--ops", "forward,bwd"}, "--ops");
  require_usage_error({"--seconds", "5", "--ops", "forward,forward"}, "--ops");
  require_usage_error({"--seconds", "5", "--ops", ""}, "--ops");
  require_usage_error({"--seconds", "5", "--shapes", "tiny"}, "--shapes");
  require_usage_error({"--seconds", "5", "--threads", "-1"}, "--threads");
}
