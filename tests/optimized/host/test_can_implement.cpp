// can_implement() of ForwardOp, TransposeOp, BackwardOp, LceOp and AttentionOp on the host, without a device:
// ok for a valid call; for a bad argument exactly the Status of the reference's validate (argument
// and message); the CUDA limits after it, in the order the constructors and the host backends
// always reported them.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tbe/backward_case.h"
#include "tbe/cuda/backward.h"
#include "tbe/cuda/forward.h"
#include "tbe/cuda/ikbo_attention.h"
#include "tbe/cuda/ikbo_lce.h"
#include "tbe/host_case.h"
#include "tbe/ikbo_workloads.h"
#include "tbe/precision.h"

using namespace tbe;

namespace {

/// Two tables (E = 5, D = 4; E = 3, D = 8), three features (feature 2 shares table 0), B = 2.
ForwardCase valid_forward(DType weights = DType::F32) {
  ForwardCase c;
  c.set_tables(weights, {5, 3}, {4, 8});
  c.feature_table_map = {0, 1, 0};
  c.indices = {0, 4, 2, 1, 0, 3, 4};
  c.offsets = {0, 2, 3, 3, 5, 6, 7};
  c.batch_size = 2;
  c.options.policy = make_policy(PolicyKind::SeedDefault, weights, DType::F32);
  c.options.bounds_check = BoundsCheckMode::Warning;
  return c;
}

BackwardCase valid_backward(DType weights = DType::F32) {
  BackwardCase b;
  b.forward = valid_forward(weights);
  b.options.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  b.reset_momentum();
  b.resize_grad_output();
  return b;
}

void same_status(const Status& got, const Status& want) {
  INFO("got: " << got.message << "\nwant: " << want.message);
  REQUIRE(!want.ok());
  CHECK(!got.ok());
  CHECK(got.argument == want.argument);
  CHECK(got.message == want.message);
}

struct Mutation {
  const char* name;
  std::function<void(ForwardCase&)> apply;
};
/// Bad arguments tbe::validate(ForwardProblem) rejects.
const std::vector<Mutation>& forward_mutations() {
  static const std::vector<Mutation> m = {
      {"offsets one too long", [](ForwardCase& c) { c.offsets.push_back(c.offsets.back()); }},
      {"D over the limit", [](ForwardCase& c) { c.dims[0] = 4096; }},
      {"feature_table_map out of range", [](ForwardCase& c) { c.feature_table_map[0] = 2; }},
      {"policy.weights != tables.dtype", [](ForwardCase& c) { c.options.policy.weights = DType::F16; }},
      {"output not a storage type", [](ForwardCase& c) { c.options.policy.output = DType::I32; }},
      {"index type not an index", [](ForwardCase& c) { c.index_dtype = DType::F32; }},
  };
  return m;
}

}  // namespace

TEST_CASE("ForwardOp::can_implement: ok, validate's Status, then the CUDA limits", "[can_implement]") {
  for (DType w : {DType::F32, DType::F16, DType::BF16}) {
    ForwardCase c = valid_forward(w);
    CHECK(cuda::ForwardOp::can_implement(c.view()).ok());
  }
  for (const Mutation& m : forward_mutations()) {
    INFO(m.name);
    ForwardCase c = valid_forward();
    m.apply(c);
    const ForwardProblem p = c.view();
    same_status(cuda::ForwardOp::can_implement(p), validate(p));
  }
  // the reference accepts any accumulation type, the CUDA kernels FP32 and FP64
  ForwardCase c = valid_forward();
  c.options.policy.accumulation = DType::F16;
  const ForwardProblem p = c.view();
  REQUIRE(validate(p).ok());
  const Status s = cuda::ForwardOp::can_implement(p);
  CHECK(s.argument == "options.policy.accumulation");
  CHECK(s.message ==
        "options.policy.accumulation: fp16 is not supported by the CUDA backend (fp32 or fp64)");
}

