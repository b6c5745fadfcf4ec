// tbe-fuzz's backward cases (backward.h).
#include "fuzz/backward.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <sstream>
#include <utility>

#include "fuzz/draw.h"
#include "tbe/bounds_check.h"
#include "tbe/errors.h"
#include "tbe/judge/forward_judgement.h"
#include "tbe/oracle/backward_oracle.h"

namespace tbe::fuzz {
namespace {

constexpr std::uint64_t kBackwardStream = 0x6277640000000000ULL;  // "bwd" + i: the forward part
constexpr std::uint64_t kSpecStream = 0x6277647300000000ULL;      // "bwds" + i: the backward part
constexpr std::uint64_t kGradStream = 0x6772616400000000ULL;      // "grad"
constexpr std::uint64_t kMomentumStream = 0x6d6f6d0000000000ULL;  // "mom"
constexpr std::byte kCanaryByte{0xA5};
constexpr std::size_t kCanaryBytes = 64;

// One run of `fc` (a row of the table of a feature with bags) aimed at SL = target: lookups of
// that row are added to random bags of the feature until it has `target` of them (none removed).
void aim_run(FuzzCase& fc, Rng& r, std::int64_t target, std::int64_t max_lookups) {
  std::vector<std::int64_t> features;
  for (std::int64_t f = 0; f < fc.T(); ++f)
    if (fc.bags_of_feature(f) > 0) features.push_back(f);
  if (features.empty()) return;
  const std::int64_t f = features[r.uniform_int(static_cast<std::int64_t>(features.size()))];
  const std::int32_t t = fc.ftm[f];
  const std::int64_t E = fc.tables->rows[t];
  const std::int64_t row = E > 1 ? in_range(r, 1, E - 1) : 0;  // row 0 also gets repairs
  std::int64_t have = 0;
  for (std::int64_t g = 0; g < fc.T(); ++g) {
    if (fc.ftm[g] != t) continue;
    const std::int64_t first = fc.first_bag(g), n = fc.bags_of_feature(g);
    for (std::int64_t b = first; b < first + n; ++b)
      have += std::count(fc.bags[b].idx.begin(), fc.bags[b].idx.end(), row);
  }
  const std::int64_t add = target - have;
  if (add <= 0 || fc.lookups() + add > max_lookups) return;
  const std::int64_t first = fc.first_bag(f), n = fc.bags_of_feature(f);
  for (std::int64_t k = 0; k < add; ++k) {
    Bag& bag = fc.bags[first + r.uniform_int(n)];
    bag.idx.push_back(row);
    bag.w.push_back(static_cast<float>(0.5 + r.uniform()));
  }
}


// A host output buffer followed by a canary tail (kCanaryByte).
struct Guarded {
  std::vector<std::byte> bytes;
  std::size_t size = 0;
  void init(const void* src, std::size_t n, std::byte fill) {
    size = n;
    bytes.assign(n + kCanaryBytes, kCanaryByte);
    if (src != nullptr && n > 0) std::memcpy(bytes.data(), src, n);
    else std::fill_n(bytes.begin(), n, fill);
  }
  void* data() { return bytes.data(); }
  bool canary_intact() const {
    return std::all_of(bytes.begin() + static_cast<std::ptrdiff_t>(size), bytes.end(),
                       [](std::byte b) { return b == kCanaryByte; });
  }
  bool same_as(const void* src, std::byte fill) const {  // the contents before the call
    if (!canary_intact()) return false;
    if (src != nullptr) return size == 0 || std::memcmp(bytes.data(), src, size) == 0;
    return std::all_of(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size),
                       [fill](std::byte b) { return b == fill; });
  }
  bool same_bytes(const Guarded& o) const {
    return size == o.size && std::memcmp(bytes.data(), o.bytes.data(), size) == 0;
  }
  template <class T>
  std::vector<T> copy() const {
    std::vector<T> v(size / sizeof(T));
    if (size > 0) std::memcpy(v.data(), bytes.data(), size);
    return v;
  }
};

// The outputs of one backward call: weights (a copy of the weights before), momentum (a copy),
// per-sample-weight gradients (poisoned), each with a canary tail.
struct CallBuffers {
  Guarded weights, momentum, psw;
  bool has_momentum = false, has_psw = false;
  static constexpr std::byte kPswPoison{0xFF};
  CallBuffers(const BackwardCase& c, bool want_momentum, bool want_psw) {
    weights.init(c.forward.weights.data(), c.forward.weights.size(), std::byte{0});
    has_momentum = want_momentum;
    momentum.init(c.momentum.data(), c.momentum.size() * sizeof(float), std::byte{0});
    has_psw = want_psw;
    psw.init(nullptr, c.forward.indices.size() * sizeof(float), kPswPoison);
  }
  BackwardOutputs outputs() {
    BackwardOutputs o;
    o.weights = weights.data();
    o.momentum = has_momentum ? reinterpret_cast<float*>(momentum.data()) : nullptr;
    o.per_sample_weight_grad = has_psw ? reinterpret_cast<float*>(psw.data()) : nullptr;
    return o;
  }
  bool untouched(const BackwardCase& c) const {
    return weights.same_as(c.forward.weights.data(), std::byte{0}) &&
           momentum.same_as(c.momentum.data(), std::byte{0}) && psw.same_as(nullptr, kPswPoison);
  }
  bool canaries_intact() const {
    return weights.canary_intact() && momentum.canary_intact() && psw.canary_intact();
  }
  bool same_results(const CallBuffers& o) const {
    return weights.same_bytes(o.weights) && momentum.same_bytes(o.momentum) &&
           psw.same_bytes(o.psw);
  }
};

// What one dev.backward call did.
struct Call {
  BackwardStats stats;
  std::optional<std::string> error;  // "invalid_argument", "bounds_check", "device_error"
  std::string argument, what;
  std::optional<BoundsViolation> violation;
};
Call call_backward(Backend& dev, const BackwardProblem& p, const BackwardOutputs& out,
                   const BackwardStrategy& s) {
  Call c;
  try {
    c.stats = dev.backward(p, out, s);
  } catch (const InvalidArgument& e) {
    c.error = "invalid_argument";
    c.argument = e.argument();
    c.what = e.what();
  } catch (const BoundsCheckError& e) {
    c.error = "bounds_check";
    c.violation = e.violation();
    c.what = e.what();
  } catch (const DeviceError& e) {
    c.error = "device_error";
    c.what = std::string("DeviceError: ") + e.what();
  } catch (const std::exception& e) {
    c.error = "device_error";  // as a case folder records any other failure
    c.what = std::string("unexpected error: ") + e.what();
  }
  return c;
}
std::string error_text(const Call& c) {
  if (!c.error) return "no error";
  if (*c.error == "invalid_argument") return "InvalidArgument[" + c.argument + "]: " + c.what;
  if (*c.error == "bounds_check") return "BoundsCheckError(" + c.what + ")";
  return c.what;
}

void fail(Verdict& v, const std::string& check, const std::string& detail) {
  if (v.failed) return;
  v.failed = true;
  v.check = check;
  v.detail = detail;
}

}  // namespace

