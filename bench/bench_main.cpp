// tbe-bench's main(): parses the command line (bench_args.cpp) before any device work, then runs
// the subcommand. A TBE_CUDA=OFF build (TBE_BENCH_CUDA 0) has only `cpu`; the CUDA subcommands
// there exit 77 (skipped), as they do on a machine without a GPU.
#include <cstdio>
#include <exception>
#include <variant>

#include "bench_args.h"

namespace {

using tbe::bench::BenchCommand;

int run(const BenchCommand& cmd) {
  switch (cmd.kind) {
    case BenchCommand::Kind::Cpu: return tbe::bench::cpu_main(cmd.cpu);
#if TBE_BENCH_CUDA
    case BenchCommand::Kind::Forward: return tbe::bench::forward_main(cmd.forward);
    case BenchCommand::Kind::Backward: return tbe::bench::backward_main(cmd.backward);
    case BenchCommand::Kind::IkboLce: return tbe::bench::ikbo_lce_main(cmd.ikbo_lce);
    case BenchCommand::Kind::IkboFa: return tbe::bench::ikbo_fa_main(cmd.ikbo_fa);
    case BenchCommand::Kind::SmallTable: return tbe::bench::small_table_main(cmd.small_table);
#else
    case BenchCommand::Kind::Forward:
    case BenchCommand::Kind::Backward:
    case BenchCommand::Kind::IkboLce:
    case BenchCommand::Kind::IkboFa:
    case BenchCommand::Kind::SmallTable: break;
#endif
  }
  std::fprintf(stderr, "tbe-bench: this build has no CUDA (TBE_CUDA=OFF); only `cpu` runs here\n");
  return 77;
}

}  // namespace

int main(int argc, char** argv) {
  const tbe::cli::Parsed<BenchCommand> parsed = tbe::bench::parse_bench_args(argc, argv);
  if (const tbe::cli::Exit* exit = std::get_if<tbe::cli::Exit>(&parsed))
    return tbe::cli::finish(*exit);  // before any device work: usage errors need no GPU
  try {
    return run(std::get<BenchCommand>(parsed));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tbe-bench: error: %s\n", e.what());
    return 3;
  }
}