TEST_CASE("ForwardOp::can_implement: the tuning's values by name, after the problem's checks",
          "[can_implement]") {
  ForwardCase c = valid_forward();
  const ForwardProblem p = c.view();
  // every documented value passes
  for (int rows : {4, 8})
    for (int staged : {cuda::ForwardTuning::kStagedRowsAuto, 0, 8, 16})
      for (int per_warp : {0, 1, 32}) {
        cuda::ForwardTuning t;
        t.rows_in_flight = rows;
        t.staged_rows = staged;
        t.staged_bags_per_warp = per_warp;
        t.launch_streams = per_warp == 32 ? 8 : per_warp + 1;  // 1, 2, 8
        t.staged_auto_min_bags = staged == 8 ? 0 : std::int64_t{1} << 40;
        t.small_table.expected_bag_length = per_warp == 1 ? 12.5 : 0;
        CHECK(cuda::ForwardOp::can_implement(p, t).ok());
      }
  CHECK(cuda::ForwardTuning{}.staged_rows == cuda::ForwardTuning::kStagedRowsAuto);
  struct Bad {
    std::function<void(cuda::ForwardTuning&)> apply;
    const char* argument;
    const char* message;
  };
  const std::vector<Bad> bad = {
      {[](cuda::ForwardTuning& t) { t.rows_in_flight = 6; }, "tuning.rows_in_flight",
       "tuning.rows_in_flight: 6 is not 4 or 8"},
      {[](cuda::ForwardTuning& t) { t.staged_rows = 4; }, "tuning.staged_rows",
       "tuning.staged_rows: 4 is not kStagedRowsAuto (-1), 0, 8 or 16"},
      {[](cuda::ForwardTuning& t) { t.staged_rows = -2; }, "tuning.staged_rows",
       "tuning.staged_rows: -2 is not kStagedRowsAuto (-1), 0, 8 or 16"},
      {[](cuda::ForwardTuning& t) { t.staged_auto_min_bags = -1; }, "tuning.staged_auto_min_bags",
       "tuning.staged_auto_min_bags: -1 is not >= 0"},
      {[](cuda::ForwardTuning& t) { t.staged_bags_per_warp = 33; }, "tuning.staged_bags_per_warp",
       "tuning.staged_bags_per_warp: 33 is not in 0..32 (0: chosen from the launch's bag count)"},
      {[](cuda::ForwardTuning& t) { t.staged_bags_per_warp = -1; }, "tuning.staged_bags_per_warp",
       "tuning.staged_bags_per_warp: -1 is not in 0..32 (0: chosen from the launch's bag count)"},
      {[](cuda::ForwardTuning& t) { t.launch_streams = 0; }, "tuning.launch_streams",
       "tuning.launch_streams: 0 is not in 1..8"},
      {[](cuda::ForwardTuning& t) { t.launch_streams = 9; }, "tuning.launch_streams",
       "tuning.launch_streams: 9 is not in 1..8"},
      {[](cuda::ForwardTuning& t) { t.small_table.expected_bag_length = -1; },
       "tuning.small_table.expected_bag_length",
       "tuning.small_table.expected_bag_length: -1 is not finite and >= 0 (0: measured from the "
       "offsets)"},
      {[](cuda::ForwardTuning& t) { t.small_table.expected_bag_length = -1e-300; },
       "tuning.small_table.expected_bag_length",
       "tuning.small_table.expected_bag_length: -1e-300 is not finite and >= 0 (0: measured from "
       "the offsets)"},
      {[](cuda::ForwardTuning& t) { t.small_table.expected_bag_length = std::nan(""); },
       "tuning.small_table.expected_bag_length", nullptr},
      {[](cuda::ForwardTuning& t) { t.small_table.expected_bag_length = HUGE_VAL; },
       "tuning.small_table.expected_bag_length", nullptr},
  };
  for (const Bad& b : bad) {
    cuda::ForwardTuning t;
    b.apply(t);
    const Status s = cuda::ForwardOp::can_implement(p, t);
    INFO(s.message);
    CHECK(s.argument == b.argument);
    if (b.message != nullptr) CHECK(s.message == b.message);
    // the constructor throws the same Status before touching the device
    CHECK_THROWS_AS(cuda::ForwardOp(p, {}, t), InvalidArgument);
    // the problem's own errors come first
    ForwardCase bad_case = valid_forward();
    bad_case.feature_table_map[0] = 2;
    const ForwardProblem bp = bad_case.view();
    same_status(cuda::ForwardOp::can_implement(bp, t), validate(bp));
  }
}

