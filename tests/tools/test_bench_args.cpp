// tbe-bench's command line (bench/bench_args.h), on the CPU: defaults, every option's value per
// subcommand, --help, and usage errors (exit status 2, the message naming the flag). The binary's
// own exit statuses are checked by tests/tools/run_bench_usage.cmake.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "bench_args.h"

using namespace tbe;
using namespace tbe::bench;

namespace {

cli::Parsed<BenchCommand> parse(std::vector<const char*> args) {
  args.insert(args.begin(), "tbe-bench");
  return parse_bench_args(static_cast<int>(args.size()), args.data());
}

BenchCommand command(const std::vector<const char*>& args) {
  const cli::Parsed<BenchCommand> p = parse(args);
  if (const cli::Exit* e = std::get_if<cli::Exit>(&p)) FAIL("unexpected exit " << e->status << ": " << e->text);
  return std::get<BenchCommand>(p);
}

cli::Exit exit_of(const std::vector<const char*>& args) {
  const cli::Parsed<BenchCommand> p = parse(args);
  REQUIRE(std::holds_alternative<cli::Exit>(p));
  return std::get<cli::Exit>(p);
}

void check_usage_error(const std::vector<const char*>& args, const std::string& what) {
  const cli::Exit e = exit_of(args);
  CHECK(e.status == cli::kUsageError);
  CHECK(e.text.rfind("tbe-bench: ", 0) == 0);
  CHECK_THAT(e.text, Catch::Contains(what));
}

}  // namespace

TEST_CASE("bench args: forward, defaults and every option", "[cli]") {
  const BenchCommand d = command({"forward"});
  CHECK(d.kind == BenchCommand::Kind::Forward);
  CHECK(d.forward.workload == "seed-large");
  CHECK(d.forward.batch == 0);
  CHECK(d.forward.iters == 20);
  CHECK(d.forward.json_path.empty());
  CHECK(d.forward.npy_dir.empty());
  const ForwardArgs a = command({"forward", "--workload", "seed-large-fp16", "--batch", "8192",
                                 "--iters=10", "--json", "b.json", "--dump-npy", "/tmp/npy"})
                            .forward;
  CHECK(a.workload == "seed-large-fp16");
  CHECK(a.batch == 8192);
  CHECK(a.iters == 10);
  CHECK(a.json_path == "b.json");
  CHECK(a.npy_dir == "/tmp/npy");
  CHECK(command({"forward", "--batch", "4194304", "--iters", "100000"}).forward.batch ==
        kMaxBenchBatch);
  // --auto-min-bags: ForwardTuning::staged_auto_min_bags of the Auto variants (-1: not given)
  CHECK(d.forward.auto_min_bags == -1);
  CHECK(command({"forward", "--auto-min-bags", "0"}).forward.auto_min_bags == 0);
  CHECK(command({"forward", "--auto-min-bags", "131072"}).forward.auto_min_bags == 131072);
  check_usage_error({"forward", "--auto-min-bags", "-1"}, "--auto-min-bags");
  check_usage_error({"forward", "--auto-min-bags", "2e5"}, "--auto-min-bags: '2e5' is not a decimal integer");
  check_usage_error({"forward", "--auto-min-bags", "1099511627777"}, "--auto-min-bags: '1099511627777' is out of range");
}

