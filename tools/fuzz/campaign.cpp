// The tbe-fuzz campaign (campaign.h).
#include "fuzz/campaign.h"

#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <mutex>
#include <ostream>
#include <set>
#include <sstream>
#include <utility>

#include <omp.h>

#include "fuzz/backward.h"
#include "fuzz/ikbo_case.h"
#include "fuzz/judge.h"
#include "fuzz/shrink.h"
#include "tbe/io/backward_case_file.h"
#include "tbe/io/case_file.h"
#include "tbe/io/ikbo_case_file.h"
#include "tbe/judge/case_commands.h"
#include "tbe/judge/forward_call.h"
#include "tbe/serialized_backend.h"

namespace tbe::fuzz {

using judge::ForwardJudgement;
namespace {

using Coverage = std::vector<std::pair<std::string, std::string>>;

std::string dim_class(std::int32_t d) {
  if (d == 1) return "1";
  if (d == 2048) return "2048";
  if (d > 1024) return "1025..2047";
  if (d % 2 == 1) return "odd";
  if (d % 4 != 0) return "even,%4!=0";
  return "%4==0";
}

// The axes of the forward part of a case (forward and backward cases), prefixed.
void count_forward_axes(Coverage& cov, const std::string& pre, const FuzzCase& fc) {
  auto add = [&](const std::string& axis, const std::string& v) { cov.emplace_back(pre + axis, v); };
  add("pooling", to_string(fc.pooling));
  add("bounds", to_string(fc.bounds));
  add("weighted", fc.weighted ? "1" : "0");
  add("index", to_string(fc.index_dtype));
  add("w", to_string(fc.tables->dtype));
  add("vbe", fc.R ? "1" : "0");
  add("invalid", to_string(fc.invalid));
  add("small-table shape", fc.small_table ? "1" : "0");
  std::set<std::string> dims, lens;
  bool e1 = false;
  for (std::size_t t = 0; t < fc.tables->rows.size(); ++t) {
    dims.insert(dim_class(fc.tables->dims[t]));
    e1 = e1 || fc.tables->rows[t] == 1;
  }
  for (const auto& k : dims) add("D (cases with)", k);
  add("E=1 (cases with)", e1 ? "1" : "0");
  for (const Bag& b : fc.bags) {
    const std::size_t L = b.idx.size();
    if (L == 0 || L == 1 || (L >= 255 && L <= 257)) lens.insert(std::to_string(L));
    else if (L > 257) lens.insert(">257");
    else lens.insert("2..254");
  }
  for (const auto& k : lens) add("L (cases with)", k);
  const std::set<std::int32_t> tables(fc.ftm.begin(), fc.ftm.end());
  add("shared tables", tables.size() < fc.ftm.size() ? "1" : "0");
}

void count_forward(Coverage& cov, const FuzzCase& fc, const ForwardJudgement& j) {
  count_forward_axes(cov, "fwd.", fc);
  auto add = [&](const std::string& axis, const std::string& v) { cov.emplace_back("fwd." + axis, v); };
  const bool malformed = !fc.faults.empty() || j.expected_violation || j.expected_warnings > 0;
  add("malformed", malformed ? "1" : "0");
  add("out", to_string(fc.policy.output));
  add("policy", to_string(fc.policy.kind));
  add("fused", fc.fused ? "1" : "0");
  add("fill", fc.fill);
  add("lead", fc.lead.empty() ? "0" : ">0");
  add("B=0", (fc.R == 0 && fc.B == 0) ? "1" : "0");
  add("huge(E·D>=2^31)", fc.huge ? "1" : "0");
  add("outcome", j.expected_invalid ? "invalid_argument"
                 : j.expected_violation ? "bounds_error" : "output");
}

void count_backward(Coverage& cov, const BackwardFuzzCase& c, const BackwardJudgement& j) {
  count_forward_axes(cov, "bwd.", c.fwd);
  auto add = [&](const std::string& axis, const std::string& v) { cov.emplace_back("bwd." + axis, v); };
  const BackwardSpec& s = c.bwd;
  const OptimizerConfig& o = s.optimizer;
  add("optimizer", to_string(o.kind) + (o.kind == OptimizerKind::ExactRowwiseAdagrad
                                            ? "/" + to_string(o.weight_decay_mode) : ""));
  add("round", s.stochastic ? "sr" : "rne");
  add("max_norm", o.max_norm > 0 ? "1" : "0");
  add("clip", o.max_gradient > 0 ? "1" : "0");
  add("psw_grad", c.fwd.weighted && s.psw_grad ? "1" : "0");
  add("long", s.strategy.long_runs == BackwardStrategy::LongRuns::Fused ? "fused" : "chunked");
  add("det", s.strategy.deterministic ? (s.recheck ? "1 (rechecked)" : "1") : "0");
  add("bad", to_string(s.bad));
  add("outcome", j.expected_invalid ? "invalid_argument"
                 : j.expected_violation ? "bounds_error" : "output");
  // SL edges reached (on the reference transpose)
  const std::int64_t th = s.strategy.long_run_threshold, ch = s.strategy.chunk_size;
  std::set<std::string> edges;
  bool long_run = false;
  for (std::int64_t sl : j.run_lengths) {
    if (sl >= 255 && sl <= 257) edges.insert("SL=" + std::to_string(sl));
    if (sl == th - 1) edges.insert("SL=threshold-1");
    if (sl == th) edges.insert("SL=threshold");
    if (sl == th + 1) edges.insert("SL=threshold+1");
    if (sl >= th) {
      long_run = true;
      const std::int64_t m = sl % ch;
      const std::string k = sl / ch >= 2 || (sl / ch == 1 && m == ch - 1) ? "k·chunk" : "chunk";
      if (m == 0) edges.insert("long SL=" + k);
      if (m == 1 && sl > 1) edges.insert("long SL=" + k + "+1");
      if (m == ch - 1) edges.insert("long SL=" + std::string(sl / ch >= 1 ? "k·chunk" : "chunk") + "-1");
    }
  }
  for (const auto& e : edges) add("SL edges (cases with)", e);
  add("long runs", long_run ? "1" : "0");
}

void count_ikbo(Coverage& cov, const IkboFuzzCase& c, const IkboJudgement& j) {
  const std::string pre = c.attention ? "attn." : "lce.";
  auto add = [&](const std::string& axis, const std::string& v) { cov.emplace_back(pre + axis, v); };
  add("storage", to_string(c.policy.storage));
  add("map", ikbo::to_string(c.map));
  add("bad map", to_string(c.bad));
  add("outcome", j.backend_limit      ? "backend_limit"
                 : j.expected_invalid ? "invalid_argument"
                                      : "output");
  if (!c.attention) {
    add("rounding", ikbo::to_string(c.policy.lce_rounding));
    add("B", c.lce.B <= 1 ? std::to_string(c.lce.B) : ">1");
    add("K_c%8", c.lce.K_c % 8 == 0 ? "0" : "!=0");
    add("K_u", c.lce.K_u == 0 ? "0" : c.lce.K_u % 8 == 0 ? "%8==0" : "%8!=0");
    add("stage", std::to_string(c.stage));
  } else {
    add("B", c.att.B <= 1 ? std::to_string(c.att.B) : ">1");
    add("keys", c.att.jagged ? "jagged" : "dense");
    add("S>64", c.att.S > 64 ? "1" : "0");
  }
}

// Seconds this thread spent inside the backends' calls (judge_one resets and reads it).
thread_local double t_device_seconds = 0;
struct DeviceTimer {
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  ~DeviceTimer() {
    t_device_seconds +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
};

// The TBE backend's calls, timed into t_device_seconds (inside the SerializedBackend's lock in
// judge_cases: the worker threads share one backend, one call at a time).
class TimedBackend final : public Backend {
 public:
  explicit TimedBackend(Backend& inner) : inner_(inner) {}
  std::string name() const override { return inner_.name(); }
  ForwardStats forward(const ForwardProblem& p, void* output,
                       const ForwardStrategy& strategy) override {
    const DeviceTimer timer;
    return inner_.forward(p, output, strategy);
  }
  RepairResult repair(const ForwardProblem& p) override {
    const DeviceTimer timer;
    return inner_.repair(p);
  }
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& s) override {
    const DeviceTimer timer;
    return inner_.backward(p, out, s);
  }
  TrainingStepStats training_step(const BackwardProblem& p, void* output,
                                  const BackwardOutputs& out, const BackwardStrategy& s) override {
    const DeviceTimer timer;
    return inner_.training_step(p, output, out, s);
  }

