// GPU tests of the IKBO cross attention (tbe::cuda::AttentionOp and the CUDA IKBO backend):
// outputs judged by the attention oracle (tbe::oracle::check_attention) for random shapes, map
// kinds, dense and jagged keys, every kernel variant (mma.sync: key blocks 64, 128; 128 with Q in
// registers and / or a 3-stage K/V ring; the sm_90a wgmma kernel with its TMA-store and register
// epilogues, the former's row blocks counted against a host model); cases C19 (exact tail tiles), C21 (tiling
// independence, bitwise stable), C22 (empty ranges); a private copy of a user's K/V vs shared
// K/V (bitwise equal); long S, extreme logits; canaries (NaN-poisoned output, sentinels past its
// end); the device map check and invalid arguments (InvalidArgument, output bitwise untouched).
// C20 (64-bit offsets, 17 GB) is test_ikbo_attention_huge.cu, tagged [large].
#include <algorithm>
#include <climits>
#include <cmath>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>
#include <rapidcheck/catch.h>

#include "ikbo_attention_harness.h"
#include "ikbo_test_support.h"
#include "tbe/cuda/ikbo_backend.h"
#include "tbe/host_case.h"
#include "tbe/ikbo_workloads.h"
#include "tbe/oracle/ikbo_oracle.h"

using namespace tbe;
using namespace tbe::test;
using tbe::ikbo::MapKind;

namespace {

/// The compiled kernel variants: the mma.sync kernel's (dispatch/tuning.h AttentionMmaSync: key
/// block, Q in registers, K/V stages) and the sm_90a wgmma kernel (AttentionWgmma; the mma.sync
/// knobs do not apply to it).
struct Variant {
  int key_block;
  bool q_in_registers;
  int kv_stages;
  cuda::AttentionKernel kernel = cuda::AttentionKernel::MmaSync;
  bool pingpong = false;  // wgmma only
  cuda::AttentionEpilogue epilogue = cuda::AttentionEpilogue::Auto;  // wgmma: TMA store
  bool pipelined = false;  // wgmma only: FA3's intra-warpgroup order (else serial)
};
/// The wgmma kernel's schedules: the default (serial order, warpgroups unordered), ping-pong in
/// the serial order (a job's first QKᵀ ordered), and FA3's pipelined order with ping-pong every
/// tile (the default before session 18); all bitwise the same output.
constexpr Variant kWgmma{128, false, 2, cuda::AttentionKernel::Wgmma};
constexpr Variant kWgmmaPingpong{128, false, 2, cuda::AttentionKernel::Wgmma, true};
constexpr Variant kWgmmaPipelined{128, false, 2, cuda::AttentionKernel::Wgmma, true,
                                  cuda::AttentionEpilogue::Auto, true};
constexpr Variant kWgmmaPipelinedNoPingpong{128, false, 2, cuda::AttentionKernel::Wgmma, false,
                                            cuda::AttentionEpilogue::Auto, true};
constexpr Variant kWgmmaRegisters{128, false, 2, cuda::AttentionKernel::Wgmma, false,
                                  cuda::AttentionEpilogue::Registers};
constexpr Variant kVariants[] = {{64, false, 2}, {128, false, 2}, {128, true, 2},
                                 {128, false, 3}, {128, true, 3}, kWgmma,
                                 kWgmmaPingpong, kWgmmaPipelined, kWgmmaPipelinedNoPingpong,
                                 kWgmmaRegisters};

cuda::AttentionTuning tuning_of(Variant kv) {
  cuda::AttentionTuning t;
  t.kernel = kv.kernel;
  t.pingpong = kv.pingpong;
  t.pipelined = kv.pipelined;
  t.epilogue = kv.epilogue;
  t.key_block = kv.key_block;
  t.q_in_registers = kv.q_in_registers;
  t.kv_stages = kv.kv_stages;
  return t;
}

cuda::AttentionTuning tuning_kb(int key_block) { return tuning_of({key_block, false, 2}); }

/// The wgmma schedule's suffix of a name or path: "", ".pingpong", ".pipelined" or both.
std::string wgmma_schedule(Variant kv) {
  return std::string(kv.pingpong ? ".pingpong" : "") + (kv.pipelined ? ".pipelined" : "");
}

/// "mma-sync.kb128.qreg.stages3", "wgmma": the variant's name in test logs.
std::string label(Variant kv) {
  if (kv.kernel == cuda::AttentionKernel::Wgmma)
    return "wgmma" + wgmma_schedule(kv) +
           (kv.epilogue == cuda::AttentionEpilogue::Registers ? ".registers" : "");
  return "mma-sync.kb" + std::to_string(kv.key_block) + (kv.q_in_registers ? ".qreg" : "") +
         (kv.kv_stages == 3 ? ".stages3" : "");
}

/// The kernel path AttentionOp::paths() reports for the variant at head dimension Dh.
std::string kernel_path(Variant kv, std::int64_t Dh) {
  const std::string dh = ".dh" + std::to_string(Dh);
  if (kv.kernel == cuda::AttentionKernel::Wgmma)
    return "attention.wgmma" + dh + ".kb128.stages" + (Dh == 64 ? "3" : "2") + wgmma_schedule(kv);
  return "attention.mma-sync" + dh + label(kv).substr(std::string("mma-sync").size());
}

/// The kernel AttentionKernel::Auto picks on this device (compute capability 9.0: wgmma) for
/// problems whose keys fit the TMA coordinates.
cuda::AttentionKernel auto_kernel() {
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  return prop.major == 9 && prop.minor == 0 ? cuda::AttentionKernel::Wgmma
                                            : cuda::AttentionKernel::MmaSync;
}

/// The GPU outcome is Ok, canaries hold and the oracle accepts every element.
void require_in_enclosure(const ikbo::AttentionProblem& p, const AttentionOutcome& gpu) {
  INFO(to_string(gpu));
  REQUIRE(gpu.kind == AttentionOutcome::Kind::Ok);
  REQUIRE(gpu.sentinels_intact);
  const oracle::CheckReport r = oracle::check_attention(p, gpu.output.data());
  INFO(r.summary());
  REQUIRE(r.passed());
}

ikbo::AttentionShape shape(std::int64_t B, std::int64_t U, std::int64_t n_seed, std::int64_t H,
                           std::int64_t Dh, std::int64_t S, bool jagged = false) {
  ikbo::AttentionShape sh = ikbo_test::dense_shape(B, U, n_seed, H, Dh, S);
  sh.jagged = jagged;
  return sh;
}

ikbo::IkboPolicy policy(DType st) { return {st, DType::F32, ikbo::LceRounding::RoundOnce}; }

/// GPU-sized specs: n_seed and B cross the 128-row blocks (partial blocks, candidates split over
/// two blocks), S crosses the key tiles (1, 63, 64, 65, 127, 128, 129, ...), Dh 64 or 128, dense
/// or jagged (empty users), every map kind, scale default or given, B = 0 sometimes.
rc::Gen<ikbo_test::AttentionSpec> gen_gpu_attention_spec() {
  return rc::gen::exec([] {
    ikbo_test::AttentionSpec s;
    s.map = *rc::gen::elementOf(std::vector<MapKind>(std::begin(ikbo::kAllMapKinds),
                                                     std::end(ikbo::kAllMapKinds)));
    s.shape.B = *rc::gen::weightedOneOf<std::int64_t>(
        {{1, rc::gen::just<std::int64_t>(0)}, {8, rc::gen::inRange<std::int64_t>(1, 24)}});
    s.shape.U = *rc::gen::inRange<std::int64_t>(s.map == MapKind::UsersWithoutCandidates ? 2 : 1, 7);
    s.shape.n_seed = *rc::gen::elementOf(std::vector<std::int64_t>{1, 3, 16, 33, 64, 127, 128, 129});
    s.shape.H = *rc::gen::inRange<std::int64_t>(1, 4);
    s.shape.Dh = *rc::gen::elementOf(std::vector<std::int64_t>{64, 128});
    s.shape.S = *rc::gen::weightedOneOf<std::int64_t>(
        {{2, rc::gen::inRange<std::int64_t>(1, 300)},
         {2, rc::gen::elementOf(std::vector<std::int64_t>{1, 2, 63, 64, 65, 127, 128, 129, 257})}});
    s.shape.jagged = *rc::gen::weightedElement<bool>({{2, false}, {1, true}});
    s.shape.scale = *rc::gen::weightedElement<double>({{4, 0.0}, {1, 0.5}, {1, 2.0}});
    s.policy = policy(*rc::gen::elementOf(std::vector<DType>{DType::F16, DType::BF16}));
    s.seed = *rc::gen::arbitrary<std::uint64_t>();
    // work B·n_seed·S·Dh·H bounded (the oracle runs on the host)
    while (s.shape.B > 1 && s.shape.B * s.shape.n_seed * s.shape.S * s.shape.H * s.shape.Dh > 40'000'000)
      s.shape.B /= 2;
    return s;
  });
}

/// Sets every element of a [rows, H, Dh] tensor to f(row, h, d).
template <class F>
void fill(std::vector<std::byte>& t, DType st, std::int64_t rows, std::int64_t H, std::int64_t Dh,
          F&& f) {
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t h = 0; h < H; ++h)
      for (std::int64_t d = 0; d < Dh; ++d)
        store_from_double(st, t.data(), (r * H + h) * Dh + d, f(r, h, d));
}

}  // namespace