TEST_CASE("TransposeOp::can_implement: ok, validate's Status, then N < 2^31", "[can_implement]") {
  ForwardCase c = valid_forward();
  CHECK(cuda::TransposeOp::can_implement(c.view()).ok());
  for (const Mutation& m : forward_mutations()) {
    INFO(m.name);
    ForwardCase bad = valid_forward();
    m.apply(bad);
    const ForwardProblem p = bad.view();
    same_status(cuda::TransposeOp::can_implement(p), validate(p));
  }
  // N = 2^31: validate never reads the data, so the view may claim more lookups than it holds
  ForwardProblem p = c.view();
  p.lookups.num_indices = cuda::kBackwardMaxLookups + 1;
  REQUIRE(validate(p).ok());
  const Status s = cuda::TransposeOp::can_implement(p);
  CHECK(s.argument == "lookups.num_indices");
  CHECK(s.message.find("exceeds the CUDA backward limit") != std::string::npos);
}

TEST_CASE("TransposeTuning::Keys::RowBits where it is not valid: InvalidArgument by name, before "
          "any allocation", "[can_implement][transpose_keys]") {
  // No device here: the constructors must throw before they upload anything.
  using Keys = cuda::TransposeTuning::Keys;
  auto refused = [](const std::function<void()>& construct, const std::string& why) {
    try {
      construct();
      FAIL("constructed");
    } catch (const InvalidArgument& e) {
      INFO(e.what());
      CHECK(e.argument() == "tuning.transpose.keys");
      CHECK(std::string(e.what()).find(why) != std::string::npos);
    }
  };
  // valid_forward: feature 2 shares table 0 with feature 0, around feature 1's table 1
  ForwardCase c = valid_forward();
  const std::string interleaved = "table 0's features are not consecutive in feature_table_map";
  refused([&] { cuda::TransposeOp t(c.view(), {Keys::RowBits}); }, interleaved);
  BackwardCase b = valid_backward();
  cuda::BackwardTuning knobs;
  knobs.transpose.keys = Keys::RowBits;
  refused([&] { cuda::BackwardOp op(b.view(), BackwardStrategy{}, knobs); }, interleaved);
  // Tables too large for the keys (validate never reads the rows' data, so the view may claim rows
  // it does not hold): K >= 2^31; K < 2^31 but max E_t = 2^30, 31 row bits, and two tables (plus
  // the sentinel slot) need 2 more.
  ForwardCase one = valid_forward();
  one.feature_table_map = {0, 0, 1};
  struct Large {
    int log2_rows;
    const char* why;
  };
  for (const Large l : {Large{31, "Σ E_t < 2^31 (the runs' keys become 32-bit linearized ids), not 2147483651"},
                        Large{30, "31 row bits (max E_t = 1073741824) + 2 table bits exceed the 32-bit key"}}) {
    INFO("E_0 = 2^" << l.log2_rows);
    ForwardProblem p = one.view();
    const std::vector<std::int64_t> rows = {std::int64_t{1} << l.log2_rows, 3};
    const std::vector<std::int64_t> table_offsets = {0, (std::int64_t{1} << l.log2_rows) * 4};
    p.tables.rows = rows;
    p.tables.table_offsets = table_offsets;
    REQUIRE(cuda::TransposeOp::can_implement(p).ok());
    refused([&] { cuda::TransposeOp t(p, {Keys::RowBits}); }, l.why);
  }
}

