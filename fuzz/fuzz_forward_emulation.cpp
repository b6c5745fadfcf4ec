// fuzz_forward_emulation: bytes -> a tiny VALID forward problem (T <= 3 features over <= 3 tables,
// B <= 4 or VBE with R <= 2, E <= 8, D <= 9, L <= 12; SUM / MEAN / NONE; weighted or not; int32 or
// int64 indices; FP32 / FP16 / BF16 weights and outputs; seed-default or fbgemm-cuda policy) whose
// weight and per-sample-weight values come straight from the bytes: any finite value of the
// storage type, including ±0, subnormals and the largest finite magnitudes.
// Checks (each failure aborts): the oracle is SOUND on this problem, i.e.
//  - check_forward passes on forward_reference's output;
//  - for every SummationOrder (RandomPermutation with a seed from the bytes) and, under MEAN, every
//    MeanScaling, the output of emulate_forward (a conforming implementation) passes judge_forward
//    against the problem's enclosures (which also demands values of the output type); the
//    index-order outputs also pass check_forward as stored output buffers;
//  - emulate_forward in index order with FP64 accumulation and MEAN as one division is the
//    reference itself: equal bit for bit to forward_reference.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <omp.h>

#include "fuzz_input.h"
#include "tbe/case_builder.h"
#include "tbe/forward.h"
#include "tbe/host_case.h"
#include "tbe/oracle/forward_oracle.h"
#include "tbe/oracle/policy_emulation.h"

using namespace tbe;
using namespace tbe::oracle;
using tbe_fuzz::ByteReader;
using tbe_fuzz::fail;