TEST_CASE("ikbo attention: every dtype, Dh, variant, map kind, dense and jagged in the enclosure",
          "[gpu][ikbo][attention]") {
  int i = 0;
  for (DType st : {DType::F16, DType::BF16})
    for (std::int64_t Dh : {64, 128})
      for (Variant kv : kVariants)
        for (MapKind map : ikbo::kAllMapKinds)
          for (bool jagged : {false, true}) {
            // 21 candidates of 9 query rows over 5 users: blocks of 128 rows split candidates,
            // S = 150 crosses both key tiles; jagged: user 0 empty, lengths in [0, 300]
            const ikbo::AttentionCase c = ikbo::make_attention_case(
                shape(21, 5, 9, 2, Dh, 150, jagged), policy(st), map, 500 + i++);
            const ikbo::AttentionProblem p = c.view();
            INFO(to_string(st) << " Dh=" << Dh << " " << label(kv) << " map=" << to_string(map)
                               << " jagged=" << jagged);
            const AttentionOutcome gpu = run_attention_gpu(p, tuning_of(kv));
            require_in_enclosure(p, gpu);
            REQUIRE(gpu.paths.front() == kernel_path(kv, Dh));
          }
}

TEST_CASE("ikbo attention: more jobs than the persistent wgmma grid, several per CTA",
          "[gpu][ikbo][attention]") {
  // 128 users of 16 candidates × 16 query rows: 2 work items per user, 256 items × 2 heads = 512
  // jobs; the wgmma kernel runs one CTA per SM, so each CTA takes ~4 jobs in a row: the K/V ring,
  // its phases, the tail barrier and the ping-pong turns carry over from job to job, Q is loaded
  // during the previous job; jagged: user 0 and others empty (zero jobs between full ones),
  // lengths in [0, 400] (partial tail tiles in most jobs)
  int sms = 0;
  REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
  REQUIRE(512 >= 3 * sms);  // several jobs per CTA (H100 / H200: 132 SMs)
  int i = 0;
  for (DType st : {DType::BF16, DType::F16})
    for (std::int64_t Dh : {64, 128})
      for (bool jagged : {false, true})
        for (MapKind map : {MapKind::Sorted, MapKind::Unsorted}) {
          const ikbo::AttentionCase c = ikbo::make_attention_case(
              shape(2048, 128, 16, 2, Dh, 200, jagged), policy(st), map, 900 + i++);
          const ikbo::AttentionProblem p = c.view();
          // every wgmma schedule bitwise equal to the default's output over several jobs per CTA
          // (the turn hand-off between jobs, the ring running on from job to job)
          std::vector<std::byte> wgmma_default;
          for (Variant kv : {kWgmma, kWgmmaPingpong, kWgmmaPipelined, kWgmmaPipelinedNoPingpong,
                             Variant{128, true, 3}}) {
            if (kv.kernel == cuda::AttentionKernel::Wgmma &&
                auto_kernel() != cuda::AttentionKernel::Wgmma)
              continue;  // no sm_90a device: the mma.sync row still runs
            INFO(to_string(st) << " Dh=" << Dh << " " << label(kv) << " map=" << to_string(map)
                               << " jagged=" << jagged);
            const AttentionOutcome gpu = run_attention_gpu(p, tuning_of(kv));
            require_in_enclosure(p, gpu);
            REQUIRE(gpu.paths.front() == kernel_path(kv, Dh));
            REQUIRE(run_attention_gpu(p, tuning_of(kv)).output == gpu.output);
            if (kv.kernel == cuda::AttentionKernel::Wgmma) {
              if (wgmma_default.empty()) wgmma_default = gpu.output;  // kWgmma comes first
              else REQUIRE(gpu.output == wgmma_default);
            }
          }
        }
}