const char* to_string(BadBackward b) {
  switch (b) {
    case BadBackward::None: return "none";
    case BadBackward::LearningRate: return "learning-rate";
    case BadBackward::Eps: return "eps";
    case BadBackward::WeightDecay: return "weight-decay";
    case BadBackward::SgdWeightDecayMode: return "sgd-weight-decay-mode";
    case BadBackward::MaxNorm: return "max-norm";
    case BadBackward::MaxGradient: return "max-gradient";
    case BadBackward::Threshold: return "long-run-threshold";
    case BadBackward::ChunkSize: return "chunk-size";
    case BadBackward::PswGradUnweighted: return "psw-grad-unweighted";
    case BadBackward::MissingMomentum: return "missing-momentum";
  }
  return "?";
}

BackwardFuzzCase generate_backward_case(std::uint64_t seed, std::uint64_t case_index,
                                        Shapes shapes) {
  BackwardFuzzCase c;
  c.fwd = generate_case_from(Rng(seed, kBackwardStream + case_index), false, shapes);
  Rng r(seed, kSpecStream + case_index);
  BackwardSpec& s = c.bwd;
  OptimizerConfig& o = s.optimizer;
  o.kind = chance(r, 0.35) ? OptimizerKind::ExactSgd : OptimizerKind::ExactRowwiseAdagrad;
  o.learning_rate = pick<double>(r, {0.01, 0.05, 0.5, 1e-4});
  if (o.kind == OptimizerKind::ExactRowwiseAdagrad) {
    o.eps = pick<double>(r, {1e-8, 1e-4, 0.1});
    o.weight_decay_mode =
        pick<WeightDecayMode>(r, {WeightDecayMode::None, WeightDecayMode::L2,
                                  WeightDecayMode::Decoupled});
    o.weight_decay =
        o.weight_decay_mode == WeightDecayMode::None ? 0.0 : pick<double>(r, {0.01, 0.1});
    s.momentum_nonzero = chance(r, 0.5);
  }
  if (chance(r, 0.2)) o.max_norm = pick<double>(r, {0.5, 5.0});
  if (chance(r, 0.2)) o.max_gradient = pick<double>(r, {0.1, 0.5, 2.0});
  const bool sixteen = c.fwd.tables->dtype != DType::F32;
  s.stochastic = chance(r, sixteen ? 0.45 : 0.1);
  s.sr_seed = r.next_u64();
  s.sr_offset = pick<std::uint64_t>(r, {0, 1, r.next_u64() >> 20});
  s.data_seed = r.next_u64();
  const double ug = r.uniform();
  s.grad_kind = ug < 0.6 ? 0 : ug < 0.85 ? 1 : 2;
  s.psw_grad = chance(r, 0.8);

  BackwardStrategy& st = s.strategy;
  st.deterministic = chance(r, 0.6);
  st.long_runs = chance(r, 0.5) ? BackwardStrategy::LongRuns::Fused
                                : BackwardStrategy::LongRuns::Chunked;
  st.long_run_threshold = chance(r, 0.8)
                              ? pick<std::int32_t>(r, {1, 2, 3, 4, 8, 16, 32, 64, 255, 256, 257,
                                                       1 << 20})
                              : static_cast<std::int32_t>(in_range(r, 1, 300));
  st.chunk_size = chance(r, 0.05)  ? 4096  // the largest chunk (its boundaries cost 4097 lookups)
                  : chance(r, 0.8) ? pick<std::int32_t>(r, {32, 64, 96, 128, 256, 512})
                                   : static_cast<std::int32_t>(32 * in_range(r, 1, 16));
  s.recheck = st.deterministic && chance(r, 0.25);

  // one run aimed at a routing edge
  if (chance(r, 0.7)) {
    const std::int64_t th = st.long_run_threshold, ch = st.chunk_size;
    std::int64_t target = 0;
    switch (r.uniform_int(4)) {
      case 0: target = th + in_range(r, -1, 1); break;                          // threshold edge
      case 1: target = ch + in_range(r, -1, 1); break;                          // one chunk
      case 2: target = in_range(r, 2, 3) * ch + in_range(r, -1, 1); break;      // chunk boundary
      default: target = pick<std::int64_t>(r, {1, 255, 256, 257}); break;       // SL edges
    }
    const std::int64_t cap = shapes == Shapes::Small ? 4200 : 262144;
    std::int64_t max_lookups = cap + 6000;
    if (c.fwd.pooling == PoolingMode::None)  // N·D output elements, as the forward generator
      max_lookups = std::min<std::int64_t>(
          max_lookups, (shapes == Shapes::Small ? std::int64_t{1} << 17 : std::int64_t{1} << 23) /
                           c.fwd.tables->dims[0]);
    if (target >= 1 && target <= cap) {
      s.target_sl = target;
      aim_run(c.fwd, r, target, max_lookups);
    }
  }

  if (c.fwd.invalid == Invalid::None && chance(r, 0.05)) {
    s.bad = pick<BadBackward>(
        r, {BadBackward::LearningRate, BadBackward::Eps, BadBackward::WeightDecay,
            BadBackward::SgdWeightDecayMode, BadBackward::MaxNorm, BadBackward::MaxGradient,
            BadBackward::Threshold, BadBackward::ChunkSize, BadBackward::PswGradUnweighted,
            BadBackward::MissingMomentum});
    switch (s.bad) {
      case BadBackward::Eps:
      case BadBackward::WeightDecay:
      case BadBackward::MissingMomentum:
        o.kind = OptimizerKind::ExactRowwiseAdagrad;
        if (s.bad == BadBackward::WeightDecay) o.weight_decay_mode = WeightDecayMode::L2;
        break;
      case BadBackward::SgdWeightDecayMode:
        o.kind = OptimizerKind::ExactSgd;
        break;
      case BadBackward::PswGradUnweighted:
        c.fwd.weighted = false;
        break;
      default: break;
    }
  }
  return c;
}

