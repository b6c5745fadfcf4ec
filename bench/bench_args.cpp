// tbe-bench's command line on CLI11 (see bench_args.h).
#include "bench_args.h"

#include <algorithm>
#include <stdexcept>

#include "cli/cli_parse.h"
#include "tbe/workloads.h"

namespace tbe::bench {
namespace {

/// --iters N of the CUDA subcommands.
void add_iters(CLI::App& sub, int& iters) {
  cli::add_decimal(sub, "--iters", "N", iters, 1, kMaxBenchIters,
                   "timed iterations after 3 warm-up calls (default 20)");
}

/// --batch B of `forward`, `backward` and `cpu`.
void add_batch(CLI::App& sub, std::int64_t& batch, const char* description) {
  cli::add_decimal(sub, "--batch", "B", batch, std::int64_t{1}, kMaxBenchBatch, description);
}

/// --workload W of `forward`, `backward` and `cpu`: one of named_workload_names().
void add_workload(CLI::App& sub, std::string& workload, const char* description) {
  sub.add_option("--workload", workload, description)
      ->type_name("W")
      ->check(CLI::IsMember(named_workload_names()));
}

void add_forward(CLI::App& app, ForwardArgs& a) {
  CLI::App* sub = app.add_subcommand("forward", "the CUDA TBE forward on a named workload");
  sub->footer(
      "Times the CUDA forward on a named workload (CUDA events, median/min/max over N\n"
      "iterations after warm-up, L2 flushed between iterations) in every variant (no check,\n"
      "fused and separate bounds check, FP32/FP16 weights, tuning variants), counts bytes\n"
      "(unique rows, all gathered rows, indices, offsets, output) and reports % of the device\n"
      "copy bandwidth measured in the same run. Exits 77 when no CUDA device is visible.");
  add_workload(*sub, a.workload,
               "the named workload (default seed-large; mixed-D ones such as prod-mixed count "
               "each table's D; fbgemm-bench-default is launch-bound at B = 512)");
  add_batch(*sub, a.batch, "batch size B (default: the workload's)");
  add_iters(*sub, a.iters);
  sub->add_option("--json", a.json_path, "write the results as JSON")->type_name("FILE");
  sub->add_option("--dump-npy", a.npy_dir,
                  "write the inputs as .npy files for bench/peer_embedding_bag.py and "
                  "bench/peer_tbe_forward.py")
      ->type_name("DIR");
  sub->add_option("--only", a.only,
                  "time only these variants (comma-separated names as printed, e.g. "
                  "fp32.nocheck,fp16.nocheck; for a profiler run)")
      ->type_name("NAMES");
  cli::add_decimal(*sub, "--auto-min-bags", "N", a.auto_min_bags, std::int64_t{0},
                   std::int64_t{1} << 40,
                   "ForwardTuning::staged_auto_min_bags of the default (Auto) variants: launches "
                   "of at least N bags take the streamed kernel (default: the library's, 2^17)");
}

void add_backward(CLI::App& app, BackwardArgs& a) {
  CLI::App* sub =
      app.add_subcommand("backward", "the CUDA TBE backward + exact optimizer on a named workload");
  sub->footer(
      "Times the CUDA backward + exact optimizer on a named workload's lookups (default\n"
      "seed-large) with FP32 weights (SGD, rowwise Adagrad) and FP16 weights (rowwise Adagrad),\n"
      "transpose inside backward or hoisted, plus forward + backward totals; CUDA events after\n"
      "warm-up, L2 flushed, median/min/max; split across preprocessing / routing / short runs /\n"
      "long chunks / long apply; bytes counted (each lookup with its table's D) against the\n"
      "device copy bandwidth measured in the same run. Exits 77 when no CUDA device is visible.");
  add_workload(*sub, a.workload,
               "the named workload (default seed-large; prod-mixed has tables of different D "
               "and E; fbgemm-bench-default is launch-bound at B = 512)");
  add_batch(*sub, a.batch, "batch size B (default: the workload's; 8192 for quick runs)");
  add_iters(*sub, a.iters);
  cli::add_parsed(
      *sub, "--bounds", a.bounds,
      [](const std::string& s) {
        const BoundsCheckMode m = parse_bounds_check(s, "--bounds");
        if (m != BoundsCheckMode::Warning && m != BoundsCheckMode::None)
          throw std::invalid_argument("'" + s + "' is not allowed here (allowed: warning, none)");
        return m;
      },
      "bounds-check mode of the workload: warning (default) or none")
      ->type_name("MODE");
  sub->add_option("--json", a.json_path, "write the results as JSON")->type_name("FILE");
  sub->add_option("--dump-npy", a.npy_dir,
                  "write indices/offsets for bench/peer_backward.py (one D workloads only)")
      ->type_name("DIR");
  sub->add_option("--only", a.only,
                  "time only these variants (comma-separated names as printed, e.g. "
                  "fp32.sgd.hoisted; for a profiler run)")
      ->type_name("NAMES");
  sub->add_option("--priority", a.priority,
                  "hoisted forward + backward: the stream created with the device's greatest "
                  "priority, so that its blocks are scheduled first (same: neither, the default; "
                  "transpose: the TransposeOp's; forward: the forward's and the backward's)")
      ->check(CLI::IsMember({"same", "transpose", "forward"}))
      ->type_name("STREAM");
  sub->add_option("--transpose-keys", a.transpose_keys,
                  "cuda::TransposeTuning::keys of every variant's transpose, inline and hoisted "
                  "(auto, the default: linear ids; linear-ids; row-bits)")
      ->check(CLI::IsMember({"auto", "linear-ids", "row-bits"}))
      ->type_name("KEYS");
  cli::add_decimal(*sub, "--interleave-chunk-every", "N", a.interleave_chunk_every, std::int32_t{1},
                   std::int32_t{64},
                   "cuda::BackwardTuning::interleave_chunk_every of every variant whose short "
                   "runs and chunks take one launch: every N-th warp starts on the long-run "
                   "chunks (default 1)");
  cli::add_decimal(*sub, "--long-threshold", "N", a.long_threshold, std::int32_t{1},
                   std::int32_t{1} << 20,
                   "BackwardStrategy::long_run_threshold: runs of at least N lookups take the "
                   "long-run chunks (default: the strategy's, 256)");
  cli::add_parsed(
      *sub, "--chunk-size", a.chunk_size,
      [](const std::string& text) {
        const std::int32_t c = cli::parse_decimal(text, std::int32_t{32}, std::int32_t{4096});
        if (c % 32 != 0)
          throw std::invalid_argument("'" + text + "' is not a multiple of 32 (chunks are whole "
                                      "warps of lookups)");
        return c;
      },
      "BackwardStrategy::chunk_size: lookups per long-run chunk, a multiple of 32 in [32, 4096] "
      "(default: the strategy's, 256)")
      ->type_name("N");
}

void add_ikbo_lce(CLI::App& app, IkboLceArgs& a) {
  CLI::App* sub = app.add_subcommand(
      "ikbo-lce", "the IKBO linear compression stages against the broadcast baseline");
  sub->footer(
      "Times the IKBO LCE stages (decomposed, padded-k, fused epilogue, l2-chunked,\n"
      "lt-epilogue; tbe::cuda::LceOp) and the broadcast + one GEMM baseline on the ikbo-lce\n"
      "shape (FP16, BF16; the three rounding policies, or only --rounding R) and its sweeps\n"
      "over B and candidates per user (FP16, --sweep-rounding). CUDA events, median / min /\n"
      "max over N iterations after warm-up, L2 flushed between iterations; TFLOP/s on the\n"
      "decomposed work 2*M*N*(B*K_c + U*K_u) and as % of a cuBLAS 8192^3 GEMM measured in\n"
      "the same run. Exits 77 when no CUDA device is visible.");
  add_iters(*sub, a.iters);
  sub->add_option("--json", a.json_path, "write the results as JSON")->type_name("FILE");
  sub->add_flag_callback("--no-sweeps", [&a] { a.sweeps = false; }, "skip the two sweeps");
  sub->add_flag_callback(
      "--quick", [&a] { a.quick = true, a.sweeps = false; },
      "published shape FP16 only, round-once and user-rounded (or\n"
      "--rounding); no sweeps");
  sub->add_flag("--sweeps-only", a.sweeps_only, "only the sweeps");
  const auto rounding = [](const std::string& s) {
    return ikbo::parse_lce_rounding(s, "--rounding");
  };
  sub->add_option_function<std::vector<std::string>>(
         "--rounding",
         [&a, rounding](const std::vector<std::string>& names) {
           for (const std::string& n : names) a.roundings.push_back(rounding(n));
         },
         "time the published shape under rounding R only: round-once, published\n"
         "or user-rounded (repeatable; default: the three)")
      ->type_name("R")
      ->take_all()
      ->allow_extra_args(false)  // one R per --rounding
      ->check(cli::parsed_by("--rounding", rounding));
  cli::add_parsed(
      *sub, "--sweep-rounding", a.sweep_rounding,
      [](const std::string& s) { return ikbo::parse_lce_rounding(s, "--sweep-rounding"); },
      "rounding policy of the sweeps (default round-once)")
      ->type_name("R");
}

void add_ikbo_fa(CLI::App& app, IkboFaArgs& a) {
  CLI::App* sub = app.add_subcommand(
      "ikbo-fa", "the IKBO cross attention (per-user K/V reuse) on the ikbo-fa shape");
  sub->footer(
      "Times tbe::cuda::AttentionOp (map check, device grouping by user, attention kernel):\n"
      "the mma.sync kernel's five tunings (key block 64, key block 128 [+ Q in registers]\n"
      "[+ 3 stages]) and the wgmma kernel's schedules (default serial order; ping-pong;\n"
      "FA3's pipelined order with and without ping-pong; device-wide grouping; register\n"
      "epilogue) (or --kernel K) on the\n"
      "ikbo-fa shape: B candidates (default 2048), H=2, n_seed=64, Dh=128 (or --dh 64), 64\n"
      "candidates per user, S in {512, ..., 16384} (or --seq), BF16 and FP16 (or --dtype).\n"
      "CUDA events, median / min / max over N iterations after warm-up, L2\n"
      "flushed between iterations; TFLOP/s on 4*B*H*n_seed*S*Dh and as % of a cuBLAS BF16\n"
      "8192^3 GEMM measured in the same run. Peers: bench/peer_ikbo_fa.py. Exits 77 when no\n"
      "CUDA device is visible.");
  add_iters(*sub, a.iters);
  sub->add_option("--json", a.json_path, "write the results as JSON")->type_name("FILE");
  constexpr std::int64_t per_user = kIkboFaCandidatesPerUser, max_batch = std::int64_t{1} << 20;
  cli::add_parsed(
      *sub, "--batch", a.batch,
      [](const std::string& text) {
        const std::int64_t b = cli::parse_decimal(text, per_user, max_batch);
        if (b % per_user != 0)
          throw std::invalid_argument("'" + text + "' is not a multiple of " +
                                      std::to_string(per_user) + " (the ikbo-fa shape has " +
                                      std::to_string(per_user) + " candidates per user)");
        return b;
      },
      "candidates B, a multiple of 64 (U = B / 64 users; default 2048)")
      ->type_name("B:[" + std::to_string(per_user) + ", " + std::to_string(max_batch) + "]");
  constexpr std::int64_t max_seq = std::int64_t{1} << 20;
  const auto seq = [](const std::string& text) {
    return cli::parse_decimal(text, std::int64_t{1}, max_seq);
  };
  sub->add_option_function<std::vector<std::string>>(
         "--seq",
         [&a, seq](const std::vector<std::string>& v) {
           a.seqs.clear();
           for (const std::string& text : v) a.seqs.push_back(seq(text));
         },
         "keys per user S (repeatable; default 512 1024 2048 4096 8192 16384)")
      ->type_name("S:[1, " + std::to_string(max_seq) + "]")
      ->check(cli::parsed_by("--seq", seq));
  sub->add_option_function<std::vector<std::string>>(
         "--dtype",
         [&a](const std::vector<std::string>& v) {
           a.dtypes.clear();
           for (const std::string& n : v) a.dtypes.push_back(n == "fp16" ? DType::F16 : DType::BF16);
         },
         "storage type: bf16 or fp16 (repeatable; default both)")
      ->type_name("T")
      ->check(CLI::IsMember({"bf16", "fp16"}));
  sub->add_flag("--unsorted", a.unsorted, "also time a shuffled map");
  sub->add_option("--dh", a.dh, "head dimension Dh (64 or 128; default 128, the published shape)")
      ->type_name("D")
      ->check(CLI::IsMember({std::int64_t{64}, std::int64_t{128}}));
  sub->add_option("--kernel", a.kernel,
                  "time the variants of one kernel only: wgmma or mma-sync (default all)")
      ->type_name("K")
      ->check(CLI::IsMember({"all", "wgmma", "mma-sync"}));
  cli::add_decimal(*sub, "--warmup-ms", "MS", a.warmup_ms, 0, 60000,
                   "after the 3 warm-up calls, keep calling each row's kernel (L2 flushed before "
                   "each call, as timed) for MS milliseconds before timing it: the clock settles "
                   "under the power limit (default 0; bench/peer_ikbo_fa.py has the same option)");
}

void add_cpu(CLI::App& app, CpuArgs& a) {
  CLI::App* sub = app.add_subcommand(
      "cpu", "the CPU fallback (FP64 reference, OpenMP) forward and backward; no GPU");
  sub->footer(
      "Times the CPU fallback (the reference backend) on a named workload: forward with FP32\n"
      "and FP16 weights, backward + exact SGD and + exact rowwise Adagrad with FP32 and FP16\n"
      "weights (in place, one backend object whose workspace persists across calls). Wall\n"
      "clock after 1 warm-up call, median/min/max over N iterations; lookups/s and bytes\n"
      "counted against the host copy bandwidth measured in the same run. Makes no CUDA call.\n"
      "--dump-npy writes the inputs for bench/peer_fbgemm_cpu.py.");
  add_workload(*sub, a.workload, "the named workload (default seed-large)");
  add_batch(*sub, a.batch, "batch size B (default: the workload's)");
  cli::add_decimal(*sub, "--iters", "N", a.iters, 1, kMaxBenchIters,
                   "timed iterations after 1 warm-up call (default 5)");
  cli::add_decimal(*sub, "--threads", "N", a.threads, 1, 1024,
                   "OpenMP threads (default: OpenMP's, e.g. OMP_NUM_THREADS)");
  sub->add_option("--json", a.json_path, "write the results as JSON")->type_name("FILE");
  sub->add_option("--dump-npy", a.npy_dir,
                  "write the inputs (indices, offsets, FP32 weights, grad_output, meta.json)\n"
                  "for bench/peer_fbgemm_cpu.py")
      ->type_name("DIR");
}

void add_small_table(CLI::App& app, SmallTableArgs& a) {
  CLI::App* sub = app.add_subcommand(
      "small-table", "the small-table histogram path vs the generic path (CUDA)");
  sub->footer(
      "Forward and forward + backward (exact rowwise Adagrad) with the small-table path on\n"
      "(SmallTableTuning Auto, saved counts) and off, on the small-table workload and on one-\n"
      "feature problems E in {8, 32, 64} x L in {64, 128, 512} (D = 96, FP16). CUDA events,\n"
      "3 warm-ups, 256 MiB L2 flush per iteration, medians. --dump-npy writes the inputs for\n"
      "bench/peer_small_table.py (docs/small-table.md).");
  add_batch(*sub, a.batch, "batch size B (default: the workload's; the sweep 16384)");
  cli::add_decimal(*sub, "--iters", "N", a.iters, 1, kMaxBenchIters,
                   "timed iterations after 3 warm-ups (default 20)");
  sub->add_option("--json", a.json_path, "write the results as JSON")->type_name("FILE");
  sub->add_option("--dump-npy", a.npy_dir,
                  "write each case's inputs under DIR/<case>/ for bench/peer_small_table.py")
      ->type_name("DIR");
  sub->add_option("--only", a.only,
                  "time only these cases (comma-separated names as printed, e.g. "
                  "E8.L64,small-table; for a profiler run)")
      ->type_name("NAMES");
}

}  // namespace

std::vector<std::string> select_variants(const std::vector<std::string>& names,
                                         const std::string& only) {
  if (only.empty()) return names;
  std::vector<std::string> wanted;
  for (std::size_t b = 0; b <= only.size();) {
    const std::size_t e = std::min(only.find(',', b), only.size());
    if (e > b) wanted.push_back(only.substr(b, e - b));
    b = e + 1;
  }
  for (const std::string& w : wanted)
    if (std::find(names.begin(), names.end(), w) == names.end()) {
      std::string known;
      for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
      throw std::invalid_argument("--only: '" + w + "' is not a variant (known: " + known + ")");
    }
  std::vector<std::string> out;
  for (const std::string& n : names)
    if (std::find(wanted.begin(), wanted.end(), n) != wanted.end()) out.push_back(n);
  return out;
}

cli::Parsed<BenchCommand> parse_bench_args(int argc, const char* const* argv) {
  BenchCommand cmd;
  CLI::App app("Benchmarks of the CUDA TBE and IKBO kernels (bench/).", "tbe-bench");
  cli::set_conventions(app);
  add_forward(app, cmd.forward);
  add_backward(app, cmd.backward);
  add_ikbo_lce(app, cmd.ikbo_lce);
  add_ikbo_fa(app, cmd.ikbo_fa);
  add_cpu(app, cmd.cpu);
  add_small_table(app, cmd.small_table);
  app.require_subcommand(0, 1);  // none is reported below (CLI11 would not name a bad one)
  app.footer(  // after the subcommands, which would inherit it
      "`tbe-bench SUBCOMMAND --help` describes each one. Exit status: 0 after the run, 2 for a\n"
      "bad command line (checked before any device work), 77 when no CUDA device is visible\n"
      "(forward, backward, ikbo-lce, ikbo-fa, small-table; `cpu` needs none).");
  if (std::optional<cli::Exit> exit = cli::parse(app, argc, argv)) return *exit;
  if (app.get_subcommands().empty())
    return cli::usage_error(
        app, "a subcommand is required (forward, backward, ikbo-lce, ikbo-fa, small-table, cpu)");
  const std::string name = app.get_subcommands().front()->get_name();
  cmd.kind = name == "forward"    ? BenchCommand::Kind::Forward
             : name == "backward" ? BenchCommand::Kind::Backward
             : name == "cpu"      ? BenchCommand::Kind::Cpu
             : name == "small-table" ? BenchCommand::Kind::SmallTable
             : name == "ikbo-fa"  ? BenchCommand::Kind::IkboFa
                                  : BenchCommand::Kind::IkboLce;
  return cmd;
}

}  // namespace tbe::bench
