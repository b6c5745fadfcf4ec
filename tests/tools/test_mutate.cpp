// tbe-mutate on the CPU (docs/mutation.md): the fault catalogue and its name parser, the parsers
// that read a child's captured output (tbe-verify's fail lines, Catch2's console reporter), the
// verdicts from exit statuses, the child runner's early stop and budget, and the command line.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <variant>
#include <vector>

#include "mutate/campaign.h"
#include "mutate/child.h"
#include "mutate/kill_table.h"
#include "mutate/mutate_args.h"
#include "tbe/cuda/mutation.h"
#include "tbe/judge/fail_line.h"

using namespace tbe;
using namespace tbe::mutate;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

cli::Parsed<MutateOptions> parse(std::vector<std::string> args) {
  args.insert(args.begin(), "/nowhere/tbe-mutate");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  return parse_mutate_args(static_cast<int>(argv.size()), argv.data());
}

// A captured tbe-verify run (stderr and stdout interleaved, as tbe-mutate reads them) whose
// forward case 3 failed; the fail line is the real formatter's.
std::string verify_sample() {
  judge::FailLine f{"forward", "policy=seed-default,w=fp32,pool=mean",
                    "gpu oracle", "out/fwd/cases/policy=seed-default,w=fp32,pool=mean",
                    "tbe-verify replay out/fwd/cases/policy=seed-default,w=fp32,pool=mean"};
  return "tbe mutation build: fault fwd_mean_missing active\n"
         "tbe-verify: device NVIDIA H200 (cuda:NVIDIA H200), seed 1\n"
         "[ 1/40] policy=seed-default w=fp32 pool=sum  passed (0.41 s)\n"
         "[ 2/40] policy=seed-default w=fp16 pool=sum  passed (0.38 s)\n"
         "[ 3/40] policy=seed-default w=fp32 pool=mean  failed (0.40 s)\n" +
         judge::format_fail_line(f) + "\n" +
         "[ 4/40] policy=fbgemm-cuda w=bf16 pool=mean  failed (0.39 s)\n" +
         judge::format_fail_line({"forward", "second", "gpu canary", "", "x"}) + "\n";
}

// Catch2 v2.13 console output of a binary with one passing and two failing test cases (captured).
const char* const kCatchSample =
    "\n~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~\n"
    "t is a Catch v2.13.10 host application.\n"
    "Run with -? for options\n\n"
    "-------------------------------------------------------------------------------\n"
    "backward: fused long runs match the reference\n"
    "  SL = 257\n"
    "-------------------------------------------------------------------------------\n"
    "t.cpp:5\n"
    "...............................................................................\n\n"
    "t.cpp:5: FAILED:\n"
    "  REQUIRE( got == 4 )\n"
    "with expansion:\n"
    "  3 == 4\n\n"
    "-------------------------------------------------------------------------------\n"
    "later fails too\n"
    "-------------------------------------------------------------------------------\n"
    "t.cpp:7\n"
    "...............................................................................\n\n"
    "t.cpp:7: FAILED:\n"
    "  CHECK( 2 == 3 )\n\n"
    "===============================================================================\n"
    "test cases: 3 | 1 passed | 2 failed\n"
    "assertions: 3 | 1 passed | 2 failed\n";

}  // namespace

TEST_CASE("mutate: the catalogue has >= 30 faults, names and enumerators unique", "[mutate]") {
  using tbe::cuda::kFaults;
  CHECK(kFaults.size() >= 30);
  std::set<std::string_view> names, enumerators;
  for (const tbe::cuda::FaultInfo& f : kFaults) {
    INFO(f.name);
    CHECK(f.fault != tbe::cuda::Fault::kNone);
    CHECK(names.insert(f.name).second);
    CHECK(enumerators.insert(f.enumerator).second);
    CHECK(!f.where.empty());
    CHECK(!f.what.empty());
    CHECK(&tbe::cuda::parse_fault(f.name) == &f);
    // lower-case names with a family prefix (tbe-mutate's section order reads it)
    CHECK(f.name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string_view::npos);
    const bool family = f.name.rfind("fwd_", 0) == 0 || f.name.rfind("seq_", 0) == 0 ||
                        f.name.rfind("bounds_", 0) == 0 || f.name.rfind("bwd_", 0) == 0 ||
                        f.name.rfind("lce_", 0) == 0 || f.name.rfind("attn_", 0) == 0 ||
                        f.name.rfind("small_table_", 0) == 0;
    CHECK(family);
  }
}

