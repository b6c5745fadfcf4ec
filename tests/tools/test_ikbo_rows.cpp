// tbe-verify's IKBO rows on tiny shapes: every row passes on the CPU reference (as the device and
// as the no-GPU self-check), and deliberately faulty IKBO backends make rows fail with the check
// that names the fault.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <unistd.h>
#include <sstream>

#include "scratch_dir.h"
#include "tbe/errors.h"
#include "tbe/host_case.h"
#include "tbe/io/any_case_file.h"
#include "tbe/judge/case_commands.h"
#include "tbe/judge/ikbo_rows.h"

using namespace tbe;
using namespace tbe::judge;

namespace {

IkboConfig tiny_ikbo(ikbo::IkboBackend* device) {
  IkboConfig cfg;
  cfg.lce_shape = ikbo::LceShape{6, 3, 5, 7, 19, 13};
  cfg.attention_batch = 6;
  cfg.attention_users = 3;
  cfg.attention_S = 9;
  cfg.seed = 5;
  cfg.device = device;
  cfg.skip_reason = "no GPU (test)";
  cfg.include_fp32 = true;
  return cfg;
}

bool has_check(const RowResult& row, const std::string& name, bool passed) {
  return std::any_of(row.checks.begin(), row.checks.end(),
                     [&](const Check& c) { return c.name == name && c.passed == passed; });
}

enum class IkboFault { WrongUser, WritePastEnd, IgnoreBadMap, CorruptOne };

// Wraps the reference and breaks one thing.
class FaultyIkbo : public ikbo::IkboBackend {
 public:
  explicit FaultyIkbo(IkboFault f) : fault_(f), ref_(ikbo::make_reference_ikbo_backend()) {}
  std::string name() const override { return "faulty-ikbo"; }
  void lce(const ikbo::LceProblem& p, void* out) override {
    run(p, out, ikbo::lce_output_numel(p), [&](const ikbo::LceProblem& q, void* o) { ref_->lce(q, o); });
  }
  void attention(const ikbo::AttentionProblem& p, void* out) override {
    run(p, out, ikbo::attention_output_numel(p),
        [&](const ikbo::AttentionProblem& q, void* o) { ref_->attention(q, o); });
  }

 private:
  template <class P, class F>
  void run(const P& p, void* out, std::int64_t numel, F&& call) {
    const std::size_t bytes = static_cast<std::size_t>(numel) * dtype_size(p.policy.storage);
    if (fault_ == IkboFault::IgnoreBadMap &&
        !ikbo::validate_map(std::span<const std::int32_t>(p.cand_to_user, p.B), p.U).ok())
      return;  // swallows the error (and writes nothing)
    if (fault_ == IkboFault::WrongUser && p.B > 0) {
      std::vector<std::int32_t> map(p.cand_to_user, p.cand_to_user + p.B);
      const bool valid = ikbo::validate_map(map, p.U).ok();
      if (valid)
        for (auto& u : map) u = static_cast<std::int32_t>((u + 1) % p.U);
      P q = p;
      q.cand_to_user = map.data();
      call(q, out);
      return;
    }
    call(p, out);
    if (fault_ == IkboFault::WritePastEnd) static_cast<std::byte*>(out)[bytes] = std::byte{0};
    if (fault_ == IkboFault::CorruptOne && numel > 0) {
      const std::int64_t i = numel / 2;
      store_from_double(p.policy.storage, out, i,
                        load_as_double(p.policy.storage, out, i) + 4.0);
    }
  }
  IkboFault fault_;
  std::unique_ptr<ikbo::IkboBackend> ref_;
};

}  // namespace

