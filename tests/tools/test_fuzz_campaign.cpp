// tbe-fuzz's backward and IKBO cases and its parallel campaign: the backward generator reaches
// every route and the SL edges, planted backward / LCE / attention faults (cpu-faulty) are found,
// shrunk to small cases and saved as folders whose replay reproduces them, generation and
// verdicts are deterministic in the seed and independent of the thread count.
#include <catch2/catch.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "scratch_dir.h"
#include "fuzz/backward.h"
#include "fuzz/campaign.h"
#include "fuzz/faulty_backend.h"
#include "fuzz/ikbo_case.h"
#include "tbe/bounds_check.h"
#include "tbe/io/backward_case_file.h"
#include "tbe/io/ikbo_case_file.h"
#include "tbe/oracle/backward_oracle.h"
#include "tbe/oracle/ikbo_oracle.h"

using namespace tbe;
using namespace tbe::fuzz;

namespace {

ShrinkLimits no_time_limit() {
  ShrinkLimits l;
  l.max_seconds = 1e9;  // the run budget alone stops it: deterministic
  return l;
}

std::string fresh_dir(const std::string& name) {
  return tbe::test::scratch_dir("fuzz_test", name).string();
}

// The first case of `op` in campaign `seed` that `judge` fails, searching cases [0, limit).
template <class Judge>
std::uint64_t first_failing(const CampaignOptions& o, Operator op, Judge judge,
                            std::uint64_t limit) {
  for (std::uint64_t i = 0; i < limit; ++i)
    if (o.ops[i % o.ops.size()] == op && judge(i)) return i;
  FAIL("no failing case of " << to_string(op) << " in " << limit << " cases");
  return 0;
}

}  // namespace

TEST_CASE("generator: about 5% small-table shapes, each FP16, E <= 64, 64 <= D <= 128, own "
          "tables, unweighted SUM/MEAN, not VBE, 16..63 bags",
          "[fuzz]") {
  int small = 0, with_empty_tile = 0;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    const FuzzCase c = generate_case(3, static_cast<std::uint64_t>(i), 0, Shapes::Small);
    if (!c.small_table) continue;
    ++small;
    INFO(describe(c));
    CHECK(c.tables->dtype == DType::F16);
    CHECK(!c.weighted);
    CHECK((c.pooling == PoolingMode::Sum || c.pooling == PoolingMode::Mean));
    CHECK(c.R == 0);
    CHECK(c.invalid == Invalid::None);
    CHECK((c.B >= 1 && c.B <= 63));  // 16..63 drawn, halved only by the lookups cap
    for (std::size_t t = 0; t < c.tables->rows.size(); ++t) {
      CHECK(c.tables->rows[t] <= 64);
      CHECK((c.tables->dims[t] >= 64 && c.tables->dims[t] <= 128));
    }
    for (std::int64_t f = 0; f < c.T(); ++f) CHECK(c.ftm[static_cast<std::size_t>(f)] == f);
    // a whole 16-bag tile of empty bags (an edge of the saved counts) now and then
    for (std::int64_t f = 0; f < c.T(); ++f)
      for (std::int64_t t0 = 0; t0 < c.B; t0 += 16) {
        bool all_empty = true;
        for (std::int64_t b = t0; b < std::min(c.B, t0 + 16); ++b)
          all_empty = all_empty && c.bags[static_cast<std::size_t>(c.first_bag(f) + b)].idx.empty();
        with_empty_tile += all_empty;
      }
  }
  CHECK(small > n * 3 / 100);  // 5% of the valid, non-huge cases
  CHECK(small < n * 7 / 100);
  CHECK(with_empty_tile > 0);
}