void build(const BackwardFuzzCase& c, BuiltBackward& out) {
  Built bt;
  build(c.fwd, bt);
  const BackwardSpec& s = c.bwd;
  BackwardCase& bc = out.c;
  bc = BackwardCase{};
  bc.forward = std::move(bt.c);
  bc.forward.weights = c.fwd.tables->weights;
  bc.forward.options.policy.write_back =
      s.stochastic ? RoundingMode::Stochastic : RoundingMode::Nearest;
  bc.options.optimizer = s.optimizer;
  bc.options.sr_seed = s.sr_seed;
  bc.options.sr_offset = s.sr_offset;
  out.strategy = s.strategy;
  out.want_psw_grad = c.fwd.weighted && s.psw_grad;
  OptimizerConfig& o = bc.options.optimizer;
  switch (s.bad) {
    case BadBackward::None: break;
    case BadBackward::LearningRate: o.learning_rate = o.learning_rate > 0.02 ? 0.0 : -o.learning_rate; break;
    case BadBackward::Eps: o.eps = 0.0; break;
    case BadBackward::WeightDecay: o.weight_decay = -0.01; break;
    case BadBackward::SgdWeightDecayMode:
      o.weight_decay_mode = WeightDecayMode::L2;
      o.weight_decay = 0.01;
      break;
    case BadBackward::MaxNorm: o.max_norm = -1.0; break;
    case BadBackward::MaxGradient: o.max_gradient = -0.5; break;
    case BadBackward::Threshold:
      out.strategy.long_run_threshold = s.strategy.long_run_threshold > 128 ? (1 << 20) + 1 : 0;
      break;
    case BadBackward::ChunkSize:
      out.strategy.chunk_size = s.strategy.chunk_size > 256 ? 4128 : 33;
      break;
    case BadBackward::PswGradUnweighted: out.want_psw_grad = true; break;
    case BadBackward::MissingMomentum: break;
  }

  const ForwardProblem fp = bc.forward.view();
  const std::int64_t numel =
      validate(fp).ok() ? make_output_layout(fp).numel : judge::invalid_call_numel(fp);
  const DType gt = bc.forward.options.policy.output;
  bc.grad_output.assign(static_cast<std::size_t>(numel) * dtype_size(gt), std::byte{0});
  for (std::int64_t i = 0; i < numel; ++i) {
    Rng g(s.data_seed, kGradStream + static_cast<std::uint64_t>(i));
    const double u = g.uniform();
    const double v = s.grad_kind == 1   ? std::floor(7.0 * u) - 3.0
                     : s.grad_kind == 2 ? std::ldexp(2.0 * u - 1.0, -12)
                                        : 2.0 * u - 1.0;
    store_from_double(gt, bc.grad_output.data(), i, v);
  }
  if (o.kind == OptimizerKind::ExactRowwiseAdagrad && s.bad != BadBackward::MissingMomentum) {
    std::int64_t K = 0;
    for (std::int64_t e : bc.forward.rows) K += std::max<std::int64_t>(e, 0);
    bc.momentum.assign(static_cast<std::size_t>(K), 0.0f);
    if (s.momentum_nonzero)
      for (std::int64_t k = 0; k < K; ++k)
        bc.momentum[k] = static_cast<float>(
            0.5 * Rng(s.data_seed, kMomentumStream + static_cast<std::uint64_t>(k)).uniform());
  }
}

