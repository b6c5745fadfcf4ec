// tbe-bench's command line (CLI11, bench_args.cpp): the subcommands `forward`, `backward`,
// `ikbo-lce` (CUDA) and `cpu` (the CPU fallback, no device) with their options. Plain C++ (no
// CUDA, no CLI11 in this header): the benchmarks take these structs,
// tests/tools/test_bench_args.cpp checks the parser on the CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cli/cli_exit.h"
#include "tbe/ikbo.h"
#include "tbe/types.h"

namespace tbe::bench {

/// Largest --batch of `forward` and `backward`; largest --iters of every subcommand.
inline constexpr std::int64_t kMaxBenchBatch = std::int64_t{1} << 22;
inline constexpr int kMaxBenchIters = 100000;
/// Candidates per user of the ikbo-fa shape (docs/ikbo.md): `tbe-bench ikbo-fa --batch B` takes
/// a multiple of it, U = B / kIkboFaCandidatesPerUser users.
inline constexpr std::int64_t kIkboFaCandidatesPerUser = 64;

/// `tbe-bench forward` (bench/tbe_bench.cu).
struct ForwardArgs {
  std::string workload = "seed-large";  ///< --workload: any of named_workload_names()
  std::int64_t batch = 0;               ///< --batch B (0: the workload's own B)
  int iters = 20;                       ///< --iters N
  std::string json_path;                ///< --json FILE, "" for none
  std::string npy_dir;                  ///< --dump-npy DIR, "" for none (one D workloads only)
  std::string only;                     ///< --only NAMES: comma-separated variant names ("" all)
  /// --auto-min-bags N: ForwardTuning::staged_auto_min_bags of the variants on the default
  /// (Auto) kernel choice; -1: the library's default.
  std::int64_t auto_min_bags = -1;
};

/// `tbe-bench backward` (bench/backward_bench.cu).
struct BackwardArgs {
  std::string workload = "seed-large";  ///< --workload: any of named_workload_names()
  std::int64_t batch = 0;  ///< --batch B (0: the workload's own B)
  int iters = 20;          ///< --iters N
  BoundsCheckMode bounds = BoundsCheckMode::Warning;  ///< --bounds: warning or none
  std::string json_path;   ///< --json FILE, "" for none
  std::string npy_dir;     ///< --dump-npy DIR, "" for none (one D workloads only)
  std::string only;        ///< --only NAMES: comma-separated variant names ("" all)
  /// --long-threshold N / --chunk-size N: BackwardStrategy::long_run_threshold / chunk_size of
  /// every variant (0: the strategy's default; tbe::validate(p, s) checks the values)
  std::int32_t long_threshold = 0;
  std::int32_t chunk_size = 0;
  /// --interleave-chunk-every N: cuda::BackwardTuning::interleave_chunk_every of every variant
  /// (used where short runs and chunks take one launch; 0: the tuning's default)
  std::int32_t interleave_chunk_every = 0;
  /// --priority same|transpose|forward: which stream of the hoisted forward + backward timing
  /// (the TransposeOp beside the forward) is created with the device's greatest priority
  std::string priority = "same";
  /// --transpose-keys auto|linear-ids|row-bits: cuda::TransposeTuning::keys of every variant's
  /// transpose (inline and hoisted)
  std::string transpose_keys = "auto";
};

/// `tbe-bench ikbo-lce` (bench/ikbo_lce_bench.cu).
struct IkboLceArgs {
  int iters = 20;          ///< --iters N
  std::string json_path;   ///< --json FILE, "" for none
  bool sweeps = true;      ///< false with --no-sweeps or --quick
  bool quick = false;      ///< --quick: published shape FP16 only, two roundings
  bool sweeps_only = false;  ///< --sweeps-only
  ikbo::LceRounding sweep_rounding = ikbo::LceRounding::RoundOnce;  ///< --sweep-rounding R
  std::vector<ikbo::LceRounding> roundings;  ///< --rounding R (repeatable); empty: the default set
};

/// `tbe-bench ikbo-fa` (bench/ikbo_fa_bench.cu).
struct IkboFaArgs {
  int iters = 20;                       ///< --iters N
  std::string json_path;                ///< --json FILE, "" for none
  std::int64_t batch = 2048;            ///< --batch B, a multiple of 64 (U = B / 64)
  std::vector<std::int64_t> seqs = {512, 1024, 2048, 4096, 8192, 16384};  ///< --seq S (repeatable)
  std::vector<DType> dtypes = {DType::BF16, DType::F16};                  ///< --dtype T (repeatable)
  bool unsorted = false;                ///< --unsorted: also a shuffled map
  std::int64_t dh = 128;                ///< --dh: head dimension Dh, 64 or 128
  std::string kernel = "all";           ///< --kernel: all, wgmma or mma-sync (the variants timed)
  int warmup_ms = 0;                    ///< --warmup-ms: untimed calls per row after the 3 warm-ups
};

/// `tbe-bench small-table` (bench/small_table_bench.cu): the histogram path vs the generic path.
struct SmallTableArgs {
  std::int64_t batch = 0;  ///< --batch B (0: the small-table workload's B; the sweep 16384)
  int iters = 20;          ///< --iters N
  std::string json_path;   ///< --json FILE, "" for none
  std::string npy_dir;     ///< --dump-npy DIR, "" for none
  std::string only;        ///< --only: comma-separated case names, "" for all
};

/// `tbe-bench cpu` (bench/cpu_bench.cpp): the CPU fallback's forward and backward.
struct CpuArgs {
  std::string workload = "seed-large";  ///< --workload: any of named_workload_names()
  std::int64_t batch = 0;               ///< --batch B (0: the workload's own B)
  int iters = 5;                        ///< --iters N
  int threads = 0;                      ///< --threads N (0: OpenMP's default, OMP_NUM_THREADS)
  std::string json_path;                ///< --json FILE, "" for none
  std::string npy_dir;                  ///< --dump-npy DIR, "" for none
};

/// The subcommand named on the command line and its arguments (the others keep defaults).
struct BenchCommand {
  enum class Kind { Forward, Backward, IkboLce, IkboFa, Cpu, SmallTable };
  Kind kind = Kind::Forward;
  ForwardArgs forward;
  BackwardArgs backward;
  IkboLceArgs ikbo_lce;
  IkboFaArgs ikbo_fa;
  CpuArgs cpu;
  SmallTableArgs small_table;
};

/// Parses tbe-bench's command line (argv[0] is the program). Returns the command, or how to end:
/// --help (status 0, the help of the command named) or a usage error (status 2, a message naming
/// the flag): no or an unknown subcommand, an unknown flag, a missing value, a number out of range
/// or not decimal, an ikbo-fa --batch that is not a multiple of kIkboFaCandidatesPerUser, a bad
/// name (--workload, --bounds, --rounding, --sweep-rounding). Touches no device: main() calls it
/// before looking for one.
cli::Parsed<BenchCommand> parse_bench_args(int argc, const char* const* argv);

/// The variants of `names` that --only NAMES (comma-separated, "" = all) selects, in their order.
/// A name of `only` that is not in `names` is a usage error: std::invalid_argument naming
/// --only, the name and the known names (forward and backward check it before the workload is
/// generated: bench_common.h only_variants).
std::vector<std::string> select_variants(const std::vector<std::string>& names,
                                         const std::string& only);

/// The subcommands; each returns the exit status (the CUDA ones 77 without a CUDA device; a
/// TBE_CUDA=OFF build has only cpu_main, bench_main.cpp).
int forward_main(const ForwardArgs& args);    // bench/tbe_bench.cu
int backward_main(const BackwardArgs& args);  // bench/backward_bench.cu
int ikbo_lce_main(const IkboLceArgs& args);   // bench/ikbo_lce_bench.cu
int ikbo_fa_main(const IkboFaArgs& args);     // bench/ikbo_fa_bench.cu
int cpu_main(const CpuArgs& args);            // bench/cpu_bench.cpp (no CUDA call)
int small_table_main(const SmallTableArgs& args);  // bench/small_table_bench.cu

}  // namespace tbe::bench
