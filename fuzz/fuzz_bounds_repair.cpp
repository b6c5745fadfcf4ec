// fuzz_bounds_repair: bytes -> a small TBE lookup problem with arbitrary offsets and indices
// (negative, huge, decreasing, past the end), sometimes with a deliberately broken shape.
// Checks (each failure aborts):
//  - a broken shape is rejected by tbe::validate with a non-empty argument(), and tbe::repair /
//    forward_reference throw InvalidArgument naming it without writing the output;
//  - a valid shape: find_first_violation equals the brute-force offender scan below (offender
//    order of docs/semantics.md); FATAL: repair and forward_reference throw BoundsCheckError with
//    that offender (output untouched) or return the input unchanged with zero counts;
//  - WARNING / IGNORE: repair's offsets and counts equal repair_offsets_sequential, the max-scan
//    form and the loop of docs/semantics.md written out here; repaired offsets are monotone in [0, N] and end at
//    N; every index inside a bag is in [0, E_t) (bad ones became 0, good ones unchanged, indices
//    before offsets[0] untouched); warnings = bags + last offset + indices;
//  - forward_reference on the repaired problem (mode NONE) runs and equals forward_reference on
//    the original problem (bit for bit), whose warning count equals repair's.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <omp.h>

#include "fuzz_input.h"
#include "tbe/bounds_check.h"
#include "tbe/forward.h"
#include "tbe/host_case.h"
#include "tbe/problem.h"

using namespace tbe;
using tbe_fuzz::ByteReader;
using tbe_fuzz::fail;

namespace {

constexpr std::int64_t kI32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kI32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();

// Clamps an exact value into the range of the index type (int32 or int64).
std::int64_t fit(__int128 v, bool i32) {
  const __int128 lo = i32 ? kI32Min : kI64Min, hi = i32 ? kI32Max : kI64Max;
  return static_cast<std::int64_t>(v < lo ? lo : (v > hi ? hi : v));
}

// An offset or index value: mostly near the legal range [0, lim], sometimes an extreme.
std::int64_t wild_value(ByteReader& in, std::int64_t prev, std::int64_t lim, bool i32) {
  const std::int64_t tmax = i32 ? kI32Max : kI64Max, tmin = i32 ? kI32Min : kI64Min;
  switch (in.u8() % 16) {
    case 10: return -1 - static_cast<std::int64_t>(in.u8());
    case 11: return lim;
    case 12: return lim + 1 + in.u8() % 3;
    case 13: return tmax - in.u8() % 2;
    case 14: return tmin + in.u8() % 2;
    case 15: return i32 ? static_cast<std::int32_t>(in.u32()) : static_cast<std::int64_t>(in.u64());
    case 9: return fit(static_cast<__int128>(prev) - 1 - in.u8() % 3, i32);  // decreasing
    default: return static_cast<std::int64_t>(in.u8() % static_cast<unsigned>(lim + 3)) - 1;
  }
}

// What the harness built, owning every buffer the views point into.
struct Built {
  DType wdt = DType::F32;
  std::vector<std::byte> weights;
  std::vector<std::int64_t> rows, table_offsets;
  std::vector<std::int32_t> dims, ftm, vbe;
  std::int32_t vbe_ranks = 0;
  DType idt = DType::I64;
  std::vector<std::int64_t> idx64, off64;  // int64 masters
  std::vector<std::int32_t> idx32, off32;
  std::int64_t num_offsets = 0;            // may differ from off64.size() when corrupted
  std::vector<float> psw;
  std::int64_t B = 0;
  ForwardOptions opt;
  bool corrupted = false;

