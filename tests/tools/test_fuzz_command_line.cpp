// tbe-fuzz's command line: the flags and their defaults, typed and range-checked values, usage
// errors naming the flag (exit status 2), --help generated from the definitions (exit status 0).
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "fuzz/command_line.h"

using namespace tbe::fuzz;

namespace {

CommandLine parse(std::vector<std::string> args) {
  args.insert(args.begin(), "tbe-fuzz");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_command_line(static_cast<int>(argv.size()), argv.data());
}

// A usage error: exit status 2, the message names `flag` and points at --help.
void require_usage_error(const std::vector<std::string>& args, const std::string& names) {
  const CommandLine cl = parse(args);
  INFO(cl.text);
  CHECK_FALSE(cl.options);
  CHECK(cl.exit_code == 2);
  CHECK_THAT(cl.text, Catch::StartsWith("tbe-fuzz: "));
  CHECK_THAT(cl.text, Catch::Contains(names));
  CHECK_THAT(cl.text, Catch::EndsWith("(see tbe-fuzz --help)\n"));
}

}  // namespace

TEST_CASE("command line: defaults and every flag", "[fuzz][cli]") {
  const CommandLine d = parse({"--seconds", "5"});
  REQUIRE(d.options);
  CHECK(d.options->seconds == 5.0);
  CHECK(d.options->have_seconds);
  CHECK(d.options->seed == 1);
  CHECK(d.options->out == "tbe-fuzz-out");
  CHECK(d.options->backend == "cuda");
  CHECK_FALSE(d.options->only_case);
  CHECK(d.options->report_every == 30.0);
  CHECK(d.options->huge_every == -1);
  CHECK(d.options->max_saved == 10);
  CHECK(d.options->max_failures == 0);
  CHECK(d.options->list == 0);

  const CommandLine a =
      parse({"--seconds=2.5", "--seed", "18446744073709551615", "--out", "dir/x", "--backend",
             "cpu-faulty", "--case", "42", "--report-every", "0.5", "--huge-every", "0",
             "--max-saved", "3", "--max-failures=7", "--list", "9"});
  REQUIRE(a.options);
  CHECK(a.options->seconds == 2.5);
  CHECK(a.options->seed == 18446744073709551615ull);
  CHECK(a.options->out == "dir/x");
  CHECK(a.options->backend == "cpu-faulty");
  REQUIRE(a.options->only_case);
  CHECK(*a.options->only_case == 42);
  CHECK(a.options->report_every == 0.5);
  CHECK(a.options->huge_every == 0);
  CHECK(a.options->max_saved == 3);
  CHECK(a.options->max_failures == 7);
  CHECK(a.options->list == 9);
}

TEST_CASE("command line: --seconds may be left out with --case or --list", "[fuzz][cli]") {
  const CommandLine c = parse({"--case", "3", "--backend", "cpu"});
  REQUIRE(c.options);
  CHECK_FALSE(c.options->have_seconds);
  CHECK(*c.options->only_case == 3);
  const CommandLine l = parse({"--list", "4"});
  REQUIRE(l.options);
  CHECK(l.options->list == 4);
  require_usage_error({}, "--seconds S is required");
  require_usage_error({"--list", "0"}, "--seconds S is required");
}

TEST_CASE("command line: integers are decimal (a leading zero is not octal)", "[fuzz][cli]") {
  const CommandLine c = parse({"--seconds", "1", "--seed", "010", "--case", "007"});
  REQUIRE(c.options);
  CHECK(c.options->seed == 10);
  CHECK(*c.options->only_case == 7);
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
                      "--seed: '+1' is not an unsigned integer");
  require_usage_error({"--seconds", "1", "--seed", "0x10"}, "--seed: '0x10'");
  require_usage_error({"--seconds", "1", "--seed", "18446744073709551616"}, "--seed");
  require_usage_error({"--seconds", "1", "--case", "1.5"}, "--case: '1.5'");
  require_usage_error({"--seconds", "1", "--max-saved", "2147483648"},
                      "--max-saved: '2147483648' is not an unsigned integer in [0, 2147483647]");
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
    const CommandLine h = parse({flag});
    CHECK_FALSE(h.options);
    CHECK(h.exit_code == 0);
    for (const char* f : {"--seconds S", "--seed X", "--out DIR", "--backend K", "--case I",
                          "--report-every S", "--huge-every K", "--max-saved K",
                          "--max-failures K", "--list N", "-h,--help"})
      CHECK_THAT(h.text, Catch::Contains(f));
    CHECK_THAT(h.text, Catch::Contains("Exit status: 0 when no case failed"));
  }
}
