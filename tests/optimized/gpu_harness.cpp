#include "gpu_harness.h"

#include <cstring>
#include <filesystem>
#include <sstream>

#include <cuda_runtime_api.h>

#include "tbe/cuda/device_buffer.h"
#include "tbe/cuda/forward.h"
#include "tbe/io/case_file.h"
#include "tbe/workloads.h"

namespace tbe::test {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw DeviceError(std::string(what) + ": " + cudaGetErrorString(e));
}

cudaStream_t test_stream() {
  static cudaStream_t s = [] {
    cudaStream_t t = nullptr;
    check(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), "cudaStreamCreate");
    return t;
  }();
  return s;
}

}  // namespace

DeviceCase::DeviceCase(ForwardCase& c) {
  problem = c.view();
  const std::size_t isz = dtype_size(c.index_dtype);
  weights = cuda::DeviceBuffer(c.weights.data(), c.weights.size());
  indices = cuda::DeviceBuffer(problem.lookups.indices, c.indices.size() * isz);
  offsets = cuda::DeviceBuffer(problem.lookups.offsets, c.offsets.size() * isz);
  psw = cuda::DeviceBuffer(c.per_sample_weights.data(), c.per_sample_weights.size() * 4);
  problem.tables.weights = c.weights.empty() ? nullptr : weights.get();
  problem.lookups.indices = indices.get();
  problem.lookups.offsets = offsets.get();
  problem.lookups.per_sample_weights =
      c.per_sample_weights.empty() ? nullptr : psw.as<const float>();
  // Non-null pointers even for empty buffers, as the host view has them.
  static cuda::DeviceBuffer dummy(256);
  if (problem.lookups.indices == nullptr) problem.lookups.indices = dummy.get();
  if (problem.lookups.offsets == nullptr && !c.offsets.empty()) problem.lookups.offsets = dummy.get();
}

std::string to_string(const Outcome& o) {
  std::ostringstream s;
  switch (o.kind) {
    case Outcome::Kind::Ok: s << "ok (" << o.output.size() << " bytes, warnings " << o.stats.warnings << ")"; break;
    case Outcome::Kind::InvalidArgument: s << "InvalidArgument[" << o.argument << "]: " << o.what; break;
    case Outcome::Kind::BoundsCheck: s << "BoundsCheckError: " << o.what; break;
  }
  return s.str();
}

Outcome run_reference(ForwardCase& c) {
  Outcome o;
  try {
    const ForwardProblem p = c.view();
    throw_if_error(validate(p));
    const OutputLayout layout = make_output_layout(p);
    o.output.assign(layout.numel * dtype_size(p.options.policy.output), std::byte{0xff});
    o.stats = forward_reference(p, o.output.data());
  } catch (const InvalidArgument& e) {
    o.kind = Outcome::Kind::InvalidArgument;
    o.argument = e.argument();
    o.what = e.what();
    o.output.clear();
  } catch (const BoundsCheckError& e) {
    o.kind = Outcome::Kind::BoundsCheck;
    o.violation = e.violation();
    o.what = e.what();
    o.output.clear();
  }
  return o;
}

cuda::ForwardTuning gen_forward_tuning() {
  cuda::ForwardTuning t;
  t.pipelined = *rc::gen::arbitrary<bool>();
  t.prefer_l1 = *rc::gen::arbitrary<bool>();
  t.rows_in_flight = *rc::gen::element(4, 8);
  t.row_index32 = *rc::gen::arbitrary<bool>();
  t.staged_rows = *rc::gen::element(cuda::ForwardTuning::kStagedRowsAuto, 0, 8, 16);
  // Auto's threshold: every launch, launches of at least 64 bags, or none (the cases are small)
  t.staged_auto_min_bags = *rc::gen::element(std::int64_t{0}, std::int64_t{64}, std::int64_t{1} << 17);
  t.staged_bags_per_warp = *rc::gen::element(0, 1, 3, 32);
  t.launch_streams = *rc::gen::element(1, 2, 4, 8);
  t.merge_launches = *rc::gen::arbitrary<bool>();
  t.narrow_vectors = *rc::gen::arbitrary<bool>();
  return t;
}

std::string describe_gpu(bool fused_bounds_check, const cuda::ForwardTuning& t) {
  return std::string("tbe_optimized cuda::ForwardOp (") +
         (fused_bounds_check ? "fused" : "separate") + " bounds check, pipelined=" +
         (t.pipelined ? "1" : "0") + ", prefer_l1=" + (t.prefer_l1 ? "1" : "0") +
         ", rows_in_flight=" + std::to_string(t.rows_in_flight) +
         ", row_index32=" + (t.row_index32 ? "1" : "0") +
         ", staged_rows=" + std::to_string(t.staged_rows) +
         ", staged_auto_min_bags=" + std::to_string(t.staged_auto_min_bags) +
         ", staged_bags_per_warp=" + std::to_string(t.staged_bags_per_warp) +
         ", launch_streams=" + std::to_string(t.launch_streams) +
         ", merge_launches=" + (t.merge_launches ? "1" : "0") +
         ", narrow_vectors=" + (t.narrow_vectors ? "1" : "0") + ")";
}