namespace {
cuda::AttentionTuning with_grouping(cuda::AttentionGroupingBuild g) {
  cuda::AttentionTuning t;
  t.grouping = g;
  return t;
}
bool has_path(const AttentionOutcome& o, const std::string& path) {
  return std::find(o.paths.begin(), o.paths.end(), path) != o.paths.end();
}
}  // namespace

TEST_CASE("ikbo attention: the one-CTA and the device-wide grouping, bitwise the same output",
          "[gpu][ikbo][attention]") {
  // B up to the one-CTA limit (4096), every map kind, dense and jagged; n_seed 3 splits
  // candidates over the 128-row blocks; U = 20000 > B needs a 15-bit sort (several passes)
  const auto one = with_grouping(cuda::AttentionGroupingBuild::OneCta);
  const auto wide = with_grouping(cuda::AttentionGroupingBuild::DeviceWide);
  struct Shape {
    std::int64_t B, U, n_seed, S;
  };
  int i = 0;
  for (Shape g : {Shape{1, 1, 129, 40}, {2, 2, 64, 40}, {5, 3, 129, 40}, {127, 9, 3, 40},
                  {129, 40, 3, 40}, {1000, 31, 3, 24}, {3000, 20000, 3, 2}, {4095, 300, 3, 8},
                  {4096, 64, 3, 8}})
    for (MapKind map : ikbo::kAllMapKinds)
      for (bool jagged : {false, true}) {
        if (map == MapKind::UsersWithoutCandidates && g.U < 2) continue;
        const ikbo::AttentionCase c = ikbo::make_attention_case(
            shape(g.B, g.U, g.n_seed, 1, 64, g.S, jagged), policy(DType::BF16), map, 1300 + i++);
        const ikbo::AttentionProblem p = c.view();
        INFO("B=" << p.B << " U=" << p.U << " n_seed=" << p.n_seed << " map=" << to_string(map)
                  << " jagged=" << jagged);
        const AttentionOutcome a = run_attention_gpu(p, one);
        const AttentionOutcome b = run_attention_gpu(p, wide);
        INFO(to_string(a) << " / " << to_string(b));
        REQUIRE(has_path(a, "attention.grouping.one-cta"));
        REQUIRE(has_path(b, "attention.grouping.cub-sort-rle"));
        require_in_enclosure(p, a);
        REQUIRE(b.kind == AttentionOutcome::Kind::Ok);
        REQUIRE(a.output == b.output);
      }
  // the one-CTA build skips its sort when the map is already in order: a sorted map with one pair
  // out of order (the two sides of a user boundary swapped) inside one thread's 8 positions,
  // across two threads', across two warps' (255, 256) or near the end must still be sorted
  auto boundary = [](const std::vector<std::int32_t>& map, auto&& kind) {
    for (std::size_t p = 0; p + 1 < map.size(); ++p)
      if (map[p] != map[p + 1] && kind(p)) return static_cast<std::int64_t>(p);
    return std::int64_t{-1};
  };
  const ikbo::AttentionCase base = ikbo::make_attention_case(shape(1000, 43, 3, 1, 64, 8),
                                                             policy(DType::BF16), MapKind::Sorted, 77);
  const std::int64_t pairs[] = {
      boundary(base.cand_to_user, [](std::size_t p) { return p % 8 != 7; }),
      boundary(base.cand_to_user, [](std::size_t p) { return p % 8 == 7 && p % 256 != 255; }),
      boundary(base.cand_to_user, [](std::size_t p) { return p % 256 == 255; }),
      boundary(base.cand_to_user, [](std::size_t p) { return p > 900; })};
  for (std::int64_t at : pairs) {
    REQUIRE(at >= 0);
    ikbo::AttentionCase c = base;
    std::swap(c.cand_to_user[at], c.cand_to_user[at + 1]);
    REQUIRE(c.cand_to_user[at] > c.cand_to_user[at + 1]);
    INFO("swapped " << at << ", " << at + 1);
    const AttentionOutcome a = run_attention_gpu(c.view(), one);
    const AttentionOutcome b = run_attention_gpu(c.view(), wide);
    require_in_enclosure(c.view(), a);
    REQUIRE(a.output == b.output);
  }
  // Auto: one CTA up to 4096 candidates, device-wide above
  for (std::int64_t B : {4096, 4097}) {
    const ikbo::AttentionCase c = ikbo::make_attention_case(shape(B, 64, 1, 1, 64, 4),
                                                            policy(DType::F16), MapKind::Sorted, 7);
    const AttentionOutcome o = run_attention_gpu(c.view());
    INFO(to_string(o));
    require_in_enclosure(c.view(), o);
    REQUIRE(has_path(o, B <= 4096 ? "attention.grouping.one-cta" : "attention.grouping.cub-sort-rle"));
  }
}

