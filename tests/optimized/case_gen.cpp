#include "case_gen.h"

#include <algorithm>
#include <sstream>

#include <rapidcheck.h>

#include "gpu_harness.h"
#include "tbe/case_builder.h"
#include "tbe/precision.h"
#include "tbe/workloads.h"

namespace tbe::test {

namespace {

rc::Gen<std::int32_t> gen_dim() {
  return rc::gen::weightedOneOf<std::int32_t>({
      {6, rc::gen::element<std::int32_t>(1, 2, 3, 4, 5, 7, 8, 12, 16, 24, 33, 64, 96, 127, 128,
                                         129, 136, 256, 264)},
      {2, rc::gen::inRange<std::int32_t>(1, 300)},
      {1, rc::gen::element<std::int32_t>(511, 1000, 1024, 1025, 1280, 1536, 2047, 2048)},
  });
}

rc::Gen<std::int64_t> gen_bag_length() {
  return rc::gen::weightedOneOf<std::int64_t>({
      {12, rc::gen::inRange<std::int64_t>(0, 7)},
      {3, rc::gen::inRange<std::int64_t>(0, 40)},
      {1, rc::gen::element<std::int64_t>(0, 1, 255, 256, 257)},
  });
}

}  // namespace

ForwardCase gen_valid_case(BoundsCheckMode mode, const CaseLimits& limits) {
  ForwardCaseSpec spec;
  const PoolingMode pooling =
      limits.allow_none_pooling
          ? *rc::gen::element(PoolingMode::Sum, PoolingMode::Mean, PoolingMode::None)
          : *rc::gen::element(PoolingMode::Sum, PoolingMode::Mean);
  const auto T = *rc::gen::inRange<std::int32_t>(1, 5);
  const auto num_tables = *rc::gen::inRange<std::int32_t>(1, T + 1);
  spec.rows.resize(num_tables);
  spec.dims.resize(num_tables);
  const std::int32_t common_dim = *gen_dim();
  for (std::int32_t t = 0; t < num_tables; ++t) {
    spec.rows[t] = *rc::gen::weightedOneOf<std::int64_t>(
        {{2, rc::gen::inRange<std::int64_t>(1, 4)}, {3, rc::gen::inRange<std::int64_t>(1, 200)}});
    spec.dims[t] = pooling == PoolingMode::None ? common_dim : *gen_dim();
  }
  const DType wdt = *rc::gen::element(DType::F32, DType::F16, DType::BF16);
  const DType odt = *rc::gen::element(DType::F32, DType::F16, DType::BF16);
  const PolicyKind kind = *rc::gen::element(PolicyKind::SeedDefault, PolicyKind::FbgemmCuda);
  spec.weights = wdt;
  spec.feature_table_map.resize(T);
  for (std::int32_t f = 0; f < T; ++f)
    spec.feature_table_map[f] = *rc::gen::inRange<std::int32_t>(0, num_tables);
  spec.index_dtype = *rc::gen::element(DType::I32, DType::I64);
  spec.options.pooling = pooling;
  spec.options.bounds_check = mode;
  spec.options.policy = make_policy(kind, wdt, odt);

  // bags: non-VBE B per feature, or VBE batch sizes [T][R]
  const bool vbe = limits.allow_vbe && pooling != PoolingMode::None && *rc::gen::inRange(0, 4) == 0;
  std::vector<std::int64_t> bags_of_feature(T);
  if (vbe) {
    const auto R = *rc::gen::inRange<std::int32_t>(1, 4);
    spec.vbe_ranks = R;
    spec.vbe_batch_sizes.resize(static_cast<std::size_t>(T) * R);
    for (std::int32_t f = 0; f < T; ++f)
      for (std::int32_t r = 0; r < R; ++r) {
        const auto b = *rc::gen::inRange<std::int32_t>(0, 5);
        spec.vbe_batch_sizes[static_cast<std::size_t>(f) * R + r] = b;
        bags_of_feature[f] += b;
      }
  } else {
    const std::int64_t B = *rc::gen::weightedOneOf<std::int64_t>(
        {{1, rc::gen::just<std::int64_t>(0)},
         {8, rc::gen::inRange<std::int64_t>(1, std::max<std::int64_t>(2, limits.max_bags / T))}});
    spec.batch_size = B;
    for (auto& b : bags_of_feature) b = B;
  }
  const std::uint64_t seed = *rc::gen::arbitrary<std::uint64_t>();
  Rng rng(seed, 1);
  const std::int64_t lead = *rc::gen::weightedElement<std::int64_t>({{6, 0}, {1, 1}, {1, 3}});
  for (std::int64_t i = 0; i < lead; ++i) spec.leading.push_back(rng.uniform_int(1000) - 500);
  const bool weighted = pooling != PoolingMode::None && *rc::gen::arbitrary<bool>();
  std::int64_t N = lead;
  for (std::int32_t f = 0; f < T; ++f) {
    const std::int64_t E = spec.rows[spec.feature_table_map[f]];
    for (std::int64_t b = 0; b < bags_of_feature[f]; ++b) {
      const std::int64_t L = *gen_bag_length();
      std::vector<std::int64_t>& bag = spec.bags.emplace_back();
      for (std::int64_t l = 0; l < L; ++l) bag.push_back(rng.uniform_int(E));
      N += L;
    }
  }
  if (weighted) {
    spec.per_sample_weights.resize(static_cast<std::size_t>(N));
    for (auto& w : spec.per_sample_weights) w = static_cast<float>(0.5 + rng.uniform());
  }
  ForwardCase c = build_case(spec);
  const bool small_integers = *rc::gen::inRange(0, 4) == 0;
  fill_weights(c, seed ^ 0x9e3779b97f4a7c15ull, small_integers);
  return c;
}

void gen_malform(ForwardCase& c) {
  const std::int64_t N = static_cast<std::int64_t>(c.indices.size());
  const std::int64_t K = static_cast<std::int64_t>(c.offsets.size()) - 1;
  std::int64_t emax = 1;
  for (auto e : c.rows) emax = std::max(emax, e);
  const int mutations = *rc::gen::inRange(1, 5);
  for (int m = 0; m < mutations; ++m) {
    const int what = *rc::gen::inRange(0, 4);
    if ((what == 0 || N == 0) && K >= 0) {  // an offset anywhere (incl. the last) to any value
      const auto k = *rc::gen::inRange<std::int64_t>(0, K + 1);
      c.offsets[k] = *rc::gen::inRange<std::int64_t>(-3, N + 4);
    } else if (what == 1 && K >= 0) {  // the last offset only
      c.offsets[K] = *rc::gen::element<std::int64_t>(N - 1, N + 1, N + 5, 0);
    } else if (N > 0) {  // an index out of range
      const auto p = *rc::gen::inRange<std::int64_t>(0, N);
      c.indices[p] = *rc::gen::element<std::int64_t>(-1, -7, emax, emax + 3, 1 << 30);
    }
  }
}

std::string describe(const ForwardCase& c) {
  std::ostringstream s;
  s << "T=" << c.num_features() << " tables=" << c.rows.size() << " N=" << c.indices.size()
    << " bags=" << (c.offsets.empty() ? 0 : c.offsets.size() - 1) << " B=" << c.batch_size
    << " vbeR=" << c.vbe_ranks << " w=" << to_string(c.weights_dtype)
    << " idx=" << to_string(c.index_dtype) << " pool=" << to_string(c.options.pooling)
    << " check=" << to_string(c.options.bounds_check) << " policy=" << to_string(c.options.policy)
    << " weighted=" << !c.per_sample_weights.empty() << " dims=[";
  for (auto d : c.dims) s << d << ",";
  s << "] rows=[";
  for (auto e : c.rows) s << e << ",";
  s << "]";
  return s.str();
}

}  // namespace tbe::test