TEST_CASE("backward generator: every route, SR, psw gradient, shared tables, bad inputs and the "
          "SL edges are reached",
          "[fuzz][backward]") {
  std::map<std::string, std::int64_t> n;
  for (std::uint64_t i = 0; i < 500; ++i) {
    const BackwardFuzzCase c = generate_backward_case(1, i);
    const BackwardSpec& s = c.bwd;
    ++n["bad=" + std::string(to_string(s.bad))];
    ++n[s.optimizer.kind == OptimizerKind::ExactSgd ? "sgd"
                                                    : "adagrad/" + to_string(s.optimizer.weight_decay_mode)];
    BuiltBackward b;
    build(c, b);
    const BackwardProblem p = b.c.view();
    if (!validate(p, b.strategy).ok()) continue;
    if (p.forward.options.bounds_check == BoundsCheckMode::Fatal && find_first_violation(p.forward))
      continue;
    if (b.want_psw_grad) ++n["psw_grad"];
    if (s.stochastic && p.forward.tables.dtype != DType::F32) ++n["sr"];
    if (std::set<std::int32_t>(c.fwd.ftm.begin(), c.fwd.ftm.end()).size() < c.fwd.ftm.size())
      ++n["shared tables"];
    const Transpose tr = transpose_lookups(p.forward, tbe::repair(p.forward));
    const std::int64_t th = b.strategy.long_run_threshold, ch = b.strategy.chunk_size;
    const bool fused = b.strategy.long_runs == BackwardStrategy::LongRuns::Fused;
    const std::string det = b.strategy.deterministic ? ",det" : ",nondet";
    std::set<std::string> seen;
    for (std::int64_t sl : tr.run_lengths) {
      if (sl < th) seen.insert("route=short");
      else seen.insert(std::string(fused ? "route=fused" : "route=chunked") + det);
      if (sl >= 255 && sl <= 257) seen.insert("SL=" + std::to_string(sl));
      if (sl == th - 1 || sl == th || sl == th + 1)
        seen.insert("SL=threshold" + std::to_string(sl - th));
      if (sl >= th && sl > ch) seen.insert("long SL=chunk boundary" + std::to_string((sl + 1) % ch - 1));
    }
    for (const auto& k : seen) ++n[k];
  }
  std::ostringstream counts;
  for (const auto& [k, v] : n) counts << k << "=" << v << " ";
  INFO(counts.str());
  for (const char* k :
       {"route=short", "route=fused,det", "route=fused,nondet", "route=chunked,det",
        "route=chunked,nondet", "SL=255", "SL=256", "SL=257", "SL=threshold-1", "SL=threshold0",
        "SL=threshold1", "long SL=chunk boundary-1", "long SL=chunk boundary0",
        "long SL=chunk boundary1", "psw_grad", "sr", "shared tables", "sgd", "adagrad/none",
        "adagrad/l2", "adagrad/decoupled"})
    CHECK(n[k] > 0);
  for (BadBackward b : {BadBackward::LearningRate, BadBackward::Eps, BadBackward::WeightDecay,
                        BadBackward::SgdWeightDecayMode, BadBackward::MaxNorm,
                        BadBackward::MaxGradient, BadBackward::Threshold, BadBackward::ChunkSize,
                        BadBackward::PswGradUnweighted, BadBackward::MissingMomentum}) {
    INFO(to_string(b));
    CHECK(n["bad=" + std::string(to_string(b))] > 0);
  }
}

TEST_CASE("backward: a bad argument is named by both backends, a valid case passes on the "
          "reference",
          "[fuzz][backward]") {
  auto reference = make_reference_backend();
  std::int64_t invalid = 0, passed = 0;
  for (std::uint64_t i = 0; i < 120; ++i) {
    BackwardFuzzCase c = generate_backward_case(7, i);
    if (i % 3 == 0) c.bwd.bad = BadBackward::ChunkSize;  // 33 or 4128: never a multiple of 32
    const BackwardJudgement j = judge_backward_case(*reference, c);
    INFO(describe(c) << "\n" << j.verdict.check << ": " << j.verdict.detail);
    REQUIRE_FALSE(j.verdict.failed);
    invalid += j.expected_invalid;
    passed += !j.expected_invalid && !j.expected_violation;
  }
  CHECK(invalid >= 40);
  CHECK(passed > 0);
}