namespace {
/// Host model of the wgmma kernel's epilogue: for every job (work item, head) with keys, its row
/// blocks of 64 (one per consumer warpgroup with rows): {all, tma}, tma = the full blocks whose
/// 64 rows are 64 consecutive rows of out (AttentionEpilogue::TmaStore's condition).
cuda::AttentionOp::EpilogueBlocks expected_epilogue_blocks(const ikbo::AttentionProblem& p) {
  std::vector<std::int32_t> order(static_cast<std::size_t>(p.B));
  for (std::int32_t b = 0; b < p.B; ++b) order[b] = b;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::int32_t x, std::int32_t y) { return p.cand_to_user[x] < p.cand_to_user[y]; });
  cuda::AttentionOp::EpilogueBlocks e;  // .tma_store, .registers = all blocks until the end
  for (std::size_t run0 = 0; run0 < order.size();) {
    const std::int32_t u = p.cand_to_user[order[run0]];
    std::size_t run1 = run0;
    while (run1 < order.size() && p.cand_to_user[order[run1]] == u) ++run1;
    const std::int64_t keys = p.jagged() ? p.k_offsets[u + 1] - p.k_offsets[u] : p.S;
    const std::int64_t rows = static_cast<std::int64_t>(run1 - run0) * p.n_seed;
    auto out_row = [&](std::int64_t pos) {
      return std::int64_t{order[run0 + pos / p.n_seed]} * p.n_seed + pos % p.n_seed;
    };
    for (std::int64_t r0 = 0; keys > 0 && r0 < rows; r0 += 64) {
      e.registers += static_cast<std::uint64_t>(p.H);
      bool contiguous = r0 + 64 <= rows;
      for (std::int64_t i = 0; contiguous && i < 64; ++i)
        contiguous = out_row(r0 + i) == out_row(r0) + i;
      if (contiguous) e.tma_store += static_cast<std::uint64_t>(p.H);
    }
    run0 = run1;
  }
  e.registers -= e.tma_store;
  return e;
}
}  // namespace

TEST_CASE("ikbo attention: the wgmma epilogues (TMA store, registers) give bitwise the same "
          "output, counted per row block",
          "[gpu][ikbo][attention]") {
  // n_seed 64 / 32: every full block is one / two whole candidates (TMA, unless an n_seed-32
  // block's two candidates are not consecutive b: unsorted maps); n_seed 9 / 129 / 3: blocks
  // split candidates (consecutive b: TMA, else registers) and runs end in 1..63-row blocks
  // (registers); jagged: empty users (no job) and short ones
  struct Shape {
    std::int64_t B, U, n_seed, S;
  };
  int i = 0;
  std::uint64_t tma_total = 0, reg_total = 0;
  for (Shape g : {Shape{128, 2, 64, 130}, {21, 5, 9, 70}, {7, 3, 129, 40}, {40, 4, 32, 200},
                  {33, 1, 64, 20}, {300, 40, 3, 10}})
    for (MapKind map : ikbo::kAllMapKinds)
      for (bool jagged : {false, true})
        for (std::int64_t Dh : {64, 128}) {
          if (map == MapKind::UsersWithoutCandidates && g.U < 2) continue;
          const ikbo::AttentionCase c = ikbo::make_attention_case(
              shape(g.B, g.U, g.n_seed, 2, Dh, g.S, jagged), policy(DType::BF16), map, 1700 + i++);
          const ikbo::AttentionProblem p = c.view();
          INFO("B=" << p.B << " U=" << p.U << " n_seed=" << p.n_seed << " Dh=" << Dh
                    << " map=" << to_string(map) << " jagged=" << jagged);
          const AttentionOutcome tma = run_attention_gpu(p, tuning_of(kWgmma));
          const AttentionOutcome reg = run_attention_gpu(p, tuning_of(kWgmmaRegisters));
          INFO(to_string(tma) << " / " << to_string(reg));
          require_in_enclosure(p, tma);
          REQUIRE(reg.kind == AttentionOutcome::Kind::Ok);
          REQUIRE(tma.output == reg.output);
          const cuda::AttentionOp::EpilogueBlocks want = expected_epilogue_blocks(p);
          INFO("expected tma " << want.tma_store << " registers " << want.registers << ", got "
                               << tma.epilogue.tma_store << " / " << tma.epilogue.registers);
          REQUIRE(tma.epilogue.tma_store == want.tma_store);
          REQUIRE(tma.epilogue.registers == want.registers);
          REQUIRE(reg.epilogue.tma_store == 0);
          REQUIRE(reg.epilogue.registers == want.tma_store + want.registers);
          REQUIRE(has_path(tma, "attention.epilogue.tma-store") == (want.tma_store > 0));
          REQUIRE(has_path(tma, "attention.epilogue.registers") == (want.registers > 0));
          REQUIRE(!has_path(reg, "attention.epilogue.tma-store"));
          tma_total += want.tma_store;
          reg_total += want.registers;
        }
  REQUIRE(tma_total > 0);  // both epilogues were exercised
  REQUIRE(reg_total > 0);
  // the published shape's layout (n_seed 64, sorted map, even candidate counts): TMA only
  const ikbo::AttentionCase c = ikbo::make_attention_case(shape(256, 4, 64, 2, 128, 300),
                                                          policy(DType::F16), MapKind::Sorted, 3);
  const AttentionOutcome o = run_attention_gpu(c.view());
  INFO(to_string(o));
  require_in_enclosure(c.view(), o);
  REQUIRE(o.epilogue.tma_store == 256 * 64 / 64 * 2);
  REQUIRE(o.epilogue.registers == 0);
  // mma.sync has one epilogue: TmaStore with it is an InvalidArgument before any launch
  cuda::AttentionTuning t = tuning_of({128, true, 3});
  t.epilogue = cuda::AttentionEpilogue::TmaStore;
  const AttentionOutcome bad = run_attention_gpu(c.view(), t);
  INFO(to_string(bad));
  REQUIRE(bad.kind == AttentionOutcome::Kind::InvalidArgument);
  REQUIRE(bad.argument == "tuning.epilogue");
  REQUIRE(bad.poison_intact);
}

