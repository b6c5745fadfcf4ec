// The case generator of tbe-fuzz (generate.h).
#include "fuzz/generate.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "fuzz/draw.h"
#include "tbe/workloads.h"

namespace tbe::fuzz {
namespace {

// Size limits of a non-huge case per shape profile: lookups N, elements E·D per table, B, output
// elements (pooled: B·Σ_f D_f, NONE: N·D).
struct Limits {
  std::int64_t lookups, table_elements, max_batch, output;
};
constexpr Limits kLarge{250000, std::int64_t{1} << 22, 512, std::int64_t{1} << 23};
constexpr Limits kSmall{6000, std::int64_t{1} << 16, 64, std::int64_t{1} << 17};

std::int32_t draw_dim(Rng& r) {
  const double u = r.uniform();
  if (u < 0.15) return 1;
  if (u < 0.35) return static_cast<std::int32_t>(2 * r.uniform_int(150) + 1);  // odd 1..299
  if (u < 0.45) return 2048;
  if (u < 0.55) return pick<std::int32_t>(r, {1024, 1025, 1280, 1536, 2047, 1000, 511});
  if (u < 0.85)
    return pick<std::int32_t>(r, {2, 3, 4, 5, 8, 12, 16, 24, 32, 33, 64, 96, 127, 128, 129, 136,
                                  256, 260});
  return static_cast<std::int32_t>(in_range(r, 1, 300));
}

std::int64_t draw_rows(Rng& r) {
  const double u = r.uniform();
  if (u < 0.15) return 1;
  if (u < 0.40) return in_range(r, 2, 8);
  if (u < 0.90) return in_range(r, 1, 2000);
  return in_range(r, 10000, 100000);
}

// Bag length by the case's length mode.
enum class LengthMode : std::uint8_t { Small, Edge, FixedEdge };
std::int64_t draw_length(Rng& r, LengthMode m, std::int64_t fixed) {
  switch (m) {
    case LengthMode::FixedEdge: return fixed;
    case LengthMode::Edge:
      return chance(r, 0.6) ? pick<std::int64_t>(r, {0, 1, 255, 256, 257}) : in_range(r, 0, 8);
    default:
      return chance(r, 0.8) ? in_range(r, 0, 8) : in_range(r, 0, 40);
  }
}

std::int64_t draw_valid_index(Rng& r, std::int64_t E, DType index_dtype) {
  std::int64_t hi = E - 1;
  if (index_dtype == DType::I32) hi = std::min<std::int64_t>(hi, INT32_MAX);
  const double u = r.uniform();
  if (u < 0.1) return 0;
  if (u < 0.2) return hi;
  return r.uniform_int(hi + 1);
}

float draw_psw(Rng& r, int kind) {
  switch (kind) {
    case 0: return static_cast<float>(0.5 + r.uniform());
    case 1: return static_cast<float>(4.0 * r.uniform() - 2.0);
    default: return static_cast<float>(in_range(r, -2, 2));
  }
}

void fill_tables(Tables& tb, Rng& r, const std::string& fill, int scale_exp) {
  for (std::size_t t = 0; t < tb.rows.size(); ++t)
    for (std::int64_t row = 0; row < tb.rows[t]; ++row)
      for (std::int32_t d = 0; d < tb.dims[t]; ++d) {
        double v;
        if (fill == "int") {
          v = static_cast<double>(r.uniform_int(17) - 8);
        } else {
          v = 2.0 * r.uniform() - 1.0;
          if (fill == "scaled") v = std::ldexp(v, scale_exp);
        }
        tb.set(t, row, d, v);
      }
}

// A huge table: one table with E·D just above 2^31 elements (zeroed except the rows looked up,
// which get random values), then a small table after it (its offset is past 2^31 too).
std::shared_ptr<Tables> make_huge_tables(Rng& r, FuzzCase& fc, std::vector<std::int64_t>& hot) {
  auto tb = std::make_shared<Tables>();
  tb->dtype = chance(r, 0.25) ? DType::F32 : pick<DType>(r, {DType::F16, DType::BF16});
  const std::int32_t D = pick<std::int32_t>(r, {1, 4, 127, 128, 2048});
  const std::int64_t E = ((std::int64_t{1} << 31) + D - 1) / D + r.uniform_int(4);
  tb->rows = {E, in_range(r, 1, 16)};
  tb->dims = {D, fc.pooling == PoolingMode::None ? D : draw_dim(r)};
  tb->allocate();
  // rows looked up: both ends, the first row past element 2^31, and a few random ones
  std::int64_t row_hi = E - 1;
  if (fc.index_dtype == DType::I32) row_hi = std::min<std::int64_t>(row_hi, INT32_MAX);
  const std::int64_t past = std::min<std::int64_t>(((std::int64_t{1} << 31) + D - 1) / D, row_hi);
  hot = {0, row_hi, past, std::max<std::int64_t>(past - 1, 0)};
  for (int i = 0; i < 4; ++i) hot.push_back(r.uniform_int(row_hi + 1));
  for (std::int64_t row : hot)
    for (std::int32_t d = 0; d < D; ++d) tb->set(0, row, d, 2.0 * r.uniform() - 1.0);
  for (std::int64_t row = 0; row < tb->rows[1]; ++row)
    for (std::int32_t d = 0; d < tb->dims[1]; ++d) tb->set(1, row, d, 2.0 * r.uniform() - 1.0);
  return tb;
}

}  // namespace

bool is_huge_case(std::uint64_t case_index, std::int64_t huge_every) {
  return huge_every > 0 && case_index % static_cast<std::uint64_t>(huge_every) ==
                               static_cast<std::uint64_t>(huge_every / 2);
}

std::string to_string(Shapes s) { return s == Shapes::Small ? "small" : "large"; }

FuzzCase generate_case(std::uint64_t seed, std::uint64_t case_index, std::int64_t huge_every,
                       Shapes shapes) {
  return generate_case_from(Rng(seed, 0x66757A7A00000000ULL + case_index),  // "fuzz" + i
                            is_huge_case(case_index, huge_every), shapes);
}

FuzzCase generate_case_from(Rng r, bool huge, Shapes shapes) {
  const Limits lim = shapes == Shapes::Small ? kSmall : kLarge;
  FuzzCase fc;
  fc.huge = huge;
  const double up = r.uniform();
  fc.pooling = up < 0.4 ? PoolingMode::Sum : up < 0.7 ? PoolingMode::Mean : PoolingMode::None;
  fc.bounds = pick<BoundsCheckMode>(r, {BoundsCheckMode::Fatal, BoundsCheckMode::Warning,
                                        BoundsCheckMode::Ignore, BoundsCheckMode::None});
  fc.index_dtype = chance(r, 0.5) ? DType::I32 : DType::I64;
  fc.fused = chance(r, 0.5);
  const PolicyKind kind = chance(r, 0.5) ? PolicyKind::SeedDefault : PolicyKind::FbgemmCuda;
  const DType odt = pick<DType>(r, {DType::F32, DType::F16, DType::BF16});
  const bool malformed = fc.bounds != BoundsCheckMode::None && chance(r, 0.5);
  Invalid invalid = Invalid::None;
  if (!fc.huge && chance(r, 0.04))
    invalid = pick<Invalid>(r, {Invalid::OffsetsShort, Invalid::OffsetsLong, Invalid::DimTooBig,
                                Invalid::DimZero, Invalid::RowsZero, Invalid::FeatureMap,
                                Invalid::PolicyWeights, Invalid::NoneWeighted,
                                Invalid::NoneMixedD, Invalid::VbeTotals, Invalid::NegativeBatch});

  // 5% of the cases: a shape the small-table histogram path takes (docs/small-table.md), which
  // the draws below reach only by chance (0.1% of the cases in a campaign of 2026-12-01). The
  // choice comes from a stream of its own (r far ahead), so every other case draws exactly what
  // it drew before this mode existed and old campaigns' case indices still replay.
  Rng side = r;
  side.advance(std::uint64_t{1} << 40);
  fc.small_table = !fc.huge && invalid == Invalid::None && chance(side, 0.05);
  if (fc.small_table) fc.pooling = chance(side, 0.5) ? PoolingMode::Sum : PoolingMode::Mean;

  // features and tables
  std::int64_t T = fc.small_table ? in_range(r, 1, 2)
                   : chance(r, 0.1) ? in_range(r, 5, 16) : in_range(r, 1, 4);
  std::vector<std::int64_t> hot_rows;
  std::shared_ptr<Tables> tb;
  if (fc.huge) {
    tb = make_huge_tables(r, fc, hot_rows);
    fc.fill = "huge";
  } else {
    tb = std::make_shared<Tables>();
    tb->dtype = fc.small_table ? DType::F16 : pick<DType>(r, {DType::F32, DType::F16, DType::BF16});
    const std::int64_t num_tables = fc.small_table ? T : in_range(r, 1, T);
    const std::int32_t common = draw_dim(r);
    for (std::int64_t t = 0; t < num_tables; ++t) {
      std::int32_t D = fc.small_table ? pick<std::int32_t>(r, {64, 72, 96, 127, 128})
                       : fc.pooling == PoolingMode::None ? common
                                                         : draw_dim(r);
      std::int64_t E = fc.small_table ? pick<std::int64_t>(r, {1, 2, 3, 8, 16, 33, 48, 63, 64})
                                      : draw_rows(r);
      E = std::max<std::int64_t>(1, std::min(E, lim.table_elements / D));
      tb->rows.push_back(E);
      tb->dims.push_back(D);
    }
    if (invalid == Invalid::NoneMixedD && tb->dims.size() < 2) {
      tb->rows.push_back(in_range(r, 1, 8));
      tb->dims.push_back(tb->dims[0]);
    }
    tb->allocate();
    const double uf = r.uniform();
    fc.fill = uf < 0.6 ? "uniform" : uf < 0.85 ? "int" : "scaled";
    const int scale_exp = static_cast<int>(in_range(r, -24, tb->dtype == DType::F16 ? 14 : 24));
    fill_tables(*tb, r, fc.fill, scale_exp);
  }
  const std::int64_t num_tables = static_cast<std::int64_t>(tb->rows.size());
  fc.ftm.resize(static_cast<std::size_t>(T));
  for (auto& t : fc.ftm) t = static_cast<std::int32_t>(r.uniform_int(num_tables));
  if (fc.huge) fc.ftm[0] = 0;  // the huge table is looked up
  if (fc.small_table)  // own tables: a shared table is not eligible
    for (std::int64_t f = 0; f < T; ++f) fc.ftm[f] = static_cast<std::int32_t>(f);
  if (invalid == Invalid::NoneMixedD) {  // the last feature uses another table than feature 0
    if (fc.ftm.size() < 2) fc.ftm.push_back(0);
    T = static_cast<std::int64_t>(fc.ftm.size());
    fc.ftm.front() = 0;
    fc.ftm.back() = 1;
    if (tb->dims[1] < 2) invalid = Invalid::PolicyWeights;
  }
  fc.policy = make_policy(kind, tb->dtype, odt);
  fc.weighted = !fc.small_table && fc.pooling != PoolingMode::None && chance(r, 0.5);
  const int psw_kind = static_cast<int>(r.uniform_int(3));

  // batch geometry
  const bool vbe = !fc.small_table && (chance(r, fc.pooling == PoolingMode::None ? 0.1 : 0.25) ||
                                       invalid == Invalid::VbeTotals);
  const double ub = r.uniform();
  std::int64_t B = ub < 0.05   ? 0
                   : ub < 0.55 ? in_range(r, 1, 8)
                   : ub < 0.9  ? in_range(r, 1, 64)
                               : in_range(r, std::min<std::int64_t>(65, lim.max_batch), lim.max_batch);
  if (invalid != Invalid::None) B = std::min<std::int64_t>(B, 8);
  if (fc.small_table) B = in_range(side, 16, 63);  // several 16-bag tiles, the last one partial
  const double ul = invalid != Invalid::None ? 1.0 : r.uniform();
  const LengthMode lm = ul < 0.3 ? LengthMode::Edge : ul < 0.4 ? LengthMode::FixedEdge
                                                               : LengthMode::Small;
  const std::int64_t fixed = pick<std::int64_t>(r, {0, 1, 255, 256, 257});
  const std::int64_t mean_l = fc.small_table             ? 95
                             : lm == LengthMode::FixedEdge ? fixed
                             : lm == LengthMode::Edge      ? 90
                                                           : 6;
  while (B > 1 && T * B * std::max<std::int64_t>(mean_l, 1) > lim.lookups) B /= 2;
  std::int64_t sum_d = 0;  // Σ_f D_f: output columns of a pooled sample
  for (auto t : fc.ftm) sum_d += tb->dims[t];
  while (B > 1 && B * sum_d > lim.output) B /= 2;
  if (fc.huge) B = std::min<std::int64_t>(B, 16);
  std::vector<std::int64_t> per_feature(static_cast<std::size_t>(T), B);
  if (vbe) {
    fc.R = static_cast<std::int32_t>(in_range(r, 1, 4));
    fc.vbe.resize(static_cast<std::size_t>(T * fc.R));
    const std::int64_t cap = std::max<std::int64_t>(B, 1);
    for (std::int64_t f = 0; f < T; ++f) {
      per_feature[f] = 0;
      for (std::int32_t q = 0; q < fc.R; ++q) {
        const std::int32_t n = static_cast<std::int32_t>(r.uniform_int(cap / fc.R + 2));
        fc.vbe[f * fc.R + q] = n;
        per_feature[f] += n;
      }
    }
  } else {
    fc.B = B;
  }

  // lookups
  std::int64_t e_min = INT64_MAX, e_max = 1;
  for (auto e : tb->rows) e_min = std::min(e_min, e), e_max = std::max(e_max, e);
  if (chance(r, 0.15)) {
    const std::int64_t n = in_range(r, 1, 3);
    for (std::int64_t i = 0; i < n; ++i)
      // in range under bounds NONE (never malformed there); anything elsewhere (in no bag)
      fc.lead.push_back(fc.bounds == BoundsCheckMode::None
                            ? r.uniform_int(std::min<std::int64_t>(e_min, INT32_MAX - 1))
                            : r.uniform_int(1000) - 500);
  }
  std::int64_t total = static_cast<std::int64_t>(fc.lead.size());
  // NONE writes N·D elements: at most lim.output of them
  const std::int64_t max_lookups =
      fc.pooling == PoolingMode::None
          ? std::min<std::int64_t>(lim.lookups, lim.output / tb->dims[0])
          : lim.lookups;
  for (std::int64_t f = 0; f < T; ++f) {
    const std::int64_t t = fc.ftm[f];
    const std::int64_t E = tb->rows[t];
    for (std::int64_t b = 0; b < per_feature[f]; ++b) {
      Bag bag;
      // small-table shapes: long bags, and now and then an empty one (a tile of 16 empty bags
      // is an edge of the saved counts)
      std::int64_t L = !fc.small_table      ? draw_length(r, lm, fixed)
                       : chance(r, 0.15)    ? 0
                                            : in_range(r, 64, 160);
      if (total + L > max_lookups) L = 0;
      total += L;
      for (std::int64_t l = 0; l < L; ++l) {
        std::int64_t i = fc.huge && t == 0 && chance(r, 0.8)
                             ? hot_rows[r.uniform_int(static_cast<std::int64_t>(hot_rows.size()))]
                             : draw_valid_index(r, E, fc.index_dtype);
        if (fc.index_dtype == DType::I32) i = std::min<std::int64_t>(i, INT32_MAX);
        bag.idx.push_back(i);
        bag.w.push_back(draw_psw(r, psw_kind));
      }
      fc.bags.push_back(std::move(bag));
    }
  }

  // faults (never under bounds NONE)
  if (malformed) {
    const int n = static_cast<int>(in_range(r, 1, 4));
    for (int m = 0; m < n; ++m) {
      const std::int64_t K = static_cast<std::int64_t>(fc.bags.size());
      const std::int64_t N = total;
      const int what = static_cast<int>(r.uniform_int(4));
      std::vector<std::pair<std::size_t, std::size_t>> slots;  // (bag, lookup)
      if (what >= 2)
        for (std::size_t b = 0; b < fc.bags.size(); ++b)
          if (!fc.bags[b].idx.empty()) slots.emplace_back(b, 0);
      if (what == 0 || (what >= 2 && slots.empty())) {  // any offset, any value in [-3, N+4]
        OffsetFault f;
        f.k = r.uniform_int(K + 1);
        const std::int64_t v = in_range(r, -3, N + 4);
        if (v > N - 5) {
          f.relative_to_n = true;
          f.value = v - N;
        } else {
          f.value = v;
        }
        fc.faults.push_back(f);
      } else if (what == 1) {  // the last offset
        OffsetFault f;
        f.k = -1;
        f.relative_to_n = true;
        f.value = pick<std::int64_t>(r, {-1, 1, 5, -3});
        if (chance(r, 0.2)) f = OffsetFault{-1, false, 0};
        fc.faults.push_back(f);
      } else {  // an index out of range
        auto [b, unused] = slots[r.uniform_int(static_cast<std::int64_t>(slots.size()))];
        (void)unused;
        Bag& bag = fc.bags[b];
        const std::int64_t l = r.uniform_int(static_cast<std::int64_t>(bag.idx.size()));
        // feature of bag b
        std::int64_t f = 0;
        while (fc.first_bag(f + 1) <= static_cast<std::int64_t>(b)) ++f;
        const std::int64_t E = tb->rows[fc.ftm[f]];
        std::int64_t v = pick<std::int64_t>(r, {-1, -7, E, E + 3, e_max, std::int64_t{1} << 30,
                                                INT32_MAX});
        if (v >= 0 && v < E) v = E;
        if (fc.index_dtype == DType::I32 && v > INT32_MAX) v = -1;
        bag.idx[l] = v;
      }
    }
  }
  // decreasing pair (a separate fault kind, sometimes)
  if (malformed && fc.bags.size() >= 2 && chance(r, 0.25)) {
    const std::int64_t k = r.uniform_int(static_cast<std::int64_t>(fc.bags.size()) - 1);
    std::int64_t next = static_cast<std::int64_t>(fc.lead.size());
    for (std::int64_t q = 0; q <= k; ++q) next += static_cast<std::int64_t>(fc.bags[q].idx.size());
    fc.faults.push_back(OffsetFault{k, false, next + in_range(r, 1, 3)});
  }
  // invalid arguments that need a particular shape
  if (invalid == Invalid::NoneWeighted) {
    fc.pooling = PoolingMode::Sum;  // build() switches to NONE and adds weights
    fc.weighted = false;
    if (total == 0) invalid = Invalid::OffsetsLong;
  }
  if (invalid == Invalid::NoneMixedD) fc.weighted = false;
  if (invalid == Invalid::VbeTotals && fc.R == 0) invalid = Invalid::OffsetsShort;
  if (invalid == Invalid::NegativeBatch && fc.R != 0) invalid = Invalid::OffsetsLong;
  if ((invalid == Invalid::NoneWeighted || invalid == Invalid::NoneMixedD) && fc.R != 0)
    invalid = Invalid::DimTooBig;  // keep the shape argument the only error
  fc.invalid = invalid;
  fc.tables = std::move(tb);
  return fc;
}

}  // namespace tbe::fuzz
