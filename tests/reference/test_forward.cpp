// The FP64 reference forward: hand-derived cases, a brute-force layout check, and metamorphic
// properties on generated valid problems (exact small-integer fills make every check bitwise).
#include <catch2/catch.hpp>
#include <rapidcheck/catch.h>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <numeric>

#include "reference_test_support.h"
#include "tbe/backend.h"

using namespace tbe;
using namespace tbe_test;

namespace {

// Brute force from the definitions of docs/semantics.md, using only the owning case: per bag, Σ s_p·W[i_p]
// in index order (÷ L for MEAN), placed by hand-written layout rules.
std::vector<double> brute_forward(const ForwardCase& c) {
  const std::int64_t T = c.num_features();
  const auto feats = bag_features(c);
  const bool none = c.options.pooling == PoolingMode::None;
  auto D_of = [&](std::int64_t f) { return std::int64_t{c.dims[c.feature_table_map[f]]}; };
  const std::int64_t N = static_cast<std::int64_t>(c.indices.size());
  std::vector<double> out;
  if (none) {
    const std::int64_t D = T ? D_of(0) : 0;
    out.assign(static_cast<std::size_t>(N * D), 0.0);
    for (std::size_t k = 0; k < feats.size(); ++k)
      for (std::int64_t q = c.offsets[k]; q < c.offsets[k + 1]; ++q)
        for (std::int64_t d = 0; d < D; ++d)
          out[q * D + d] = c.weight(c.feature_table_map[feats[k]], c.indices[q], d);
    return out;
  }
  // Row placement of bag (f, b): non-VBE row b at column offset Σ_{f'<f} D; VBE by blocks.
  std::vector<std::int64_t> place(feats.size());
  std::int64_t total = 0;
  if (c.vbe_batch_sizes.empty()) {
    std::int64_t cols = 0, k = 0;
    std::vector<std::int64_t> col(T);
    for (std::int64_t f = 0; f < T; ++f) { col[f] = cols; cols += D_of(f); }
    for (std::int64_t f = 0; f < T; ++f)
      for (std::int64_t b = 0; b < c.batch_size; ++b) place[k++] = b * cols + col[f];
    total = c.batch_size * cols;
  } else {
    const std::int64_t R = c.vbe_ranks;
    std::vector<std::int64_t> first(T * R);  // first bag of (f, r)
    std::int64_t k = 0;
    for (std::int64_t f = 0; f < T; ++f)
      for (std::int64_t r = 0; r < R; ++r) { first[f * R + r] = k; k += c.vbe_batch_sizes[f * R + r]; }
    for (std::int64_t r = 0; r < R; ++r)
      for (std::int64_t f = 0; f < T; ++f)
        for (std::int64_t j = 0; j < c.vbe_batch_sizes[f * R + r]; ++j) {
          place[first[f * R + r] + j] = total;
          total += D_of(f);
        }
  }
  out.assign(static_cast<std::size_t>(total), 0.0);
  for (std::size_t k = 0; k < feats.size(); ++k) {
    const std::int64_t f = feats[k], t = c.feature_table_map[f], D = D_of(f);
    const std::int64_t L = c.offsets[k + 1] - c.offsets[k];
    for (std::int64_t d = 0; d < D; ++d) {
      double acc = 0.0;
      for (std::int64_t q = c.offsets[k]; q < c.offsets[k + 1]; ++q) {
        const double s = c.per_sample_weights.empty() ? 1.0 : c.per_sample_weights[q];
        acc += s * c.weight(t, c.indices[q], d);
      }
      if (c.options.pooling == PoolingMode::Mean && L > 0) acc /= static_cast<double>(L);
      out[place[k] + d] = acc;
    }
  }
  return out;
}

// Reads a typed output buffer back as doubles.
std::vector<double> typed_forward(ForwardCase& c) {
  const auto p = c.view();
  const auto L = make_output_layout(p);
  std::vector<std::byte> buf(static_cast<std::size_t>(L.numel) * dtype_size(p.options.policy.output));
  forward_reference(p, buf.data());
  std::vector<double> out(static_cast<std::size_t>(L.numel));
  for (std::int64_t i = 0; i < L.numel; ++i) out[i] = load_as_double(p.options.policy.output, buf.data(), i);
  return out;
}

GenOptions pooled_exact() {
  GenOptions o;
  o.allow_none = false;
  return o;
}

}  // namespace