TEST_CASE("backward: the planted fault is shrunk to one run of 256 lookups and saved; the "
          "folder's replay reproduces it",
          "[fuzz][backward][shrink]") {
  FaultyBackend faulty;
  auto reference = make_reference_backend();
  CampaignOptions o;
  o.ops = {Operator::Backward};
  o.backend = "cpu-faulty";
  const std::uint64_t index = first_failing(
      o, Operator::Backward,
      [&](std::uint64_t i) {
        return judge_backward_case(faulty, generate_backward_case(o.seed, i)).verdict.failed;
      },
      200);
  const BackwardFuzzCase start = generate_backward_case(o.seed, index);
  const Verdict first = judge_backward_case(faulty, start).verdict;
  REQUIRE(first.check == "oracle");
  CHECK_FALSE(judge_backward_case(*reference, start).verdict.failed);

  const auto judge = [&](const BackwardFuzzCase& c) {
    return judge_backward_case(faulty, c).verdict;
  };
  const BackwardShrinkResult r = shrink_backward(start, first, judge, no_time_limit());
  const BackwardShrinkResult again = shrink_backward(start, first, judge, no_time_limit());
  INFO(describe(r.shrunk));
  CHECK(describe(r.shrunk) == describe(again.shrunk));  // deterministic
  CHECK(r.verdict.check == "oracle");
  CHECK(r.shrunk.fwd.T() == 1);
  CHECK(r.shrunk.fwd.tables->rows == std::vector<std::int64_t>{1});
  CHECK(r.shrunk.fwd.tables->dims == std::vector<std::int32_t>{1});
  CHECK(r.shrunk.fwd.lookups() >= 256);
  CHECK(r.shrunk.fwd.lookups() <= 320);
  CHECK(r.shrunk.bwd.optimizer.kind == OptimizerKind::ExactSgd);

  // The campaign on that case saves the shrunk case; read back, it fails the same way on the
  // faulty backend and passes on the reference, and its recorded weights fail the oracle.
  o.only_case = index;
  o.out = fresh_dir("backward");
  Devices dev;
  dev.tbe = &faulty;
  FaultyIkboBackend faulty_ikbo;
  dev.ikbo = {&faulty_ikbo};
  std::ostringstream log;
  Campaign campaign(o, dev, log);
  CHECK(campaign.run() == 1);
  INFO(log.str());
  REQUIRE(campaign.saved_folders().size() == 1);
  io::BackwardCaseFile cf = io::read_backward_case(campaign.saved_folders()[0]);
  REQUIRE(cf.strategy.has_value());
  REQUIRE(cf.recorded.has_value());
  REQUIRE(cf.recorded->weights.has_value());
  const bool psw = cf.recorded->per_sample_weight_grad.has_value();
  CHECK(cf.problem.forward.indices.size() <= 320);
  const BackwardJudgement replay =
      judge_backward_call(faulty, cf.problem, cf.strategy->strategy, psw);
  CHECK(replay.verdict.failed);
  CHECK(replay.verdict.check == "oracle");
  CHECK_FALSE(judge_backward_call(*reference, cf.problem, cf.strategy->strategy, psw).verdict.failed);
  const BackwardProblem p = cf.problem.view();
  const oracle::BackwardCheckReport rep = oracle::check_backward(
      p, {cf.recorded->weights->data(),
          cf.recorded->momentum ? cf.recorded->momentum->data() : nullptr,
          psw ? cf.recorded->per_sample_weight_grad->data() : nullptr});
  CHECK_FALSE(rep.passed());
  std::filesystem::remove_all(o.out);
}

