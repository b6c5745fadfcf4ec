// GPU-vs-reference properties of the CUDA forward (device-level ForwardOp, canaries on), judged by
// the enclosure oracle; bounds-check outcomes compared with tbe::repair / find_first_violation.
#include <algorithm>
#include <filesystem>

#include <rapidcheck/catch.h>

#include "case_gen.h"
#include "gpu_harness.h"
#include "tbe/cuda/backend.h"
#include "tbe/io/case_file.h"
#include "tbe/oracle/forward_oracle.h"

using namespace tbe;
using namespace tbe::test;

namespace {

bool has_path(const ForwardStats& s, const std::string& name) {
  return std::find(s.paths.begin(), s.paths.end(), name) != s.paths.end();
}

/// The GPU output of `c` (strategy `fused`) lies in the oracle's enclosures, the canaries hold and
/// the warning count equals tbe::repair's.
void verify_ok(ForwardCase& c, const Outcome& gpu) {
  RC_ASSERT(gpu.sentinels_intact);
  const ForwardProblem p = c.view();
  const oracle::CheckReport report = oracle::check_forward(p, gpu.output.data());
  RC_LOG() << report.summary() << "\n";
  RC_ASSERT(report.passed());
  const RepairResult expected = repair(p);
  RC_ASSERT(gpu.stats.warnings == expected.warnings);
}

}  // namespace

TEST_CASE("forward on valid input matches the reference in every mode", "[gpu][forward]") {
  rc::prop("valid input: GPU output in the enclosure, no warnings", [] {
    const BoundsCheckMode mode = *rc::gen::element(BoundsCheckMode::Warning, BoundsCheckMode::Ignore,
                                                   BoundsCheckMode::None, BoundsCheckMode::Fatal);
    ForwardCase c = gen_valid_case(mode);
    const bool fused = *rc::gen::arbitrary<bool>();
    const cuda::ForwardTuning tuning = gen_forward_tuning();
    RC_LOG() << describe(c) << " " << describe_gpu(fused, tuning) << "\n";
    FailureRecorder rec("valid-input", c);
    rec.run([&] {
      const Outcome gpu = run_gpu(c, fused, tuning);
      rec.record(gpu, describe_gpu(fused, tuning));
      RC_LOG() << to_string(gpu) << "\n";
      RC_ASSERT(gpu.kind == Outcome::Kind::Ok);
      verify_ok(c, gpu);
      RC_ASSERT(gpu.stats.warnings == 0);
      if (mode == BoundsCheckMode::Warning || mode == BoundsCheckMode::Ignore)
        RC_ASSERT(has_path(gpu.stats, fused ? "bounds.fused" : "bounds.separate"));
      if (mode == BoundsCheckMode::Fatal) RC_ASSERT(has_path(gpu.stats, "bounds.fatal_check"));
      if (has_path(gpu.stats, "forward.pooled.vec4") || has_path(gpu.stats, "forward.pooled.vec8") ||
          has_path(gpu.stats, "forward.pooled.narrow_vec4") || has_path(gpu.stats, "forward.pooled.scalar"))  // a pooled launch ran; 32 bits fit c's tables
        RC_ASSERT(has_path(gpu.stats, tuning.row_index32 ? "forward.pooled.row_index32"
                                                         : "forward.pooled.row_index64"));
    });
  });
}

TEST_CASE("forward repairs malformed input like the reference", "[gpu][forward][bounds]") {
  rc::prop("WARNING/IGNORE: fused and separate in the enclosure, bitwise equal, same count", [] {
    const BoundsCheckMode mode = *rc::gen::element(BoundsCheckMode::Warning, BoundsCheckMode::Ignore);
    ForwardCase c = gen_valid_case(mode);
    gen_malform(c);
    RC_LOG() << describe(c) << "\n";
    // the two runs differ in every knob that must not change a bit of the output
    const cuda::ForwardTuning fused_tuning = gen_forward_tuning();
    cuda::ForwardTuning separate_tuning = gen_forward_tuning();
    separate_tuning.pipelined = !fused_tuning.pipelined;
    separate_tuning.row_index32 = !fused_tuning.row_index32;
    RC_LOG() << describe_gpu(true, fused_tuning) << "; " << describe_gpu(false, separate_tuning) << "\n";
    FailureRecorder rec("repair-malformed", c);
    rec.run([&] {
      const Outcome fused = run_gpu(c, true, fused_tuning);
      const Outcome separate = run_gpu(c, false, separate_tuning);
      RC_LOG() << "fused: " << to_string(fused) << "; separate: " << to_string(separate) << "\n";
      // Recorded: the separate pass if the fused one looks right, else the fused one.
      rec.record(separate, describe_gpu(false, separate_tuning));
      if (fused.kind != Outcome::Kind::Ok || !oracle::check_forward(c.view(), fused.output.data()).passed())
        rec.record(fused, describe_gpu(true, fused_tuning));
      RC_ASSERT(fused.kind == Outcome::Kind::Ok);
      RC_ASSERT(separate.kind == Outcome::Kind::Ok);
      verify_ok(c, fused);
      verify_ok(c, separate);
      RC_ASSERT(count_bit_differences(fused, separate) == 0);
    });
  });
}

