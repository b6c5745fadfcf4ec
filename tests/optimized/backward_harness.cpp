#include "backward_harness.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <sstream>

#include <cuda_runtime_api.h>
#include <rapidcheck.h>

#include "case_gen.h"
#include "gpu_harness.h"
#include "tbe/cuda/backward.h"
#include "tbe/cuda/forward.h"
#include "tbe/cuda/device_buffer.h"
#include "tbe/io/backward_case_file.h"
#include "tbe/workloads.h"

namespace tbe::test {

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw DeviceError(std::string(what) + ": " + cudaGetErrorString(e));
}

cudaStream_t stream_a() {
  static cudaStream_t s = [] {
    cudaStream_t t = nullptr;
    check(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), "cudaStreamCreate");
    return t;
  }();
  return s;
}
cudaStream_t stream_b() {
  static cudaStream_t s = [] {
    cudaStream_t t = nullptr;
    check(cudaStreamCreateWithFlags(&t, cudaStreamNonBlocking), "cudaStreamCreate");
    return t;
  }();
  return s;
}

constexpr std::size_t kSentinel = 256;
constexpr std::byte kSentinelByte{0xa5};

/// A device buffer holding `bytes` copied from host plus kSentinel sentinel bytes.
cuda::DeviceBuffer with_sentinel(const void* host, std::size_t bytes) {
  cuda::DeviceBuffer b(bytes + kSentinel);
  if (bytes > 0 && host != nullptr) check(cudaMemcpy(b.get(), host, bytes, cudaMemcpyHostToDevice), "upload");
  check(cudaMemset(static_cast<char*>(b.get()) + bytes, 0xa5, kSentinel), "sentinel");
  return b;
}

/// Downloads `bytes` and checks the sentinels after them.
std::vector<std::byte> download(const cuda::DeviceBuffer& b, std::size_t bytes, bool& intact) {
  std::vector<std::byte> all(bytes + kSentinel);
  check(cudaMemcpy(all.data(), b.get(), all.size(), cudaMemcpyDeviceToHost), "download");
  for (std::size_t i = bytes; i < all.size(); ++i)
    if (all[i] != kSentinelByte) intact = false;
  all.resize(bytes);
  return all;
}

template <class T>
std::vector<T> as_vector(const std::vector<std::byte>& b) {
  std::vector<T> v(b.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * sizeof(T));
  return v;
}

}  // namespace

std::string to_string(const BackwardOutcome& o) {
  std::ostringstream s;
  switch (o.kind) {
    case BackwardOutcome::Kind::Ok:
      s << "ok (runs " << o.stats.runs << ", lookups " << o.stats.lookups << ", short "
        << o.stats.counters.short_runs << ", chunked " << o.stats.counters.chunked_runs
        << ", fused " << o.stats.counters.fused_runs << ", chunks " << o.stats.counters.chunks
        << ", warnings " << o.stats.warnings << ", paths";
      for (const auto& p : o.stats.paths) s << " " << p;
      s << ")";
      break;
    case BackwardOutcome::Kind::InvalidArgument:
      s << "InvalidArgument[" << o.argument << "]: " << o.what;
      break;
    case BackwardOutcome::Kind::BoundsCheck: s << "BoundsCheckError: " << o.what; break;
  }
  return s.str();
}