std::string describe(const BackwardFuzzCase& c) {
  const BackwardSpec& s = c.bwd;
  const OptimizerConfig& o = s.optimizer;
  std::ostringstream os;
  os << describe(c.fwd) << " | opt=" << to_string(o.kind);
  if (o.kind == OptimizerKind::ExactRowwiseAdagrad)
    os << " wd=" << to_string(o.weight_decay_mode) << ":" << o.weight_decay << " eps=" << o.eps
       << " momentum=" << (s.momentum_nonzero ? "random" : "zero");
  os << " lr=" << o.learning_rate << " max_norm=" << o.max_norm << " clip=" << o.max_gradient
     << " round=" << (s.stochastic ? "sr" : "rne") << " grad=" << s.grad_kind
     << " psw_grad=" << (c.fwd.weighted && s.psw_grad) << " threshold="
     << s.strategy.long_run_threshold << " chunk=" << s.strategy.chunk_size << " long="
     << (s.strategy.long_runs == BackwardStrategy::LongRuns::Fused ? "fused" : "chunked")
     << " det=" << s.strategy.deterministic << " recheck=" << s.recheck;
  if (s.target_sl) os << " target_sl=" << s.target_sl;
  if (s.bad != BadBackward::None) os << " bad=" << to_string(s.bad);
  return os.str();
}