TEST_CASE("FATAL reports the same first offender and writes nothing", "[gpu][forward][bounds]") {
  rc::prop("FATAL: same BoundsViolation as the reference, output untouched", [] {
    ForwardCase c = gen_valid_case(BoundsCheckMode::Fatal);
    gen_malform(c);
    RC_LOG() << describe(c) << "\n";
    const bool fused = *rc::gen::arbitrary<bool>();
    const cuda::ForwardTuning tuning = gen_forward_tuning();
    FailureRecorder rec("fatal-offender", c);
    rec.run([&] {
      const Outcome ref = run_reference(c);
      const Outcome gpu = run_gpu(c, fused, tuning);
      rec.record(gpu, describe_gpu(fused, tuning));
      RC_LOG() << "reference: " << to_string(ref) << "; gpu: " << to_string(gpu) << "\n";
      RC_ASSERT(gpu.kind == ref.kind);
      RC_ASSERT(gpu.sentinels_intact);
      if (ref.kind == Outcome::Kind::BoundsCheck) {
        RC_ASSERT(gpu.violation == ref.violation);
        RC_ASSERT(gpu.poison_intact);
      } else {
        verify_ok(c, gpu);  // a mutation may have left the input valid
      }
    });
  });
}

TEST_CASE("GPU repair step equals tbe::repair", "[gpu][bounds]") {
  rc::prop("repair(): offsets, indices and counts equal the reference", [] {
    const BoundsCheckMode mode = *rc::gen::element(BoundsCheckMode::Warning, BoundsCheckMode::Ignore,
                                                   BoundsCheckMode::Fatal);
    ForwardCase c = gen_valid_case(mode);
    if (*rc::gen::arbitrary<bool>()) gen_malform(c);
    RC_LOG() << describe(c) << "\n";
    FailureRecorder rec("repair-step", c);  // inputs only: replay reruns the forward on them
    rec.run([&] {
      const ForwardProblem p = c.view();
      bool ref_threw = false, gpu_threw = false;
      RepairResult ref, gpu;
      BoundsViolation ref_v, gpu_v;
      try { ref = repair(p); } catch (const BoundsCheckError& e) { ref_threw = true; ref_v = e.violation(); }
      try { gpu = repair_gpu(c); } catch (const BoundsCheckError& e) { gpu_threw = true; gpu_v = e.violation(); }
      RC_ASSERT(ref_threw == gpu_threw);
      if (ref_threw) {
        RC_ASSERT(ref_v == gpu_v);
        return;
      }
      RC_ASSERT(gpu.offsets == ref.offsets);
      RC_ASSERT(gpu.indices == ref.indices);
      RC_ASSERT(gpu.warnings == ref.warnings);
      RC_ASSERT(gpu.bad_bags == ref.bad_bags);
      RC_ASSERT(gpu.bad_last_offset == ref.bad_last_offset);
      RC_ASSERT(gpu.bad_indices == ref.bad_indices);
    });
  });
}