BackwardOutcome run_backward_gpu(BackwardCase& c, const BackwardRunOptions& o) {
  BackwardOutcome out;
  BackwardProblem p = c.view();
  const ForwardProblem& f = p.forward;
  const std::size_t isz = dtype_size(c.forward.index_dtype);
  const std::size_t w_bytes = c.forward.weights.size();
  const std::size_t m_bytes = c.momentum.size() * sizeof(float);
  const std::int64_t N = static_cast<std::int64_t>(c.forward.indices.size());
  cuda::DeviceBuffer d_w = with_sentinel(c.forward.weights.data(), w_bytes);
  cuda::DeviceBuffer d_idx(f.lookups.indices, N * isz);
  cuda::DeviceBuffer d_off(f.lookups.offsets, c.forward.offsets.size() * isz);
  cuda::DeviceBuffer d_psw(c.forward.per_sample_weights.data(), c.forward.per_sample_weights.size() * 4);
  cuda::DeviceBuffer d_grad(c.grad_output.size() + o.grad_misalign);
  if (!c.grad_output.empty())
    check(cudaMemcpy(d_grad.as<std::byte>() + o.grad_misalign, c.grad_output.data(),
                     c.grad_output.size(), cudaMemcpyHostToDevice),
          "upload grad_output");
  cuda::DeviceBuffer d_m = with_sentinel(c.momentum.data(), m_bytes);
  cuda::DeviceBuffer d_wout, d_mout, d_pswg;
  static cuda::DeviceBuffer dummy(256);
  BackwardProblem dp = p;
  dp.forward.tables.weights = w_bytes > 0 ? d_w.get() : dummy.get();
  dp.forward.lookups.indices = N > 0 ? d_idx.get() : dummy.get();
  dp.forward.lookups.offsets = c.forward.offsets.empty() ? nullptr : d_off.get();
  dp.forward.lookups.per_sample_weights =
      c.forward.per_sample_weights.empty() ? nullptr : d_psw.as<const float>();
  dp.grad_output = c.grad_output.empty() ? (p.grad_output ? dummy.get() : nullptr)
                                          : static_cast<const void*>(d_grad.as<std::byte>() + o.grad_misalign);
  dp.momentum = c.momentum.empty() ? nullptr : d_m.as<const float>();
  BackwardOutputs dout;
  if (o.in_place) {
    dout.weights = const_cast<void*>(dp.forward.tables.weights);
    dout.momentum = const_cast<float*>(dp.momentum);
  } else {
    d_wout = with_sentinel(c.forward.weights.data(), w_bytes);
    dout.weights = w_bytes > 0 ? d_wout.get() : dummy.get();
    if (!c.momentum.empty()) {
      d_mout = with_sentinel(c.momentum.data(), m_bytes);
      dout.momentum = d_mout.as<float>();
    }
  }
  if (o.want_psw) {
    d_pswg = cuda::DeviceBuffer(N * 4 + kSentinel);
    check(cudaMemset(d_pswg.get(), 0xff, N * 4), "poison");
    check(cudaMemset(static_cast<char*>(d_pswg.get()) + N * 4, 0xa5, kSentinel), "sentinel");
    dout.per_sample_weight_grad = d_pswg.as<float>();
  }
  const cuda::DeviceBuffer& wbuf = o.in_place ? d_w : d_wout;
  const cuda::DeviceBuffer& mbuf = o.in_place ? d_m : d_mout;
  auto collect = [&] {
    bool intact = true;
    out.weights = download(wbuf, w_bytes, intact);
    if (!c.momentum.empty()) out.momentum = as_vector<float>(download(mbuf, m_bytes, intact));
    if (o.want_psw) out.psw_grad = as_vector<float>(download(d_pswg, N * 4, intact));
    out.sentinels_intact = intact;
  };
  try {
    cuda::BackwardOp op(dp, o.strategy, cuda::BackwardTuning{o.small_table, o.short_runs, o.short_groups, o.chunk_order, o.sort, o.split_k, o.chunk_schedule, o.run_launch, o.interleave_chunk_every, o.transpose});
    cuda::DeviceBuffer counts_buffer, fwd_out, fwd_ws;
    cuda::SmallTableCounts counts;
    if (o.saved_counts) {  // the forward of the same batch, its histogram saved
      cuda::ForwardTuning ft;
      ft.small_table = o.small_table;
      cuda::ForwardOp fop(dp.forward, {}, ft);
      counts_buffer = cuda::DeviceBuffer::poisoned(std::max<std::size_t>(1, fop.small_table_counts_bytes()), stream_a());
      counts.data = counts_buffer.get();
      counts.bytes = fop.small_table_counts_bytes();
      fop.save_small_table_counts(&counts, 1);
      fwd_out = cuda::DeviceBuffer(std::max<std::int64_t>(1, fop.layout().numel) *
                                   dtype_size(dp.forward.options.policy.output));
      fwd_ws = cuda::DeviceBuffer::poisoned(fop.workspace_bytes(), stream_a());
      fop.run(fwd_out.get(), fwd_ws.get(), stream_a());
      fop.finish();
      op.use_small_table_counts(&counts, o.stale_batch ? 2 : 1);
    }
    if (o.hoisted) {
      cuda::TransposeOp t(dp.forward, o.hoisted_transpose);
      const cuda::DeviceBuffer tws = cuda::DeviceBuffer::poisoned(t.workspace_bytes(), stream_b());
      const cuda::DeviceBuffer ws = cuda::DeviceBuffer::poisoned(op.workspace_bytes(true), stream_a());
      cudaEvent_t done;
      check(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "event");
      t.run(tws.get(), stream_b());
      check(cudaEventRecord(done, stream_b()), "record");
      check(cudaStreamWaitEvent(stream_a(), done, 0), "wait");
      op.run(dout, ws.get(), stream_a(), t.sorted());
      cudaEventDestroy(done);
      out.stats = op.finish();
    } else {
      const cuda::DeviceBuffer ws = cuda::DeviceBuffer::poisoned(op.workspace_bytes(), stream_a());
      op.run(dout, ws.get(), stream_a());
      out.stats = op.finish();
    }
    collect();
  } catch (const InvalidArgument& e) {
    out.kind = BackwardOutcome::Kind::InvalidArgument;
    out.argument = e.argument();
    out.what = e.what();
  } catch (const BoundsCheckError& e) {
    out.kind = BackwardOutcome::Kind::BoundsCheck;
    out.violation = e.violation();
    out.what = e.what();
    collect();
  }
  return out;
}