TEST_CASE("ikbo: the planted LCE and attention faults are shrunk and saved; the folders' replay "
          "reproduces them",
          "[fuzz][ikbo][shrink]") {
  FaultyBackend faulty;
  FaultyIkboBackend faulty_ikbo;
  auto reference = ikbo::make_reference_ikbo_backend();
  for (Operator op : {Operator::Lce, Operator::Attention}) {
    INFO(to_string(op));
    CampaignOptions o;
    o.ops = {op};
    o.backend = "cpu-faulty";
    const bool attn = op == Operator::Attention;
    const std::uint64_t index = first_failing(
        o, op,
        [&](std::uint64_t i) {
          return judge_ikbo_case(faulty_ikbo, generate_ikbo_case(o.seed, i, attn)).verdict.failed;
        },
        200);
    const IkboFuzzCase start = generate_ikbo_case(o.seed, index, attn);
    CHECK_FALSE(judge_ikbo_case(*reference, start).verdict.failed);
    const Verdict first = judge_ikbo_case(faulty_ikbo, start).verdict;
    REQUIRE(first.check == "oracle");
    const IkboShrinkResult r = shrink_ikbo(
        start, first, [&](const IkboFuzzCase& c) { return judge_ikbo_case(faulty_ikbo, c).verdict; },
        no_time_limit());
    INFO(describe(r.shrunk));
    CHECK(r.verdict.check == "oracle");
    if (!attn) {  // minimal: two candidates (the fault needs B >= 2), K_c = 1 (not % 8)
      CHECK(r.shrunk.lce.B == 2);
      CHECK(r.shrunk.lce.M == 1);
      CHECK(r.shrunk.lce.N == 1);
      CHECK(r.shrunk.lce.K_c == 1);
      CHECK(r.shrunk.lce.K_u == 0);
    } else {  // one or two candidates (a user with more than 64 keys), one query row of width 1
      CHECK(r.shrunk.att.B <= 2);
      CHECK(r.shrunk.att.n_seed == 1);
      CHECK(r.shrunk.att.H == 1);
      CHECK(r.shrunk.att.Dh == 1);
    }

    o.only_case = index;
    o.out = fresh_dir(to_string(op));
    Devices dev;
    dev.tbe = &faulty;
    dev.ikbo = {&faulty_ikbo};
    std::ostringstream log;
    Campaign campaign(o, dev, log);
    CHECK(campaign.run() == 1);
    INFO(log.str());
    REQUIRE(campaign.saved_folders().size() == 1);
    const std::string dir = campaign.saved_folders()[0];
    if (!attn) {
      const io::LceCaseFile cf = io::read_lce_case(dir);
      CHECK(judge_lce_call(faulty_ikbo, cf.problem.view()).verdict.check == "oracle");
      CHECK_FALSE(judge_lce_call(*reference, cf.problem.view()).verdict.failed);
      REQUIRE(cf.recorded.has_value());
      REQUIRE(cf.recorded->output.has_value());
      CHECK_FALSE(oracle::check_lce(cf.problem.view(), cf.recorded->output->data()).passed());
    } else {
      const io::AttentionCaseFile cf = io::read_attention_case(dir);
      CHECK(judge_attention_call(faulty_ikbo, cf.problem.view()).verdict.check == "oracle");
      CHECK_FALSE(judge_attention_call(*reference, cf.problem.view()).verdict.failed);
      REQUIRE(cf.recorded.has_value());
      REQUIRE(cf.recorded->output.has_value());
      CHECK_FALSE(
          oracle::check_attention(cf.problem.view(), cf.recorded->output->data()).passed());
    }
    std::filesystem::remove_all(o.out);
  }
}