 private:
  Backend& inner_;
};
// The IKBO backends of the campaign, one call at a time and timed (the worker threads share them).
class LockedIkbo final : public ikbo::IkboBackend {
 public:
  LockedIkbo(ikbo::IkboBackend& inner, std::mutex& m) : inner_(inner), m_(m) {}
  std::string name() const override { return inner_.name(); }
  void lce(const ikbo::LceProblem& p, void* out) override {
    const std::lock_guard<std::mutex> lock(m_);
    const DeviceTimer timer;
    inner_.lce(p, out);
  }
  void attention(const ikbo::AttentionProblem& p, void* out) override {
    const std::lock_guard<std::mutex> lock(m_);
    const DeviceTimer timer;
    inner_.attention(p, out);
  }
  Status lce_limits(const ikbo::LceProblem& p) const override { return inner_.lce_limits(p); }
  Status attention_limits(const ikbo::AttentionProblem& p) const override {
    return inner_.attention_limits(p);
  }

 private:
  ikbo::IkboBackend& inner_;
  std::mutex& m_;
};

Operator op_of(const CampaignOptions& o, std::uint64_t index) {
  return o.ops[index % o.ops.size()];
}

ikbo::IkboBackend& ikbo_for(const std::vector<ikbo::IkboBackend*>& list, int stage) {
  return *list[static_cast<std::size_t>(stage) % list.size()];
}

BackwardJudgeOptions backward_options(bool gpu) {
  BackwardJudgeOptions o;
  o.check_counters = gpu;
  return o;
}

// Case `index` judged on `tbe` / `ikbo` (the locked wrappers inside judge_cases).
CaseRecord judge_one(const CampaignOptions& o, Backend& tbe,
                     const std::vector<ikbo::IkboBackend*>& ikbo, bool gpu, std::uint64_t index) {
  CaseRecord r;
  r.index = index;
  r.op = op_of(o, index);
  t_device_seconds = 0;
  const std::int64_t every = huge_every(o, gpu);
  switch (r.op) {
    case Operator::Forward: {
      const FuzzCase fc = generate_case(o.seed, index, every, o.shapes);
      const ForwardJudgement j = judge_case(tbe, fc);
      r.verdict = verdict_of(j);
      count_forward(r.coverage, fc, j);
      r.paths = j.call.stats.paths;
      break;
    }
    case Operator::Backward: {
      const BackwardFuzzCase c = generate_backward_case(o.seed, index, o.shapes);
      const BackwardJudgement j = judge_backward_case(tbe, c, backward_options(gpu));
      r.verdict = j.verdict;
      count_backward(r.coverage, c, j);
      r.paths = j.stats.paths;
      break;
    }
    case Operator::Lce:
    case Operator::Attention: {
      const IkboFuzzCase c = generate_ikbo_case(o.seed, index, r.op == Operator::Attention, o.shapes);
      ikbo::IkboBackend& dev = ikbo_for(ikbo, c.stage);
      const IkboJudgement j = judge_ikbo_case(dev, c);
      r.verdict = j.verdict;
      count_ikbo(r.coverage, c, j);
      if (!j.expected_invalid) r.paths = {to_string(r.op) + " on " + dev.name()};
      break;
    }
  }
  r.device_seconds = t_device_seconds;
  return r;
}

}  // namespace

std::string to_string(Operator op) {
  switch (op) {
    case Operator::Forward: return "forward";
    case Operator::Backward: return "backward";
    case Operator::Lce: return "lce";
    case Operator::Attention: return "attention";
  }
  return "?";
}

std::string to_string(const std::vector<Operator>& ops) {
  std::string s;
  for (Operator op : ops) s += (s.empty() ? "" : ",") + to_string(op);
  return s;
}

bool CaseRecord::operator==(const CaseRecord& o) const {
  return index == o.index && op == o.op && verdict.failed == o.verdict.failed &&
         verdict.check == o.verdict.check && verdict.detail == o.verdict.detail &&
         verdict.device_lost == o.verdict.device_lost && coverage == o.coverage &&
         paths == o.paths;
}

std::int64_t huge_every(const CampaignOptions& options, bool gpu) {
  // a huge case costs seconds (~9 GiB filled and uploaded): rarer among the fast small cases
  if (options.huge_every >= 0) return options.huge_every;
  return gpu ? (options.shapes == Shapes::Small ? 20000 : 1000) : 0;
}

void list_cases(const CampaignOptions& options, std::ostream& os) {
  const std::int64_t every = huge_every(options, options.backend == "cuda");
  for (std::int64_t i = 0; i < options.list; ++i) {
    const auto index = static_cast<std::uint64_t>(i);
    const Operator op = op_of(options, index);
    os << "case " << i << ": " << to_string(op) << " ";
    switch (op) {
      case Operator::Forward:
        os << (is_huge_case(index, every)
                   ? std::string("(a huge-table case)")
                   : describe(generate_case(options.seed, index, every, options.shapes)));
        break;
      case Operator::Backward:
        os << describe(generate_backward_case(options.seed, index, options.shapes));
        break;
      default:
        os << describe(generate_ikbo_case(options.seed, index, op == Operator::Attention,
                                          options.shapes));
    }
    os << "\n";
  }
}

std::vector<CaseRecord> judge_cases(const CampaignOptions& options, const Devices& dev,
                                    std::uint64_t first, std::uint64_t count) {
  std::mutex device_mutex;
  TimedBackend timed(*dev.tbe);
  SerializedBackend tbe(timed, device_mutex);
  std::vector<LockedIkbo> locked;
  locked.reserve(dev.ikbo.size());
  for (ikbo::IkboBackend* b : dev.ikbo) locked.emplace_back(*b, device_mutex);
  std::vector<ikbo::IkboBackend*> ikbo;
  for (LockedIkbo& b : locked) ikbo.push_back(&b);
  std::vector<CaseRecord> records(count);
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();
  const auto n = static_cast<std::int64_t>(count);
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (std::int64_t k = 0; k < n; ++k)
    records[k] = judge_one(options, tbe, ikbo, dev.gpu, first + static_cast<std::uint64_t>(k));
  return records;
}

Campaign::Campaign(CampaignOptions options, Devices dev, std::ostream& os)
    : options_(std::move(options)), dev_(std::move(dev)), os_(os) {}

double Campaign::elapsed() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
}