BackwardOutcome run_backward_reference(BackwardCase& c, bool want_psw) {
  BackwardOutcome out;
  BackwardProblem p = c.view();
  out.weights = c.forward.weights;
  out.momentum = c.momentum;
  if (want_psw) out.psw_grad.assign(c.forward.indices.size(), 0.0f);
  BackwardOutputs o;
  o.weights = out.weights.empty() ? nullptr : out.weights.data();
  o.momentum = out.momentum.empty() ? nullptr : out.momentum.data();
  o.per_sample_weight_grad = want_psw ? out.psw_grad.data() : nullptr;
  try {
    out.stats = backward_reference(p, o);
  } catch (const InvalidArgument& e) {
    out.kind = BackwardOutcome::Kind::InvalidArgument;
    out.argument = e.argument();
    out.what = e.what();
  } catch (const BoundsCheckError& e) {
    out.kind = BackwardOutcome::Kind::BoundsCheck;
    out.violation = e.violation();
    out.what = e.what();
  }
  return out;
}

oracle::BackwardCheckReport judge(BackwardCase& c, const BackwardOutcome& gpu) {
  const BackwardProblem p = c.view();
  return oracle::check_backward(p, gpu.view());
}

void fill_grad_output(BackwardCase& c, std::uint64_t seed, bool small_integers) {
  c.resize_grad_output();
  Rng rng(seed, 0x9badull);
  const std::int64_t n = static_cast<std::int64_t>(
      c.grad_output.size() / dtype_size(c.forward.options.policy.output));
  for (std::int64_t i = 0; i < n; ++i)
    c.set_grad(i, small_integers ? static_cast<double>(rng.uniform_int(9) - 4)
                                 : 2.0 * rng.uniform() - 1.0);
}