  ForwardProblem view() const {
    ForwardProblem p;
    p.tables.dtype = wdt;
    p.tables.weights = weights.data();
    p.tables.rows = rows;
    p.tables.dims = dims;
    p.tables.table_offsets = table_offsets;
    p.tables.feature_table_map = ftm;
    p.lookups.index_dtype = idt;
    const bool i32 = idt == DType::I32;
    p.lookups.indices = i32 ? static_cast<const void*>(idx32.data()) : idx64.data();
    p.lookups.num_indices = static_cast<std::int64_t>(idx64.size());
    p.lookups.offsets = i32 ? static_cast<const void*>(off32.data()) : off64.data();
    p.lookups.num_offsets = num_offsets;
    p.lookups.per_sample_weights = psw.empty() ? nullptr : psw.data();
    p.lookups.batch_size = B;
    p.lookups.vbe_batch_sizes = vbe;
    p.lookups.vbe_ranks = vbe_ranks;
    p.options = opt;
    return p;
  }
};

// Applies one shape corruption chosen by `kind`; returns false if it does not apply here.
bool corrupt(Built& b, int kind, ByteReader& in) {
  const std::int64_t T = static_cast<std::int64_t>(b.ftm.size());
  const std::size_t nt = b.rows.size();
  switch (kind) {
    case 0:  // offsets one entry short (the buffer keeps its size: validate must not read it)
      b.num_offsets -= 1;
      return true;
    case 1:  // one entry too many (validate must reject it before anything reads the buffer)
      b.num_offsets += 1;
      return true;
    case 2: b.dims[in.u8() % nt] = in.flag() ? 0 : static_cast<std::int32_t>(kMaxD + 1); return true;
    case 3: b.rows[in.u8() % nt] = -static_cast<std::int64_t>(in.u8() % 2); return true;
    case 4:
      if (T == 0) return false;
      b.ftm[in.u8() % T] = in.flag() ? -1 : static_cast<std::int32_t>(nt);
      return true;
    case 5:
      if (b.vbe.empty()) {
        if (T == 0) return false;
        b.vbe_ranks = 1 + in.u8() % 2;  // ranks without batch sizes
        return true;
      }
      b.vbe[in.u8() % b.vbe.size()] += 1;  // total bags != len(offsets) - 1
      return true;
    case 6:
      if (b.vbe.empty()) { b.B = -1 - in.u8() % 2; return true; }
      b.vbe[in.u8() % b.vbe.size()] = -1;
      return true;
    case 7:
      if (b.opt.pooling != PoolingMode::None) return false;
      b.psw.assign(b.idx64.size() + 1, 1.0f);  // weights with NONE (non-null even for N = 0)
      return true;
    case 8: b.opt.policy.weights = b.wdt == DType::F32 ? DType::F16 : DType::F32; return true;
    case 9: b.idt = DType::F32; return true;
    default: b.table_offsets[in.u8() % nt] = -1; return true;
  }
}

std::int64_t rows_of(const Built& b, std::int64_t f) { return b.rows[b.ftm[f]]; }

// Brute-force offender scan (docs/semantics.md "Bounds check", FATAL order), written from that rule.
std::optional<BoundsViolation> brute_first_violation(const Built& b,
                                                     const std::vector<std::int64_t>& bag_feature,
                                                     const std::vector<std::int64_t>& bag_sample) {
  const std::vector<std::int64_t>& o = b.off64;
  const std::int64_t N = static_cast<std::int64_t>(b.idx64.size());
  const std::int64_t K = static_cast<std::int64_t>(o.size()) - 1;
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t s = o[k], e = o[k + 1];
    if (s < 0 || s > e)
      return BoundsViolation{BoundsViolation::Kind::Bag, bag_feature[k], bag_sample[k], k, s, N};
    if (e > N)
      return BoundsViolation{BoundsViolation::Kind::Bag, bag_feature[k], bag_sample[k], k, e, N};
  }
  if (o[K] != N) return BoundsViolation{BoundsViolation::Kind::LastOffset, -1, -1, K, o[K], N};
  std::optional<BoundsViolation> best;
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t E = rows_of(b, bag_feature[k]);
    for (std::int64_t q = o[k]; q < o[k + 1]; ++q) {
      const std::int64_t i = b.idx64[q];
      if ((i < 0 || i >= E) && (!best || q < best->position))
        best = BoundsViolation{BoundsViolation::Kind::Index, bag_feature[k], bag_sample[k], q, i, E};
    }
  }
  return best;
}

// The repair loop of docs/semantics.md "Bounds check", written out independently of the library.
std::vector<std::int64_t> spec_repair(std::vector<std::int64_t> o, std::int64_t N,
                                      std::int64_t& bags, std::int64_t& last) {
  bags = 0;
  last = 0;
  const std::size_t K = o.size() - 1;
  if (o[K] != N) o[K] = N, last = 1;
  for (std::size_t k = 0; k < K; ++k) {
    if (o[k] < 0 || o[k] > o[k + 1] || o[k + 1] > N) {
      ++bags;
      o[k] = o[k] < 0 ? 0 : (o[k] > N ? N : o[k]);
      o[k + 1] = o[k + 1] < o[k] ? o[k] : (o[k + 1] > N ? N : o[k + 1]);
    }
  }
  return o;
}