std::string Campaign::rerun_command(std::uint64_t index) const {
  return "tbe-fuzz --backend " + options_.backend + " --seed " + std::to_string(options_.seed) +
         " --ops " + to_string(options_.ops) + " --shapes " + to_string(options_.shapes) +
         " --case " + std::to_string(index);
}

void Campaign::save_failure(const CaseRecord& rec) {
  const std::uint64_t index = rec.index;
  ShrinkLimits limits;
  // at most 60 s, and not much past the end of the campaign
  if (!options_.only_case)
    limits.max_seconds = std::clamp(options_.seconds - elapsed() + 15.0, 5.0, 60.0);
  const bool shrinkable = !rec.verdict.device_lost && rec.verdict.check != "generator";
  const int n = ++saved_;
  const std::string dir = options_.out + "/failure-" + std::to_string(n);
  const std::string name = "tbe-fuzz-failure-" + std::to_string(n);
  Backend& tbe = *dev_.tbe;
  const std::int64_t every = huge_every(options_, dev_.gpu);
  int steps = 0, runs = 0;
  std::string shrunk_line;
  Verdict now = rec.verdict;
  std::string implementation;
  auto provenance = [&](const Verdict& v) {
    std::ostringstream prov;
    prov << rerun_command(index) << " (" << implementation << "); failed check '" << v.check
         << "': " << v.detail << "; shrunk in " << steps << " steps";
    return prov.str();
  };
  try {
    switch (rec.op) {
      case Operator::Forward: {
        FuzzCase cur = generate_case(options_.seed, index, every, options_.shapes);
        if (shrinkable) {
          ShrinkResult r = shrink(
              cur, rec.verdict, [&](const FuzzCase& c) { return verdict_of(judge_case(tbe, c)); },
              limits);
          cur = std::move(r.shrunk);
          steps = r.steps;
          runs = r.runs;
        }
        const ForwardJudgement jj = judge_case(tbe, cur);
        now = verdict_of(jj);
        shrunk_line = describe(cur);
        implementation = tbe.name();
        io::CaseFile cf;
        cf.name = name;
        cf.provenance = provenance(now);
        cf.seed = options_.seed;
        Built bt;
        build(cur, bt);
        cf.problem = bt.c;
        cf.problem.weights = cur.tables->weights;
        cf.recorded = judge::recorded_outputs(jj.call, jj.output, cur.policy.output,
                                              "tbe-fuzz backend " + tbe.name());
        std::filesystem::create_directories(dir);
        io::write_case(dir, cf);
        break;
      }
      case Operator::Backward: {
        const BackwardJudgeOptions bo = backward_options(dev_.gpu);
        BackwardFuzzCase cur = generate_backward_case(options_.seed, index, options_.shapes);
        if (shrinkable) {
          BackwardShrinkResult r = shrink_backward(
              cur, rec.verdict,
              [&](const BackwardFuzzCase& c) { return judge_backward_case(tbe, c, bo).verdict; },
              limits);
          cur = std::move(r.shrunk);
          steps = r.steps;
          runs = r.runs;
        }
        const BackwardJudgement jj = judge_backward_case(tbe, cur, bo);
        now = jj.verdict;
        shrunk_line = describe(cur);
        implementation = tbe.name();
        BuiltBackward b;
        build(cur, b);
        io::BackwardCaseFile cf;
        cf.name = name;
        cf.provenance = provenance(now);
        cf.seed = options_.seed;
        cf.problem = b.c;
        cf.strategy = io::BackwardStrategyRecord{b.strategy, false};
        io::BackwardRecordedOutputs rec_out;
        rec_out.implementation = "tbe-fuzz backend " + tbe.name();
        if (jj.error) {
          rec_out.error = jj.error;
        } else if (jj.weights) {
          rec_out.weights = jj.weights;
          rec_out.momentum = jj.momentum;
          rec_out.per_sample_weight_grad = jj.psw_grad;
          rec_out.warnings = jj.stats.warnings;
        }
        cf.recorded = rec_out;
        std::filesystem::create_directories(dir);
        io::write_case(dir, cf);
        break;
      }
      case Operator::Lce:
      case Operator::Attention: {
        IkboFuzzCase cur = generate_ikbo_case(options_.seed, index,
                                              rec.op == Operator::Attention, options_.shapes);
        ikbo::IkboBackend& dev = ikbo_for(dev_.ikbo, cur.stage);
        if (shrinkable) {
          IkboShrinkResult r = shrink_ikbo(
              cur, rec.verdict,
              [&](const IkboFuzzCase& c) { return judge_ikbo_case(dev, c).verdict; }, limits);
          cur = std::move(r.shrunk);
          steps = r.steps;
          runs = r.runs;
        }
        const IkboJudgement jj = judge_ikbo_case(dev, cur);
        now = jj.verdict;
        shrunk_line = describe(cur);
        implementation = dev.name();
        io::IkboRecordedOutput rec_out;
        rec_out.implementation = "tbe-fuzz ikbo backend " + dev.name();
        if (jj.error) rec_out.error = jj.error;
        else rec_out.output = jj.output;
        const BuiltIkbo b = build(cur);
        std::filesystem::create_directories(dir);
        if (b.lce) {
          io::LceCaseFile cf{name, provenance(now), options_.seed, *b.lce, rec_out, std::nullopt};
          io::write_case(dir, cf);
        } else {
          io::AttentionCaseFile cf{name, provenance(now), options_.seed, *b.attention, rec_out,
                                   std::nullopt};
          io::write_case(dir, cf);
        }
        break;
      }
    }
    os_ << "  shrunk in " << steps << " steps (" << runs << " runs): " << shrunk_line
        << "\n  now: [" << now.check << "] " << now.detail << "\n";
    const std::string replay = judge::replay_case_command(dir);
    os_ << "  saved " << dir << "\n  replay: " << replay << "\n";
    saved_dirs_.push_back(dir);
    failure_lines_.push_back("failure-" + std::to_string(n) + " (case " + std::to_string(index) +
                             ", " + to_string(rec.op) + ", " + now.check + "): " + replay);
  } catch (const std::exception& e) {
    os_ << "  could not save the case to " << dir << ": " << e.what() << "\n";
    failure_lines_.push_back("case " + std::to_string(index) + " (" + to_string(rec.op) + ", " +
                             rec.verdict.check + "): not saved (" + e.what() + ")");
  }
}