BackwardCase gen_backward_case(BoundsCheckMode mode, bool small_rows, DimRule dim_rule) {
  BackwardCase c;
  c.forward = gen_valid_case(mode, CaseLimits{true, true, small_rows ? 40 : 24});
  if (small_rows) {  // 1..3 rows per table: the lookups pile up into long runs
    const std::int64_t E = *rc::gen::inRange<std::int64_t>(1, 4);
    Rng rng(*rc::gen::arbitrary<std::uint64_t>(), 7);
    const std::int64_t lead = c.forward.offsets.empty() ? 0 : c.forward.offsets[0];
    ForwardCase& f = c.forward;
    std::vector<std::int64_t> rows(f.rows.size(), E);
    const DType w = f.weights_dtype;
    const std::vector<std::int32_t> dims = f.dims;
    f.set_tables(w, rows, dims);
    for (std::size_t p = static_cast<std::size_t>(lead); p < f.indices.size(); ++p)
      f.indices[p] = rng.uniform_int(E);
    fill_weights(f, rng.next_u64(), *rc::gen::inRange(0, 3) == 0);
  }
  if (dim_rule != DimRule::Any) {
    ForwardCase& f = c.forward;
    std::vector<std::int32_t> dims = f.dims;
    for (std::int32_t& d : dims) {
      d = (d + 3) / 4 * 4;
      if (dim_rule == DimRule::Staged) d = 64 + (d - 4) % 68;  // 64..128, still a multiple of 4
    }
    if (dims != f.dims) {
      const std::vector<std::int64_t> rows = f.rows;
      f.set_tables(f.weights_dtype, rows, dims);
      fill_weights(f, *rc::gen::arbitrary<std::uint64_t>(), *rc::gen::inRange(0, 3) == 0);
    }
  }
  if (c.forward.weights_dtype != DType::F32 && *rc::gen::inRange(0, 3) == 0)
    c.forward.options.policy.write_back = RoundingMode::Stochastic;
  OptimizerConfig& o = c.options.optimizer;
  o.kind = *rc::gen::element(OptimizerKind::ExactSgd, OptimizerKind::ExactRowwiseAdagrad);
  o.learning_rate = *rc::gen::element(0.01, 0.5, 0x1p-6, 1.0);
  o.eps = *rc::gen::element(1e-8, 1e-3, 0.1);
  if (o.kind == OptimizerKind::ExactRowwiseAdagrad) {
    o.weight_decay_mode = *rc::gen::element(WeightDecayMode::None, WeightDecayMode::L2,
                                            WeightDecayMode::Decoupled);
    o.weight_decay = *rc::gen::element(0.0, 0.01, 0.1);
  }
  o.max_norm = *rc::gen::weightedElement<double>({{3, 0.0}, {1, 0.5}, {1, 4.0}});
  o.max_gradient = *rc::gen::weightedElement<double>({{3, 0.0}, {1, 0.25}});
  c.options.sr_seed = *rc::gen::arbitrary<std::uint64_t>();
  c.options.sr_offset = *rc::gen::inRange<std::uint64_t>(0, 1000);
  const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();
  fill_grad_output(c, seed, *rc::gen::inRange(0, 3) == 0);
  c.reset_momentum();
  Rng rng(seed, 3);
  for (float& m : c.momentum) m = static_cast<float>(rng.uniform() * 2.0);
  return c;
}

BackwardStrategy gen_strategy() {
  BackwardStrategy s;
  s.long_run_threshold = *rc::gen::weightedElement<std::int32_t>(
      {{2, 256}, {2, 1}, {2, 2}, {2, 8}, {2, 32}, {1, 64}});
  s.chunk_size = *rc::gen::element<std::int32_t>(32, 64, 256);
  s.long_runs = *rc::gen::element(BackwardStrategy::LongRuns::Fused,
                                  BackwardStrategy::LongRuns::Chunked);
  s.deterministic = *rc::gen::weightedElement<bool>({{3, true}, {1, false}});
  return s;
}

std::string describe(const BackwardStrategy& s) {
  std::ostringstream o;
  o << "threshold=" << s.long_run_threshold << " chunk=" << s.chunk_size << " long_runs="
    << (s.long_runs == BackwardStrategy::LongRuns::Fused ? "fused" : "chunked")
    << " deterministic=" << s.deterministic;
  return o.str();
}

void BackwardFailureRecorder::save() noexcept {
  const std::string dir = FailureRecorder::folder(property_);
  try {
    io::BackwardCaseFile cf;
    cf.name = property_;
    cf.provenance = "test_optimized backward property '" + property_ +
                    "' (failing evaluation; RapidCheck prints the seed to reproduce it)";
    cf.problem = case_;
    cf.strategy = io::BackwardStrategyRecord{strategy_, hoisted_};
    if (gpu_) {
      io::BackwardRecordedOutputs r;
      r.implementation = implementation_;
      switch (gpu_->kind) {
        case BackwardOutcome::Kind::Ok:
          r.weights = gpu_->weights;
          if (!gpu_->momentum.empty()) r.momentum = gpu_->momentum;
          if (!gpu_->psw_grad.empty()) r.per_sample_weight_grad = gpu_->psw_grad;
          r.warnings = gpu_->stats.warnings;
          break;
        case BackwardOutcome::Kind::BoundsCheck: r.error = "bounds_check"; break;
        case BackwardOutcome::Kind::InvalidArgument: r.error = "invalid_argument"; break;
      }
      cf.recorded = std::move(r);
      cf.expect = io::Expectation{"pass", ""};
    }
    io::write_case(dir, cf);
    RC_LOG() << "case written: tbe-verify replay " << dir << "   (judge the recorded GPU outputs: "
             << "tbe-verify check " << dir << ")\n";
  } catch (const std::exception& e) {
    RC_LOG() << "could not write the failing case to " << dir << ": " << e.what() << "\n";
  } catch (...) {
  }
}

}  // namespace tbe::test