TEST_CASE("campaign: cases are deterministic in the seed and independent of the thread count",
          "[fuzz][campaign]") {
  FaultyBackend faulty;
  FaultyIkboBackend faulty_ikbo;
  auto reference = make_reference_backend();
  auto reference_ikbo = ikbo::make_reference_ikbo_backend();
  for (bool planted : {false, true}) {
    INFO("planted bugs " << planted);
    Devices dev;
    dev.tbe = planted ? static_cast<Backend*>(&faulty) : reference.get();
    dev.ikbo = {planted ? static_cast<ikbo::IkboBackend*>(&faulty_ikbo) : reference_ikbo.get()};
    CampaignOptions o;
    o.seed = 3;
    o.threads = 1;
    const std::vector<CaseRecord> one = judge_cases(o, dev, 0, 24);
    o.threads = 2;
    const std::vector<CaseRecord> two = judge_cases(o, dev, 0, 24);
    o.threads = 3;
    const std::vector<CaseRecord> three = judge_cases(o, dev, 0, 24);
    REQUIRE(one.size() == 24);
    std::int64_t failed = 0;
    for (std::size_t k = 0; k < one.size(); ++k) {
      INFO("case " << k << " " << one[k].verdict.check << " " << one[k].verdict.detail);
      CHECK(one[k].index == k);
      CHECK(one[k] == two[k]);
      CHECK(one[k] == three[k]);
      CHECK(one[k].op == o.ops[k % 4]);
      failed += one[k].verdict.failed;
    }
    if (planted) CHECK(failed > 0);
    else CHECK(failed == 0);
  }
  // the same seed gives the same cases; another seed others
  CHECK(describe(generate_backward_case(5, 9)) == describe(generate_backward_case(5, 9)));
  CHECK(describe(generate_ikbo_case(5, 9, false)) == describe(generate_ikbo_case(5, 9, false)));
  CHECK(describe(generate_backward_case(5, 9)) != describe(generate_backward_case(6, 9)));
}

namespace {

/// The reference, except that attention claims the CUDA kernel's limit (Dh 64 / 128 only) and,
/// when `honest`, raises it; a dishonest one claims the limit but computes anyway.
/// `limits_first`: the limit is checked before the map (the CUDA backend with
/// MapCheck::Device, which sees the map only on the device), and limits do not look at the map.
class LimitedIkbo final : public ikbo::IkboBackend {
 public:
  explicit LimitedIkbo(bool honest, bool limits_first = false)
      : honest_(honest), limits_first_(limits_first) {}
  std::string name() const override { return "cpu-reference-limited"; }
  void lce(const ikbo::LceProblem& p, void* out) override { inner_->lce(p, out); }
  void attention(const ikbo::AttentionProblem& p, void* out) override {
    // the CUDA backend's order (AttentionOp::can_implement): problem, map, then its own limits
    throw_if_error(ikbo::validate(p));
    if (limits_first_ && honest_) throw_if_error(dh_limit(p));
    throw_if_error(ikbo::validate_map(
        std::span<const std::int32_t>(p.cand_to_user, static_cast<std::size_t>(p.B)), p.U));
    if (honest_) throw_if_error(dh_limit(p));
    inner_->attention(p, out);
  }
  Status attention_limits(const ikbo::AttentionProblem& p) const override {
    if (!limits_first_) {  // the host-map backend's limits name a bad map first
      const Status m = ikbo::validate_map(
          std::span<const std::int32_t>(p.cand_to_user, static_cast<std::size_t>(p.B)), p.U);
      if (!m.ok() && ikbo::validate(p).ok()) return m;
    }
    return dh_limit(p);
  }

 private:
  static Status dh_limit(const ikbo::AttentionProblem& p) {
    if (p.Dh == 64 || p.Dh == 128) return Status::Ok();
    return Status::Invalid("attention.Dh", "attention.Dh: " + std::to_string(p.Dh) + " not 64/128");
  }
  bool honest_, limits_first_;
  std::unique_ptr<ikbo::IkboBackend> inner_ = ikbo::make_reference_ikbo_backend();
};

}  // namespace

TEST_CASE("ikbo: a backend's documented limit is expected, not a failure; a limit it does not "
          "raise is",
          "[fuzz][ikbo]") {
  LimitedIkbo honest(true), dishonest(false);
  int limited = 0, run = 0;
  for (std::uint64_t i = 0; i < 200; ++i) {
    const IkboFuzzCase c = generate_ikbo_case(1, i, true);
    const IkboJudgement j = judge_ikbo_case(honest, c);
    INFO(describe(c) << ": " << j.verdict.check << " " << j.verdict.detail);
    CHECK_FALSE(j.verdict.failed);
    if (j.backend_limit) {
      ++limited;
      CHECK(judge_ikbo_case(dishonest, c).verdict.failed);
    } else if (!j.expected_invalid) {
      ++run;
    }
  }
  CHECK(limited > 0);  // the generator still draws unsupported Dh
  CHECK(run > limited);  // and mostly what the CUDA kernel runs
}