namespace {

// Bits of a finite value of storage type t chosen by the bytes (edge classes weighted up).
std::uint32_t value_bits(ByteReader& in, DType t) {
  const int bits = t == DType::F32 ? 32 : 16;
  const int mant = t == DType::F32 ? 23 : (t == DType::F16 ? 10 : 7);
  const std::uint32_t sign = 1u << (bits - 1);
  const std::uint32_t exp_mask = (sign - 1) & ~((1u << mant) - 1);
  const std::uint8_t cls = in.u8();
  const std::uint32_t s = (cls & 0x80) ? sign : 0;
  std::uint32_t v;
  switch (cls & 0x0f) {
    case 0: v = 0; break;                                   // ±0
    case 1: v = exp_mask - 1; break;                        // largest finite magnitude
    case 2: v = 1 + in.u8() % 3; break;                     // smallest subnormals
    case 3: v = (1u << mant) - 1 - in.u8() % 2; break;      // largest subnormals
    case 4: v = 1u << mant; break;                          // smallest normal
    case 5: case 6: case 7: {                               // raw bits, forced finite
      v = (bits == 32 ? in.u32() : in.u16()) & (sign - 1);
      if ((v & exp_mask) == exp_mask) v &= ~(1u << (bits - 2));
      break;
    }
    default: {                                              // a small integer 1..16
      std::uint32_t w = 0;  // exact in every storage type; little-endian low bytes for 16-bit
      store_from_double(t, &w, 0, static_cast<double>(1 + in.u8() % 16));
      v = w;
      break;
    }
  }
  return s | v;
}

void store_bits(std::vector<std::byte>& buf, DType t, std::int64_t i, std::uint32_t bits) {
  if (t == DType::F32) {
    std::memcpy(buf.data() + 4 * i, &bits, 4);
  } else {
    const std::uint16_t h = static_cast<std::uint16_t>(bits);
    std::memcpy(buf.data() + 2 * i, &h, 2);
  }
}

// The case the bytes describe, read in this order: dtypes, policy, pooling, tables (E, D), every
// weight, T and the map, VBE sizes or B, the leading indices, every bag, per-sample weights, the
// index type and the bounds-check mode; laid out by tbe::build_case.
ForwardCase build(ByteReader& in) {
  static constexpr DType kF[] = {DType::F32, DType::F16, DType::BF16};
  static constexpr PoolingMode kP[] = {PoolingMode::Sum, PoolingMode::Mean, PoolingMode::None};
  static constexpr BoundsCheckMode kM[] = {BoundsCheckMode::Warning, BoundsCheckMode::Ignore,
                                           BoundsCheckMode::Fatal, BoundsCheckMode::None};
  ForwardCaseSpec spec;
  const DType wdt = kF[in.u8() % 3], odt = kF[in.u8() % 3];
  const PolicyKind kind = in.flag() ? PolicyKind::FbgemmCuda : PolicyKind::SeedDefault;
  const PoolingMode pooling = kP[in.u8() % 3];
  const bool none = pooling == PoolingMode::None;

  const int nt = in.range(1, 3);
  std::vector<std::int64_t>& rows = spec.rows;
  for (int t = 0; t < nt; ++t) {
    rows.push_back(in.range(1, 8));
    spec.dims.push_back(in.range(1, 9));
  }
  if (none) spec.dims.assign(nt, spec.dims[0]);
  spec.weights = wdt;
  // Every weight's bits, table-major (each a finite value of wdt), copied into the tables as is.
  std::vector<std::vector<std::byte>> bits(nt);
  for (int t = 0; t < nt; ++t) {
    bits[t].resize(static_cast<std::size_t>(rows[t] * spec.dims[t]) * dtype_size(wdt));
    for (std::int64_t e = 0; e < rows[t] * spec.dims[t]; ++e)
      store_bits(bits[t], wdt, e, value_bits(in, wdt));
  }

  const int T = in.range(1, 3);
  for (int f = 0; f < T; ++f)
    spec.feature_table_map.push_back(static_cast<std::int32_t>(in.u8() % nt));
  std::vector<std::int64_t> bag_table;  // table of every bag, feature-major
  if (in.u8() % 4 == 0) {               // VBE
    spec.vbe_ranks = in.range(1, 2);
    for (int f = 0; f < T; ++f)
      for (int r = 0; r < spec.vbe_ranks; ++r) {
        spec.vbe_batch_sizes.push_back(in.range(0, 4));
        bag_table.insert(bag_table.end(), spec.vbe_batch_sizes.back(), spec.feature_table_map[f]);
      }
  } else {
    spec.batch_size = in.range(0, 4);
    for (int f = 0; f < T; ++f)
      bag_table.insert(bag_table.end(), spec.batch_size, spec.feature_table_map[f]);
  }
  // Lookups: optional leading indices that belong to no bag, then L in 0..12 per bag (short
  // bags weighted up), every index valid for its table.
  const int lead = in.u8() % 8 == 0 ? in.range(1, 2) : 0;
  for (int q = 0; q < lead; ++q) spec.leading.push_back(in.u8() % rows[0]);
  std::size_t N = spec.leading.size();
  for (std::int64_t tb : bag_table) {
    const std::uint8_t l = in.u8();
    const int L = l < 192 ? l % 5 : l % 13;
    std::vector<std::int64_t>& bag = spec.bags.emplace_back();
    for (int q = 0; q < L; ++q) bag.push_back(in.u8() % rows[tb]);
    N += static_cast<std::size_t>(L);
  }
  if (!none && in.flag()) {
    for (std::size_t q = 0; q < N; ++q) {
      const std::uint32_t b = value_bits(in, DType::F32);
      float w;
      std::memcpy(&w, &b, 4);
      spec.per_sample_weights.push_back(w);
    }
  }
  spec.index_dtype = in.flag() ? DType::I32 : DType::I64;
  spec.options.pooling = pooling;
  spec.options.bounds_check = kM[in.u8() % 4];
  spec.options.policy = make_policy(kind, wdt, odt);
  ForwardCase c = build_case(spec);
  for (int t = 0; t < nt; ++t)
    std::memcpy(c.weights.data() + c.table_offsets[t] * dtype_size(wdt), bits[t].data(),
                bits[t].size());
  return c;
}

std::string describe(const ForwardProblem& p) {
  const OutputLayout lay = make_output_layout(p);
  return to_string(p.options.policy) + " pooling=" + to_string(p.options.pooling) +
         " T=" + std::to_string(lay.num_features) + " bags=" + std::to_string(lay.num_bags) +
         " N=" + std::to_string(p.lookups.num_indices) + (p.lookups.weighted() ? " weighted" : "") +
         (p.lookups.is_vbe() ? " vbe" : "");
}

void run_one(ByteReader& in) {
  ForwardCase c = build(in);
  const std::uint64_t seed = in.u64();
  const ForwardProblem p = c.view();
  const Status st = validate(p);
  TBE_FUZZ_CHECK(st.ok(), "generated problem is invalid: " + st.message);
  if (std::getenv("TBE_FUZZ_VERBOSE")) std::fprintf(stderr, "%s\n", describe(p).c_str());
  const OutputLayout layout = make_output_layout(p);
  const DType odt = p.options.policy.output;
  const std::size_t n = static_cast<std::size_t>(layout.numel);
  std::vector<std::byte> ref(n * dtype_size(odt) + 1), buf(n * dtype_size(odt) + 1);

  (void)forward_reference(p, ref.data());
  const CheckReport rr = check_forward(p, ref.data());
  TBE_FUZZ_CHECK(rr.passed(), "reference output rejected: " + rr.summary() + " | " + describe(p));

  const ForwardEnclosures enc = compute_forward_enclosures(p);
  std::vector<MeanScaling> scalings = {MeanScaling::AtEnd};
  if (p.options.pooling == PoolingMode::Mean)
    scalings.assign(std::begin(kAllMeanScalings), std::end(kAllMeanScalings));
  for (SummationOrder order : kAllSummationOrders) {
    for (MeanScaling ms : scalings) {
      EmulationOptions eo;
      eo.order = order;
      eo.mean_scaling = ms;
      eo.seed = seed;
      const std::vector<double> v = emulate_forward(p, eo);
      TBE_FUZZ_CHECK(v.size() == n, "emulation size");
      const CheckReport jr = judge_forward(p, enc, v);
      TBE_FUZZ_CHECK(jr.passed(), "emulation " + to_string(eo) + " rejected by judge_forward: " +
                                      jr.summary() + " | " + describe(p));
      if (order != SummationOrder::IndexOrder) continue;
      // The stored-buffer entry point too (it recomputes the enclosures: once per scaling).
      for (std::size_t i = 0; i < n; ++i)
        store_from_double(odt, buf.data(), static_cast<std::int64_t>(i), v[i]);
      const CheckReport cr = check_forward(p, buf.data());
      TBE_FUZZ_CHECK(cr.passed(), "emulation " + to_string(eo) + " rejected by check_forward: " +
                                      cr.summary() + " | " + describe(p));
    }
  }
  // The reference is one particular conforming implementation: index order, FP64, one division.
  EmulationOptions exact;
  exact.order = SummationOrder::IndexOrder;
  exact.mean_scaling = MeanScaling::Divide;
  exact.accumulation = DType::F64;
  const std::vector<double> v = emulate_forward(p, exact);
  for (std::size_t i = 0; i < n; ++i)
    store_from_double(odt, buf.data(), static_cast<std::int64_t>(i), v[i]);
  for (std::size_t i = 0; i < n; ++i) {  // equal as numbers (±0 alike: sums may start at -0)
    const double a = load_as_double(odt, buf.data(), static_cast<std::int64_t>(i));
    const double r = load_as_double(odt, ref.data(), static_cast<std::int64_t>(i));
    TBE_FUZZ_CHECK(a == r || (std::isnan(a) && std::isnan(r)),
                   "FP64 index-order emulation " + std::to_string(a) + " != forward_reference " +
                       std::to_string(r) + " at flat " + std::to_string(i) + " | " + describe(p));
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  omp_set_num_threads(1);  // tiny problems; one thread keeps runs fast and deterministic
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return tbe_fuzz::run_bytes(data, size, run_one);
}