// ---- hand-derived cases --------------------------------------------------------------------------

TEST_CASE("two features with different D, weighted SUM and MEAN (hand-derived)", "[forward]") {
  // t0: E=3, D=2, W0[r] = [r, 10r]; t1: E=2, D=3, W1[r] = [r+1, -(r+1), 0.5].
  ForwardCase c;
  c.set_tables(DType::F32, {3, 2}, {2, 3});
  for (int r = 0; r < 3; ++r) { c.set_weight(0, r, 0, r); c.set_weight(0, r, 1, 10 * r); }
  for (int r = 0; r < 2; ++r) {
    c.set_weight(1, r, 0, r + 1); c.set_weight(1, r, 1, -(r + 1)); c.set_weight(1, r, 2, 0.5);
  }
  c.feature_table_map = {0, 1};
  c.batch_size = 2;
  // bags: (f0,b0)=[1,2] (f0,b1)=[] (f1,b0)=[0] (f1,b1)=[1,1,0]
  c.indices = {1, 2, 0, 1, 1, 0};
  c.offsets = {0, 2, 2, 3, 6};
  c.per_sample_weights = {2, 0.5, 3, 1, 1, -1};
  c.options.pooling = PoolingMode::Sum;
  // out [B=2, 5]: row0 = [2·1 + 0.5·2, 2·10 + 0.5·20 | 3·1, 3·-1, 3·0.5]
  //               row1 = [0, 0 | 2 + 2 - 1, -2 - 2 + 1, 0.5 + 0.5 - 0.5]
  CHECK(fwd64(c) == std::vector<double>{3, 30, 3, -3, 1.5, 0, 0, 3, -3, 0.5});
  c.options.pooling = PoolingMode::Mean;
  CHECK(fwd64(c) == std::vector<double>{1.5, 15, 3, -3, 1.5, 0, 0, 1, -1, 0.5 / 3});
  c.per_sample_weights.clear();
  CHECK(fwd64(c) == std::vector<double>{1.5, 15, 1, -1, 0.5, 0, 0, 5.0 / 3, -5.0 / 3, 0.5});
}

TEST_CASE("NONE pooling: one row per lookup, uncovered rows zero (hand-derived)", "[forward]") {
  // Two tables with D = 2 (E = 3 and 2), W_t[r] = [10t + r, -(10t + r)]; offsets start at 1.
  ForwardCase c;
  c.set_tables(DType::BF16, {3, 2}, {2, 2});
  for (int t = 0; t < 2; ++t)
    for (int r = 0; r < (t ? 2 : 3); ++r) { c.set_weight(t, r, 0, 10 * t + r); c.set_weight(t, r, 1, -(10 * t + r)); }
  c.feature_table_map = {1, 0};
  c.batch_size = 1;
  c.indices = {7, 1, 2, 0};  // position 0 belongs to no bag
  c.offsets = {1, 2, 4};     // f0 (table 1) = [1]; f1 (table 0) = [2, 0]
  c.options.pooling = PoolingMode::None;
  c.options.policy = make_policy(PolicyKind::SeedDefault, DType::BF16, DType::F32);
  const std::vector<double> expect = {0, 0, 11, -11, 2, -2, 0, -0.0};
  CHECK(fwd64(c) == expect);
  CHECK(typed_forward(c) == expect);
}