TEST_CASE("bench args: backward, defaults and every option", "[cli]") {
  const BenchCommand d = command({"backward"});
  CHECK(d.kind == BenchCommand::Kind::Backward);
  CHECK(d.backward.workload == "seed-large");
  CHECK(d.backward.batch == 0);
  CHECK(d.backward.bounds == BoundsCheckMode::Warning);
  CHECK(d.backward.iters == 20);
  const BackwardArgs a = command({"backward", "--workload", "prod-mixed", "--batch", "8192",
                                  "--iters", "10", "--bounds", "none", "--json", "b.json",
                                  "--dump-npy", "d"})
                             .backward;
  CHECK(a.workload == "prod-mixed");
  CHECK(a.batch == 8192);
  CHECK(a.iters == 10);
  CHECK(a.bounds == BoundsCheckMode::None);
  CHECK(a.json_path == "b.json");
  CHECK(a.npy_dir == "d");
  CHECK(d.backward.only.empty());
  CHECK(command({"backward", "--only", "fp32.sgd.hoisted,fp16.adagrad"}).backward.only ==
        "fp32.sgd.hoisted,fp16.adagrad");
  // --long-threshold / --chunk-size: the backward strategy of every variant (0: its default)
  CHECK(d.backward.long_threshold == 0);
  CHECK(d.backward.chunk_size == 0);
  const BackwardArgs r = command({"backward", "--long-threshold", "64", "--chunk-size", "128"}).backward;
  CHECK(r.long_threshold == 64);
  CHECK(r.chunk_size == 128);
  check_usage_error({"backward", "--long-threshold", "0"}, "--long-threshold: '0' is out of range");
  check_usage_error({"backward", "--chunk-size", "16"}, "--chunk-size: '16' is out of range");
  check_usage_error({"backward", "--chunk-size", "8192"}, "--chunk-size: '8192' is out of range");
  check_usage_error({"backward", "--chunk-size", "33"},
                    "--chunk-size: '33' is not a multiple of 32 (chunks are whole warps of lookups)");
  // --interleave-chunk-every (BackwardTuning::interleave_chunk_every; 0: its default) and
  // --priority (the hoisted forward + backward's stream priorities)
  CHECK(d.backward.interleave_chunk_every == 0);
  CHECK(command({"backward", "--interleave-chunk-every", "3"}).backward.interleave_chunk_every == 3);
  check_usage_error({"backward", "--interleave-chunk-every", "0"}, "--interleave-chunk-every: '0' is out of range");
  check_usage_error({"backward", "--interleave-chunk-every", "65"}, "--interleave-chunk-every: '65' is out of range");
  CHECK(d.backward.priority == "same");
  CHECK(command({"backward", "--priority", "transpose"}).backward.priority == "transpose");
  CHECK(command({"backward", "--priority", "forward"}).backward.priority == "forward");
  check_usage_error({"backward", "--priority", "both"}, "--priority: both not in {same,transpose,forward}");
  // --transpose-keys (cuda::TransposeTuning::keys)
  CHECK(d.backward.transpose_keys == "auto");
  CHECK(command({"backward", "--transpose-keys", "row-bits"}).backward.transpose_keys == "row-bits");
  CHECK(command({"backward", "--transpose-keys", "linear-ids"}).backward.transpose_keys == "linear-ids");
  check_usage_error({"backward", "--transpose-keys", "rows"},
                    "--transpose-keys: rows not in {auto,linear-ids,row-bits}");
  CHECK(command({"small-table"}).small_table.only.empty());
  CHECK(command({"small-table", "--only", "E8.L64,small-table"}).small_table.only == "E8.L64,small-table");
}

TEST_CASE("bench args: --only selects variants in their order; an unknown name is an error", "[cli]") {
  const std::vector<std::string> names = {"fp32.sgd", "fp32.sgd.hoisted", "fp16.adagrad"};
  CHECK(select_variants(names, "") == names);
  CHECK(select_variants(names, "fp16.adagrad,fp32.sgd") ==
        std::vector<std::string>{"fp32.sgd", "fp16.adagrad"});
  CHECK(select_variants(names, "fp32.sgd.hoisted,") == std::vector<std::string>{"fp32.sgd.hoisted"});
  try {
    select_variants(names, "fp32.sgd,fp32.sgdx");
    FAIL("an unknown name must be rejected");
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    CHECK(what.find("--only") != std::string::npos);
    CHECK(what.find("'fp32.sgdx'") != std::string::npos);
    CHECK(what.find("known: fp32.sgd, fp32.sgd.hoisted, fp16.adagrad") != std::string::npos);
  }
}