TEST_CASE("BackwardOp::can_implement: ok, validate's Status, then limits and kernels", "[can_implement]") {
  for (DType w : {DType::F32, DType::F16, DType::BF16}) {
    BackwardCase b = valid_backward(w);
    CHECK(cuda::BackwardOp::can_implement(b.view()).ok());
  }
  BackwardStrategy s;
  {
    BackwardCase b = valid_backward();
    b.options.optimizer.learning_rate = -1.0;
    const BackwardProblem p = b.view();
    same_status(cuda::BackwardOp::can_implement(p, s), validate(p, s));
  }
  {
    BackwardCase b = valid_backward();
    BackwardStrategy bad = s;
    bad.chunk_size = 100;
    const BackwardProblem p = b.view();
    same_status(cuda::BackwardOp::can_implement(p, bad), validate(p, bad));
  }
  for (const Mutation& m : forward_mutations()) {
    INFO(m.name);
    BackwardCase b = valid_backward();
    m.apply(b.forward);
    const BackwardProblem p = b.view();
    same_status(cuda::BackwardOp::can_implement(p, s), validate(p, s));
  }
  // FP16 weights with FP64 accumulation: the reference runs it, no CUDA run kernel is compiled
  BackwardCase b = valid_backward(DType::F16);
  b.forward.options.policy.accumulation = DType::F64;
  const BackwardProblem p = b.view();
  REQUIRE(validate(p, s).ok());
  const Status st = cuda::BackwardOp::can_implement(p, s);
  CHECK(st.argument == "options.policy");
  CHECK(st.message.find("has no CUDA backward kernel") != std::string::npos);

  // with the outputs: validate(p, out) comes before the CUDA limits (the host backend's order)
  BackwardCase good = valid_backward();
  const BackwardOutputs good_out{good.forward.weights.data(), good.momentum.data(), nullptr};
  CHECK(cuda::BackwardOp::can_implement(good.view(), s, good_out).ok());
  const BackwardOutputs out{b.forward.weights.data(), b.momentum.data(), nullptr};
  BackwardOutputs no_momentum = out;
  no_momentum.momentum = nullptr;
  same_status(cuda::BackwardOp::can_implement(p, s, no_momentum), validate(p, no_momentum));
  same_status(cuda::BackwardOp::can_implement(p, s, out), st);
}

TEST_CASE("LceOp::can_implement: ok, validate's Status, the map, then the CUDA limits", "[can_implement][ikbo]") {
  ikbo::LceShape shape;
  shape.B = 6;
  shape.U = 2;
  shape.M = 3;
  shape.N = 5;
  shape.K_c = 7;
  shape.K_u = 9;
  const ikbo::IkboPolicy f16{DType::F16, DType::F32, ikbo::LceRounding::Published};
  const ikbo::LceCase c = ikbo::make_lce_case(shape, f16, ikbo::MapKind::Sorted, 3);
  const ikbo::LceProblem ok = c.view();
  CHECK(cuda::LceOp::can_implement(ok).ok());
  CHECK(cuda::LceOp::can_implement(ok, c.cand_to_user.data()).ok());
  {
    ikbo::LceProblem p = ok;
    p.M = 0;
    same_status(cuda::LceOp::can_implement(p), ikbo::validate(p));
    same_status(cuda::LceOp::can_implement(p, c.cand_to_user.data()), ikbo::validate(p));
  }
  {
    ikbo::LceProblem p = ok;
    p.policy.storage = DType::I32;
    same_status(cuda::LceOp::can_implement(p), ikbo::validate(p));
  }
  // the CUDA limits: FP64 accumulation (the reference accepts it with FP32 storage), the pads
  const ikbo::IkboPolicy f32{DType::F32, DType::F64, ikbo::LceRounding::RoundOnce};
  const ikbo::LceCase c32 = ikbo::make_lce_case(shape, f32, ikbo::MapKind::Sorted, 3);
  const ikbo::LceProblem p64 = c32.view();
  REQUIRE(ikbo::validate(p64).ok());
  CHECK(cuda::LceOp::can_implement(p64).argument == "lce.policy.accumulation");
  cuda::LceLayout pad;
  pad.k_c_pad = shape.K_c + 2;  // not a multiple of 8
  CHECK(cuda::LceOp::can_implement(ok, pad).argument == "layout.k_c_pad");
  cuda::LceTuning tuning;
  tuning.chunk_candidates = -1;
  CHECK(cuda::LceOp::can_implement(ok, {}, tuning).argument == "tuning.chunk_candidates");
  // a bad host map: validate_map's Status, before the CUDA limits
  std::vector<std::int32_t> map = c32.cand_to_user;
  map[4] = static_cast<std::int32_t>(p64.U);
  const Status want = ikbo::validate_map(map, p64.U);
  same_status(cuda::LceOp::can_implement(p64, map.data()), want);
  CHECK(want.argument == "cand_to_user[4]");
}