TEST_CASE("VBE output is rank-major, then feature, then sample (hand-derived)", "[forward]") {
  // T = 2, R = 2, D = 1 and 2; batch sizes f0: [1, 2], f1: [2, 0]. W_t[r] = r + 1 (all columns).
  ForwardCase c;
  c.set_tables(DType::F32, {8, 8}, {1, 2});
  for (int t = 0; t < 2; ++t)
    for (int r = 0; r < 8; ++r)
      for (int d = 0; d <= t; ++d) c.set_weight(t, r, d, r + 1 + 100 * t);
  c.feature_table_map = {0, 1};
  c.vbe_ranks = 2;
  c.vbe_batch_sizes = {1, 2, 2, 0};
  // bags: f0r0s0=[0] f0r1s0=[1,2] f0r1s1=[] f1r0s0=[3] f1r0s1=[4,5]
  c.indices = {0, 1, 2, 3, 4, 5};
  c.offsets = {0, 1, 3, 3, 4, 6};
  // rank 0: f0 [1x1] = 1; f1 [2x2] = [104,104],[105+106,..]; rank 1: f0 [2x1] = 2+3, 0
  CHECK(fwd64(c) == std::vector<double>{1, 104, 104, 211, 211, 5, 0});
}

TEST_CASE("empty inputs give correctly shaped zeros", "[forward]") {
  ForwardCase c = one_table_case(4, 3, 0, {}, {0}, [](auto, auto) { return 1.0; });
  CHECK(fwd64(c).empty());
  c.batch_size = 2;
  c.offsets = {0, 0, 0};
  auto out = fwd64(c);
  CHECK(out == std::vector<double>(6, 0.0));
  c.options.pooling = PoolingMode::Mean;
  out = typed_forward(c);
  REQUIRE(out.size() == 6);
  for (double v : out) CHECK((v == 0.0 && !std::signbit(v)));  // +0.0, never NaN
  c.feature_table_map.clear();  // T = 0
  c.batch_size = 3;
  c.offsets = {0};
  CHECK(fwd64(c).empty());
}

TEST_CASE("output is rounded once from FP64 (correct RNE, not double rounding)", "[forward]") {
  // Sum 1 + 2^-11 + 2^-30: FP32 rounds it to 1 + 2^-11, an FP16 tie, that would go to 1.0; the
  // correctly rounded FP16 value is 1 + 2^-10 (the exact sum lies above the midpoint).
  ForwardCase c = one_table_case(3, 1, 1, {0, 1, 2}, {0, 3}, [](auto r, auto) {
    return r == 0 ? 1.0 : r == 1 ? 0x1p-11 : 0x1p-30;
  });
  c.options.policy.output = DType::F16;
  CHECK(typed_forward(c) == std::vector<double>{1.0 + 0x1p-10});
  c.options.policy.output = DType::BF16;  // 1 + 2^-8 + tiny: above the BF16 midpoint
  c.set_weight(0, 1, 0, 0x1p-8);
  CHECK(typed_forward(c) == std::vector<double>{1.0 + 0x1p-7});
  c.options.policy.output = DType::F32;
  CHECK(typed_forward(c) == std::vector<double>{static_cast<float>(1.0 + 0x1p-8 + 0x1p-30)});
}

TEST_CASE("errors leave the output untouched", "[forward]") {
  ForwardCase c = one_table_case(4, 2, 2, {0, 9}, {0, 1, 2}, [](auto, auto) { return 1.0; });
  std::vector<float> out(4, 7.0f);
  c.options.bounds_check = BoundsCheckMode::Fatal;
  CHECK_THROWS_AS(forward_reference(c.view(), out.data()), BoundsCheckError);
  CHECK(out == std::vector<float>(4, 7.0f));
  c.options.bounds_check = BoundsCheckMode::Warning;
  c.offsets = {0, 1};  // wrong length
  CHECK_THROWS_AS(forward_reference(c.view(), out.data()), InvalidArgument);
  CHECK(out == std::vector<float>(4, 7.0f));
}

TEST_CASE("reference backend: name, paths, strategy ignored, same result", "[forward][backend]") {
  auto be = make_reference_backend();
  CHECK(be->name() == "cpu-reference");
  ForwardCase c = one_table_case(4, 2, 2, {0, 9, 3}, {0, 1, 3}, [](auto r, auto d) { return r + d; });
  std::vector<float> a(4), b(4);
  const auto st = be->forward(c.view(), a.data(), ForwardStrategy{true});
  be->forward(c.view(), b.data(), ForwardStrategy{false});
  CHECK(a == b);
  CHECK(st.paths == std::vector<std::string>{"reference"});
  CHECK(st.warnings == 1);  // index 9 >= E = 4
  CHECK(a == std::vector<float>{0, 1, 0 + 3, 1 + 4});
  CHECK(be->repair(c.view()).indices == std::vector<std::int64_t>{0, 0, 3});
}

