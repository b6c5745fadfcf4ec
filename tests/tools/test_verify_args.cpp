// tbe-verify's command line (tools/cli/verify_args.h): defaults, every option's value, the
// subcommands, --help, and usage errors (exit status 2, the message naming the flag).
#include <catch2/catch.hpp>

#include <string>
#include <variant>
#include <vector>

#include "cli/verify_args.h"

using namespace tbe;
using namespace tbe::verify;
using namespace tbe::judge;

namespace {

cli::Parsed<VerifyCommand> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "tbe-verify");
  return parse_verify_args(static_cast<int>(args.size()), args.data());
}

/// The command of a good command line.
VerifyCommand command(const std::vector<const char*>& args) {
  const cli::Parsed<VerifyCommand> p = parse(args);
  if (const cli::Exit* e = std::get_if<cli::Exit>(&p)) FAIL("unexpected exit " << e->status << ": " << e->text);
  return std::get<VerifyCommand>(p);
}

/// The Exit of a command line that does not run.
cli::Exit exit_of(const std::vector<const char*>& args) {
  const cli::Parsed<VerifyCommand> p = parse(args);
  REQUIRE(std::holds_alternative<cli::Exit>(p));
  return std::get<cli::Exit>(p);
}

/// A usage error: status 2, "tbe-verify: ..." naming `what` (the flag, or the bad value).
void check_usage_error(const std::vector<const char*>& args, const std::string& what) {
  const cli::Exit e = exit_of(args);
  CHECK(e.status == cli::kUsageError);
  CHECK(e.text.rfind("tbe-verify: ", 0) == 0);
  CHECK_THAT(e.text, Catch::Contains(what));
  CHECK_THAT(e.text, Catch::Contains("--help"));
}

}  // namespace

TEST_CASE("verify args: no argument runs every section with the documented defaults", "[cli]") {
  const VerifyCommand c = command({});
  CHECK(c.kind == VerifyCommand::Kind::Run);
  const VerifyArgs& a = c.args;
  CHECK_FALSE(a.batch.has_value());
  CHECK_FALSE(a.full);
  CHECK(a.seed == 1);
  CHECK(a.design == Design::Pairwise);
  CHECK(a.only.empty());
  CHECK(a.json_path.empty());
  CHECK(a.backend == "cuda");
  CHECK_FALSE(a.require_gpu);
  CHECK(a.save_failures == "tbe-verify-failures");
  CHECK(a.save_failures_max == 4);
  CHECK_FALSE(a.list);
  CHECK((a.rows.forward && a.rows.backward && a.rows.ikbo));
  CHECK(a.backward_row == 0);
  CHECK(a.ikbo_rounding == ikbo::LceRounding::RoundOnce);
  CHECK(a.call_timeout == 30.0);
}

TEST_CASE("verify args: every option sets its value, separate or with '='", "[cli]") {
  const VerifyArgs a =
      command({"--batch", "64", "--full", "--seed=18446744073709551615", "--design", "full",
               "--only", "policy=fbgemm-cuda,w=fp16", "--json", "out.json", "--backend=cpu",
               "--require-gpu", "--save-failures", "dir", "--save-failures-max", "0", "--list",
               "--rows", "forward,ikbo", "--backward-row", "40", "--ikbo-rounding",
               "user-rounded", "--call-timeout", "2.5"})
          .args;
  CHECK(a.batch == 64);
  CHECK(a.full);
  CHECK(a.seed == 18446744073709551615ull);
  CHECK(a.design == Design::Full);
  CHECK(a.only == "policy=fbgemm-cuda,w=fp16");
  CHECK(a.json_path == "out.json");
  CHECK(a.backend == "cpu");
  CHECK(a.require_gpu);
  CHECK(a.save_failures == "dir");
  CHECK(a.save_failures_max == 0);
  CHECK(a.list);
  CHECK((a.rows.forward && !a.rows.backward && a.rows.ikbo));
  CHECK(a.backward_row == 40);
  CHECK(a.ikbo_rounding == ikbo::LceRounding::UserRounded);
  CHECK(a.call_timeout == 2.5);
}

TEST_CASE("verify args: edge values", "[cli]") {
  CHECK(command({"--batch", "1"}).args.batch == 1);
  CHECK(command({"--batch", "1048576"}).args.batch == kMaxVerifyBatch);
  CHECK(command({"--seed", "010"}).args.seed == 10);  // decimal, not octal
  CHECK(command({"--backward-row", "1"}).args.backward_row == 1);
  CHECK(command({"--backward-row", "48"}).args.backward_row == 48);  // the last small-table row
  CHECK(command({"--call-timeout", "0"}).args.call_timeout == 0.0);  // the watchdog off
  // A huge --save-failures-max is clamped (the hand-written parser's meaning), not rejected.
  CHECK(command({"--save-failures-max", "99999999999"}).args.save_failures_max == (1 << 30));
  // A repeated option keeps its last value.
  CHECK(command({"--batch", "5", "--batch=7"}).args.batch == 7);
  CHECK(command({"--rows", "backward", "--rows", "ikbo"}).args.rows.backward == false);
}