TEST_CASE("AttentionOp::can_implement: ok, validate's Status, the map, then the CUDA limits",
          "[can_implement][ikbo][attention]") {
  ikbo::AttentionShape shape;
  shape.B = 6;
  shape.U = 3;
  shape.n_seed = 4;
  shape.H = 2;
  shape.Dh = 128;
  shape.S = 9;
  const ikbo::IkboPolicy bf16{DType::BF16, DType::F32, ikbo::LceRounding::RoundOnce};
  const ikbo::AttentionCase c = ikbo::make_attention_case(shape, bf16, ikbo::MapKind::Sorted, 3);
  const ikbo::AttentionProblem ok = c.view();
  CHECK(cuda::AttentionOp::can_implement(ok).ok());
  CHECK(cuda::AttentionOp::can_implement(ok, c.cand_to_user.data()).ok());
  {
    ikbo::AttentionProblem p = ok;
    p.H = 0;
    same_status(cuda::AttentionOp::can_implement(p), ikbo::validate(p));
    same_status(cuda::AttentionOp::can_implement(p, c.cand_to_user.data()), ikbo::validate(p));
  }
  {  // Dh = 96 passes validate() and has no kernel: named, with what is compiled
    ikbo::AttentionShape s96 = shape;
    s96.Dh = 96;
    const ikbo::AttentionCase c96 = ikbo::make_attention_case(s96, bf16, ikbo::MapKind::Sorted, 3);
    REQUIRE(ikbo::validate(c96.view()).ok());
    const Status st = cuda::AttentionOp::can_implement(c96.view());
    CHECK(st.argument == "attention.Dh");
    CHECK(st.message.find("96") != std::string::npos);
    CHECK(st.message.find("64 and 128") != std::string::npos);
  }
  {  // FP32 storage (the reference runs it), FP64 accumulation
    const ikbo::AttentionCase c32 = ikbo::make_attention_case(
        shape, {DType::F32, DType::F64, ikbo::LceRounding::RoundOnce}, ikbo::MapKind::Sorted, 3);
    REQUIRE(ikbo::validate(c32.view()).ok());
    CHECK(cuda::AttentionOp::can_implement(c32.view()).argument == "attention.policy.storage");
  }
  {
    ikbo::AttentionProblem p = ok;
    p.H = 70000;  // metadata only: can_implement reads no tensor
    REQUIRE(ikbo::validate(p).ok());
    CHECK(cuda::AttentionOp::can_implement(p).argument == "attention.H");
    p = ok;
    p.n_seed = std::int64_t{1} << 30;  // B·n_seed > INT_MAX query rows
    REQUIRE(ikbo::validate(p).ok());
    CHECK(cuda::AttentionOp::can_implement(p).argument == "attention.B");
  }
  cuda::AttentionTuning tuning;
  tuning.key_block = 32;
  CHECK(cuda::AttentionOp::can_implement(ok, tuning).argument == "tuning.key_block");
  // Q in registers and 3 K/V stages: compiled with key block 128 only
  tuning.key_block = 64;
  tuning.q_in_registers = true;
  CHECK(cuda::AttentionOp::can_implement(ok, tuning).argument == "tuning.q_in_registers");
  tuning.key_block = 128;
  CHECK(cuda::AttentionOp::can_implement(ok, tuning).ok());
  tuning.kv_stages = 3;
  CHECK(cuda::AttentionOp::can_implement(ok, tuning).ok());
  tuning.kv_stages = 4;
  CHECK(cuda::AttentionOp::can_implement(ok, tuning).argument == "tuning.kv_stages");
  tuning.q_in_registers = false;
  tuning.key_block = 64;
  tuning.kv_stages = 3;
  CHECK(cuda::AttentionOp::can_implement(ok, tuning).argument == "tuning.kv_stages");
  tuning.kv_stages = 2;
  // a bad host map: validate_map's Status, before the CUDA limits
  std::vector<std::int32_t> map = c.cand_to_user;
  map[4] = -1;
  const Status want = ikbo::validate_map(map, ok.U);
  tuning.key_block = 64;
  same_status(cuda::AttentionOp::can_implement(ok, map.data(), tuning), want);
  CHECK(want.argument == "cand_to_user[4]");
}