// ---- properties ---------------------------------------------------------------------------------

TEST_CASE("forward equals a brute-force evaluation of the definition", "[forward][property]") {
  rc::prop("fp64 == brute force (bitwise); typed output == round_to(fp64)", []() {
    GenOptions opt;
    opt.exact = *rc::gen::arbitrary<bool>();
    GenCase g = *gen_case(opt);
    const auto expect = brute_forward(g.c);
    RC_ASSERT(fwd64(g.c) == expect);
    const auto typed = typed_forward(g.c);
    RC_ASSERT(typed.size() == expect.size());
    for (std::size_t i = 0; i < typed.size(); ++i)
      RC_ASSERT(typed[i] == round_to(g.c.options.policy.output, expect[i]));
  });
}

TEST_CASE("permuting lookups inside a bag leaves exact sums unchanged", "[forward][property]") {
  rc::prop("SUM/MEAN invariant under in-bag permutation", []() {
    GenCase g = *gen_case(pooled_exact());
    ForwardCase perm = g.c;
    tbe::Rng rng(*rc::gen::arbitrary<std::uint64_t>(), 1);
    for (std::int64_t k = 0; k < num_bags(perm); ++k) {
      for (std::int64_t q = perm.offsets[k + 1] - 1; q > perm.offsets[k]; --q) {
        const std::int64_t j = perm.offsets[k] + rng.uniform_int(q - perm.offsets[k] + 1);
        std::swap(perm.indices[q], perm.indices[j]);
        if (!perm.per_sample_weights.empty()) std::swap(perm.per_sample_weights[q], perm.per_sample_weights[j]);
      }
    }
    RC_ASSERT(fwd64(perm) == fwd64(g.c));
  });
}

TEST_CASE("splitting every bag in two and adding the halves gives the sum", "[forward][property]") {
  rc::prop("SUM(bag) == SUM(head) + SUM(tail)", []() {
    GenOptions opt = pooled_exact();
    opt.force_sum = true;
    GenCase g = *gen_case(opt);
    const ForwardCase& c = g.c;
    ForwardCase head = c, tail = c;
    for (ForwardCase* h : {&head, &tail}) {
      h->indices.clear();
      h->per_sample_weights.clear();
      h->offsets.assign(1, 0);
    }
    tbe::Rng rng(*rc::gen::arbitrary<std::uint64_t>(), 2);
    for (std::int64_t k = 0; k < num_bags(c); ++k) {
      const std::int64_t s = c.offsets[k], e = c.offsets[k + 1];
      const std::int64_t m = s + rng.uniform_int(e - s + 1);  // split point in [s, e]
      for (auto [h, lo, hi] : {std::tuple{&head, s, m}, std::tuple{&tail, m, e}}) {
        for (std::int64_t q = lo; q < hi; ++q) {
          h->indices.push_back(c.indices[q]);
          if (!c.per_sample_weights.empty()) h->per_sample_weights.push_back(c.per_sample_weights[q]);
        }
        h->offsets.push_back(static_cast<std::int64_t>(h->indices.size()));
      }
    }
    const auto a = fwd64(head), b = fwd64(tail);
    auto whole = fwd64(g.c);
    RC_ASSERT(a.size() == whole.size());
    for (std::size_t i = 0; i < whole.size(); ++i) RC_ASSERT(a[i] + b[i] == whole[i]);
  });
}

