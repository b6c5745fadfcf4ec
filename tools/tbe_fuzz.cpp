// tbe-fuzz: a time-boxed fuzz campaign of the TBE forward. Random forward cases biased to the
// edges (bag lengths 0/1/255/256/257, D = 1, odd and 2048, E = 1, tables with E·D just above 2^31
// on the GPU, VBE, offsets[0] > 0, int32/int64, SUM/MEAN/NONE, per-sample weights, FP32/FP16/BF16
// weights and outputs, both precision policies, every bounds-check mode with malformed inputs for
// the checking modes, a few invalid arguments) run through a backend and judged: the output by the
// enclosure oracle, warning counts and the repair against tbe::repair, FATAL errors against
// tbe::find_first_violation, InvalidArgument against tbe::validate, canaries past the output.
// A failing case is shrunk greedily and saved as a case folder (tbe/io/case_file.h). See --help.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <iomanip>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "tbe/select_backend.h"
#include "tbe/bounds_check.h"
#include "tbe/errors.h"
#include "tbe/forward.h"
#include "tbe/host_case.h"
#include "tbe/io/case_file.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/precision.h"
#include "tbe/workloads.h"

namespace {

using namespace tbe;

const char* const kHelp = R"(usage: tbe-fuzz --seconds S [options]

Fuzz campaign of the TBE forward: random cases biased to the edges, run through a backend, each
judged by the enclosure oracle (output), tbe::repair (warning count, repaired offsets/indices),
tbe::find_first_violation (FATAL errors) and tbe::validate (InvalidArgument), with canaries past
the output. A failing case is shrunk (drop features, halve B, drop lookups, shrink D and E, drop
faults) and saved with its recorded output as DIR/failure-<n>/ (replay with tbe-verify replay).

Options:
  --seconds S        campaign length in seconds (required; > 0)
  --seed X           campaign seed, an unsigned 64-bit integer (default 1); case i is generated
                     from (X, i) alone, so a campaign is reproducible case by case
  --out DIR          where failures are saved (default tbe-fuzz-out); created on the first failure
  --backend K        cuda (default) or cpu (the CPU reference backend against the oracle: tests
                     this tool; it finds no GPU bug); cpu-faulty: the reference with a planted bug
                     (element 0 off by one when a pooled bag has >= 256 lookups), to see the
                     failure path, the shrinker and the saved case
  --case I           run only case I of the seed (replays one case of a campaign, shrinks and
                     saves it if it fails)
  --report-every S   seconds between progress lines (default 30)
  --huge-every K     every K-th case (case i with i % K == K/2) has a table with E·D just above
                     2^31 elements (host and device memory up to ~9 GiB each); 0 turns it off
                     (default: 1000 on the cuda backend, off on the CPU backends)
  --max-saved K      save (and shrink) at most K failures (default 10); later ones are counted
  --max-failures K   stop the campaign after K failures (default 0: never)
  --list N           print the first N cases of the seed (one line each) and exit
  --help, -h         this text

Exit status: 0 when no case failed, 1 when a case failed, 2 for a bad command line, 3 for an
error that stopped the campaign (e.g. no GPU for --backend cuda).
)";

// ============================================================================================
// The case representation the generator and the shrinker work on: tables, bags as lists of
// lookups, and the faults to apply on top (bad index values live in the bags themselves).
// ============================================================================================

struct Tables {
  DType dtype = DType::F32;
  std::vector<std::int64_t> rows;
  std::vector<std::int32_t> dims;
  std::vector<std::int64_t> offsets;  // element offset of each table
  std::vector<std::byte> weights;
  std::int64_t elements() const {
    std::int64_t n = 0;
    for (std::size_t t = 0; t < rows.size(); ++t) n += rows[t] * dims[t];
    return n;
  }
  void allocate() {  // zeroed
    offsets.assign(rows.size(), 0);
    std::int64_t total = 0;
    for (std::size_t t = 0; t < rows.size(); ++t) {
      offsets[t] = total;
      total += rows[t] * dims[t];
    }
    weights.assign(static_cast<std::size_t>(total) * dtype_size(dtype), std::byte{0});
  }
  void set(std::size_t t, std::int64_t r, std::int64_t d, double v) {
    store_from_double(dtype, weights.data(), offsets[t] + r * dims[t] + d, v);
  }
  std::byte* row_ptr(std::size_t t, std::int64_t r) {
    return weights.data() + (offsets[t] + r * dims[t]) * dtype_size(dtype);
  }
  const std::byte* row_ptr(std::size_t t, std::int64_t r) const {
    return weights.data() + (offsets[t] + r * dims[t]) * dtype_size(dtype);
  }
};

struct Bag {
  std::vector<std::int64_t> idx;
  std::vector<float> w;  // same length as idx (used when the case is weighted)
};

// A fault on the offsets: offsets[k] (k = -1: the last offset) := value, or N + value when
// relative_to_n. Applied after the offsets are built from the bags.
struct OffsetFault {
  std::int64_t k = -1;
  bool relative_to_n = false;
  std::int64_t value = 0;
};

// Invalid arguments (validate must reject them; both backends must agree on the argument).
enum class Invalid : std::uint8_t {
  None, OffsetsShort, OffsetsLong, DimTooBig, DimZero, RowsZero, FeatureMap, PolicyWeights,
  NoneWeighted, NoneMixedD, VbeTotals, NegativeBatch
};
const char* to_string(Invalid i) {
  switch (i) {
    case Invalid::None: return "none";
    case Invalid::OffsetsShort: return "offsets-short";
    case Invalid::OffsetsLong: return "offsets-long";
    case Invalid::DimTooBig: return "dim-2049";
    case Invalid::DimZero: return "dim-0";
    case Invalid::RowsZero: return "rows-0";
    case Invalid::FeatureMap: return "feature-map";
    case Invalid::PolicyWeights: return "policy-weights";
    case Invalid::NoneWeighted: return "none-weighted";
    case Invalid::NoneMixedD: return "none-mixed-d";
    case Invalid::VbeTotals: return "vbe-totals";
    case Invalid::NegativeBatch: return "negative-batch";
  }
  return "?";
}

struct FuzzCase {
  std::shared_ptr<const Tables> tables;
  std::vector<std::int32_t> ftm;  // feature_table_map
  DType index_dtype = DType::I64;
  PoolingMode pooling = PoolingMode::Sum;
  BoundsCheckMode bounds = BoundsCheckMode::Warning;
  PrecisionPolicy policy;
  bool weighted = false;
  bool fused = true;  // ForwardStrategy::fused_bounds_check
  std::int64_t B = 0;
  std::int32_t R = 0;  // VBE ranks (0: not VBE)
  std::vector<std::int32_t> vbe;  // [T·R]
  std::vector<std::int64_t> lead;  // indices before offsets[0] (in no bag)
  std::vector<Bag> bags;           // feature-major; VBE: rank-major inside a feature
  std::vector<OffsetFault> faults;
  Invalid invalid = Invalid::None;
  std::string fill = "uniform";
  bool huge = false;