TEST_CASE("ikbo attention: both groupings report the first bad map position, output untouched",
          "[gpu][ikbo][attention]") {
  // values outside [0, U): U itself, -1, past the sort's key bits (2^6 with U = 40), INT_MAX;
  // two bad positions: the first one is reported
  for (auto build : {cuda::AttentionGroupingBuild::OneCta, cuda::AttentionGroupingBuild::DeviceWide})
    for (std::int32_t bad : {40, -1, 64, INT_MAX})
      for (std::int64_t at : {0, 517, 999}) {
        ikbo::AttentionCase c = ikbo::make_attention_case(shape(1000, 40, 3, 1, 64, 8),
                                                          policy(DType::BF16), MapKind::Unsorted, 5);
        c.cand_to_user[at] = bad;
        if (at + 100 < 1000) c.cand_to_user[at + 100] = -7;
        const AttentionOutcome o = run_attention_gpu(c.view(), with_grouping(build));
        INFO(to_string(build) << " bad=" << bad << " at " << at << ": " << to_string(o));
        REQUIRE(o.kind == AttentionOutcome::Kind::InvalidArgument);
        REQUIRE(o.argument == "cand_to_user[" + std::to_string(at) + "]");
        REQUIRE(o.poison_intact);
        REQUIRE(o.sentinels_intact);
      }
}

TEST_CASE("ikbo attention: random shapes, maps and variants in the enclosure, stable run to run",
          "[gpu][ikbo][attention]") {
  rc::prop("GPU output in the enclosure; a second run is bitwise equal", [] {
    const ikbo_test::AttentionSpec s = *gen_gpu_attention_spec();
    const int v = *rc::gen::inRange(0, static_cast<int>(std::size(kVariants)));
    const Variant kv = kVariants[v];
    RC_LOG() << s << " " << label(kv) << "\n";
    const ikbo::AttentionCase c = ikbo_test::build(s);
    const ikbo::AttentionProblem p = c.view();
    const AttentionOutcome gpu = run_attention_gpu(p, tuning_of(kv));
    RC_LOG() << to_string(gpu) << "\n";
    RC_ASSERT(gpu.kind == AttentionOutcome::Kind::Ok);
    RC_ASSERT(gpu.sentinels_intact);
    const oracle::CheckReport r = oracle::check_attention(p, gpu.output.data());
    RC_LOG() << r.summary() << "\n";
    RC_ASSERT(r.passed());
    RC_ASSERT(run_attention_gpu(p, tuning_of(kv)).output == gpu.output);
  });
}

TEST_CASE("ikbo attention C19: exact tail tiles and S = 1", "[gpu][ikbo][attention]") {
  // Q = 0: every logit 0, P = 1 exactly, l = S; V[j][d] = j (exact) -> out = (S - 1) / 2 exactly
  for (DType st : {DType::BF16, DType::F16})
    for (Variant kv : kVariants)
      for (std::int64_t S : {1, 2, 31, 32, 33, 63, 64, 65, 97, 127, 128, 129}) {
        ikbo::AttentionCase c = ikbo::make_attention_case(shape(4, 1, 16, 8, 128, S), policy(st),
                                                          MapKind::OneUser, 19 + S);
        fill(c.q, st, 4 * 16, 8, 128, [](auto, auto, auto) { return 0.0; });
        fill(c.v, st, S, 8, 128, [](std::int64_t j, auto, auto) { return static_cast<double>(j); });
        const ikbo::AttentionProblem p = c.view();
        INFO(to_string(st) << " " << label(kv) << " S=" << S);
        const AttentionOutcome gpu = run_attention_gpu(p, tuning_of(kv));
        require_in_enclosure(p, gpu);
        const std::int64_t n = ikbo::attention_output_numel(p);
        for (std::int64_t e = 0; e < n; ++e) {
          INFO("element " << e);
          REQUIRE(load_as_double(st, gpu.output.data(), e) == static_cast<double>(S - 1) / 2.0);
        }
      }
}

TEST_CASE("ikbo attention C19: candidates sharing K/V == each with a private copy, bitwise",
          "[gpu][ikbo][attention]") {
  for (DType st : {DType::BF16, DType::F16})
    for (bool jagged : {false, true})
      for (MapKind map : {MapKind::Sorted, MapKind::Unsorted, MapKind::UsersWithoutCandidates}) {
        const ikbo::AttentionCase shared = ikbo::make_attention_case(
            shape(13, 4, 24, 2, 128, 97, jagged), policy(st), map, 77);
        const ikbo::AttentionProblem p = shared.view();
        // private: user b holds a copy of candidate b's user's keys, identity map (U = B)
        ikbo::AttentionCase priv = shared;
        priv.shape.U = p.B;
        priv.cand_to_user.resize(static_cast<std::size_t>(p.B));
        priv.k.clear();
        priv.v.clear();
        priv.k_offsets.assign(1, 0);
        const std::size_t row_bytes = static_cast<std::size_t>(p.H * p.Dh) * dtype_size(st);
        for (std::int64_t b = 0; b < p.B; ++b) {
          priv.cand_to_user[b] = static_cast<std::int32_t>(b);
          const auto [k0, k1] = ikbo::attention_key_range(p, p.cand_to_user[b]);
          const auto* kb = static_cast<const std::byte*>(p.k);
          const auto* vb = static_cast<const std::byte*>(p.v);
          priv.k.insert(priv.k.end(), kb + k0 * row_bytes, kb + k1 * row_bytes);
          priv.v.insert(priv.v.end(), vb + k0 * row_bytes, vb + k1 * row_bytes);
          priv.k_offsets.push_back(priv.k_offsets.back() + (k1 - k0));
        }
        if (!jagged) priv.k_offsets.clear();  // dense: every user has S keys
        for (Variant kv : {Variant{128, true, 3}, kWgmma}) {
          INFO(to_string(st) << " jagged=" << jagged << " map=" << to_string(map) << " "
                             << label(kv));
          const AttentionOutcome a = run_attention_gpu(p, tuning_of(kv));
          const AttentionOutcome b = run_attention_gpu(priv.view(), tuning_of(kv));
          require_in_enclosure(p, a);
          REQUIRE(b.kind == AttentionOutcome::Kind::Ok);
          REQUIRE(a.output == b.output);
        }
      }
}