std::string vstr(const std::optional<BoundsViolation>& v) {
  return v ? to_string(*v) : std::string("none");
}

void run_one(ByteReader& in) {
  Built b;
  // --- tables: 1..3 tables, E in {1..6, 255, 256}, D in 1..4 ---
  const int nt = in.range(1, 3);
  static constexpr DType kW[] = {DType::F32, DType::F16, DType::BF16};
  b.wdt = kW[in.u8() % 3];
  for (int t = 0; t < nt; ++t) {
    const std::uint8_t e = in.u8();
    b.rows.push_back(e >= 250 ? 255 + (e & 1) : 1 + e % 6);
    b.dims.push_back(in.range(1, 4));
  }
  // --- features, pooling, options ---
  const int T = in.range(0, 3);
  for (int f = 0; f < T; ++f) b.ftm.push_back(static_cast<std::int32_t>(in.u8() % nt));
  static constexpr PoolingMode kP[] = {PoolingMode::Sum, PoolingMode::Mean, PoolingMode::None};
  b.opt.pooling = kP[in.u8() % 3];
  if (b.opt.pooling == PoolingMode::None)
    for (int t = 1; t < nt; ++t) b.dims[t] = b.dims[0];
  static constexpr BoundsCheckMode kM[] = {BoundsCheckMode::Warning, BoundsCheckMode::Ignore,
                                           BoundsCheckMode::Fatal};
  b.opt.bounds_check = kM[in.u8() % 3];
  static constexpr DType kO[] = {DType::F32, DType::F16, DType::BF16};
  b.opt.policy = make_policy(in.flag() ? PolicyKind::FbgemmCuda : PolicyKind::SeedDefault, b.wdt,
                             kO[in.u8() % 3]);
  b.idt = in.flag() ? DType::I32 : DType::I64;
  const bool i32 = b.idt == DType::I32;
  // Weights: small integers, table t at the prefix of E·D.
  std::int64_t total = 0;
  for (int t = 0; t < nt; ++t) {
    b.table_offsets.push_back(total);
    total += b.rows[t] * b.dims[t];
  }
  b.weights.assign(static_cast<std::size_t>(total) * dtype_size(b.wdt), std::byte{0});
  for (std::int64_t i = 0; i < total; ++i)
    store_from_double(b.wdt, b.weights.data(), i, static_cast<double>(static_cast<int>(i % 7) - 3));
  // --- bags: non-VBE B in 0..4, or VBE with R in 1..3 and batch sizes 0..3 ---
  std::int64_t K = 0;
  if (T > 0 && in.u8() % 4 == 0) {
    b.vbe_ranks = in.range(1, 3);
    for (int i = 0; i < T * b.vbe_ranks; ++i) {
      b.vbe.push_back(in.range(0, 3));
      K += b.vbe.back();
    }
  } else {
    b.B = in.range(0, 4);
    K = T * b.B;
  }
  // --- lookups: N in 0..16, arbitrary offsets and indices ---
  const std::int64_t N = in.range(0, 16);
  const std::int64_t Emax = *std::max_element(b.rows.begin(), b.rows.end());
  for (std::int64_t p = 0; p < N; ++p)
    b.idx64.push_back(wild_value(in, p ? b.idx64.back() : 0, Emax, i32));
  std::int64_t prev = 0;
  for (std::int64_t k = 0; k <= K; ++k) {
    const std::uint8_t how = in.u8();
    std::int64_t v;
    if (how < 160) v = fit(static_cast<__int128>(prev) + how % 4, i32);  // mostly a plausible non-decreasing walk
    else v = wild_value(in, prev, N, i32);
    b.off64.push_back(v);
    prev = v;
  }
  if (in.u8() % 2 == 0 && !b.off64.empty()) b.off64.back() = N;  // often a correct last offset
  if (b.opt.pooling != PoolingMode::None && in.flag())
    for (std::int64_t p = 0; p < N; ++p) b.psw.push_back(0.5f + static_cast<float>(p % 4));
  b.num_offsets = K + 1;
  // --- sometimes a broken shape ---
  const std::uint8_t c = in.u8();
  if (c >= 224) b.corrupted = corrupt(b, c % 11, in);
  // int32 mirrors (values were drawn inside int32 when i32). No spare slots: a length that
  // validate wrongly accepts makes ASan report the over-read.
  for (auto v : b.idx64) b.idx32.push_back(static_cast<std::int32_t>(v));
  for (auto v : b.off64) b.off32.push_back(static_cast<std::int32_t>(v));

  const ForwardProblem p = b.view();
  const Status st = validate(p);
  const double kSentinel = -12345.0;

  const bool verbose = std::getenv("TBE_FUZZ_VERBOSE") != nullptr;
  if (verbose)
    std::fprintf(stderr, "T=%d K=%lld N=%lld %s %s %s: %s\n", T, static_cast<long long>(K),
                 static_cast<long long>(N), to_string(b.idt).c_str(),
                 to_string(b.opt.bounds_check).c_str(), b.corrupted ? "corrupted" : "well-formed",
                 st.ok() ? "valid" : st.message.c_str());
  if (b.corrupted) {
    TBE_FUZZ_CHECK(!st.ok(), "a broken shape passed validate");
    TBE_FUZZ_CHECK(!st.argument.empty() && !st.message.empty(), "empty argument/message");
    try {
      (void)repair(p);
      fail("repair accepted an invalid problem");
    } catch (const InvalidArgument& e) {
      TBE_FUZZ_CHECK(e.argument() == st.argument, e.argument() + " vs " + st.argument);
    }
    std::vector<double> out(64, kSentinel);
    try {
      (void)forward_reference(p, out.data());
      fail("forward_reference accepted an invalid problem");
    } catch (const InvalidArgument& e) {
      TBE_FUZZ_CHECK(!e.argument().empty(), "forward: empty argument()");
    }
    for (double v : out) TBE_FUZZ_CHECK(v == kSentinel, "output written on an invalid problem");
    return;
  }
  TBE_FUZZ_CHECK(st.ok(), "validate rejected a well-formed problem: " + st.message);

  // Bag coordinates from the shape alone (feature-major; VBE rank-major inside a feature).
  std::vector<std::int64_t> bag_feature, bag_sample;
  for (std::int64_t f = 0; f < T; ++f) {
    std::int64_t nb = b.B;
    if (!b.vbe.empty()) {
      nb = 0;
      for (int r = 0; r < b.vbe_ranks; ++r) nb += b.vbe[f * b.vbe_ranks + r];
    }
    for (std::int64_t s = 0; s < nb; ++s) bag_feature.push_back(f), bag_sample.push_back(s);
  }
  TBE_FUZZ_CHECK(static_cast<std::int64_t>(bag_feature.size()) == K, "bag count");

  const std::optional<BoundsViolation> expect = brute_first_violation(b, bag_feature, bag_sample);
  const std::optional<BoundsViolation> got = find_first_violation(p);
  if (verbose) std::fprintf(stderr, "  first violation: %s\n", vstr(expect).c_str());
  TBE_FUZZ_CHECK(got == expect, "find_first_violation " + vstr(got) + " != brute force " + vstr(expect));

  const OutputLayout layout = make_output_layout(p);
  const std::size_t osz = static_cast<std::size_t>(layout.numel) * dtype_size(b.opt.policy.output);

  if (b.opt.bounds_check == BoundsCheckMode::Fatal) {
    std::vector<std::byte> out(osz + 8, std::byte{0x5a});
    if (expect) {
      try {
        (void)repair(p);
        fail("FATAL repair did not throw for " + vstr(expect));
      } catch (const BoundsCheckError& e) {
        TBE_FUZZ_CHECK(e.violation() == *expect, "FATAL offender " + to_string(e.violation()));
      }
      try {
        (void)forward_reference(p, out.data());
        fail("FATAL forward did not throw for " + vstr(expect));
      } catch (const BoundsCheckError& e) {
        TBE_FUZZ_CHECK(e.violation() == *expect, "FATAL forward offender " + to_string(e.violation()));
      }
      for (auto v : out) TBE_FUZZ_CHECK(v == std::byte{0x5a}, "FATAL forward wrote its output");
      return;
    }
    const RepairResult r = repair(p);
    TBE_FUZZ_CHECK(r.offsets == b.off64 && r.indices == b.idx64, "FATAL changed valid input");
    TBE_FUZZ_CHECK(r.warnings == 0 && r.bad_bags == 0 && r.bad_indices == 0 && r.bad_last_offset == 0,
                   "FATAL counted warnings on valid input");
    const ForwardStats fs = forward_reference(p, out.data());
    TBE_FUZZ_CHECK(fs.warnings == 0, "FATAL forward warnings");
    return;
  }

  // --- WARNING / IGNORE ---
  const RepairResult r = repair(p);
  std::int64_t sb = 0, sl = 0, mb = 0, ml = 0, xb = 0, xl = 0;
  const auto seq = repair_offsets_sequential(b.off64, N, &sb, &sl);
  const auto scan = repair_offsets_max_scan(b.off64, N, &mb, &ml);
  const auto mine = spec_repair(b.off64, N, xb, xl);
  TBE_FUZZ_CHECK(seq == mine && sb == xb && sl == xl, "repair_offsets_sequential != spec loop");
  TBE_FUZZ_CHECK(scan == mine && mb == xb && ml == xl, "repair_offsets_max_scan != spec loop");
  TBE_FUZZ_CHECK(r.offsets == seq, "repair offsets != repair_offsets_sequential");
  TBE_FUZZ_CHECK(r.bad_bags == sb && r.bad_last_offset == sl, "repair counts != sequential");
  const auto& o = r.offsets;
  TBE_FUZZ_CHECK(static_cast<std::int64_t>(o.size()) == K + 1 && o[K] == N, "last offset != N");
  for (std::int64_t k = 0; k <= K; ++k) {
    TBE_FUZZ_CHECK(o[k] >= 0 && o[k] <= N, "repaired offset outside [0, N]");
    if (k > 0) TBE_FUZZ_CHECK(o[k - 1] <= o[k], "repaired offsets not monotone");
  }
  TBE_FUZZ_CHECK(static_cast<std::int64_t>(r.indices.size()) == N, "indices length");
  std::int64_t bad = 0;
  for (std::int64_t q = 0; q < o[0]; ++q)
    TBE_FUZZ_CHECK(r.indices[q] == b.idx64[q], "index before offsets[0] was changed");
  for (std::int64_t k = 0; k < K; ++k) {
    const std::int64_t E = rows_of(b, bag_feature[k]);
    for (std::int64_t q = o[k]; q < o[k + 1]; ++q) {
      const std::int64_t i = b.idx64[q];
      const bool is_bad = i < 0 || i >= E;
      bad += is_bad;
      TBE_FUZZ_CHECK(r.indices[q] == (is_bad ? 0 : i), "repaired index wrong at " + std::to_string(q));
      TBE_FUZZ_CHECK(r.indices[q] >= 0 && r.indices[q] < E, "repaired index out of range");
    }
  }
  TBE_FUZZ_CHECK(r.bad_indices == bad, "bad index count");
  TBE_FUZZ_CHECK(r.warnings == r.bad_bags + r.bad_last_offset + r.bad_indices, "warnings sum");

  // Forward on the original (repairs internally) and on the repaired input under NONE: same bytes.
  std::vector<std::byte> out1(osz + 8, std::byte{0x11}), out2(osz + 8, std::byte{0x22});
  const ForwardStats fs = forward_reference(p, out1.data());
  TBE_FUZZ_CHECK(fs.warnings == r.warnings, "forward warnings != repair warnings");
  Built rb = b;
  rb.off64 = r.offsets;
  rb.idx64 = r.indices;
  rb.off32.assign(rb.off64.begin(), rb.off64.end());
  rb.idx32.assign(rb.idx64.begin(), rb.idx64.end());
  rb.opt.bounds_check = BoundsCheckMode::None;
  const ForwardProblem rp = rb.view();
  TBE_FUZZ_CHECK(!find_first_violation(rp).has_value(), "repaired problem still violates bounds");
  const ForwardStats fs2 = forward_reference(rp, out2.data());
  TBE_FUZZ_CHECK(fs2.warnings == 0, "NONE forward counted warnings");
  TBE_FUZZ_CHECK(std::memcmp(out1.data(), out2.data(), osz) == 0,
                 "forward(original, repair) != forward(repaired, NONE)");
  TBE_FUZZ_CHECK(out1[osz] == std::byte{0x11} && out2[osz] == std::byte{0x22}, "wrote past the output");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  omp_set_num_threads(1);  // tiny problems; one thread keeps runs fast and deterministic
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tbe_fuzz::run_bytes(data, size, run_one);
}
