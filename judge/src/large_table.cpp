// The large-table rows (large_table.h).
#include "tbe/judge/large_table.h"

#include <chrono>
#include <cstdio>

#include "tbe/host_case.h"
#include "tbe/judge/poisoned_output.h"
#include "tbe/oracle/backward_oracle.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/rng.h"

namespace tbe::judge {
namespace {

constexpr std::int64_t kBags = 256;        // B, one feature
constexpr std::int64_t kBagLength = 4;     // two high rows, two low rows per bag
constexpr std::int64_t kRowsUsed = 64;     // distinct high rows and low rows
constexpr std::int64_t kHighRow0 = std::int64_t{1} << 21;  // element offset 2^31
constexpr std::int64_t kLowRow0 = 64;      // rows 0..63 stay zero and untouched
constexpr std::uint64_t kLargeStream = 0x6c61'7267'6500'0000ULL;  // "large"

// The case: rows 0..63 zero (what a 32-bit offset of rows 2^21 + k reads: row k), the looked-up
// rows kLowRow0.. and kHighRow0.. random, every other row zero.
ForwardCase make_case(std::uint64_t seed) {
  ForwardCase c;
  c.set_tables(DType::F16, {kLargeTableRows}, {kLargeTableDim});
  c.feature_table_map = {0};
  Rng rng(seed, kLargeStream);
  for (std::int64_t k = 0; k < kRowsUsed; ++k)
    for (std::int64_t r : {kLowRow0 + k, kHighRow0 + k})
      for (std::int64_t d = 0; d < kLargeTableDim; ++d) c.set_weight(0, r, d, 2.0 * rng.uniform() - 1.0);
  c.index_dtype = DType::I32;
  c.batch_size = kBags;
  c.offsets.push_back(0);
  for (std::int64_t b = 0; b < kBags; ++b) {
    const std::int64_t k = b % kRowsUsed, j = (b * 7 + 3) % kRowsUsed;
    for (std::int64_t r : {kHighRow0 + k, kLowRow0 + j, kHighRow0 + j, kLowRow0 + k}) c.indices.push_back(r);
    c.offsets.push_back(static_cast<std::int64_t>(c.indices.size()));
  }
  c.options.pooling = PoolingMode::Sum;
  c.options.bounds_check = BoundsCheckMode::None;
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::F16, DType::F32);
  return c;
}

void add_report(RowResult& row, const std::string& name, oracle::CheckReport rep) {
  Check c;
  c.name = name;
  c.passed = rep.passed();
  c.detail = rep.summary();
  c.report = std::move(rep);
  row.checks.push_back(std::move(c));
}

RowResult forward_row(Backend& dev, ForwardCase& c) {
  RowResult row;
  row.target = Target::Device;
  guarded(row.checks, "large.forward", [&] {
    const ForwardProblem p = c.view();
    const oracle::ForwardEnclosures enc = oracle::compute_forward_enclosures(p);
    PoisonedOutput out(DType::F32, enc.layout.numel);
    const ForwardStats st = dev.forward(p, out.data());
    add_paths(row, st.paths);
    row.checks.push_back(agreement("canary", out.canary_intact(),
                                   out.canary_intact() ? "sentinels past the output untouched"
                                                       : "wrote past the end of the output"));
    std::vector<double> values(static_cast<std::size_t>(enc.layout.numel));
    for (std::int64_t i = 0; i < enc.layout.numel; ++i)
      values[i] = load_as_double(DType::F32, out.data(), i);
    add_report(row, "oracle", oracle::judge_forward(p, enc, values));
  });
  finish_row(row);
  return row;
}

RowResult backward_row(Backend& dev, ForwardCase& c, std::uint64_t seed) {
  RowResult row;
  row.target = Target::Device;
  guarded(row.checks, "large.backward", [&] {
    BackwardProblem p;
    p.forward = c.view();
    const std::int64_t numel = make_output_layout(p.forward).numel;
    std::vector<float> grad(static_cast<std::size_t>(numel));
    Rng g(seed, kLargeStream + 1);
    for (float& v : grad) v = static_cast<float>(2.0 * g.uniform() - 1.0);
    p.grad_output = grad.data();
    p.options.optimizer.kind = OptimizerKind::ExactSgd;
    p.options.optimizer.learning_rate = 0.5;  // updates of a few FP16 ulps at least
    const oracle::BackwardEnclosures enc = oracle::compute_backward_enclosures(p);
    std::vector<std::byte> weights = c.weights;  // the output starts as the tables before
    BackwardOutputs out;
    out.weights = weights.data();
    const BackwardStats st = dev.backward(p, out, BackwardStrategy{});
    add_paths(row, st.paths);
    const oracle::BackwardCheckReport rep = oracle::judge_backward(p, enc, {weights.data()});
    for (const oracle::CheckReport& r : rep.reports) add_report(row, "oracle." + r.check, r);
  });
  finish_row(row);
  return row;
}

}  // namespace

std::size_t large_table_device_bytes() {
  const std::size_t weights = static_cast<std::size_t>(kLargeTableRows) * kLargeTableDim * 2;
  return 2 * weights + (std::size_t{256} << 20);
}

std::vector<LargeTableRow> run_large_table_rows(const LargeTableConfig& cfg) {
  std::vector<LargeTableRow> out = {{"large.forward", {}}, {"large.backward", {}}};
  std::string skip;
  if (!cfg.device) {
    skip = cfg.skip_reason.empty() ? "no GPU" : cfg.skip_reason;
  } else if (cfg.device_free_bytes < large_table_device_bytes()) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "needs %.1f GiB of free device memory, the device has %.1f GiB free",
                  static_cast<double>(large_table_device_bytes()) / (1 << 30),
                  static_cast<double>(cfg.device_free_bytes) / (1 << 30));
    skip = buf;
  }
  if (!skip.empty()) {
    for (LargeTableRow& r : out) {
      r.row.target = Target::Device;
      r.row.verdict = Verdict::Skipped;
      r.row.reason = skip;
    }
    return out;
  }
  ForwardCase c = make_case(cfg.seed);
  auto timed = [](auto&& fn) {
    const auto t0 = std::chrono::steady_clock::now();
    RowResult r = fn();
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  out[0].row = timed([&] { return forward_row(*cfg.device, c); });
  out[1].row = timed([&] { return backward_row(*cfg.device, c, cfg.seed); });
  return out;
}

}  // namespace tbe::judge