TEST_CASE("ikbo attention C21: every variant in the enclosure, each bitwise stable",
          "[gpu][ikbo][attention]") {
  const ikbo::AttentionCase c = ikbo::make_attention_case(shape(16, 1, 16, 2, 128, 4096),
                                                          policy(DType::BF16), MapKind::OneUser, 21);
  const ikbo::AttentionProblem p = c.view();
  for (Variant kv : kVariants) {
    INFO(label(kv));
    const AttentionOutcome first = run_attention_gpu(p, tuning_of(kv));
    require_in_enclosure(p, first);
    for (int rep = 0; rep < 3; ++rep) REQUIRE(run_attention_gpu(p, tuning_of(kv)).output == first.output);
  }
  // Q in registers and the 3-stage ring feed the same MMA operands in the same order as the
  // key block 128 kernel with Q read from shared memory and 2 stages: bitwise equal outputs
  // (the wgmma kernel sums in another order: the enclosure only, checked above; its schedules,
  // ping-pong or not, serial or pipelined, are bitwise the same)
  for (DType st : {DType::BF16, DType::F16})
    for (std::int64_t Dh : {64, 128}) {
      const ikbo::AttentionCase d = ikbo::make_attention_case(shape(21, 5, 9, 2, Dh, 300, true),
                                                              policy(st), MapKind::Unsorted, 210);
      const AttentionOutcome base = run_attention_gpu(d.view(), tuning_of({128, false, 2}));
      REQUIRE(base.kind == AttentionOutcome::Kind::Ok);
      for (Variant kv : kVariants)
        if (kv.key_block == 128 && kv.kernel == cuda::AttentionKernel::MmaSync) {
          INFO(to_string(st) << " Dh=" << Dh << " " << label(kv));
          REQUIRE(run_attention_gpu(d.view(), tuning_of(kv)).output == base.output);
        }
      const AttentionOutcome w = run_attention_gpu(d.view(), tuning_of(kWgmma));
      REQUIRE(w.kind == AttentionOutcome::Kind::Ok);
      for (Variant kv : {kWgmmaPingpong, kWgmmaPipelined, kWgmmaPipelinedNoPingpong}) {
        INFO(to_string(st) << " Dh=" << Dh << " " << label(kv) << " vs the default wgmma schedule");
        REQUIRE(run_attention_gpu(d.view(), tuning_of(kv)).output == w.output);
      }
    }
}

TEST_CASE("ikbo attention C22: empty key ranges give exact zeros", "[gpu][ikbo][attention]") {
  for (Variant kv : kVariants) {  // no keys at all (k, v hold no row; the wgmma kernel's TMA maps)
    ikbo::AttentionShape sh = shape(5, 3, 4, 2, 64, 0, true);
    sh.lengths = {0, 0, 0};
    const ikbo::AttentionCase c =
        ikbo::make_attention_case(sh, policy(DType::F16), MapKind::Unsorted, 220);
    REQUIRE(c.k_offsets == std::vector<std::int64_t>{0, 0, 0, 0});
    const AttentionOutcome gpu = run_attention_gpu(c.view(), tuning_of(kv));
    INFO(label(kv));
    require_in_enclosure(c.view(), gpu);
    for (std::int64_t e = 0; e < ikbo::attention_output_numel(c.view()); ++e) {
      const double x = load_as_double(DType::F16, gpu.output.data(), e);
      REQUIRE(x == 0.0);
      REQUIRE(!std::signbit(x));
    }
  }
  for (Variant kv : kVariants) {
    ikbo::AttentionShape sh = shape(6, 4, 4, 2, 128, 0, true);
    sh.lengths = {0, 5, 0, 4};  // k_offsets [0, 0, 5, 5, 9]
    ikbo::AttentionCase c = ikbo::make_attention_case(sh, policy(DType::BF16), MapKind::Sorted, 22);
    c.cand_to_user = {0, 1, 2, 3, 0, 2};
    REQUIRE(c.k_offsets == std::vector<std::int64_t>{0, 0, 5, 5, 9});
    fill(c.q, DType::BF16, 6 * 4, 2, 128, [](auto, auto, auto) { return 0.0; });
    fill(c.v, DType::BF16, 9, 2, 128, [](std::int64_t j, auto, auto) { return static_cast<double>(j); });
    const ikbo::AttentionProblem p = c.view();
    const AttentionOutcome gpu = run_attention_gpu(p, tuning_of(kv));
    require_in_enclosure(p, gpu);
    const double want[6] = {0.0, 2.0, 0.0, 6.5, 0.0, 0.0};
    const std::int64_t per = 4 * 2 * 128;
    for (std::int64_t e = 0; e < 6 * per; ++e) {
      INFO(label(kv) << " element " << e);
      const double x = load_as_double(DType::BF16, gpu.output.data(), e);
      REQUIRE(x == want[e / per]);
      REQUIRE(!std::signbit(x));
    }
  }
}