BackwardJudgement judge_backward_call(Backend& dev, BackwardCase& c, const BackwardStrategy& s,
                                      bool want_psw_grad, const BackwardJudgeOptions& o) {
  BackwardJudgement j;
  Verdict& v = j.verdict;
  const BackwardProblem p = c.view();
  const bool adagrad = p.options.optimizer.kind == OptimizerKind::ExactRowwiseAdagrad;
  CallBuffers buf(c, adagrad && p.momentum != nullptr, want_psw_grad);
  const BackwardOutputs outs = buf.outputs();

  auto record_error = [&](const Call& call) {
    j.error = call.error;
    if (call.error && *call.error == "device_error") v.device_lost = true;
  };
  Status st = validate(p, s);
  if (st.ok()) st = validate(p, outs);
  if (!st.ok()) {
    j.expected_invalid = true;
    const Call call = call_backward(dev, p, outs, s);
    record_error(call);
    if (!call.error || *call.error != "invalid_argument")
      fail(v, v.device_lost ? "device" : "invalid_argument",
           "expected InvalidArgument[" + st.argument + "]: " + st.message + "; got " +
               error_text(call));
    else if (call.argument != st.argument)
      fail(v, "invalid_argument",
           "expected InvalidArgument[" + st.argument + "], got " + error_text(call));
    else if (!buf.untouched(c))
      fail(v, "invalid_argument.untouched", "an output was written before InvalidArgument");
    return j;
  }
  if (p.forward.options.bounds_check == BoundsCheckMode::Fatal) {
    if (const std::optional<BoundsViolation> bad = find_first_violation(p.forward)) {
      j.expected_violation = true;
      const Call call = call_backward(dev, p, outs, s);
      record_error(call);
      if (!call.violation)
        fail(v, v.device_lost ? "device" : "fatal",
             "expected BoundsCheckError(" + to_string(*bad) + "), got " + error_text(call));
      else if (!(*call.violation == *bad))
        fail(v, "fatal",
             "expected BoundsCheckError(" + to_string(*bad) + "), got " + error_text(call));
      else if (!buf.untouched(c))
        fail(v, "fatal.untouched", "an output was written under a FATAL error");
      return j;
    }
  }
  oracle::BackwardEnclosures enc;
  try {
    enc = oracle::compute_backward_enclosures(p);
  } catch (const std::exception& e) {
    fail(v, "reference", std::string("the reference threw: ") + e.what());
    return j;
  }
  j.run_lengths = enc.reference.transpose.run_lengths;
  const BoundsCheckMode mode = p.forward.options.bounds_check;
  if (mode == BoundsCheckMode::Warning || mode == BoundsCheckMode::Ignore)
    j.expected_warnings = enc.reference.repair.warnings;

  const Call call = call_backward(dev, p, outs, s);
  record_error(call);
  if (call.error) {
    fail(v, v.device_lost ? "device" : "error", "backward: " + error_text(call));
    return j;
  }
  j.stats = call.stats;
  j.weights = std::vector<std::byte>(buf.weights.bytes.begin(),
                                     buf.weights.bytes.begin() +
                                         static_cast<std::ptrdiff_t>(buf.weights.size));
  if (buf.has_momentum) j.momentum = buf.momentum.copy<float>();
  if (buf.has_psw) j.psw_grad = buf.psw.copy<float>();
  if (!buf.canaries_intact())
    fail(v, "canary", "the backend wrote past the end of an output (weights, momentum or "
                      "per-sample-weight gradients)");
  if (call.stats.warnings != j.expected_warnings)
    fail(v, "warnings", "expected " + std::to_string(j.expected_warnings) + " warnings, got " +
                            std::to_string(call.stats.warnings));
  try {
    oracle::BackwardResultView view;
    view.weights = buf.weights.data();
    view.momentum = buf.has_momentum ? reinterpret_cast<const float*>(buf.momentum.data()) : nullptr;
    view.per_sample_weight_grad =
        buf.has_psw ? reinterpret_cast<const float*>(buf.psw.data()) : nullptr;
    const oracle::BackwardCheckReport rep = oracle::judge_backward(p, enc, view);
    for (const oracle::CheckReport& r : rep.reports)
      if (!r.passed()) {
        fail(v, "oracle", r.summary());
        break;
      }
  } catch (const std::exception& e) {
    fail(v, "oracle", std::string("the oracle threw: ") + e.what());
  }

  if (o.check_counters) {
    const BackwardPathCounters& k = call.stats.counters;
    const auto& sl = enc.reference.transpose.run_lengths;
    const std::int64_t runs = static_cast<std::int64_t>(sl.size());
    // Rows the small-table histogram path updated (k.histogram_runs) leave the generic counters:
    // those rows all have SL >= k.histogram_min_run, so every run shorter than that and than the
    // long-run threshold is still short, and the generic counts are bounded by the reference's.
    const std::int64_t min_hist =
        k.histogram_runs > 0 ? k.histogram_min_run : std::numeric_limits<std::int64_t>::max();
    std::int64_t lookups = 0, long_runs = 0, long_lookups = 0, chunks = 0, sure_short = 0,
                 sure_short_lookups = 0;
    for (std::int64_t n : sl) {
      lookups += n;
      if (n >= s.long_run_threshold) {
        ++long_runs;
        long_lookups += n;
        chunks += (n + s.chunk_size - 1) / s.chunk_size;
      } else if (n < min_hist) {
        ++sure_short;
        sure_short_lookups += n;
      }
    }
    const bool fused = s.long_runs == BackwardStrategy::LongRuns::Fused;
    const std::int64_t got_long = fused ? k.fused_runs : k.chunked_runs;
    const std::int64_t got_long_lookups = fused ? k.fused_lookups : k.chunked_lookups;
    const std::int64_t other = fused ? k.chunked_runs : k.fused_runs;
    // without the sort, the path's exact sums take the rows that would have been generic
    const std::int64_t exact = k.histogram_exact_runs, exact_lookups = k.histogram_exact_lookups;
    const bool covered =
        k.short_runs + got_long + k.histogram_runs + exact == runs &&
        k.short_lookups + got_long_lookups + k.histogram_lookups + exact_lookups == lookups &&
        other == 0;
    const bool ok =
        k.histogram_runs == 0 && exact == 0
            ? covered && k.short_runs == runs - long_runs &&
                  k.short_lookups == lookups - long_lookups && got_long == long_runs &&
                  got_long_lookups == long_lookups && k.chunks == chunks
            : covered && k.histogram_lookups >= k.histogram_runs * k.histogram_min_run &&
                  k.short_runs + exact >= sure_short &&
                  k.short_lookups + exact_lookups >= sure_short_lookups &&
                  k.short_runs <= runs - long_runs && got_long <= long_runs &&
                  got_long_lookups <= long_lookups && k.chunks <= chunks;
    if (!ok) {
      std::ostringstream os;
      os << "short " << k.short_runs << " runs/" << k.short_lookups << " lookups, chunked "
         << k.chunked_runs << "/" << k.chunked_lookups << ", fused " << k.fused_runs << "/"
         << k.fused_lookups << ", chunks " << k.chunks << ", small-table histogram "
         << k.histogram_runs << "/" << k.histogram_lookups << " (SL >= " << k.histogram_min_run
         << "), exact " << exact << "/" << exact_lookups
         << " (no sort); expected from the reference transpose (threshold " << s.long_run_threshold
         << ", chunk " << s.chunk_size << "): short " << runs - long_runs << "/"
         << lookups - long_lookups << ", " << (fused ? "fused " : "chunked ") << long_runs << "/"
         << long_lookups << ", chunks " << chunks
         << (k.histogram_runs + exact > 0 ? " (those of the histogram's rows excepted)" : "");
      fail(v, "counters", os.str());
    }
  }
  if (o.recheck && s.deterministic && !v.failed) {
    CallBuffers again(c, buf.has_momentum, buf.has_psw);
    const Call second = call_backward(dev, p, again.outputs(), s);
    if (second.error) {
      record_error(second);
      fail(v, v.device_lost ? "device" : "error", "second backward call: " + error_text(second));
    } else if (!again.same_results(buf)) {
      fail(v, "deterministic", "a second call with the deterministic strategy differs bitwise");
    }
  }
  const DType w = p.forward.tables.dtype;
  if (o.z_test_min_samples > 0 && p.forward.options.policy.write_back == RoundingMode::Stochastic &&
      (w == DType::F16 || w == DType::BF16) && !v.failed) {
    const oracle::StochasticRoundingTest z =
        oracle::stochastic_rounding_test(p, enc, buf.weights.data(), o.z_limit);
    if (z.samples >= o.z_test_min_samples && !z.passed()) fail(v, "sr.z_test", z.summary());
  }
  return j;
}