TEST_CASE("bench args: ikbo-lce, defaults and every option", "[cli]") {
  const BenchCommand d = command({"ikbo-lce"});
  CHECK(d.kind == BenchCommand::Kind::IkboLce);
  CHECK((d.ikbo_lce.sweeps && !d.ikbo_lce.quick && !d.ikbo_lce.sweeps_only));
  CHECK(d.ikbo_lce.roundings.empty());
  CHECK(d.ikbo_lce.sweep_rounding == ikbo::LceRounding::RoundOnce);
  const IkboLceArgs q = command({"ikbo-lce", "--quick"}).ikbo_lce;
  CHECK((q.quick && !q.sweeps));
  CHECK_FALSE(command({"ikbo-lce", "--no-sweeps"}).ikbo_lce.sweeps);
  const IkboLceArgs a =
      command({"ikbo-lce", "--iters", "3", "--json", "i.json", "--sweeps-only", "--rounding",
               "published", "--rounding=user-rounded", "--sweep-rounding", "published"})
          .ikbo_lce;
  CHECK(a.iters == 3);
  CHECK(a.json_path == "i.json");
  CHECK(a.sweeps_only);
  CHECK(a.roundings == std::vector<ikbo::LceRounding>{ikbo::LceRounding::Published,
                                                      ikbo::LceRounding::UserRounded});
  CHECK(a.sweep_rounding == ikbo::LceRounding::Published);
}

TEST_CASE("bench args: ikbo-fa, defaults and every option", "[cli]") {
  const BenchCommand d = command({"ikbo-fa"});
  CHECK(d.kind == BenchCommand::Kind::IkboFa);
  CHECK(d.ikbo_fa.batch == 2048);
  CHECK(d.ikbo_fa.seqs == std::vector<std::int64_t>{512, 1024, 2048, 4096, 8192, 16384});
  CHECK(d.ikbo_fa.dtypes == std::vector<DType>{DType::BF16, DType::F16});
  CHECK_FALSE(d.ikbo_fa.unsorted);
  CHECK(d.ikbo_fa.dh == 128);
  CHECK(d.ikbo_fa.kernel == "all");
  CHECK(d.ikbo_fa.warmup_ms == 0);
  const IkboFaArgs a = command({"ikbo-fa", "--iters", "4", "--json", "f.json", "--batch", "256",
                                "--seq", "4096", "--seq", "8192", "--dtype", "fp16", "--unsorted",
                                "--dh", "64", "--kernel", "wgmma", "--warmup-ms", "300"})
                           .ikbo_fa;
  CHECK(a.iters == 4);
  CHECK(a.json_path == "f.json");
  CHECK(a.batch == 256);
  CHECK(a.seqs == std::vector<std::int64_t>{4096, 8192});
  CHECK(a.dtypes == std::vector<DType>{DType::F16});
  CHECK(a.unsorted);
  CHECK(a.dh == 64);
  CHECK(a.kernel == "wgmma");
  CHECK(a.warmup_ms == 300);
  CHECK_THAT(exit_of({"ikbo-fa", "--help"}).text, Catch::Contains("peer_ikbo_fa.py"));
  check_usage_error({"ikbo-fa", "--warmup-ms", "-1"}, "--warmup-ms");
  check_usage_error({"ikbo-fa", "--warmup-ms", "60001"}, "--warmup-ms");
  check_usage_error({"ikbo-fa", "--dh", "96"}, "--dh");
  check_usage_error({"ikbo-fa", "--kernel", "cutlass"}, "--kernel");
  check_usage_error({"ikbo-fa", "--dtype", "fp32"}, "--dtype");
  check_usage_error({"ikbo-fa", "--seq", "0"}, "--seq");
  check_usage_error({"ikbo-fa", "--batch", "63"}, "--batch");
  // 64 candidates per user: a batch that is not a multiple of 64 is refused, naming the rule
  CHECK(command({"ikbo-fa", "--batch", "64"}).ikbo_fa.batch == 64);
  check_usage_error({"ikbo-fa", "--batch", "100"},
                    "--batch: '100' is not a multiple of 64 (the ikbo-fa shape has 64 candidates "
                    "per user)");
  check_usage_error({"ikbo-fa", "--batch", "1048577"}, "--batch");
  // --seq: decimal integers (010 is ten), "not an integer" and "out of range" told apart
  CHECK(command({"ikbo-fa", "--seq", "010"}).ikbo_fa.seqs == std::vector<std::int64_t>{10});
  check_usage_error({"ikbo-fa", "--seq", "1e3"}, "--seq: '1e3' is not a decimal integer");
  check_usage_error({"ikbo-fa", "--seq", "0"}, "--seq: '0' is out of range [1, 1048576]");
  check_usage_error({"ikbo-fa", "--batch", "32"}, "--batch: '32' is out of range [64, 1048576]");
}