bool Campaign::take(const CaseRecord& r) {
  ++cases_;
  ++per_op_[r.op];
  device_seconds_ += r.device_seconds;
  for (const auto& [axis, v] : r.coverage) ++coverage_[axis][v];
  for (const auto& p : r.paths) ++paths_[p];
  if (!r.verdict.failed) return true;
  ++failures_;
  os_ << "FAIL case " << r.index << " (" << to_string(r.op) << ") [" << r.verdict.check
      << "]: " << r.verdict.detail << "\n  rerun: " << rerun_command(r.index) << "\n";
  if (saved_ < options_.max_saved) save_failure(r);
  else
    failure_lines_.push_back("case " + std::to_string(r.index) + " (" + to_string(r.op) + ", " +
                             r.verdict.check + "): not saved (--max-saved)");
  os_.flush();
  if (r.verdict.device_lost) {
    os_ << "the device reported an error (the CUDA context may be lost): stopping\n";
    return false;
  }
  return true;
}

void Campaign::print_counts() const {
  for (const auto& [axis, values] : coverage_) {
    os_ << "  " << axis << ":";
    for (const auto& [v, n] : values) os_ << " " << v << "=" << n;
    os_ << "\n";
  }
}

void Campaign::print_paths() const {
  os_ << "kernel paths exercised (cases that reported each):\n";
  if (paths_.empty()) os_ << "  none\n";
  std::size_t w = 0;
  for (const auto& [p, n] : paths_) w = std::max(w, p.size());
  for (const auto& [p, n] : paths_)
    os_ << "  " << p << std::string(w + 2 - p.size(), ' ') << std::setw(10) << n << "\n";
  if (!dev_.gpu) return;
  // The device paths the campaign is meant to reach (reported, not a failure: a short campaign
  // or an --ops subset may not reach them all).
  std::vector<std::pair<Operator, const char*>> wanted = {
      {Operator::Forward, "bounds.fused"},      {Operator::Forward, "bounds.separate"},
      {Operator::Forward, "bounds.fatal_check"}, {Operator::Forward, "forward.vbe"},
      {Operator::Forward, "forward.pooled.scalar"}, {Operator::Forward, "forward.launch_streams"},
      {Operator::Forward, "forward.pooled.merged_launch"}, {Operator::Forward, "forward.pooled.narrow_vec4"},
      {Operator::Backward, "bwd.sort.key32"},   {Operator::Backward, "bwd.short"},
      {Operator::Backward, "bwd.long.chunked"}, {Operator::Backward, "bwd.long.fused"},
      {Operator::Backward, "bwd.sr"},           {Operator::Backward, "bwd.psw_grad"},
      {Operator::Backward, "bwd.group.warp"},   {Operator::Backward, "bwd.group.block"},
      {Operator::Backward, "bwd.nondeterministic"}, {Operator::Backward, "bwd.gather.staged"},
      {Operator::Backward, "bwd.gather.registers"}, {Operator::Backward, "bwd.short.staged"},
      {Operator::Backward, "bwd.chunk_order.one-cta"},
      {Operator::Backward, "bwd.short.registers"}, {Operator::Backward, "bwd.short.per_dim"}};
  std::string missing;
  for (const auto& [op, p] : wanted)
    if (per_op_.count(op) && !paths_.count(p)) missing += std::string(missing.empty() ? "" : ", ") + p;
  os_ << "device paths never exercised: " << (missing.empty() ? "none" : missing) << "\n";
}