TEST_CASE("mutate: every fault is wired in the files it names and documented", "[mutate]") {
  const std::string root = TBE_PROJECT_SOURCE_DIR;
  const std::string doc = read_text(root + "/docs/mutation.md");
  REQUIRE(!doc.empty());
  for (const tbe::cuda::FaultInfo& f : tbe::cuda::kFaults) {
    INFO(f.name << " (" << f.where << ")");
    CHECK(doc.find("`" + std::string(f.name) + "`") != std::string::npos);
    // where = "file: function[; file: function]": the enumerator is tested in one of the files
    bool used = false;
    std::string_view rest = f.where;
    while (!rest.empty()) {
      const std::size_t semi = rest.find("; ");
      const std::string_view part = rest.substr(0, semi);
      const std::string file = root + "/optimized/" + std::string(part.substr(0, part.find(':')));
      const std::string text = read_text(file);
      CHECK(!text.empty());  // the file exists
      used = used || text.find(std::string(f.enumerator)) != std::string::npos;
      rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 2);
    }
    CHECK(used);
  }
}

TEST_CASE("mutate: an unknown fault name is an error listing every name", "[mutate]") {
  try {
    (void)tbe::cuda::parse_fault("fwd_mean_mising");
    FAIL("no error");
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    CHECK(m.find("TBE_MUTANT: unknown fault 'fwd_mean_mising'") != std::string::npos);
    for (const tbe::cuda::FaultInfo& f : tbe::cuda::kFaults)
      CHECK(m.find(std::string(f.name)) != std::string::npos);
  }
  CHECK_THROWS_AS(tbe::cuda::parse_fault(""), std::invalid_argument);
}

TEST_CASE("mutate: fail lines round-trip; malformed ones are not fail lines", "[mutate]") {
  const judge::FailLine f{"backward", "row \"7\"", "gpu oracle.weights", "", "tbe-verify --rows backward"};
  const std::optional<judge::FailLine> back = judge::parse_fail_line(judge::format_fail_line(f) + "\r\n");
  REQUIRE(back);
  CHECK(back->section == f.section);
  CHECK(back->row == f.row);
  CHECK(back->check == f.check);
  CHECK(back->case_dir == f.case_dir);
  CHECK(back->replay == f.replay);
  CHECK_FALSE(judge::parse_fail_line("tbe-verify-fail"));
  CHECK_FALSE(judge::parse_fail_line("tbe-verify-fail {\"section\":1}"));
  CHECK_FALSE(judge::parse_fail_line("tbe-verify-fail {not json"));
  CHECK_FALSE(judge::parse_fail_line("  tbe-verify-fail {}"));
  CHECK_FALSE(judge::parse_fail_line("[ 3/40] ... failed"));
}

TEST_CASE("mutate: the first failure of a captured tbe-verify output", "[mutate]") {
  const std::optional<Failure> f = first_verify_failure(verify_sample());
  REQUIRE(f);
  CHECK(f->check == "gpu oracle");
  CHECK(f->row == "forward: policy=seed-default,w=fp32,pool=mean");
  CHECK(f->case_dir == "out/fwd/cases/policy=seed-default,w=fp32,pool=mean");
  CHECK(f->replay == "tbe-verify replay out/fwd/cases/policy=seed-default,w=fp32,pool=mean");

  // no fail line: a kernel path no row exercised, or an error that ended the run
  const std::optional<Failure> path = first_verify_failure(
      "backward: 40 passed\n  FAILED: path bwd.long.fused was never exercised by any backward row\n");
  REQUIRE(path);
  CHECK(path->check == "FAILED: path bwd.long.fused was never exercised by any backward row");
  const std::optional<Failure> err = first_verify_failure(
      "[ 1/40] ...\ntbe-verify: error: CUDA error in forward (stream synchronize): "
      "cudaErrorIllegalAddress (an illegal memory access was encountered)\n");
  REQUIRE(err);
  CHECK(err->check.rfind("tbe-verify: error: CUDA error in forward", 0) == 0);
  CHECK_FALSE(first_verify_failure("[ 1/2] a  passed (0.1 s)\n[ 2/2] b  passed (0.1 s)\n"));
}