TEST_CASE("bench args: cpu, defaults and every option", "[cli]") {
  const BenchCommand d = command({"cpu"});
  CHECK(d.kind == BenchCommand::Kind::Cpu);
  CHECK(d.cpu.workload == "seed-large");
  CHECK(d.cpu.batch == 0);
  CHECK(d.cpu.iters == 5);
  CHECK(d.cpu.threads == 0);
  CHECK(d.cpu.json_path.empty());
  CHECK(d.cpu.npy_dir.empty());
  const CpuArgs a = command({"cpu", "--workload", "prod-mixed", "--batch", "2048", "--iters",
                             "3", "--threads", "2", "--json", "c.json", "--dump-npy", "d"})
                        .cpu;
  CHECK(a.workload == "prod-mixed");
  CHECK(a.batch == 2048);
  CHECK(a.iters == 3);
  CHECK(a.threads == 2);
  CHECK(a.json_path == "c.json");
  CHECK(a.npy_dir == "d");
}

TEST_CASE("bench args: --help of the tool and of each subcommand exits 0", "[cli]") {
  const cli::Exit root = exit_of({"--help"});
  CHECK(root.status == 0);
  for (const char* text : {"forward", "backward", "ikbo-lce", "ikbo-fa", "cpu", "Exit status"})
    CHECK_THAT(root.text, Catch::Contains(text));
  const cli::Exit fwd = exit_of({"forward", "-h"});
  CHECK(fwd.status == 0);
  for (const char* text : {"tbe-bench forward", "--workload", "--batch", "--iters", "--json",
                           "--dump-npy", "copy bandwidth"})
    CHECK_THAT(fwd.text, Catch::Contains(text));
  CHECK_THAT(exit_of({"backward", "--help"}).text, Catch::Contains("--bounds"));
  CHECK_THAT(exit_of({"ikbo-lce", "--help"}).text, Catch::Contains("--sweep-rounding"));
  CHECK_THAT(exit_of({"cpu", "--help"}).text, Catch::Contains("peer_fbgemm_cpu.py"));
}

TEST_CASE("bench args: bad command lines are usage errors naming the flag", "[cli]") {
  check_usage_error({}, "a subcommand is required");
  check_usage_error({"sideways"}, "sideways");
  check_usage_error({"--iters", "3"}, "--iters");  // options belong to a subcommand
  check_usage_error({"forward", "--bogus"}, "--bogus");
  check_usage_error({"forward", "--batch"}, "--batch");  // missing value
  check_usage_error({"forward", "--batch", "0"}, "--batch: '0' is out of range [1, 4194304]");
  check_usage_error({"backward", "--batch", "4194305"}, "--batch");
  check_usage_error({"ikbo-lce", "--iters", "100001"}, "--iters");
  check_usage_error({"forward", "--iters", "1e3"},
                    "--iters: '1e3' is not a decimal integer (digits 0-9 only)");
  check_usage_error({"forward", "--iters", "-5"}, "--iters");
  check_usage_error({"forward", "--workload", "seed-small"}, "--workload");
  check_usage_error({"backward", "--workload", "seed-small"}, "--workload");
  check_usage_error({"backward", "--bounds", "fatal"}, "--bounds: 'fatal' is not allowed here");
  check_usage_error({"backward", "--bounds", "lenient"}, "--bounds");
  check_usage_error({"ikbo-lce", "--rounding", "nearest"}, "--rounding: 'nearest' is not a rounding");
  check_usage_error({"ikbo-lce", "--rounding", "published", "user-rounded"}, "user-rounded");
  check_usage_error({"ikbo-lce", "--sweep-rounding", "x"}, "--sweep-rounding");
  check_usage_error({"ikbo-lce", "--quick=1"}, "quick");  // a flag takes no value
  check_usage_error({"cpu", "--workload", "seed-small"}, "--workload");
  check_usage_error({"cpu", "--threads", "0"}, "--threads");
  check_usage_error({"cpu", "--iters", "0"}, "--iters");
}