TEST_CASE("ikbo attention: long S and extreme logits in the enclosure", "[gpu][ikbo][attention]") {
  SECTION("S = 16384") {
    const ikbo::AttentionCase c = ikbo::make_attention_case(shape(4, 2, 16, 1, 128, 16384),
                                                            policy(DType::BF16), MapKind::Sorted, 5);
    require_in_enclosure(c.view(), run_attention_gpu(c.view()));
  }
  SECTION("logits up to ~1e4: exp without the running maximum would overflow") {
    for (DType st : {DType::BF16, DType::F16})
      for (Variant kv : kVariants) {
        ikbo::AttentionCase c = ikbo::make_attention_case(shape(5, 2, 8, 2, 64, 300), policy(st),
                                                          MapKind::Unsorted, 6);
        // q, k scaled by 12: |logit| <= 144·64/8 ≈ 1150; increasing keys: key j's logit grows
        // with j (the maximum rises in every tile)
        const ikbo::AttentionProblem p0 = c.view();
        fill(c.q, st, 5 * 8, 2, 64, [&](std::int64_t r, std::int64_t h, std::int64_t d) {
          return 12.0 * load_as_double(st, p0.q, (r * 2 + h) * 64 + d);
        });
        fill(c.k, st, 600, 2, 64, [&](std::int64_t j, std::int64_t h, std::int64_t d) {
          return (d % 2 == 0 ? 12.0 : 0.04 * static_cast<double>(j % 300)) *
                 load_as_double(st, p0.k, (j * 2 + h) * 64 + d);
        });
        const ikbo::AttentionProblem p = c.view();
        INFO(to_string(st) << " " << label(kv));
        const AttentionOutcome gpu = run_attention_gpu(p, tuning_of(kv));
        require_in_enclosure(p, gpu);
        for (std::int64_t e = 0; e < ikbo::attention_output_numel(p); ++e)
          REQUIRE(std::isfinite(load_as_double(st, gpu.output.data(), e)));
      }
  }
}

TEST_CASE("ikbo attention: invalid arguments are rejected before any launch",
          "[gpu][ikbo][attention]") {
  ikbo::AttentionCase c = ikbo::make_attention_case(shape(6, 3, 4, 2, 128, 40), policy(DType::BF16),
                                                    MapKind::Sorted, 3);
  auto expect = [](const ikbo::AttentionProblem& p, const std::string& argument,
                   const cuda::AttentionTuning& t = {}, bool misalign = false) {
    const AttentionOutcome o = run_attention_gpu(p, t, misalign);
    INFO(to_string(o));
    REQUIRE(o.kind == AttentionOutcome::Kind::InvalidArgument);
    REQUIRE(o.argument == argument);
    REQUIRE(o.poison_intact);
    REQUIRE(o.sentinels_intact);
  };
  SECTION("Dh not compiled") {
    ikbo::AttentionCase d = ikbo::make_attention_case(shape(6, 3, 4, 2, 96, 40),
                                                      policy(DType::BF16), MapKind::Sorted, 3);
    expect(d.view(), "attention.Dh");
  }
  SECTION("fp32 storage") {
    ikbo::AttentionCase d = ikbo::make_attention_case(shape(6, 3, 4, 2, 128, 40),
                                                      {DType::F32, DType::F32, {}}, MapKind::Sorted, 3);
    expect(d.view(), "attention.policy.storage");
  }
  SECTION("key block") { expect(c.view(), "tuning.key_block", tuning_kb(32)); }
  SECTION("Q in registers with key block 64") {
    expect(c.view(), "tuning.q_in_registers", tuning_of({64, true, 2}));
  }
  SECTION("K/V stages") {
    expect(c.view(), "tuning.kv_stages", tuning_of({128, false, 4}));
    expect(c.view(), "tuning.kv_stages", tuning_of({64, false, 3}));
  }
  SECTION("misaligned q") {
    expect(c.view(), "q", {}, true);
    expect(c.view(), "q", tuning_of(kWgmma), true);
  }
  SECTION("wgmma with more keys than its 32-bit TMA coordinates reach; Auto falls back") {
    ikbo::AttentionProblem p = c.view();
    p.S = (std::int64_t{INT_MAX} - 127) / p.U + 1;  // U·S > INT_MAX - 128 (no device memory needed)
    const Status st = cuda::AttentionOp::can_implement(p, tuning_of(kWgmma));
    INFO(st.message);
    REQUIRE(st.argument == "tuning.kernel");
    REQUIRE(st.message.find(std::to_string(p.U * p.S)) != std::string::npos);
    REQUIRE(cuda::AttentionOp::can_implement(p).ok());
    REQUIRE(cuda::AttentionOp(p).kernel() == cuda::AttentionKernel::MmaSync);
  }
  SECTION("more work items than the grid holds") {
    ikbo::AttentionProblem p = c.view();  // shapes only: can_implement reads no buffer
    p.n_seed = 1;
    p.B = INT_MAX;  // ceil(B / 128) + min(U, B) work items > INT_MAX
    p.U = INT_MAX;
    p.S = 1;
    const Status st = cuda::AttentionOp::can_implement(p);
    INFO(st.message);
    REQUIRE(st.argument == "attention.B");
    const std::int64_t items = (p.B + 127) / 128 + p.U;
    REQUIRE(st.message.find(std::to_string(items) + " work items") != std::string::npos);
    p.U = INT_MAX - (p.B + 127) / 128;  // exactly INT_MAX work items: the limit itself is fine
    REQUIRE(cuda::AttentionOp::can_implement(p).ok());
  }
  SECTION("one-CTA grouping past its 4096 candidates") {
    ikbo::AttentionProblem p = c.view();  // shapes only: can_implement reads no buffer
    p.B = 4097;
    p.U = 1;
    cuda::AttentionTuning t;
    t.grouping = cuda::AttentionGroupingBuild::OneCta;
    const Status st = cuda::AttentionOp::can_implement(p, t);
    INFO(st.message);
    REQUIRE(st.argument == "tuning.grouping");
    REQUIRE(st.message.find("4096") != std::string::npos);
    REQUIRE(st.message.find("B = 4097") != std::string::npos);
    REQUIRE(cuda::AttentionOp::can_implement(p).ok());  // Auto: device-wide
  }
  SECTION("a shape validate() rejects: the reference's argument") {
    ikbo::AttentionProblem p = c.view();
    p.n_seed = 0;
    expect(p, "attention.n_seed");
  }
  SECTION("a map value outside [0, U): the device check, the reference's message") {
    for (std::int32_t bad : {3, -1}) {
      c.cand_to_user[4] = bad;
      const AttentionOutcome o = run_attention_gpu(c.view());
      INFO(to_string(o));
      REQUIRE(o.kind == AttentionOutcome::Kind::InvalidArgument);
      REQUIRE(o.argument == "cand_to_user[4]");
      REQUIRE(o.poison_intact);
    }
  }
}