TEST_CASE("mutate: the first failing test case of a captured Catch2 output", "[mutate]") {
  const std::optional<Failure> f = first_catch_failure(kCatchSample);
  REQUIRE(f);
  CHECK(f->check == "backward: fused long runs match the reference");
  CHECK(f->row == "t.cpp:5: FAILED:");
  CHECK_FALSE(first_catch_failure("All tests passed (12 assertions in 3 test cases)\n"));
}

TEST_CASE("mutate: verdicts from exit statuses and budgets", "[mutate]") {
  ChildResult r;
  r.output = verify_sample();
  r.kill_seconds = 2.5;
  r.seconds = 3.0;
  r.signal = 15;
  r.stopped_at_kill = true;
  Verdict v = judge_verify(r);
  CHECK(v.outcome == Outcome::Killed);
  CHECK(v.seconds == 2.5);
  REQUIRE(v.failure);
  CHECK(v.failure->check == "gpu oracle");

  ChildResult pass;
  pass.output = "[ 1/1] a  passed (0.1 s)\n";
  CHECK(judge_verify(pass).outcome == Outcome::Survived);
  pass.exit_code = 4;
  CHECK(judge_verify(pass).outcome == Outcome::NoDevice);
  pass.exit_code = 0;
  pass.over_budget = true;
  pass.signal = 15;
  CHECK(judge_verify(pass).outcome == Outcome::Budget);
  ChildResult crash;
  crash.signal = 11;
  v = judge_verify(crash);
  CHECK(v.outcome == Outcome::Killed);
  CHECK(v.failure->check == "signal 11");
  ChildResult tests;
  tests.exit_code = 77;
  CHECK(judge_tests(tests).outcome == Outcome::NoDevice);
  tests.exit_code = 1;
  tests.output = kCatchSample;
  CHECK(judge_tests(tests).outcome == Outcome::Killed);
  // a hang stopped at the budget: Catch2 reports the SIGTERM as "FAILED:", which is the stop,
  // not a check (the failure came after the stop)
  tests.over_budget = true;
  tests.signal = 15;
  tests.exit_code = 0;
  tests.output_before_stop = 0;
  v = judge_tests(tests);
  CHECK(v.outcome == Outcome::Budget);
  CHECK_FALSE(v.failure);
  tests.output_before_stop = tests.output.size();  // printed before the stop: a kill
  CHECK(judge_tests(tests).outcome == Outcome::Killed);
  // the main job's fallback lines (FAILED: path ...) count when printed before the stop too
  ChildResult path;
  path.output = "FAILED: path paths.backward: bwd.fused not exercised\nikbo [1/20] ...\n";
  path.over_budget = true;
  path.signal = 15;
  path.output_before_stop = path.output.size();
  CHECK(judge_verify(path).outcome == Outcome::Killed);
}

TEST_CASE("mutate: the kill table counts kills and names survivors", "[mutate]") {
  KillRow base;
  base.fault = "(baseline)";
  base.verify.outcome = Outcome::Survived;
  KillRow a, b;
  a.fault = "fwd_mean_missing";
  a.verify.outcome = Outcome::Killed;
  a.verify.failure = Failure{"gpu oracle", "forward: x", "DIR", "tbe-verify replay DIR"};
  b.fault = "bwd_fused_fence_missing";
  b.where = "kernels/backward_run_work.cuh: long_chunk";
  b.verify.outcome = Outcome::Budget;
  std::ostringstream os;
  print_kill_table(os, base, {a, b}, false);
  const std::string t = os.str();
  CHECK(t.find("killed 1 of 2 faults (main job alone: 1)") != std::string::npos);
  CHECK(t.find("not killed:\n  bwd_fused_fence_missing (kernels/backward_run_work.cuh") != std::string::npos);
  CHECK(t.find("case DIR  replay: tbe-verify replay DIR") != std::string::npos);
  const nlohmann::json j = kill_table_json(base, {a, b});
  CHECK(j["faults"][0]["killed"] == true);
  CHECK(j["faults"][1]["verify"]["outcome"] == "budget");
}