TEST_CASE("output is linear in the per-sample weights", "[forward][property]") {
  rc::prop("f(w1 + w2) == f(w1) + f(w2); f(2w) == 2 f(w); unweighted == weights of 1", []() {
    GenOptions opt = pooled_exact();
    opt.allow_weighted = false;
    GenCase g = *gen_case(opt);
    ForwardCase c1 = g.c, c2 = g.c, c12 = g.c, c_one = g.c;
    const std::size_t N = g.c.indices.size();
    tbe::Rng rng(*rc::gen::arbitrary<std::uint64_t>(), 3);
    c1.per_sample_weights.resize(N);
    c2.per_sample_weights.resize(N);
    c12.per_sample_weights.resize(N);
    c_one.per_sample_weights.assign(N, 1.0f);
    for (std::size_t q = 0; q < N; ++q) {
      c1.per_sample_weights[q] = static_cast<float>(rng.uniform_int(17) - 8) / 4;  // exact
      c2.per_sample_weights[q] = static_cast<float>(rng.uniform_int(17) - 8) / 4;
      c12.per_sample_weights[q] = c1.per_sample_weights[q] + c2.per_sample_weights[q];
    }
    const auto y1 = fwd64(c1), y2 = fwd64(c2), y12 = fwd64(c12);
    if (g.c.options.pooling == PoolingMode::Sum)
      for (std::size_t i = 0; i < y1.size(); ++i) RC_ASSERT(y12[i] == y1[i] + y2[i]);
    ForwardCase c_two = c1;
    for (auto& w : c_two.per_sample_weights) w *= 2;
    const auto y_two = fwd64(c_two);
    for (std::size_t i = 0; i < y1.size(); ++i) RC_ASSERT(y_two[i] == 2 * y1[i]);
    RC_ASSERT(fwd64(c_one) == fwd64(g.c));
  });
}

TEST_CASE("MEAN equals SUM divided by L and empty bags give +0", "[forward][property]") {
  rc::prop("mean[k] == sum[k] / L_k", []() {
    GenOptions opt = pooled_exact();
    opt.force_sum = true;
    GenCase g = *gen_case(opt);
    ForwardCase sum = g.c, mean = g.c;
    mean.options.pooling = PoolingMode::Mean;
    const auto ys = fwd64(sum), ym = fwd64(mean);
    const auto p = sum.view();
    const auto L = make_output_layout(p);
    for (std::int64_t k = 0; k < L.num_bags; ++k) {
      const std::int64_t f = L.feature_of_bag(k), D = sum.dims[sum.feature_table_map[f]];
      const std::int64_t len = sum.offsets[k + 1] - sum.offsets[k];
      const std::int64_t o = L.bag_output_offset(k);
      for (std::int64_t d = 0; d < D; ++d) {
        if (len == 0) {
          RC_ASSERT(ym[o + d] == 0.0);
          RC_ASSERT(!std::signbit(ym[o + d]));
        } else {
          RC_ASSERT(ym[o + d] == ys[o + d] / static_cast<double>(len));
        }
      }
    }
  });
}

TEST_CASE("a shared table equals a duplicated table", "[forward][property]") {
  rc::prop("feature_table_map sharing == one private copy per feature", []() {
    GenCase g = *gen_case();
    const ForwardCase& c = g.c;
    ForwardCase dup = c;
    const std::int64_t T = c.num_features();
    std::vector<std::int64_t> rows(T);
    std::vector<std::int32_t> dims(T);
    for (std::int64_t f = 0; f < T; ++f) {
      rows[f] = c.rows[c.feature_table_map[f]];
      dims[f] = c.dims[c.feature_table_map[f]];
    }
    dup.set_tables(c.weights_dtype, rows, dims);
    for (std::int64_t f = 0; f < T; ++f) {
      dup.feature_table_map[f] = static_cast<std::int32_t>(f);
      for (std::int64_t r = 0; r < rows[f]; ++r)
        for (std::int64_t d = 0; d < dims[f]; ++d)
          dup.set_weight(f, r, d, c.weight(c.feature_table_map[f], r, d));
    }
    dup.options = c.options;
    RC_ASSERT(fwd64(dup) == fwd64(g.c));
  });
}