TEST_CASE("ikbo attention: resolve_attention_kernel is what AttentionOp runs",
          "[gpu][ikbo][attention]") {
  using cuda::AttentionKernel;
  const AttentionKernel dev = auto_kernel();  // from the device properties, independently
  REQUIRE(cuda::resolve_attention_kernel(AttentionKernel::Auto) == dev);
  REQUIRE(cuda::resolve_attention_kernel(AttentionKernel::Auto, std::int64_t{INT_MAX} - 128) == dev);
  REQUIRE(cuda::resolve_attention_kernel(AttentionKernel::Auto, std::int64_t{INT_MAX} - 127) ==
          AttentionKernel::MmaSync);
  REQUIRE(cuda::resolve_attention_kernel(AttentionKernel::MmaSync) == AttentionKernel::MmaSync);
  if (dev == AttentionKernel::Wgmma)
    REQUIRE(cuda::resolve_attention_kernel(AttentionKernel::Wgmma) == AttentionKernel::Wgmma);
  else
    REQUIRE_THROWS_AS(cuda::resolve_attention_kernel(AttentionKernel::Wgmma), InvalidArgument);
  ikbo::AttentionCase c = ikbo::make_attention_case(shape(6, 3, 4, 2, 64, 40), policy(DType::BF16),
                                                    MapKind::Sorted, 5);
  for (AttentionKernel k : {AttentionKernel::Auto, AttentionKernel::MmaSync}) {
    cuda::AttentionTuning t;
    t.kernel = k;
    REQUIRE(cuda::AttentionOp(c.view(), t).kernel() ==
            cuda::resolve_attention_kernel(k, c.view().total_keys()));
  }
}

TEST_CASE("ikbo attention: the CUDA IKBO backend runs AttentionOp and reports its paths",
          "[gpu][ikbo][attention]") {
  const std::unique_ptr<ikbo::IkboBackend> gpu = cuda::make_cuda_ikbo_backend();
  INFO(gpu->name());
  REQUIRE(gpu->name().find(std::string("attention: ") + cuda::to_string(auto_kernel())) !=
          std::string::npos);
  ikbo::AttentionCase c = ikbo::make_attention_case(shape(17, 4, 8, 2, 128, 70, true),
                                                    policy(DType::F16), MapKind::Unsorted, 9);
  std::vector<std::byte> out = c.make_output();
  gpu->attention(c.view(), out.data());
  REQUIRE(oracle::check_attention(c.view(), out.data()).passed());
  const std::vector<std::string> paths = gpu->last_paths();
  // the backend runs the default tuning (AttentionTuning{}: Auto; mma.sync kb128.qreg.stages3)
  const cuda::AttentionTuning def{};
  const Variant resolved = auto_kernel() == cuda::AttentionKernel::Wgmma
                               ? kWgmma
                               : Variant{def.key_block, def.q_in_registers, def.kv_stages};
  const std::string kernel = kernel_path(resolved, 128);
  INFO(kernel);
  REQUIRE(std::find(paths.begin(), paths.end(), kernel) != paths.end());
  REQUIRE(std::find(paths.begin(), paths.end(), "attention.jagged") != paths.end());
  REQUIRE(run_attention_gpu(c.view()).output == out);  // the same kernel, bitwise

  // a bad map: the reference's error, the host output untouched
  c.cand_to_user[3] = 4;
  std::vector<std::byte> untouched(out.size(), std::byte{0x5a});
  std::string gpu_what, cpu_what;
  try {
    gpu->attention(c.view(), untouched.data());
  } catch (const InvalidArgument& e) {
    gpu_what = e.what();
  }
  try {
    ikbo::make_reference_ikbo_backend()->attention(c.view(), out.data());
  } catch (const InvalidArgument& e) {
    cpu_what = e.what();
  }
  REQUIRE(!gpu_what.empty());
  REQUIRE(gpu_what == cpu_what);
  REQUIRE(std::all_of(untouched.begin(), untouched.end(), [](std::byte b) { return b == std::byte{0x5a}; }));

  // a null `out` with the bad map: the reference names `out` first (attention_reference's
  // order), and so does the CUDA backend, with either map check
  cuda::CudaIkboOptions dev_opts;
  dev_opts.map_check = cuda::MapCheck::Device;
  const std::unique_ptr<ikbo::IkboBackend> gpu_dev = cuda::make_cuda_ikbo_backend(dev_opts);
  const std::unique_ptr<ikbo::IkboBackend> cpu = ikbo::make_reference_ikbo_backend();
  for (ikbo::IkboBackend* be : {cpu.get(), gpu.get(), gpu_dev.get()}) {
    INFO(be->name() << ", out = nullptr");
    try {
      be->attention(c.view(), nullptr);
      FAIL("no error for a null out");
    } catch (const InvalidArgument& e) {
      REQUIRE(e.argument() == "out");
      REQUIRE(std::string(e.what()) == "out: null pointer for B·n_seed·H·Dh = " +
                                           std::to_string(ikbo::attention_output_numel(c.view())) +
                                           " elements");
    }
  }
}
