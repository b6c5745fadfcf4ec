// The oracle side of the seeded streams, pinned bit for bit (hashes taken before tbe::Rng moved
// into rng.h): the case builders of these tests, the random summation orders of the forward and
// backward emulations and the backward emulation's stochastic-rounding draws. tbe-verify's CPU
// self-checks and the recorded counterexamples depend on them.
#include <catch2/catch.hpp>

#include "backward_oracle_test_support.h"
#include "content_hash.h"
#include "tbe/oracle/backward_emulation.h"
#include "tbe/oracle/policy_emulation.h"

using namespace tbe;
using namespace tbe::oracle;
using namespace tbe::oracle::testing;
using tbe_test::ContentHash;
using tbe_test::hash_case;

TEST_CASE("the case builders and the emulations' random streams are pinned", "[oracle][rng]") {
  CaseRng g(99);
  CHECK(g.range(-8, 8) == 2);
  CHECK(g.range(0, 600) == 477);
  CHECK(g.unit() == 0x1.ab65a069e083ap-1);
  CHECK(g.coin(0.3));

  CaseSpec s;
  s.seed = 77;
  s.policy = PolicyKind::FbgemmCuda;
  s.weights = DType::F16;
  s.output = DType::F32;
  s.pooling = PoolingMode::Mean;
  s.num_tables = 2;
  s.num_features = 3;
  s.dims = {5, 9};
  s.rows = {7, 3};
  s.vbe = true;
  s.ranks = 2;
  s.batch = 4;
  s.bag_length_mode = 3;
  s.values = ValueMode::Binades;
  s.exponent_spread = 12;
  s.sample_weights = SampleWeightMode::Binades;
  s.inject_bad = true;
  ForwardCase c = build_case(s);
  CHECK(hash_case(c) == 0xD31EB22B5B23FA46ull);
  ContentHash forward;
  forward.add(emulate_forward(c.view(), SummationOrder::RandomPermutation, 5));
  CHECK(forward.value == 0x179149C32F6DC41Aull);

  BackwardSpec bs;
  bs.forward = s;
  bs.forward.pooling = PoolingMode::Sum;
  bs.forward.inject_bad = false;
  bs.write_back = RoundingMode::Stochastic;
  bs.optimizer.kind = OptimizerKind::ExactRowwiseAdagrad;
  bs.sr_seed = 3;
  BackwardCase bc = build_backward_case(bs);
  ContentHash built;
  built.add(bc.grad_output);
  built.add(bc.momentum);
  built.scalar(hash_case(bc.forward));
  CHECK(built.value == 0x618D26EAB71F1864ull);
  BackwardEmulationOptions o;
  o.order = SummationOrder::RandomPermutation;
  o.column_order = SummationOrder::RandomPermutation;
  o.seed = 9;
  const BackwardEmulationResult r = emulate_backward(bc.view(), o);
  ContentHash backward;
  backward.add(r.weights);
  backward.add(r.momentum);
  backward.add(r.per_sample_weight_grad);
  CHECK(backward.value == 0x9D9C30EBAF120DEEull);
}