void Campaign::progress_line() {
  const double t = elapsed();
  os_ << "[" << static_cast<long>(t) << " s] cases " << cases_ << " (" << std::fixed
      << std::setprecision(1) << (t > 0 ? static_cast<double>(cases_) / t : 0.0)
      << "/s), failures " << failures_ << ", " << device_seconds_
      << " s inside the backend" << std::defaultfloat << "\n";
  os_.flush();
}

void Campaign::final_report() {
  const double t = elapsed();
  os_ << "\n== tbe-fuzz report (seed " << options_.seed << ", backend " << dev_.tbe->name()
      << ", ops " << to_string(options_.ops) << ", shapes " << to_string(options_.shapes) << ")\n"
      << "cases run: " << cases_ << " in " << std::fixed << std::setprecision(1) << t << " s ("
      << (t > 0 ? static_cast<double>(cases_) / t : 0.0) << " cases/s)" << std::defaultfloat;
  for (const auto& [op, n] : per_op_) os_ << "; " << to_string(op) << " " << n;
  os_ << "\ntime inside the backend's calls (serialised): " << std::fixed << std::setprecision(1)
      << device_seconds_ << " s of " << t << " s wall ("
      << (cases_ > 0 ? 1e3 * device_seconds_ / static_cast<double>(cases_) : 0.0)
      << " ms per case; the rest is generation, reference, oracle and shrinking on "
      << (options_.threads > 0 ? options_.threads : omp_get_max_threads()) << " threads)"
      << std::defaultfloat;
  os_ << "\ncoverage (cases per axis value):\n";
  print_counts();
  print_paths();
  os_ << "failures found: " << failures_ << "\n";
  for (const auto& l : failure_lines_) os_ << "  " << l << "\n";
  os_ << (failures_ == 0 ? "PASS" : "FAIL") << ": " << cases_ << " cases, " << failures_
      << " failures (seed " << options_.seed << ")" << std::endl;
}