TEST_CASE("mutate: a child is stopped at its first failure and at its budget", "[mutate]") {
  ChildSpec c;
  c.argv = {"/bin/sh", "-c", "echo one; echo \"$TBE_MUTANT\"; echo BAD; sleep 30; echo never"};
  c.fault = "fwd_mean_missing";
  c.budget_seconds = 20;
  c.is_failure = [](std::string_view line) { return line == "BAD"; };
  ChildResult r = run_child(c);
  CHECK(r.stopped_at_kill);
  CHECK_FALSE(r.over_budget);
  CHECK(r.output.find("one\nfwd_mean_missing\nBAD\n") == 0);
  CHECK(r.output.find("never") == std::string::npos);
  CHECK(r.signal == 15);
  CHECK(r.seconds < 10);

  c.argv = {"/bin/sh", "-c", "echo \"[${TBE_MUTANT-unset}]\"; sleep 30"};
  c.fault = "";
  c.budget_seconds = 0.5;
  r = run_child(c);
  CHECK(r.over_budget);
  CHECK(r.output == "[unset]\n");
  CHECK(r.seconds < 10);

  // a failure line printed only when the budget's SIGTERM arrives does not count as a kill
  c.argv = {"/bin/sh", "-c", "trap 'echo BAD; exit 1' TERM; echo start; sleep 30 & wait"};
  c.is_failure = [](std::string_view line) { return line == "BAD"; };
  c.budget_seconds = 0.5;
  r = run_child(c);
  CHECK(r.over_budget);
  CHECK(r.kill_seconds == 0.0);
  CHECK(r.output.find("BAD") != std::string::npos);
  CHECK(r.output.substr(0, r.output_before_stop).find("BAD") == std::string::npos);

  c.argv = {"/nonexistent/tbe-verify"};
  CHECK_THROWS_WITH(run_child(c), Catch::Contains("cannot run '/nonexistent/tbe-verify'"));
}

TEST_CASE("mutate: sections run the fault's own first", "[mutate]") {
  CHECK(section_order("bwd_chunk_partial_lost") == std::vector<std::string>{"backward", "forward", "ikbo"});
  CHECK(section_order("lce_map_contiguous") == std::vector<std::string>{"ikbo", "forward", "backward"});
  CHECK(section_order("bounds_repair_to_last_row") == std::vector<std::string>{"forward", "backward", "ikbo"});
}

TEST_CASE("mutate: the command line", "[mutate]") {
  const cli::Parsed<MutateOptions> p = parse({"--fault", "fwd_mean_missing,bwd_sr_round_nearest",
                                              "--fault", "lce_map_contiguous", "--budget", "30",
                                              "--with-tests", "--verify-arg=--batch",
                                              "--verify-arg=2048", "--no-baseline"});
  REQUIRE(std::holds_alternative<MutateOptions>(p));
  const MutateOptions& o = std::get<MutateOptions>(p);
  CHECK(o.faults == std::vector<std::string>{"fwd_mean_missing", "bwd_sr_round_nearest",
                                             "lce_map_contiguous"});
  CHECK(o.budget == 30.0);
  CHECK(o.with_tests);
  CHECK_FALSE(o.baseline);
  CHECK(o.verify_args == std::vector<std::string>{"--batch", "2048"});
  CHECK(o.save_cases);
  CHECK_FALSE(std::get<MutateOptions>(parse({"--no-cases"})).save_cases);
  CHECK(std::get<MutateOptions>(parse({"--cases", "/tmp/c"})).cases == "/tmp/c");
  CHECK(o.verify == "/nowhere/tbe-verify");  // neither default exists: the first form

  const cli::Parsed<MutateOptions> list = parse({"--list"});
  REQUIRE(std::holds_alternative<MutateOptions>(list));
  CHECK(std::get<MutateOptions>(list).list);

  auto usage = [](const std::vector<std::string>& args) {
    const cli::Parsed<MutateOptions> e = parse(args);
    REQUIRE(std::holds_alternative<cli::Exit>(e));
    CHECK(std::get<cli::Exit>(e).status == cli::kUsageError);
    return std::get<cli::Exit>(e).text;
  };
  CHECK_THAT(usage({"--fault", "nope"}), Catch::Contains("unknown fault 'nope'") &&
                                             Catch::Contains("fwd_mean_missing"));
  CHECK_THAT(usage({"--budget", "0"}), Catch::Contains("--budget"));
  CHECK_THAT(usage({"--budget", "-3"}), Catch::Contains("positive number of seconds"));
  CHECK_THAT(usage({"--frobnicate"}), Catch::Contains("--frobnicate"));
  CHECK_THAT(usage({"--out", ""}), Catch::Contains("empty"));
  CHECK_THAT(usage({"--baseline-only", "--no-baseline"}), Catch::Contains("--baseline-only"));
  CHECK_THAT(usage({"--baseline-only", "--fault", "seq_wrong_row"}), Catch::Contains("--baseline-only"));
  CHECK(std::get<MutateOptions>(parse({"--baseline-only"})).baseline_only);
  CHECK(std::get<cli::Exit>(parse({"--help"})).status == 0);
}