  std::int64_t T() const { return static_cast<std::int64_t>(ftm.size()); }
  std::int64_t bags_of_feature(std::int64_t f) const {
    if (R == 0) return B;
    std::int64_t n = 0;
    for (std::int32_t r = 0; r < R; ++r) n += vbe[f * R + r];
    return n;
  }
  std::int64_t first_bag(std::int64_t f) const {
    std::int64_t n = 0;
    for (std::int64_t g = 0; g < f; ++g) n += bags_of_feature(g);
    return n;
  }
  std::int64_t lookups() const {
    std::int64_t n = static_cast<std::int64_t>(lead.size());
    for (const Bag& b : bags) n += static_cast<std::int64_t>(b.idx.size());
    return n;
  }
};

// A built forward call. `c` has no weights of its own: the problem points at the shared tables.
struct Built {
  ForwardCase c;
  ForwardProblem p;
};

void build(const FuzzCase& fc, Built& out) {
  ForwardCase& c = out.c;
  c = ForwardCase{};
  const Tables& tb = *fc.tables;
  c.weights_dtype = tb.dtype;
  c.rows = tb.rows;
  c.dims = tb.dims;
  c.table_offsets = tb.offsets;
  c.feature_table_map = fc.ftm;
  c.index_dtype = fc.index_dtype;
  c.indices = fc.lead;
  const bool weighted = fc.weighted || fc.invalid == Invalid::NoneWeighted;
  if (weighted) c.per_sample_weights.assign(fc.lead.size(), 1.0f);
  c.offsets.push_back(static_cast<std::int64_t>(fc.lead.size()));
  for (const Bag& b : fc.bags) {
    c.indices.insert(c.indices.end(), b.idx.begin(), b.idx.end());
    if (weighted)
      c.per_sample_weights.insert(c.per_sample_weights.end(), b.w.begin(), b.w.end());
    c.offsets.push_back(static_cast<std::int64_t>(c.indices.size()));
  }
  const std::int64_t N = static_cast<std::int64_t>(c.indices.size());
  for (const OffsetFault& f : fc.faults) {
    const std::int64_t K = static_cast<std::int64_t>(c.offsets.size()) - 1;
    const std::int64_t k = f.k < 0 ? K : f.k;
    if (k > K) continue;
    c.offsets[k] = f.relative_to_n ? N + f.value : f.value;
  }
  c.batch_size = fc.R == 0 ? fc.B : 0;
  c.vbe_ranks = fc.R;
  c.vbe_batch_sizes = fc.vbe;
  c.options.pooling = fc.pooling;
  c.options.bounds_check = fc.bounds;
  c.options.policy = fc.policy;
  switch (fc.invalid) {
    case Invalid::None: break;
    case Invalid::OffsetsShort: c.offsets.pop_back(); break;
    case Invalid::OffsetsLong: c.offsets.push_back(N); break;
    case Invalid::DimTooBig: c.dims[0] = 2049; break;
    case Invalid::DimZero: c.dims[0] = 0; break;
    case Invalid::RowsZero: c.rows[0] = 0; break;
    case Invalid::FeatureMap:
      if (!c.feature_table_map.empty())
        c.feature_table_map.back() = static_cast<std::int32_t>(c.rows.size());
      break;
    case Invalid::PolicyWeights:
      c.options.policy.weights = tb.dtype == DType::F32 ? DType::F16 : DType::F32;
      break;
    case Invalid::NoneWeighted: c.options.pooling = PoolingMode::None; break;
    case Invalid::NoneMixedD:
      c.options.pooling = PoolingMode::None;
      if (!c.feature_table_map.empty()) {
        // a smaller D for the last feature's table (the buffer stays large enough)
        auto& d = c.dims[c.feature_table_map.back()];
        d = d > 1 ? d - 1 : d;
      }
      break;
    case Invalid::VbeTotals:
      if (!c.vbe_batch_sizes.empty()) c.vbe_batch_sizes[0] += 1;
      break;
    case Invalid::NegativeBatch:
      if (c.vbe_ranks == 0) c.batch_size = -1;
      break;
  }
  out.p = c.view();  // int32 narrowing checked (the generator keeps every value in range)
  out.p.tables.weights = tb.weights.empty() ? nullptr : tb.weights.data();
}

// ============================================================================================
// Generation
// ============================================================================================

constexpr std::int64_t kMaxLookups = 250000;
constexpr std::int64_t kMaxTableElements = std::int64_t{1} << 22;  // per table (non-huge)

bool chance(Rng& r, double p) { return r.uniform() < p; }
template <class T>
T pick(Rng& r, std::initializer_list<T> xs) {
  return *(xs.begin() + r.uniform_int(static_cast<std::int64_t>(xs.size())));
}
std::int64_t in_range(Rng& r, std::int64_t lo, std::int64_t hi) {  // [lo, hi]
  return lo + r.uniform_int(hi - lo + 1);
}

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