Outcome run_gpu(ForwardCase& c, bool fused_bounds_check, const cuda::ForwardTuning& tuning) {
  Outcome o;
  DeviceCase dc(c);
  cuda::DeviceBuffer out;
  std::size_t out_bytes = 0;
  auto download = [&]() {
    std::vector<std::byte> all(out_bytes + kSentinelBytes);
    check(cudaMemcpy(all.data(), out.get(), all.size(), cudaMemcpyDeviceToHost), "download");
    for (std::size_t i = out_bytes; i < all.size(); ++i)
      if (all[i] != std::byte{0xa5}) o.sentinels_intact = false;
    all.resize(out_bytes);
    return all;
  };
  try {
    ForwardStrategy strategy;
    strategy.fused_bounds_check = fused_bounds_check;
    cuda::ForwardOp op(dc.problem, strategy, tuning);
    out_bytes = op.layout().numel * dtype_size(dc.problem.options.policy.output);
    out = cuda::DeviceBuffer(out_bytes + kSentinelBytes);
    check(cudaMemset(out.get(), 0xff, out_bytes), "poison");
    check(cudaMemset(static_cast<char*>(out.get()) + out_bytes, 0xa5, kSentinelBytes), "sentinel");
    cuda::DeviceBuffer ws(op.workspace_bytes());
    op.run(out.get(), ws.get(), test_stream());
    o.stats = op.finish();
    o.output = download();
  } catch (const InvalidArgument& e) {
    o.kind = Outcome::Kind::InvalidArgument;
    o.argument = e.argument();
    o.what = e.what();
  } catch (const BoundsCheckError& e) {
    o.kind = Outcome::Kind::BoundsCheck;
    o.violation = e.violation();
    o.what = e.what();
    const std::vector<std::byte> after = download();
    for (std::byte b : after)
      if (b != std::byte{0xff}) o.poison_intact = false;
  }
  return o;
}

RepairResult repair_gpu(ForwardCase& c) {
  DeviceCase dc(c);
  cuda::ForwardOp op(dc.problem);
  cuda::DeviceBuffer ws(op.workspace_bytes());
  return op.repair(ws.get(), test_stream());
}

std::int64_t count_bit_differences(const Outcome& a, const Outcome& b) {
  if (a.output.size() != b.output.size()) return -1;
  std::int64_t n = 0;
  for (std::size_t i = 0; i < a.output.size(); ++i) n += a.output[i] != b.output[i];
  return n;
}

std::string FailureRecorder::folder(const std::string& property) {
  return (std::filesystem::absolute("tbe-failures") / property).string();
}

void FailureRecorder::save() noexcept {
  try {
    io::CaseFile cf;
    cf.name = property_;
    cf.provenance = "test_optimized property '" + property_ +
                    "' (failing evaluation; RapidCheck prints the seed to reproduce it)";
    cf.problem = case_;
    if (gpu_) {
      io::RecordedOutputs r;
      r.implementation = implementation_;
      r.output_dtype = case_.options.policy.output;
      switch (gpu_->kind) {
        case Outcome::Kind::Ok:
          r.output = gpu_->output;
          r.warnings = gpu_->stats.warnings;
          break;
        case Outcome::Kind::BoundsCheck: r.error = "bounds_check"; break;
        case Outcome::Kind::InvalidArgument: r.error = "invalid_argument"; break;
      }
      cf.recorded = std::move(r);
      cf.expect = io::Expectation{"pass", ""};
    }
    const std::string dir = folder(property_);
    io::write_case(dir, cf);
    RC_LOG() << "case written: tbe-verify replay " << dir << "   (judge the recorded GPU outputs: "
             << "tbe-verify check " << dir << ")\n";
  } catch (const std::exception& e) {
    RC_LOG() << "could not write the failing case to " << folder(property_) << ": " << e.what()
             << "\n";
  } catch (...) {
  }
}

void fill_weights(ForwardCase& c, std::uint64_t seed, bool small_integers) {
  Rng rng(seed, 0x5eedull);
  for (std::size_t t = 0; t < c.rows.size(); ++t)
    for (std::int64_t r = 0; r < c.rows[t]; ++r)
      for (std::int32_t d = 0; d < c.dims[t]; ++d) {
        const double v = small_integers ? static_cast<double>(rng.uniform_int(17) - 8)
                                        : 2.0 * rng.uniform() - 1.0;
        c.set_weight(static_cast<std::int64_t>(t), r, d, v);
      }
}

}  // namespace tbe::test