TEST_CASE("mutate: --list prints the catalogue", "[mutate]") {
  std::ostringstream os;
  print_catalogue(os);
  std::size_t lines = 0;
  for (char c : os.str()) lines += c == '\n';
  CHECK(lines == tbe::cuda::kFaults.size());
  CHECK(os.str().find("bwd_eps_inside_sqrt\tkernels/backward_optimizer.cuh: apply_row\t") !=
        std::string::npos);
}

TEST_CASE("mutate: a whole campaign against a stand-in for the mutation build's tbe-verify", "[mutate]") {
  // The stand-in behaves like a mutation build: it refuses an unknown TBE_MUTANT, announces the
  // active fault, fails its first forward row under fwd_mean_missing (a fail line, then it would
  // run on), and passes otherwise.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tbe_mutate_test_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path verify = dir / "tbe-verify";
  {
    std::ofstream s(verify);
    s << "#!/bin/sh\n"
         "case \"$TBE_MUTANT\" in\n"
         "  '') ;;\n"
         "  fwd_mean_missing|bwd_sr_offset_ignored) echo \"tbe mutation build: fault $TBE_MUTANT active\" >&2 ;;\n"
         "  *) echo \"tbe mutation build: TBE_MUTANT: unknown fault '$TBE_MUTANT'\" >&2; exit 3 ;;\n"
         "esac\n"
         "echo \"args: $*\"\n"
         "if [ \"$TBE_MUTANT\" = fwd_mean_missing ]; then\n"
      << "  echo '" << judge::format_fail_line({"forward", "pool=mean", "gpu oracle", "D/c", "tbe-verify replay D/c"})
      << "' >&2\n"
         "  sleep 30\n"
         "fi\n"
         "exit 0\n";
  }
  fs::permissions(verify, fs::perms::owner_all);
  MutateOptions o;
  o.verify = verify.string();
  o.faults = {"fwd_mean_missing", "bwd_sr_offset_ignored"};
  o.out = (dir / "out").string();
  o.json = (dir / "kill.json").string();
  o.budget = 20;
  std::ostringstream table, log;
  CHECK(run_campaign(o, table, log) == 1);  // bwd_sr_offset_ignored survives
  const std::string t = table.str();
  INFO(t << log.str());
  CHECK(t.find("baseline (no fault): main job survived") != std::string::npos);
  CHECK(t.find("killed 1 of 2 faults (main job alone: 1)") != std::string::npos);
  CHECK(t.find("forward: pool=mean  case D/c  replay: tbe-verify replay D/c") != std::string::npos);
  CHECK(t.find("not killed:\n  bwd_sr_offset_ignored") != std::string::npos);
  const std::string flog = read_text(o.out + "/fwd_mean_missing.log");
  CHECK(flog.find("args: --require-gpu --save-failures " + o.out +
                  "/fwd_mean_missing --save-failures-max 1 --rows forward") != std::string::npos);
  // bwd_: its own section first, then the others (each child passed)
  const std::string blog = read_text(o.out + "/bwd_sr_offset_ignored.log");
  CHECK(blog.find("--rows backward") < blog.find("--rows forward"));
  CHECK(blog.find("--rows forward") < blog.find("--rows ikbo"));
  CHECK(nlohmann::json::parse(read_text(o.json))["faults"][0]["verify"]["failure"]["check"] == "gpu oracle");

  // --baseline-only: the baseline, no fault (exit 0 when it passed)
  MutateOptions b = o;
  b.baseline_only = true;
  b.faults.clear();
  std::ostringstream t3;
  CHECK(run_campaign(b, t3, log) == 0);
  CHECK(t3.str().find("killed 0 of 0 faults") != std::string::npos);

  // a binary that ignores TBE_MUTANT is not a mutation build: exit 3 before any fault runs
  o.verify = "/bin/true";
  std::ostringstream t2;
  CHECK(run_campaign(o, t2, log) == 3);
  CHECK(t2.str().find("is not a mutation build") != std::string::npos);
  fs::remove_all(dir);
}