TEST_CASE("invalid arguments are rejected like the reference, before any launch", "[gpu][validate]") {
  rc::prop("same InvalidArgument::argument() on both backends", [] {
    ForwardCase c = gen_valid_case(BoundsCheckMode::Warning, CaseLimits{false, true, 12});
    const int what = *rc::gen::inRange(0, 7);
    switch (what) {
      case 0: c.offsets.push_back(c.offsets.back()); break;           // offsets one too long
      case 1: if (c.offsets.size() > 1) c.offsets.pop_back(); else c.offsets.clear(); break;
      case 2: c.dims[0] = 4096; break;                                // D over the limit
      case 3: c.feature_table_map[0] = static_cast<std::int32_t>(c.rows.size()); break;
      case 4: c.options.policy.weights = c.weights_dtype == DType::F32 ? DType::F16 : DType::F32; break;
      case 5:  // NONE with per-sample weights
        c.options.pooling = PoolingMode::None;
        c.per_sample_weights.assign(c.indices.size(), 1.0f);
        break;
      case 6:  // VBE totals that do not match the offsets
        c.vbe_ranks = 1;
        c.vbe_batch_sizes.assign(c.feature_table_map.size(), 1);
        c.vbe_batch_sizes[0] = static_cast<std::int32_t>(c.offsets.size());  // too many bags
        break;
    }
    RC_LOG() << "mutation " << what << ": " << describe(c) << "\n";
    // (an invalid case is written as it is; replay/check then report read_case's InvalidArgument,
    // which names the same argument as the reference)
    FailureRecorder rec("invalid-arguments", c);
    rec.run([&] {
      const Outcome ref = run_reference(c);
      const Outcome gpu = run_gpu(c, true);
      rec.record(gpu, describe_gpu(true));
      RC_LOG() << "reference: " << to_string(ref) << "; gpu: " << to_string(gpu) << "\n";
      // (a mutation can leave the call valid, e.g. NONE + "weights" with N = 0: then both succeed)
      RC_ASSERT(gpu.kind == ref.kind);
      RC_ASSERT(ref.kind != Outcome::Kind::BoundsCheck);
      if (ref.kind == Outcome::Kind::InvalidArgument) RC_ASSERT(gpu.argument == ref.argument);
      RC_CLASSIFY(ref.kind == Outcome::Kind::InvalidArgument, "rejected");
    });
  });
}

TEST_CASE("host Backend: cuda forward and repair equal the reference backend", "[gpu][backend]") {
  auto gpu_backend = cuda::make_cuda_backend();
  REQUIRE(gpu_backend->name().rfind("cuda:", 0) == 0);
  rc::prop("Backend::forward in the enclosure with the reference's warnings", [&] {
    const BoundsCheckMode mode = *rc::gen::element(BoundsCheckMode::Warning, BoundsCheckMode::Ignore);
    ForwardCase c = gen_valid_case(mode);
    if (*rc::gen::arbitrary<bool>()) gen_malform(c);
    ForwardStrategy strategy;
    strategy.fused_bounds_check = *rc::gen::arbitrary<bool>();
    FailureRecorder rec("host-backend", c);
    rec.run([&] {
      const ForwardProblem p = c.view();
      const OutputLayout layout = make_output_layout(p);
      const std::size_t bytes = layout.numel * dtype_size(p.options.policy.output);
      std::vector<std::byte> out(bytes + 64, std::byte{0xa5});
      const ForwardStats stats = gpu_backend->forward(p, out.data(), strategy);
      Outcome got;
      got.output.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(bytes));
      got.stats = stats;
      rec.record(got, gpu_backend->name() + " Backend::forward (" +
                          (strategy.fused_bounds_check ? "fused" : "separate") + " bounds check)");
      for (std::size_t i = bytes; i < out.size(); ++i) RC_ASSERT(out[i] == std::byte{0xa5});
      const oracle::CheckReport report = oracle::check_forward(p, out.data());
      RC_LOG() << describe(c) << "\n" << report.summary() << "\n";
      RC_ASSERT(report.passed());
      RC_ASSERT(stats.warnings == repair(p).warnings);
    });
  });
}

TEST_CASE("a failing evaluation leaves the shrunk case in tbe-failures/<property>", "[gpu][harness]") {
  // rc::check (not rc::prop): the property fails on purpose (more than 2 lookups), so RapidCheck
  // shrinks it; the folder must end up holding a readable case that still fails, with the GPU
  // outcome recorded. (RapidCheck prints this expected counterexample.)
  const std::string property = "recorder-self-test";
  const bool passed = rc::check("recorder self-test (fails on purpose)", [&] {
    ForwardCase c = gen_valid_case(BoundsCheckMode::Warning, CaseLimits{false, false, 6});
    FailureRecorder rec(property, c);
    rec.run([&] {
      const Outcome gpu = run_gpu(c, true);
      rec.record(gpu, "self-test");
      RC_ASSERT(c.indices.size() <= 2);
    });
  });
  CHECK_FALSE(passed);
  const io::CaseFile saved = io::read_case(FailureRecorder::folder(property));
  CHECK(saved.name == property);
  CHECK(saved.problem.indices.size() >= 3);
  REQUIRE(saved.recorded.has_value());
  CHECK(saved.recorded->implementation == "self-test");
  CHECK(saved.recorded->warnings.has_value());
  std::filesystem::remove_all(FailureRecorder::folder(property));
}
