// The CPU emulations themselves (they are test helpers that other tools reuse, so they get
// tested too): orders on exact data agree with the exact value, FP64 index order equals the
// reference bit for bit, narrow accumulators really round, seeds are deterministic.
#include <catch2/catch.hpp>

#include <cmath>

#include "oracle_test_support.h"
#include "tbe/forward.h"
#include "tbe/oracle/policy_emulation.h"

using namespace tbe;
using namespace tbe::oracle;
using namespace tbe::oracle::testing;

TEST_CASE("emulation: FP64 index order is the reference, bit for bit", "[oracle][emulation]") {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    CaseSpec s;
    s.seed = seed;
    s.policy = PolicyKind::SeedDefault;
    s.weights = DType::F32;
    s.output = seed % 2 ? DType::F32 : DType::BF16;
    s.pooling = seed % 3 == 0 ? PoolingMode::None : (seed % 3 == 1 ? PoolingMode::Sum : PoolingMode::Mean);
    s.num_tables = 2;
    s.num_features = 3;
    s.dims = {5, 5};
    s.rows = {7, 3};
    s.batch = 3;
    s.vbe = seed % 4 == 0;
    s.ranks = 2;
    s.bag_length_mode = 3;
    s.values = ValueMode::Binades;
    s.sample_weights = s.pooling == PoolingMode::None ? SampleWeightMode::None : SampleWeightMode::Binades;
    ForwardCase c = build_case(s);
    const ForwardProblem p = c.view();
    std::vector<double> ref = forward_reference_fp64(p);
    for (auto& x : ref) x = round_to(s.output, x);
    EmulationOptions o;
    o.mean_scaling = MeanScaling::Divide;  // the reference divides once
    INFO("seed " << seed);
    CHECK(emulate_forward(p, o) == ref);
  }
}

TEST_CASE("emulation: every order is exact on small integers", "[oracle][emulation]") {
  std::vector<std::int64_t> bag(700);
  for (std::size_t i = 0; i < bag.size(); ++i) bag[i] = static_cast<std::int64_t>((i * 7) % 5);
  ForwardCase c = single_table_case(DType::F16, DType::F32, PolicyKind::FbgemmCuda,
                                    PoolingMode::Sum, 5, 3, {bag, {}, {1}},
                                    [](std::int64_t r, std::int32_t d) { return (r - 2.0) * (d + 1); });
  const std::vector<double> want = emulate_forward(c.view(), SummationOrder::IndexOrder);
  for (SummationOrder o : kAllSummationOrders)
    CHECK(emulate_forward(c.view(), o, 9) == want);
}

TEST_CASE("emulation: narrow accumulators round every partial sum", "[oracle][emulation]") {
  std::vector<std::int64_t> bag(4097, 1);
  bag[0] = 0;
  ForwardCase c = single_table_case(DType::F16, DType::F32, PolicyKind::FbgemmCuda,
                                    PoolingMode::Sum, 2, 1, {bag},
                                    [](std::int64_t r, std::int32_t) { return r == 0 ? 1.0 : 0x1p-12; });
  CHECK(emulate_forward(c.view(), SummationOrder::IndexOrder)[0] == 2.0);
  CHECK(emulate_forward(c.view(), SummationOrder::IndexOrder, 0, DType::F16)[0] == 1.0);
  CHECK(emulate_forward(c.view(), SummationOrder::IndexOrder, 0, DType::BF16)[0] == 1.0);
  // ascending order adds the small terms first: 4096·2^-12 = 1 is exact in FP16 up to 0.5, then
  // the spacing is 2^-11 and every further +2^-12 ties to even; the result is not 2 either way
  CHECK(emulate_forward(c.view(), SummationOrder::SortedAscending, 0, DType::F16)[0] != 2.0);
  CHECK(round_to_accumulation(DType::F16, 1.0 + 0x1p-12) == 1.0);
  CHECK(round_to_accumulation(DType::F32, 1.0 + 0x1p-30) == 1.0);
  CHECK(round_to_accumulation(DType::F64, 1.0 + 0x1p-30) == 1.0 + 0x1p-30);
}

TEST_CASE("emulation: MEAN scalings and output rounding", "[oracle][emulation]") {
  ForwardCase c = single_table_case(DType::F32, DType::F16, PolicyKind::FbgemmCuda,
                                    PoolingMode::Mean, 3, 1, {{0, 1, 2}},
                                    [](std::int64_t r, std::int32_t) { return 0.1 * (r + 1); });
  EmulationOptions o;
  o.round_to_output = false;
  for (MeanScaling m : kAllMeanScalings) {
    o.mean_scaling = m;
    const double v = emulate_forward(c.view(), o)[0];
    CHECK(static_cast<double>(static_cast<float>(v)) == v);  // an FP32 (acc) value
    CHECK(std::fabs(v - 0.2) < 1e-6);
  }
  o.round_to_output = true;
  const double r = emulate_forward(c.view(), o)[0];
  CHECK(r == round_to(DType::F16, r));
}

TEST_CASE("emulation: random permutations are a pure function of the seed",
          "[oracle][emulation]") {
  CaseSpec s;
  s.seed = 5;
  s.policy = PolicyKind::FbgemmCuda;
  s.weights = DType::F32;
  s.dims = {4};
  s.rows = {9};
  s.batch = 3;
  s.bag_length_mode = 2;
  s.values = ValueMode::Binades;
  s.exponent_spread = 30;
  ForwardCase c = build_case(s);
  const auto a = emulate_forward(c.view(), SummationOrder::RandomPermutation, 11);
  const auto b = emulate_forward(c.view(), SummationOrder::RandomPermutation, 11);
  CHECK(a == b);
  bool differs = false;
  for (std::uint64_t seed = 12; seed < 20 && !differs; ++seed)
    differs = emulate_forward(c.view(), SummationOrder::RandomPermutation, seed) != a;
  CHECK(differs);
  EmulationOptions o;
  o.order = SummationOrder::RandomPermutation;
  o.seed = 3;
  o.accumulation = DType::F16;
  CHECK(to_string(o) == "order=random seed=3 mean=at-end acc=fp16 rounded");
}