TEST_CASE("ikbo rows: every row passes on the CPU reference as the device", "[verify][ikbo]") {
  auto be = ikbo::make_reference_ikbo_backend();
  const IkboConfig cfg = tiny_ikbo(be.get());
  std::vector<IkboRowResult> results;
  for (const IkboRowSpec& s : ikbo_row_specs(true)) results.push_back(run_ikbo_row(cfg, s));
  REQUIRE(results.size() == 3 * 5 + 3 * 5 * 2);  // lce: dtype x map kind; attention: x dense, jagged
  for (const IkboRowResult& r : results) {
    INFO(r.label << " " << r.rows.front().reason);
    REQUIRE(r.rows.size() == 1);
    CHECK(r.rows[0].target == Target::Device);
    CHECK(r.rows[0].verdict == Verdict::Passed);
    CHECK(has_check(r.rows[0], "oracle", true));
    CHECK(has_check(r.rows[0], "canary", true));
    CHECK(has_check(r.rows[0], "error.bad-map", true));
    CHECK(r.rows[0].paths.front() == "cpu-reference");
  }
  const IkboTotals t = count_ikbo_rows(results);
  CHECK(t.passed == 45);
  CHECK(t.failed == 0);
  std::ostringstream os;
  print_ikbo_rows(os, cfg, results);
  CHECK_THAT(os.str(), Catch::Contains("ikbo rows: 45 passed, 0 failed, 0 skipped"));
  CHECK_THAT(os.str(), Catch::Contains("users-without-candidates"));
  const nlohmann::json j = ikbo_rows_json(cfg, results);
  CHECK(j["rows"].size() == 45);
  CHECK(j["totals"]["passed"] == 45);
  CHECK(nlohmann::json::parse(j.dump())["rows"][0]["label"] == "ikbo op=lce,dtype=fp16,map=sorted");
  CHECK(ikbo_row_specs(false).size() == 2 * 5 + 2 * 5 * 2);
  CHECK(nlohmann::json::parse(j.dump())["rows"][16]["label"] ==
        "ikbo op=attention,dtype=fp16,map=sorted,keys=jagged");
}

TEST_CASE("ikbo rows: every LCE rounding policy passes on the CPU reference", "[verify][ikbo]") {
  auto be = ikbo::make_reference_ikbo_backend();
  for (ikbo::LceRounding r : {ikbo::LceRounding::Published, ikbo::LceRounding::RoundOnce,
                              ikbo::LceRounding::UserRounded}) {
    IkboConfig cfg = tiny_ikbo(be.get());
    cfg.lce_rounding = r;
    std::vector<IkboRowResult> results;
    for (const IkboRowSpec& s : ikbo_row_specs(true)) results.push_back(run_ikbo_row(cfg, s));
    const IkboTotals t = count_ikbo_rows(results);
    INFO(ikbo::to_string(r));
    CHECK(t.passed == 45);
    CHECK(t.failed == 0);
    CHECK(ikbo_rows_json(cfg, results)["lce_rounding"] == ikbo::to_string(r));
  }
}

TEST_CASE("ikbo rows: no device means skipped device rows and passing CPU self-checks",
          "[verify][ikbo]") {
  const IkboConfig cfg = tiny_ikbo(nullptr);
  for (const IkboRowSpec& s : ikbo_row_specs(false)) {
    const IkboRowResult r = run_ikbo_row(cfg, s);
    INFO(r.label);
    REQUIRE(r.rows.size() == 2);
    CHECK(r.rows[0].target == Target::Device);
    CHECK(r.rows[0].verdict == Verdict::Skipped);
    CHECK(r.rows[0].reason == "no GPU (test)");
    CHECK(r.rows[1].target == Target::SelfCheck);
    CHECK(r.rows[1].verdict == Verdict::Passed);
    CHECK(r.verdict() == Verdict::Passed);
  }
}

TEST_CASE("ikbo rows: a wrong user fails every row whose map has more than one user",
          "[verify][ikbo]") {
  FaultyIkbo be(IkboFault::WrongUser);
  const IkboConfig cfg = tiny_ikbo(&be);
  for (const IkboRowSpec& s : ikbo_row_specs(false)) {
    const IkboRowResult r = run_ikbo_row(cfg, s);
    INFO(r.label << " " << r.rows[0].reason);
    if (s.map == ikbo::MapKind::OneUser) {
      // (u + 1) mod 1 = u: with one user the fault does nothing, and the row rightly passes.
      CHECK(r.verdict() == Verdict::Passed);
      continue;
    }
    CHECK(r.verdict() == Verdict::Failed);
    CHECK(has_check(r.rows[0], "oracle", false));
    CHECK(has_check(r.rows[0], "error.bad-map", true));
  }
}