BackwardJudgement judge_backward_case(Backend& dev, const BackwardFuzzCase& c,
                                      const BackwardJudgeOptions& o) {
  BuiltBackward b;
  try {
    build(c, b);
  } catch (const std::exception& e) {
    BackwardJudgement j;
    fail(j.verdict, "generator", std::string("could not build the case: ") + e.what());
    return j;
  }
  BackwardJudgeOptions opts = o;
  opts.recheck = o.recheck || c.bwd.recheck;
  return judge_backward_call(dev, b.c, b.strategy, b.want_psw_grad, opts);
}

BackwardShrinkResult shrink_backward(
    const BackwardFuzzCase& failing, const Verdict& first,
    const std::function<Verdict(const BackwardFuzzCase&)>& judge, const ShrinkLimits& limits) {
  const auto t0 = std::chrono::steady_clock::now();
  BackwardShrinkResult r;
  r.shrunk = failing;
  r.verdict = first;
  // simpler backward options first, one at a time (few runs; later runs get cheaper)
  using Step = void (*)(BackwardSpec&);
  const Step steps[] = {
      [](BackwardSpec& s) { s.optimizer = OptimizerConfig{}; s.momentum_nonzero = false; },
      [](BackwardSpec& s) {
        s.optimizer.weight_decay_mode = WeightDecayMode::None;
        s.optimizer.weight_decay = 0.0;
      },
      [](BackwardSpec& s) { s.optimizer.max_norm = 0.0; },
      [](BackwardSpec& s) { s.optimizer.max_gradient = 0.0; },
      [](BackwardSpec& s) { s.momentum_nonzero = false; },
      [](BackwardSpec& s) { s.stochastic = false; },
      [](BackwardSpec& s) { s.grad_kind = 1; },
      [](BackwardSpec& s) { s.strategy.deterministic = true; },
      [](BackwardSpec& s) { s.recheck = false; },
  };
  for (Step step : steps) {
    if (r.runs >= limits.max_runs ||
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >=
            limits.max_seconds)
      break;
    BackwardFuzzCase cand = r.shrunk;
    step(cand.bwd);
    if (describe(cand) == describe(r.shrunk)) continue;  // the step changes nothing here
    ++r.runs;
    Verdict vc = judge(cand);
    if (vc.failed && !vc.device_lost && vc.check == first.check) {
      r.shrunk = std::move(cand);
      r.verdict = std::move(vc);
      ++r.steps;
    }
  }
  // then the forward part, the backward spec fixed, in what is left of the budget
  ShrinkLimits rest = limits;
  rest.max_runs = std::max(0, limits.max_runs - r.runs);
  rest.max_seconds =
      limits.max_seconds -
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const BackwardSpec spec = r.shrunk.bwd;
  const ShrinkResult f = shrink(
      r.shrunk.fwd, r.verdict,
      [&](const FuzzCase& fc) { return judge(BackwardFuzzCase{fc, spec}); }, rest);
  r.shrunk.fwd = f.shrunk;
  r.verdict = f.verdict;
  r.steps += f.steps;
  r.runs += f.runs;
  return r;
}

}  // namespace tbe::fuzz