TEST_CASE("verify args: --rows names sections, 'all' the three", "[cli]") {
  const Sections b = parse_sections("backward");
  CHECK((!b.forward && b.backward && !b.ikbo));
  const Sections all = parse_sections("ikbo,all");
  CHECK((all.forward && all.backward && all.ikbo));
  CHECK_THROWS_WITH(parse_sections("forward,,ikbo"), Catch::Contains("'' is not a section"));
  CHECK_THROWS_WITH(parse_sections("fwd"), Catch::Contains("allowed: forward, backward, ikbo, all"));
}

TEST_CASE("verify args: replay takes one case folder, check one or more", "[cli]") {
  const VerifyCommand r = command({"replay", "some/case"});
  CHECK(r.kind == VerifyCommand::Kind::Replay);
  CHECK(r.case_dirs == std::vector<std::string>{"some/case"});
  const VerifyCommand c = command({"check", "other"});
  CHECK(c.kind == VerifyCommand::Kind::Check);
  CHECK(c.case_dirs == std::vector<std::string>{"other"});
  const VerifyCommand several = command({"check", "a", "b", "c"});
  CHECK(several.kind == VerifyCommand::Kind::Check);
  CHECK(several.case_dirs == std::vector<std::string>{"a", "b", "c"});
  check_usage_error({"replay"}, "CASE_DIR");
  check_usage_error({"check"}, "CASE_DIR");
  check_usage_error({"replay", "a", "b"}, "CASE_DIR");
  check_usage_error({"check", "a", ""}, "CASE_DIR");
  check_usage_error({"check", ""}, "CASE_DIR");
  check_usage_error({"replay", "--batch", "3", "d"}, "--batch");
  check_usage_error({"--batch", "3", "replay", "d"}, "--batch");
}

TEST_CASE("verify args: --help prints the option definitions and exits 0", "[cli]") {
  for (const char* flag : {"--help", "-h"}) {
    const cli::Exit e = exit_of({"--batch", "64", flag});
    CHECK(e.status == 0);
    for (const char* text : {"--batch", "--full", "--seed", "--design", "--only", "--json",
                             "--backend", "--require-gpu", "--list", "--save-failures",
                             "--save-failures-max", "--rows", "--backward-row",
                             "--ikbo-rounding", "replay", "check", "Axes (use these names in "
                             "--only)", "Exit status"})
      CHECK_THAT(e.text, Catch::Contains(text));
  }
  const cli::Exit sub = exit_of({"replay", "--help"});
  CHECK(sub.status == 0);
  CHECK_THAT(sub.text, Catch::Contains("tbe-verify replay"));
  CHECK_THAT(sub.text, Catch::Contains("CASE_DIR"));
}

TEST_CASE("verify args: bad command lines are usage errors naming the flag", "[cli]") {
  check_usage_error({"--bogus"}, "--bogus");
  check_usage_error({"stray"}, "stray");
  check_usage_error({"--batch"}, "--batch");  // missing value
  check_usage_error({"--seed"}, "--seed");
  check_usage_error({"--batch", "0"}, "--batch: '0' is out of range [1, ");
  check_usage_error({"--batch", "1048577"}, "--batch");
  check_usage_error({"--backward-row", "49"}, "--backward-row");
  check_usage_error({"--backward-row", "0"}, "--backward-row");
  check_usage_error({"--call-timeout", "-1"}, "--call-timeout");
  check_usage_error({"--call-timeout", "soon"}, "--call-timeout");
  check_usage_error({"--batch", "abc"}, "--batch: 'abc' is not a decimal integer");
  check_usage_error({"--batch", "0x10"}, "--batch");
  check_usage_error({"--seed", "-1"}, "--seed");
  check_usage_error({"--seed", "18446744073709551616"}, "--seed");
  check_usage_error({"--save-failures-max", "-3"}, "--save-failures-max");
  check_usage_error({"--design", "fractional"}, "--design: 'fractional' is not a design");
  check_usage_error({"--backend", "gpu"}, "--backend");
  check_usage_error({"--ikbo-rounding", "nearest"}, "--ikbo-rounding: 'nearest' is not a rounding");
  check_usage_error({"--rows", "forward,sideways"}, "--rows: 'sideways' is not a section");
  check_usage_error({"--only", "w=fp9"}, "--only");
  check_usage_error({"--rows", "ikbo", "--only", "w=fp16"}, "--rows must include forward");
  check_usage_error({"--json", ""}, "--json");
  check_usage_error({"--save-failures="}, "--save-failures");
  check_usage_error({"--full=1"}, "full");  // a flag takes no value
}