TEST_CASE("ikbo rows: canaries, error agreement and a corrupted element are checked",
          "[verify][ikbo]") {
  const IkboRowSpec lce{IkboOp::Lce, DType::BF16, ikbo::MapKind::Unsorted};
  const IkboRowSpec att{IkboOp::Attention, DType::F16, ikbo::MapKind::UsersWithoutCandidates, true};
  {
    FaultyIkbo be(IkboFault::WritePastEnd);
    for (const IkboRowSpec& s : {lce, att}) {
      const IkboRowResult r = run_ikbo_row(tiny_ikbo(&be), s);
      CHECK(r.verdict() == Verdict::Failed);
      CHECK(has_check(r.rows[0], "canary", false));
      CHECK(has_check(r.rows[0], "oracle", true));
    }
  }
  {
    FaultyIkbo be(IkboFault::IgnoreBadMap);
    for (const IkboRowSpec& s : {lce, att}) {
      const IkboRowResult r = run_ikbo_row(tiny_ikbo(&be), s);
      CHECK(r.verdict() == Verdict::Failed);
      CHECK(has_check(r.rows[0], "error.bad-map", false));
    }
  }
  {
    FaultyIkbo be(IkboFault::CorruptOne);
    const IkboConfig cfg = tiny_ikbo(&be);
    const IkboRowResult r = run_ikbo_row(cfg, lce);
    REQUIRE(r.verdict() == Verdict::Failed);
    const Check* c = r.rows[0].worst_check();
    REQUIRE(c != nullptr);
    CHECK(c->report->failures == 1);
    const ikbo::LceShape sh = *cfg.lce_shape;
    const std::int64_t flat = sh.B * sh.M * sh.N / 2;
    CHECK(c->report->worst.where.flat == flat);
    CHECK(c->report->worst.where.sample == flat / (sh.M * sh.N));
    std::ostringstream os;
    print_ikbo_rows(os, cfg, {r});
    CHECK_THAT(os.str(), Catch::Contains("IKBO failures:"));
    CHECK_THAT(os.str(), Catch::Contains("ikbo rows: 0 passed, 1 failed, 0 skipped"));
  }
}

TEST_CASE("ikbo rows: a failing row is saved as a case folder that check and replay reproduce",
          "[verify][ikbo][cases]") {
  namespace fs = std::filesystem;
  const fs::path dir = tbe::test::scratch_dir("test_ikbo_rows", "saved");
  FaultyIkbo be(IkboFault::WrongUser);
  IkboConfig cfg = tiny_ikbo(&be);
  cfg.save_failures_dir = dir.string();
  cfg.save_failures_max = 2;
  std::int64_t saved = 0;
  const IkboRowSpec lce{IkboOp::Lce, DType::BF16, ikbo::MapKind::Unsorted};
  const IkboRowSpec att{IkboOp::Attention, DType::F16, ikbo::MapKind::UsersWithoutCandidates, true};
  const IkboRowSpec third{IkboOp::Lce, DType::F16, ikbo::MapKind::Sorted};
  const IkboRowResult r1 = run_ikbo_row(cfg, lce, &saved);
  const IkboRowResult r2 = run_ikbo_row(cfg, att, &saved);
  const IkboRowResult r3 = run_ikbo_row(cfg, third, &saved);
  REQUIRE(r1.verdict() == Verdict::Failed);
  REQUIRE(r2.verdict() == Verdict::Failed);
  REQUIRE(r3.verdict() == Verdict::Failed);
  CHECK(saved == 2);
  CHECK(r1.saved_case == (dir / "ikbo-lce-bf16-unsorted").string());
  CHECK(r2.saved_case == (dir / "ikbo-attention-fp16-users-without-candidates-jagged").string());
  CHECK(r3.saved_case.empty());
  CHECK_THAT(r3.save_note, Catch::Contains("--save-failures-max 2"));
  auto good = ikbo::make_reference_ikbo_backend();
  for (const IkboRowResult* r : {&r1, &r2}) {
    INFO(r->label);
    const io::AnyCaseFile c = io::read_any_case(r->saved_case);
    CHECK(io::case_operator(c) ==
          (r == &r1 ? io::CaseOperator::IkboLce : io::CaseOperator::IkboAttention));
    std::ostringstream check_out, replay_good, replay_bad;
    CHECK(check_case(r->saved_case, check_out) == kExitFailed);  // the saved output fails
    CHECK_THAT(check_out.str(), Catch::Contains("oracle worst element (ikbo-"));
    CHECK(replay_case(r->saved_case, replay_good, ReplayDevices{nullptr, good.get(), ""}) == kExitOk);
    CHECK(replay_case(r->saved_case, replay_bad, ReplayDevices{nullptr, &be, ""}) == kExitFailed);
  }
  std::ostringstream os;
  print_ikbo_rows(os, cfg, {r1, r2, r3});
  CHECK_THAT(os.str(), Catch::Contains("replay case: tbe-verify replay " + r1.saved_case));
  CHECK_THAT(os.str(), Catch::Contains("case file: not saved (--save-failures-max 2"));
  CHECK(ikbo_rows_json(cfg, {r1})["rows"][0]["replay_case"] == "tbe-verify replay " + r1.saved_case);
  fs::remove_all(dir);
}