TEST_CASE("VBE equals the padded non-VBE layout", "[forward][property]") {
  rc::prop("VBE block (r, f) row j == padded row (Σ_{r'<r} Bmax_r') + j; padding rows zero", []() {
    GenOptions opt = pooled_exact();
    GenCase g = *gen_case(opt);
    ForwardCase& v = g.c;
    RC_PRE(!v.vbe_batch_sizes.empty());
    const std::int64_t T = v.num_features(), R = v.vbe_ranks;
    std::vector<std::int64_t> bmax(R, 0), rank_base(R + 1, 0);
    for (std::int64_t r = 0; r < R; ++r) {
      for (std::int64_t f = 0; f < T; ++f) bmax[r] = std::max<std::int64_t>(bmax[r], v.vbe_batch_sizes[f * R + r]);
      rank_base[r + 1] = rank_base[r] + bmax[r];
    }
    ForwardCase pad = v;
    pad.vbe_batch_sizes.clear();
    pad.vbe_ranks = 0;
    pad.batch_size = rank_base[R];
    pad.indices.clear();
    pad.per_sample_weights.clear();
    pad.offsets.assign(1, 0);
    std::int64_t k = 0;  // VBE bag cursor (feature-major, rank-major)
    for (std::int64_t f = 0; f < T; ++f)
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t j = 0; j < bmax[r]; ++j) {
          if (j < v.vbe_batch_sizes[f * R + r]) {
            for (std::int64_t q = v.offsets[k]; q < v.offsets[k + 1]; ++q) {
              pad.indices.push_back(v.indices[q]);
              if (!v.per_sample_weights.empty()) pad.per_sample_weights.push_back(v.per_sample_weights[q]);
            }
            ++k;
          }
          pad.offsets.push_back(static_cast<std::int64_t>(pad.indices.size()));
        }
    const auto yv = fwd64(v), yp = fwd64(pad);
    std::vector<std::int64_t> col(T + 1, 0);
    for (std::int64_t f = 0; f < T; ++f) col[f + 1] = col[f] + v.dims[v.feature_table_map[f]];
    std::size_t o = 0;
    std::vector<bool> covered(yp.size(), false);
    for (std::int64_t r = 0; r < R; ++r)
      for (std::int64_t f = 0; f < T; ++f)
        for (std::int64_t j = 0; j < v.vbe_batch_sizes[f * R + r]; ++j)
          for (std::int64_t d = 0; d < col[f + 1] - col[f]; ++d) {
            const std::size_t pi = (rank_base[r] + j) * col[T] + col[f] + d;
            RC_ASSERT(yv[o++] == yp[pi]);
            covered[pi] = true;
          }
    RC_ASSERT(o == yv.size());
    for (std::size_t i = 0; i < yp.size(); ++i)
      if (!covered[i]) RC_ASSERT(yp[i] == 0.0);
  });
}

TEST_CASE("int32 and int64 indices give identical outputs", "[forward][property]") {
  rc::prop("I32 == I64 bitwise, every output type", []() {
    GenOptions opt;
    opt.exact = false;
    GenCase g = *gen_case(opt);
    ForwardCase a = g.c, b = g.c;
    a.index_dtype = DType::I32;
    b.index_dtype = DType::I64;
    RC_ASSERT(fwd64(a) == fwd64(b));
    RC_ASSERT(typed_forward(a) == typed_forward(b));
  });
}

TEST_CASE("forward is independent of the OpenMP thread count", "[forward]") {
  WorkloadSpec s = named_workload("fbgemm-bench-default", 64);
  s.T = 4;
  s.E = 1000;
  s.D = 33;
  s.weighted = true;
  s.lengths = LengthDistribution::Normal;
  s.length_spread = 8;
  for (DType w : {DType::F32, DType::F16, DType::BF16}) {
    s.options.policy = make_policy(PolicyKind::SeedDefault, w, DType::F32);
    ForwardCase c = generate(s);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const auto one = fwd64(c);
    omp_set_num_threads(2);
    const auto two = fwd64(c);
    omp_set_num_threads(saved);
    CHECK(one == two);
    CHECK(one == brute_forward(c));
  }
}