FuzzCase generate_case(std::uint64_t seed, std::uint64_t case_index, std::int64_t huge_every) {
  Rng r(seed, 0x66757A7A00000000ULL + case_index);  // "fuzz" + i
  FuzzCase fc;
  fc.huge = huge_every > 0 &&
            case_index % static_cast<std::uint64_t>(huge_every) ==
                static_cast<std::uint64_t>(huge_every / 2);
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

  // features and tables
  const std::int64_t T = chance(r, 0.1) ? in_range(r, 5, 16) : in_range(r, 1, 4);
  std::vector<std::int64_t> hot_rows;
  std::shared_ptr<Tables> tb;
  if (fc.huge) {
    tb = make_huge_tables(r, fc, hot_rows);
    fc.fill = "huge";
  } else {
    tb = std::make_shared<Tables>();
    tb->dtype = pick<DType>(r, {DType::F32, DType::F16, DType::BF16});
    const std::int64_t num_tables = in_range(r, 1, T);
    const std::int32_t common = draw_dim(r);
    for (std::int64_t t = 0; t < num_tables; ++t) {
      std::int32_t D = fc.pooling == PoolingMode::None ? common : draw_dim(r);
      std::int64_t E = draw_rows(r);
      E = std::max<std::int64_t>(1, std::min(E, kMaxTableElements / D));
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
  if (invalid == Invalid::NoneMixedD) {  // the last feature uses another table than feature 0
    if (fc.ftm.size() < 2) fc.ftm.push_back(0);
    fc.ftm.front() = 0;
    fc.ftm.back() = 1;
    if (tb->dims[1] < 2) invalid = Invalid::PolicyWeights;
  }
  fc.policy = make_policy(kind, tb->dtype, odt);
  fc.weighted = fc.pooling != PoolingMode::None && chance(r, 0.5);
  const int psw_kind = static_cast<int>(r.uniform_int(3));

  // batch geometry
  const bool vbe = chance(r, fc.pooling == PoolingMode::None ? 0.1 : 0.25) ||
                   invalid == Invalid::VbeTotals;
  const double ub = r.uniform();
  std::int64_t B = ub < 0.05 ? 0 : ub < 0.55 ? in_range(r, 1, 8) : ub < 0.9 ? in_range(r, 1, 64)
                                                                             : in_range(r, 65, 512);
  if (invalid != Invalid::None) B = std::min<std::int64_t>(B, 8);
  const double ul = invalid != Invalid::None ? 1.0 : r.uniform();
  const LengthMode lm = ul < 0.3 ? LengthMode::Edge : ul < 0.4 ? LengthMode::FixedEdge
                                                               : LengthMode::Small;
  const std::int64_t fixed = pick<std::int64_t>(r, {0, 1, 255, 256, 257});
  const std::int64_t mean_l = lm == LengthMode::FixedEdge ? fixed : lm == LengthMode::Edge ? 90 : 6;
  while (B > 1 && T * B * std::max<std::int64_t>(mean_l, 1) > kMaxLookups) B /= 2;
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
  // NONE writes N·D elements: at most 2^23 of them
  const std::int64_t max_lookups =
      fc.pooling == PoolingMode::None
          ? std::min<std::int64_t>(kMaxLookups, (std::int64_t{1} << 23) / tb->dims[0])
          : kMaxLookups;
  for (std::int64_t f = 0; f < T; ++f) {
    const std::int64_t t = fc.ftm[f];
    const std::int64_t E = tb->rows[t];
    for (std::int64_t b = 0; b < per_feature[f]; ++b) {
      Bag bag;
      std::int64_t L = draw_length(r, lm, fixed);
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

// ============================================================================================
// Judging one case
// ============================================================================================

std::string violation_text(const BoundsViolation& v) { return to_string(v); }

struct Judgement {
  bool failed = false;
  std::string check;   // which check failed
  std::string detail;  // what was expected and what came back
  enum class Outcome : std::uint8_t { Ok, BoundsError, InvalidArgument, OtherError } outcome =
      Outcome::Ok;
  std::vector<std::byte> output;  // the backend's output (Ok), numel elements
  ForwardStats stats;
  std::int64_t expected_warnings = 0;
  bool device_lost = false;
  bool expected_invalid = false;
  bool expected_violation = false;
};

void fail(Judgement& j, const std::string& check, const std::string& detail) {
  if (j.failed) return;  // keep the first
  j.failed = true;
  j.check = check;
  j.detail = detail;
}

bool same_repair(const RepairResult& a, const RepairResult& b, std::string* why) {
  std::ostringstream os;
  if (a.warnings != b.warnings) os << "warnings " << a.warnings << " vs " << b.warnings << "; ";
  if (a.bad_bags != b.bad_bags) os << "bad_bags " << a.bad_bags << " vs " << b.bad_bags << "; ";
  if (a.bad_last_offset != b.bad_last_offset)
    os << "bad_last_offset " << a.bad_last_offset << " vs " << b.bad_last_offset << "; ";
  if (a.bad_indices != b.bad_indices)
    os << "bad_indices " << a.bad_indices << " vs " << b.bad_indices << "; ";
  if (a.offsets != b.offsets) os << "repaired offsets differ; ";
  if (a.indices != b.indices) os << "repaired indices differ; ";
  *why = os.str();
  return why->empty();
}

// Poisoned output with a canary tail.
struct Poisoned {
  std::size_t size;
  std::vector<std::byte> bytes;
  Poisoned(DType t, std::int64_t numel)
      : size(static_cast<std::size_t>(numel) * dtype_size(t)), bytes(size + 64 * dtype_size(t),
                                                                     std::byte{0xFF}) {}
  bool all_poison(std::size_t from) const {
    for (std::size_t i = from; i < bytes.size(); ++i)
      if (bytes[i] != std::byte{0xFF}) return false;
    return true;
  }
};

Judgement judge(Backend& dev, const FuzzCase& fc) {
  Judgement j;
  Built bt;
  try {
    build(fc, bt);
  } catch (const std::exception& e) {
    fail(j, "generator", std::string("could not build the case: ") + e.what());
    return j;
  }
  const ForwardProblem& p = bt.p;
  ForwardStrategy strategy;
  strategy.fused_bounds_check = fc.fused;

  std::optional<BoundsViolation> got_violation;
  std::string got_argument;
  auto run_forward = [&](Poisoned& out) -> std::optional<std::string> {
    // nullopt on success, else the error as text; fills j.outcome / j.stats
    try {
      j.stats = dev.forward(p, out.bytes.data(), strategy);
      j.outcome = Judgement::Outcome::Ok;
      return std::nullopt;
    } catch (const BoundsCheckError& e) {
      j.outcome = Judgement::Outcome::BoundsError;
      got_violation = e.violation();
      return std::string("BoundsCheckError(") + violation_text(e.violation()) + ")";
    } catch (const InvalidArgument& e) {
      j.outcome = Judgement::Outcome::InvalidArgument;
      got_argument = e.argument();
      return "InvalidArgument[" + e.argument() + "]: " + e.what();
    } catch (const DeviceError& e) {
      j.outcome = Judgement::Outcome::OtherError;
      j.device_lost = true;
      return std::string("DeviceError: ") + e.what();
    } catch (const std::exception& e) {
      j.outcome = Judgement::Outcome::OtherError;
      return std::string("unexpected error: ") + e.what();
    }
  };

  const Status st = validate(p);
  if (!st.ok()) {
    j.expected_invalid = true;
    // The output size is unknown for an invalid call: a generous poisoned buffer that no
    // backend may touch.
    std::int64_t cols = 0, maxd = 1;
    for (auto d : bt.c.dims) maxd = std::max<std::int64_t>(maxd, std::clamp(d, 1, 4096));
    for (auto t : bt.c.feature_table_map)
      cols += (t >= 0 && t < static_cast<std::int32_t>(bt.c.dims.size()))
                  ? std::clamp(bt.c.dims[t], 1, 4096) : maxd;
    const std::int64_t numel = std::min<std::int64_t>(
        (static_cast<std::int64_t>(bt.c.offsets.size()) + 1) * std::max<std::int64_t>(cols, 1) +
            (p.lookups.num_indices + 1) * maxd,
        std::int64_t{1} << 22);
    Poisoned out(DType::F32, numel);
    const auto err = run_forward(out);
    if (j.outcome != Judgement::Outcome::InvalidArgument) {
      fail(j, "invalid_argument",
           "expected InvalidArgument[" + st.argument + "]: " + st.message + "; got " +
               (err ? *err : std::string("no error")));
    } else {
      if (got_argument != st.argument)
        fail(j, "invalid_argument", "expected InvalidArgument[" + st.argument + "], got " + *err);
      else if (!out.all_poison(0))
        fail(j, "invalid_argument.untouched", "the output was written before InvalidArgument");
    }
    return j;
  }

  const OutputLayout layout = make_output_layout(p);
  const DType odt = p.options.policy.output;
  std::optional<BoundsViolation> expected_violation;
  try {
    if (fc.bounds == BoundsCheckMode::Fatal) {
      expected_violation = find_first_violation(p);
      j.expected_violation = expected_violation.has_value();
    } else if (fc.bounds == BoundsCheckMode::Warning || fc.bounds == BoundsCheckMode::Ignore) {
      const RepairResult ref = tbe::repair(p);
      j.expected_warnings = ref.warnings;
      try {
        const RepairResult got = dev.repair(p);
        std::string why;
        if (!same_repair(ref, got, &why))
          fail(j, "repair", "backend repair vs tbe::repair: " + why);
      } catch (const DeviceError& e) {
        j.device_lost = true;
        fail(j, "device", std::string("repair: DeviceError: ") + e.what());
        return j;
      } catch (const std::exception& e) {
        fail(j, "repair", std::string("backend repair threw: ") + e.what());
      }
    }
  } catch (const std::exception& e) {
    fail(j, "reference", std::string("the reference threw: ") + e.what());
    return j;
  }

  Poisoned out(odt, layout.numel);
  const auto err = run_forward(out);
  if (expected_violation) {
    if (j.outcome != Judgement::Outcome::BoundsError) {
      fail(j, j.device_lost ? "device" : "fatal",
           "expected BoundsCheckError(" + violation_text(*expected_violation) + "), got " +
               (err ? *err : std::string("no error")));
    } else {
      if (!(got_violation && *got_violation == *expected_violation))
        fail(j, "fatal", "expected BoundsCheckError(" + violation_text(*expected_violation) +
                             "), got " + *err);
      else if (!out.all_poison(0)) fail(j, "fatal.untouched", "output written under FATAL error");
    }
    return j;
  }
  if (err) {
    fail(j, j.device_lost ? "device" : "error", "forward: " + *err);
    return j;
  }
  j.output.assign(out.bytes.begin(), out.bytes.begin() + static_cast<std::ptrdiff_t>(out.size));
  if (!out.all_poison(out.size)) fail(j, "canary", "the backend wrote past the end of the output");
  if (j.stats.warnings != j.expected_warnings)
    fail(j, "warnings", "expected " + std::to_string(j.expected_warnings) + " warnings, got " +
                            std::to_string(j.stats.warnings));
  try {
    const oracle::CheckReport rep = oracle::check_forward(p, j.output.data());
    if (!rep.passed()) fail(j, "oracle", rep.summary());
  } catch (const std::exception& e) {
    fail(j, "oracle", std::string("the oracle threw: ") + e.what());
  }
  return j;
}

// ============================================================================================
// Shrinking
// ============================================================================================

std::string describe(const FuzzCase& fc) {
  std::ostringstream s;
  s << "T=" << fc.T() << " tables=" << fc.tables->rows.size() << " N=" << fc.lookups()
    << " bags=" << fc.bags.size();
  if (fc.R) s << " vbeR=" << fc.R;
  else s << " B=" << fc.B;
  s << " w=" << to_string(fc.tables->dtype) << " out=" << to_string(fc.policy.output)
    << " policy=" << to_string(fc.policy.kind) << " idx=" << to_string(fc.index_dtype)
    << " pool=" << to_string(fc.pooling) << " bounds=" << to_string(fc.bounds)
    << " weighted=" << fc.weighted << " fused=" << fc.fused << " faults=" << fc.faults.size()
    << " lead=" << fc.lead.size() << " fill=" << fc.fill;
  if (fc.invalid != Invalid::None) s << " invalid=" << to_string(fc.invalid);
  s << " dims=[";
  for (std::size_t t = 0; t < fc.tables->dims.size(); ++t)
    s << (t ? "," : "") << fc.tables->dims[t];
  s << "] rows=[";
  for (std::size_t t = 0; t < fc.tables->rows.size(); ++t)
    s << (t ? "," : "") << fc.tables->rows[t];
  s << "]";
  return s.str();
}

// Removes bags [first, first + n) and fixes the offset faults that name bags.
void erase_bags(FuzzCase& fc, std::int64_t first, std::int64_t n) {
  fc.bags.erase(fc.bags.begin() + first, fc.bags.begin() + first + n);
  std::vector<OffsetFault> kept;
  for (OffsetFault f : fc.faults) {
    if (f.k >= 0) {
      if (f.k > first + n) f.k -= n;
      else if (f.k > first) continue;  // an inner boundary of the removed range
    }
    kept.push_back(f);
  }
  fc.faults = std::move(kept);
}

// A copy of the tables with table t's rows cut to E' (first rows) and/or D cut to D'.
std::shared_ptr<Tables> reshape_table(const Tables& src, std::size_t t, std::int64_t new_rows,
                                      std::int32_t new_dim) {
  auto tb = std::make_shared<Tables>();
  tb->dtype = src.dtype;
  tb->rows = src.rows;
  tb->dims = src.dims;
  tb->rows[t] = new_rows;
  tb->dims[t] = new_dim;
  tb->allocate();
  const std::size_t es = dtype_size(src.dtype);
  for (std::size_t u = 0; u < src.rows.size(); ++u) {
    if (u != t) {
      std::copy_n(src.row_ptr(u, 0), static_cast<std::size_t>(src.rows[u] * src.dims[u]) * es,
                  tb->row_ptr(u, 0));
      continue;
    }
    for (std::int64_t r = 0; r < new_rows; ++r)
      std::copy_n(src.row_ptr(u, r), static_cast<std::size_t>(new_dim) * es, tb->row_ptr(u, r));
  }
  return tb;
}

std::shared_ptr<Tables> drop_table(const Tables& src, std::size_t t) {
  auto tb = std::make_shared<Tables>();
  tb->dtype = src.dtype;
  for (std::size_t u = 0; u < src.rows.size(); ++u)
    if (u != t) tb->rows.push_back(src.rows[u]), tb->dims.push_back(src.dims[u]);
  tb->allocate();
  const std::size_t es = dtype_size(src.dtype);
  std::size_t v = 0;
  for (std::size_t u = 0; u < src.rows.size(); ++u) {
    if (u == t) continue;
    std::copy_n(src.row_ptr(u, 0), static_cast<std::size_t>(src.rows[u] * src.dims[u]) * es,
                tb->row_ptr(v, 0));
    ++v;
  }
  return tb;
}

struct Shrinker {
  Shrinker(Backend& d, Judgement first) : dev(d), check(first.check), last(std::move(first)) {}
  Backend& dev;
  std::string check;  // the failure being preserved
  int runs = 0, steps = 0;
  int max_runs = 400;
  double max_seconds = 60.0;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  Judgement last;

  bool budget() const {
    return runs < max_runs &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() <
               max_seconds;
  }
  bool still_fails(const FuzzCase& c) {
    ++runs;
    Judgement j = judge(dev, c);
    if (j.device_lost) return false;  // never shrink into a lost device
    if (j.failed && j.check == check) {
      last = std::move(j);
      return true;
    }
    return false;
  }
  bool try_accept(FuzzCase& cur, FuzzCase cand) {
    if (!budget()) return false;
    if (still_fails(cand)) {
      cur = std::move(cand);
      ++steps;
      return true;
    }
    return false;
  }

  // One pass over every kind of step; true if any step was kept.
  bool pass(FuzzCase& cur) {
    bool progress = false;
    // 1. drop features (last first)
    for (std::int64_t f = cur.T() - 1; f >= 0 && cur.T() > 1 && budget(); --f) {
      if (f >= cur.T()) continue;
      FuzzCase c = cur;
      erase_bags(c, c.first_bag(f), c.bags_of_feature(f));
      c.ftm.erase(c.ftm.begin() + f);
      if (c.R) c.vbe.erase(c.vbe.begin() + f * c.R, c.vbe.begin() + (f + 1) * c.R);
      progress |= try_accept(cur, std::move(c));
    }
    // 2. drop tables no feature uses
    for (std::int64_t t = static_cast<std::int64_t>(cur.tables->rows.size()) - 1;
         t >= 0 && cur.tables->rows.size() > 1 && budget(); --t) {
      if (std::find(cur.ftm.begin(), cur.ftm.end(), t) != cur.ftm.end()) continue;
      FuzzCase c = cur;
      c.tables = drop_table(*cur.tables, static_cast<std::size_t>(t));
      for (auto& m : c.ftm) m -= m > t ? 1 : 0;
      progress |= try_accept(cur, std::move(c));
    }
    // 3. halve B: keep the first or the second half of every feature's samples (non-VBE), or
    //    the first half of every (feature, rank) group (VBE)
    for (bool again = true; again && budget();) {
      again = false;
      if (cur.R == 0) {
        if (cur.B == 0) break;
        const std::int64_t B = cur.B, nb = B / 2;
        FuzzCase lo = cur, hi = cur;
        for (std::int64_t f = B ? lo.T() - 1 : -1; f >= 0; --f) {
          erase_bags(lo, f * B + nb, B - nb);  // first half kept
          erase_bags(hi, f * B, B - nb);       // last nb samples kept
        }
        lo.B = nb;
        hi.B = nb;
        again = try_accept(cur, std::move(lo)) || try_accept(cur, std::move(hi));
      } else {
        FuzzCase c = cur;
        bool any = false;
        for (std::int64_t f = c.T() - 1; f >= 0; --f)
          for (std::int32_t q = c.R - 1; q >= 0; --q) {
            const std::int32_t n = c.vbe[f * c.R + q];
            if (n == 0) continue;
            any = true;
            const std::int32_t keep = n / 2;
            std::int64_t first = c.first_bag(f);
            for (std::int32_t u = 0; u < q; ++u) first += c.vbe[f * c.R + u];
            erase_bags(c, first + keep, n - keep);
            c.vbe[f * c.R + q] = keep;
          }
        again = any && try_accept(cur, std::move(c));
      }
      progress |= again;
    }
    // 3b. drop one sample of every feature (non-VBE) or one bag (VBE)
    if (cur.R == 0) {
      for (std::int64_t b = cur.B - 1; b >= 0 && cur.B <= 64 && budget(); --b) {
        if (b >= cur.B) continue;
        FuzzCase c = cur;
        for (std::int64_t f = c.T() - 1; f >= 0; --f) erase_bags(c, f * c.B + b, 1);
        c.B -= 1;
        progress |= try_accept(cur, std::move(c));
      }
    } else {
      for (std::int64_t k = static_cast<std::int64_t>(cur.bags.size()) - 1;
           k >= 0 && cur.bags.size() <= 64 && budget(); --k) {
        if (k >= static_cast<std::int64_t>(cur.bags.size())) continue;
        FuzzCase c = cur;
        std::int64_t acc = 0;
        for (std::size_t g = 0; g < c.vbe.size(); ++g) {
          if (k < acc + c.vbe[g]) {
            c.vbe[g] -= 1;
            break;
          }
          acc += c.vbe[g];
        }
        erase_bags(c, k, 1);
        progress |= try_accept(cur, std::move(c));
      }
    }
    // 4. drop lookups: empty whole bags, halve every bag at once, then bag by bag (first or
    //    second half), then single lookups of short bags
    auto cut_bag = [&](FuzzCase& c, std::size_t b, std::size_t from, std::size_t n) {
      Bag& bag = c.bags[b];
      bag.idx.erase(bag.idx.begin() + from, bag.idx.begin() + from + n);
      bag.w.erase(bag.w.begin() + from, bag.w.begin() + from + n);
    };
    for (std::size_t b = 0; b < cur.bags.size() && cur.bags.size() <= 256 && budget(); ++b) {
      if (cur.bags[b].idx.empty()) continue;
      FuzzCase c = cur;
      cut_bag(c, b, 0, c.bags[b].idx.size());
      progress |= try_accept(cur, std::move(c));
    }
    if (budget()) {
      FuzzCase c = cur;
      bool any = false;
      for (std::size_t b = 0; b < c.bags.size(); ++b) {
        const std::size_t L = c.bags[b].idx.size();
        if (L > 1) cut_bag(c, b, L / 2, L - L / 2), any = true;
      }
      if (any) progress |= try_accept(cur, std::move(c));
    }
    for (std::size_t b = 0; b < cur.bags.size() && budget(); ++b) {
      while (budget() && cur.bags[b].idx.size() > 1) {
        const std::size_t L = cur.bags[b].idx.size();
        FuzzCase lo = cur, hi = cur;
        cut_bag(lo, b, L / 2, L - L / 2);  // keep the first half
        cut_bag(hi, b, 0, L / 2);          // keep the second half
        if (try_accept(cur, std::move(lo)) || try_accept(cur, std::move(hi))) {
          progress = true;
          continue;
        }
        break;
      }
      // chunks of L/8 (at least 1), so a long bag costs at most ~8 runs here
      const std::size_t chunk = std::max<std::size_t>(1, cur.bags[b].idx.size() / 8);
      for (std::size_t l = 0; l < cur.bags[b].idx.size() && budget();) {
        FuzzCase c = cur;
        cut_bag(c, b, l, std::min(chunk, c.bags[b].idx.size() - l));
        if (try_accept(cur, std::move(c))) progress = true;
        else l += chunk;
      }
    }
    // 5. lead indices
    if (!cur.lead.empty() && budget()) {
      FuzzCase c = cur;
      c.lead.clear();
      for (auto& f : c.faults)
        if (!f.relative_to_n && f.value > 0)
          f.value -= std::min<std::int64_t>(f.value, static_cast<std::int64_t>(cur.lead.size()));
      progress |= try_accept(cur, std::move(c));
    }
    // 6. offset faults one at a time
    for (std::size_t i = 0; i < cur.faults.size() && budget();) {
      FuzzCase c = cur;
      c.faults.erase(c.faults.begin() + static_cast<std::ptrdiff_t>(i));
      if (try_accept(cur, std::move(c))) progress = true;
      else ++i;
    }
    // 7. shrink D (NONE pooling needs one D: every table at once)
    for (std::size_t t = 0; t < cur.tables->rows.size() && budget(); ++t) {
      for (bool again = true; again && budget();) {
        again = false;
        const std::int32_t D = cur.tables->dims[t];
        if (D <= 1) break;
        for (std::int32_t nd : {std::int32_t{1}, static_cast<std::int32_t>(D / 2)}) {
          if (nd >= D || nd < 1) continue;
          FuzzCase c = cur;
          if (cur.pooling == PoolingMode::None) {
            std::shared_ptr<Tables> tb = std::make_shared<Tables>(*cur.tables);
            for (std::size_t u = 0; u < tb->rows.size(); ++u)
              tb = reshape_table(*tb, u, tb->rows[u], std::min(nd, tb->dims[u]));
            c.tables = tb;
          } else {
            c.tables = reshape_table(*cur.tables, t, cur.tables->rows[t], nd);
          }
          if (try_accept(cur, std::move(c))) {
            progress = again = true;
            break;
          }
        }
      }
    }
    // 8. shrink E: rows [0, E') kept, in-range indices of the table's features taken mod E'
    for (std::size_t t = 0; t < cur.tables->rows.size() && budget(); ++t) {
      for (bool again = true; again && budget();) {
        again = false;
        const std::int64_t E = cur.tables->rows[t];
        if (E <= 1) break;
        for (std::int64_t ne : {std::int64_t{1}, E / 2}) {
          if (ne >= E || ne < 1) continue;
          FuzzCase c = cur;
          c.tables = reshape_table(*cur.tables, t, ne, cur.tables->dims[t]);
          for (std::int64_t f = 0; f < c.T(); ++f) {
            if (c.ftm[f] != static_cast<std::int32_t>(t)) continue;
            const std::int64_t first = c.first_bag(f), n = c.bags_of_feature(f);
            for (std::int64_t b = first; b < first + n; ++b)
              for (auto& i : c.bags[b].idx)
                if (i >= 0 && i < E) i %= ne;
          }
          if (c.bounds == BoundsCheckMode::None)
            for (auto& i : c.lead) i %= std::min<std::int64_t>(ne, i + 1);
          if (try_accept(cur, std::move(c))) {
            progress = again = true;
            break;
          }
        }
      }
    }
    // 9. simpler options
    if (cur.weighted && budget()) {
      FuzzCase c = cur;
      c.weighted = false;
      progress |= try_accept(cur, std::move(c));
    }
    return progress;
  }
};

// ============================================================================================
// A backend with a planted bug (--backend cpu-faulty): tests the campaign's failure path, the
// shrinker and the case writer without a GPU. Bug: in a pooled call with a bag of at least 256
// lookups, output element 0 is off by one.
// ============================================================================================

class FaultyBackend final : public Backend {
 public:
  std::string name() const override { return "cpu-reference-with-planted-bug"; }
  ForwardStats forward(const ForwardProblem& p, void* output,
                       const ForwardStrategy& strategy) override {
    ForwardStats st = inner_->forward(p, output, strategy);
    if (p.options.pooling == PoolingMode::None) return st;
    bool long_bag = false;
    for (std::int64_t k = 0; k + 1 < p.lookups.num_offsets && !long_bag; ++k)
      long_bag = load_index(p.lookups.index_dtype, p.lookups.offsets, k + 1) -
                     load_index(p.lookups.index_dtype, p.lookups.offsets, k) >= 256;
    if (long_bag && make_output_layout(p).numel > 0) {
      const DType t = p.options.policy.output;
      store_from_double(t, output, 0, load_as_double(t, output, 0) + 1.0);
    }
    return st;
  }
  RepairResult repair(const ForwardProblem& p) override { return inner_->repair(p); }
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& s) override {
    return inner_->backward(p, out, s);
  }

 private:
  std::unique_ptr<Backend> inner_ = make_reference_backend();
};

// ============================================================================================
// The campaign
// ============================================================================================

struct Args {
  double seconds = 0;
  bool have_seconds = false;
  std::uint64_t seed = 1;
  std::string out = "tbe-fuzz-out";
  std::string backend = "cuda";
  std::optional<std::uint64_t> only_case;
  double report_every = 30;
  std::int64_t huge_every = -1;  // -1: 1000 on the cuda backend, 0 (off) on the CPU
  int max_saved = 10;
  std::int64_t max_failures = 0;  // 0: no limit
  std::int64_t list = 0;          // --list N
  bool help = false;
};

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::uint64_t parse_u64(const std::string& flag, const std::string& v) {
  std::size_t used = 0;
  unsigned long long x = 0;
  bool ok = !v.empty() && v[0] != '-' && v[0] != '+';
  if (ok) {
    try {
      x = std::stoull(v, &used, 10);
    } catch (const std::exception&) {
      ok = false;
    }
  }
  if (!ok || used != v.size())
    throw UsageError(flag + ": '" + v + "' is not an unsigned integer");
  return x;
}
double parse_positive(const std::string& flag, const std::string& v) {
  std::size_t used = 0;
  double x = 0;
  try {
    x = std::stod(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || !(x > 0) || !std::isfinite(x))
    throw UsageError(flag + ": '" + v + "' is not a positive number of seconds");
  return x;
}

Args parse_args(int argc, char** argv) {
  Args a;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string flag = args[i];
    std::optional<std::string> inline_value;
    if (flag.rfind("--", 0) == 0 && flag.find('=') != std::string::npos) {
      inline_value = flag.substr(flag.find('=') + 1);
      flag = flag.substr(0, flag.find('='));
    }
    auto value = [&]() -> std::string {
      if (inline_value) return *inline_value;
      if (i + 1 >= args.size()) throw UsageError(flag + ": missing value");
      return args[++i];
    };
    if (flag == "--help" || flag == "-h") a.help = true;
    else if (flag == "--seconds") a.seconds = parse_positive(flag, value()), a.have_seconds = true;
    else if (flag == "--seed") a.seed = parse_u64(flag, value());
    else if (flag == "--out") {
      a.out = value();
      if (a.out.empty()) throw UsageError("--out: the folder name is empty");
    } else if (flag == "--backend") {
      a.backend = value();
      if (a.backend != "cuda" && a.backend != "cpu" && a.backend != "cpu-faulty")
        throw UsageError("--backend: '" + a.backend +
                         "' is not a backend (allowed: cuda, cpu, cpu-faulty)");
    } else if (flag == "--case") a.only_case = parse_u64(flag, value());
    else if (flag == "--report-every") a.report_every = parse_positive(flag, value());
    else if (flag == "--huge-every")
      a.huge_every = static_cast<std::int64_t>(parse_u64(flag, value()));
    else if (flag == "--max-saved") a.max_saved = static_cast<int>(parse_u64(flag, value()));
    else if (flag == "--list") a.list = static_cast<std::int64_t>(parse_u64(flag, value()));
    else if (flag == "--max-failures")
      a.max_failures = static_cast<std::int64_t>(parse_u64(flag, value()));
    else
      throw UsageError("unknown argument '" + args[i] +
                       "' (allowed: --seconds S, --seed X, --out DIR, --backend cuda|cpu, "
                       "--case I, --report-every S, --huge-every K, --max-saved K, --max-failures K, "
                       "--list N, --help)");
  }
  if (!a.help && !a.have_seconds && !a.only_case && a.list == 0)
    throw UsageError("--seconds S is required (or --case I to run one case)");
  return a;
}

using Counts = std::map<std::string, std::map<std::string, std::int64_t>>;

std::string dim_class(std::int32_t d) {
  if (d == 1) return "1";
  if (d == 2048) return "2048";
  if (d > 1024) return "1025..2047";
  if (d % 2 == 1) return "odd";
  if (d % 4 != 0) return "even,%4!=0";
  return "%4==0";
}

void count_coverage(Counts& cov, const FuzzCase& fc, const Judgement& j) {
  auto add = [&](const std::string& axis, const std::string& v) { ++cov[axis][v]; };
  add("pooling", to_string(fc.pooling));
  add("bounds", to_string(fc.bounds));
  const bool malformed = !fc.faults.empty() || j.expected_violation || j.expected_warnings > 0;
  add("malformed", malformed ? "1" : "0");
  add("weighted", fc.weighted ? "1" : "0");
  add("index", to_string(fc.index_dtype));
  add("w", to_string(fc.tables->dtype));
  add("out", to_string(fc.policy.output));
  add("policy", to_string(fc.policy.kind));
  add("vbe", fc.R ? "1" : "0");
  add("fused", fc.fused ? "1" : "0");
  add("fill", fc.fill);
  add("lead", fc.lead.empty() ? "0" : ">0");
  add("B=0", (fc.R == 0 && fc.B == 0) ? "1" : "0");
  add("huge(E·D>=2^31)", fc.huge ? "1" : "0");
  add("invalid", to_string(fc.invalid));
  add("outcome", j.expected_invalid ? "invalid_argument"
                 : j.expected_violation ? "bounds_error" : "output");
  std::map<std::string, bool> dims, lens;
  bool e1 = false;
  for (std::size_t t = 0; t < fc.tables->rows.size(); ++t) {
    dims[dim_class(fc.tables->dims[t])] = true;
    e1 = e1 || fc.tables->rows[t] == 1;
  }
  for (auto& [k, v] : dims) add("D (cases with)", k);
  add("E=1 (cases with)", e1 ? "1" : "0");
  for (const Bag& b : fc.bags) {
    const std::size_t L = b.idx.size();
    if (L == 0 || L == 1 || (L >= 255 && L <= 257)) lens[std::to_string(L)] = true;
    else if (L > 257) lens[">257"] = true;
    else lens["2..254"] = true;
  }
  for (auto& [k, v] : lens) add("L (cases with)", k);
}

void print_counts(const Counts& cov) {
  for (const auto& [axis, values] : cov) {
    std::cout << "  " << axis << ":";
    for (const auto& [v, n] : values) std::cout << " " << v << "=" << n;
    std::cout << "\n";
  }
}

struct Campaign {
  Args args;
  std::unique_ptr<Backend> dev;
  bool gpu = false;
  Counts coverage;
  std::map<std::string, std::int64_t> paths;
  std::int64_t cases = 0, failures = 0;
  int saved = 0;
  std::vector<std::string> failure_lines;
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  void save_failure(std::uint64_t index, const FuzzCase& original, const Judgement& first) {
    FuzzCase cur = original;
    Judgement jj = first;
    int steps = 0, runs = 0;
    if (!first.device_lost) {
      Shrinker s(*dev, first);
      // at most 60 s, and not much past the end of the campaign
      if (!args.only_case)
        s.max_seconds = std::clamp(args.seconds - elapsed() + 15.0, 5.0, 60.0);
      while (s.budget() && s.pass(cur)) {
      }
      steps = s.steps;
      runs = s.runs;
      jj = s.last;  // the judgement of the last accepted candidate, i.e. of `cur`
    }
    const int n = ++saved;
    const std::string dir = args.out + "/failure-" + std::to_string(n);
    std::cout << "  shrunk in " << steps << " steps (" << runs << " runs): " << describe(cur)
              << "\n  now: [" << jj.check << "] " << jj.detail << "\n";
    try {
      io::CaseFile cf;
      cf.name = "tbe-fuzz-failure-" + std::to_string(n);
      std::ostringstream prov;
      prov << "tbe-fuzz --seed " << args.seed << " --case " << index << " --backend "
           << args.backend << " (" << dev->name() << "); failed check '" << jj.check
           << "': " << jj.detail << "; shrunk in " << steps << " steps";
      cf.provenance = prov.str();
      cf.seed = args.seed;
      Built bt;
      build(cur, bt);
      cf.problem = bt.c;
      cf.problem.weights = cur.tables->weights;
      io::RecordedOutputs rec;
      rec.implementation = "tbe-fuzz backend " + dev->name();
      rec.output_dtype = cur.policy.output;
      if (jj.outcome == Judgement::Outcome::Ok) {
        rec.output = jj.output;
        rec.warnings = jj.stats.warnings;
      } else if (jj.outcome == Judgement::Outcome::BoundsError) {
        rec.error = "bounds_check";
      } else if (jj.outcome == Judgement::Outcome::InvalidArgument) {
        rec.error = "invalid_argument";
      }
      cf.recorded = std::move(rec);
      std::filesystem::create_directories(dir);
      io::write_case(dir, cf);
      std::cout << "  saved " << dir << "\n  replay: tbe-verify replay " << dir << "\n";
      failure_lines.push_back("failure-" + std::to_string(n) + " (case " + std::to_string(index) +
                              ", " + jj.check + "): tbe-verify replay " + dir);
    } catch (const std::exception& e) {
      std::cout << "  could not save the case to " << dir << ": " << e.what() << "\n";
      failure_lines.push_back("case " + std::to_string(index) + " (" + jj.check +
                              "): not saved (" + e.what() + ")");
    }
  }

  // Returns false when the campaign must stop (the device is lost).
  bool run_case(std::uint64_t index) {
    const std::int64_t huge_every = args.huge_every >= 0 ? args.huge_every : (gpu ? 1000 : 0);
    FuzzCase fc = generate_case(args.seed, index, huge_every);
    Judgement j = judge(*dev, fc);
    ++cases;
    count_coverage(coverage, fc, j);
    for (const auto& p : j.stats.paths) ++paths[p];
    if (!j.failed) return true;
    ++failures;
    std::cout << "FAIL case " << index << " [" << j.check << "]: " << j.detail << "\n  case: "
              << describe(fc) << "\n  rerun: tbe-fuzz --backend " << args.backend << " --seed "
              << args.seed << " --case " << index << "\n";
    if (saved < args.max_saved) save_failure(index, fc, j);
    else
      failure_lines.push_back("case " + std::to_string(index) + " (" + j.check +
                              "): not saved (--max-saved)");
    std::cout.flush();
    if (j.device_lost) {
      std::cout << "the device reported an error (the CUDA context may be lost): stopping\n";
      return false;
    }
    return true;
  }

  void print_paths() const {
    std::cout << "kernel paths exercised (cases): ";
    if (paths.empty()) std::cout << "none";
    bool first = true;
    for (const auto& [p, n] : paths) {
      std::cout << (first ? "" : ", ") << p << "=" << n;
      first = false;
    }
    std::cout << "\n";
  }

  void progress_line() {
    const double t = elapsed();
    std::cout << "[" << static_cast<long>(t) << " s] cases " << cases << " (" << std::fixed
              << std::setprecision(1) << (t > 0 ? static_cast<double>(cases) / t : 0.0)
              << std::defaultfloat << "/s), failures " << failures << "\n";
    print_paths();
    print_counts(coverage);
    std::cout.flush();
  }

  void final_report() {
    const double t = elapsed();
    std::cout << "\n== tbe-fuzz report (seed " << args.seed << ", backend " << dev->name() << ")\n"
              << "cases run: " << cases << " in " << std::fixed << std::setprecision(1) << t
              << " s (" << (t > 0 ? static_cast<double>(cases) / t : 0.0) << " cases/s)\n"
              << std::defaultfloat
              << "coverage (cases per axis value):\n";
    print_counts(coverage);
    print_paths();
    std::cout << "failures found: " << failures << "\n";
    for (const auto& l : failure_lines) std::cout << "  " << l << "\n";
    std::cout << (failures == 0 ? "PASS" : "FAIL") << ": " << cases << " cases, " << failures
              << " failures (seed " << args.seed << ")" << std::endl;
  }
};

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "tbe-fuzz: " << e.what() << "\n(see tbe-fuzz --help)\n";
    return 2;
  }
  if (args.help) {
    std::cout << kHelp;
    return 0;
  }
  if (args.list > 0) {
    const bool gpu = args.backend == "cuda";
    const std::int64_t huge_every = args.huge_every >= 0 ? args.huge_every : (gpu ? 1000 : 0);
    for (std::int64_t i = 0; i < args.list; ++i) {
      // huge tables are only described, not allocated
      const bool huge = huge_every > 0 && i % huge_every == huge_every / 2;
      std::cout << "case " << i << ": "
                << (huge ? std::string("(a huge-table case)")
                         : describe(generate_case(args.seed, static_cast<std::uint64_t>(i),
                                                  huge_every)))
                << "\n";
    }
    return 0;
  }
  Campaign cp;
  cp.args = args;
  try {
    if (args.backend == "cuda") {
      cp.dev = select_backend(BackendKind::Cuda);
      cp.gpu = true;
    } else if (args.backend == "cpu-faulty") {
      cp.dev = std::make_unique<FaultyBackend>();
    } else {
      cp.dev = make_reference_backend();
    }
  } catch (const std::exception& e) {
    std::cerr << "tbe-fuzz: " << e.what() << " (use --backend cpu on a machine without a GPU)\n";
    return 3;
  }
  std::cout << "tbe-fuzz: seed " << args.seed << ", backend " << cp.dev->name() << ", ";
  if (args.only_case) std::cout << "case " << *args.only_case << " only";
  else std::cout << args.seconds << " s";
  std::cout << ", failures to " << args.out << "/ (rerun: tbe-fuzz --seed " << args.seed
            << " --backend " << args.backend << " --seconds S)" << std::endl;
  try {
    if (args.only_case) {
      cp.run_case(*args.only_case);
    } else {
      double next_report = args.report_every;
      for (std::uint64_t i = 0; cp.elapsed() < args.seconds; ++i) {
        if (!cp.run_case(i)) break;
        if (args.max_failures > 0 && cp.failures >= args.max_failures) break;
        if (cp.elapsed() >= next_report) {
          cp.progress_line();
          while (next_report <= cp.elapsed()) next_report += args.report_every;
        }
      }
    }
  } catch (const std::exception& e) {
    std::cout << "tbe-fuzz: stopped by an error: " << e.what() << "\n";
    cp.final_report();
    return 3;
  }
  cp.final_report();
  return cp.failures == 0 ? 0 : 1;
}