namespace {

/// Attention cases with a bad map (cand_to_user[0] = U) and a head dimension outside the CUDA
/// kernel's limit: case i of seed 1 onwards that has B > 0 and Dh not in {64, 128}.
IkboFuzzCase bad_map_and_bad_dh(std::uint64_t& i) {
  for (;; ++i) {
    IkboFuzzCase c = generate_ikbo_case(1, i, true);
    if (c.att.B == 0 || c.att.Dh == 64 || c.att.Dh == 128) continue;
    c.bad = BadMap::ValueU;
    c.bad_at = 0;
    ++i;
    return c;
  }
}

/// Raises InvalidArgument naming `raised` on every attention call; its prechecks name `limit`.
class RaisesArgument final : public ikbo::IkboBackend {
 public:
  RaisesArgument(std::string raised, std::string limit)
      : raised_(std::move(raised)), limit_(std::move(limit)) {}
  std::string name() const override { return "raises-" + raised_; }
  void lce(const ikbo::LceProblem&, void*) override {}
  void attention(const ikbo::AttentionProblem&, void*) override {
    throw InvalidArgument(raised_, raised_ + ": stand-in");
  }
  Status attention_limits(const ikbo::AttentionProblem&) const override {
    return Status::Invalid(limit_, limit_ + ": stand-in");
  }

 private:
  std::string raised_, limit_;
};

}  // namespace

TEST_CASE("ikbo: a bad map beside an unsupported shape is expected in the order the backend's "
          "prechecks document; any other argument is a failure",
          "[fuzz][ikbo]") {
  LimitedIkbo map_first(true), limits_first(true, /*limits_first=*/true);
  std::uint64_t next = 0;
  for (int k = 0; k < 8; ++k) {
    const IkboFuzzCase c = bad_map_and_bad_dh(next);
    INFO(describe(c));
    // what each backend names
    const BuiltIkbo built = build(c);
    const ikbo::AttentionProblem p = built.attention->view();
    auto named = [&](ikbo::IkboBackend& be) {
      std::vector<std::byte> out = built.attention->make_output();
      try {
        be.attention(p, out.data());
      } catch (const InvalidArgument& e) {
        return e.argument();
      }
      return std::string("no error");
    };
    CHECK(named(map_first) == "cand_to_user[0]");
    CHECK(named(limits_first) == "attention.Dh");
    const IkboJudgement a = judge_ikbo_case(map_first, c);
    const IkboJudgement b = judge_ikbo_case(limits_first, c);
    CHECK_FALSE(a.verdict.failed);
    CHECK_FALSE(b.verdict.failed);
    REQUIRE(a.error.has_value());
    REQUIRE(b.error.has_value());
    CHECK(*a.error == "invalid_argument");
    CHECK(*b.error == "invalid_argument");
    // the other order than the backend's prechecks document fails, and so does a third argument
    RaisesArgument limit_not_map("attention.Dh", "cand_to_user[0]"),
        map_not_limit("cand_to_user[0]", "attention.Dh"), third("attention.H", "attention.Dh");
    CHECK(judge_ikbo_case(limit_not_map, c).verdict.failed);
    CHECK(judge_ikbo_case(map_not_limit, c).verdict.failed);
    CHECK(judge_ikbo_case(third, c).verdict.failed);
  }
  // an invalid problem (validate fails, the map is fine): validate's argument, not the limit
  IkboFuzzCase c = generate_ikbo_case(1, 0, true);
  c.att.Dh = 8;
  c.att.B = std::max<std::int64_t>(c.att.B, 1);
  c.bad = BadMap::None;
  const BuiltIkbo built = build(c);
  ikbo::AttentionProblem q = built.attention->view();
  q.H = 0;  // validate: H must be >= 1
  RaisesArgument limit_instead("attention.Dh", "attention.Dh");
  CHECK(judge_attention_call(limit_instead, q).verdict.failed);
}