int Campaign::run() {
  const int threads = options_.threads > 0 ? options_.threads : omp_get_max_threads();
  os_ << "tbe-fuzz: seed " << options_.seed << ", backend " << dev_.tbe->name() << ", ops "
      << to_string(options_.ops) << ", shapes " << to_string(options_.shapes) << ", "
      << threads << " threads, ";
  if (options_.only_case) os_ << "case " << *options_.only_case << " only";
  else os_ << options_.seconds << " s";
  os_ << ", failures to " << options_.out << "/" << std::endl;
  try {
    if (options_.only_case) {
      for (const CaseRecord& r : judge_cases(options_, dev_, *options_.only_case, 1)) take(r);
    } else {
      double next_report = options_.report_every;
      // Cases per parallel batch: the threads wait for the batch's slowest case at its end, so
      // a batch holds many cases per thread (a campaign ends within one batch of --seconds).
      const std::uint64_t batch = static_cast<std::uint64_t>(std::max(1, 16 * threads));
      bool go = true;
      for (std::uint64_t i = 0; go && elapsed() < options_.seconds; i += batch) {
        for (const CaseRecord& r : judge_cases(options_, dev_, i, batch)) {
          go = take(r) && !(options_.max_failures > 0 && failures_ >= options_.max_failures);
          if (!go) break;
        }
        if (elapsed() >= next_report) {
          progress_line();
          while (next_report <= elapsed()) next_report += options_.report_every;
        }
      }
    }
  } catch (const std::exception& e) {
    os_ << "tbe-fuzz: stopped by an error: " << e.what() << "\n";
    final_report();
    return 3;
  }
  final_report();
  return failures_ == 0 ? 0 : 1;
}

}  // namespace tbe::fuzz
