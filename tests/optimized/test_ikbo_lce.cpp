// GPU tests of the IKBO linear compression (tbe::cuda::LceOp, every LceStage): outputs judged by the
// enclosure oracle (tbe::oracle::check_lce), bitwise equality with the reference on small-integer
// inputs (every sum exact), canaries (NaN-poisoned output, sentinels past its end), the map check
// (out-of-range value -> the reference's InvalidArgument, output bitwise untouched) and invalid
// shapes (the reference's InvalidArgument, nothing launched).
#include <algorithm>
#include <climits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <rapidcheck/catch.h>

#include "ikbo_lce_harness.h"
#include "ikbo_test_support.h"
#include "tbe/cuda/ikbo_backend.h"
#include "tbe/cuda/ikbo_lce.h"
#include "tbe/ikbo_workloads.h"
#include "tbe/oracle/ikbo_oracle.h"

using namespace tbe;
using namespace tbe::test;
using tbe::cuda::LceStage;
using tbe::ikbo::LceRounding;
using tbe::ikbo::MapKind;

namespace {

constexpr LceStage kStages[] = {LceStage::Decomposed, LceStage::PaddedK, LceStage::FusedEpilogue,
                                LceStage::L2Chunked, LceStage::LtEpilogue};
constexpr LceRounding kRoundings[] = {LceRounding::Published, LceRounding::RoundOnce,
                                      LceRounding::UserRounded};

/// The stage LceOp reports running: FusedEpilogue on F32 and LtEpilogue under Published, on F32
/// or where cuBLASLt rejects the configuration (RoundOnce's FP32 C on CUDA 13.1; see the test
/// "the lt-epilogue stage runs cuBLASLt under user-rounded" for where it must run) run PaddedK.
bool runs_as_requested(LceStage stage, DType st, LceRounding r, const std::vector<std::string>& paths) {
  if (stage == LceStage::FusedEpilogue && st == DType::F32) return paths.front() == "lce.padded-k";
  if (stage == LceStage::LtEpilogue && (st == DType::F32 || r == LceRounding::Published))
    return paths.front() == "lce.padded-k";
  if (stage == LceStage::LtEpilogue && paths.front() == "lce.padded-k")
    return std::any_of(paths.begin(), paths.end(), [](const std::string& x) {
      return x.rfind("lce.lt-epilogue.unsupported", 0) == 0;
    });
  return paths.front() == "lce." + cuda::to_string(stage);
}

std::int64_t round_up8(std::int64_t x) { return (x + 7) / 8 * 8; }

/// The GPU outcome is Ok, canaries hold and the oracle accepts every element.
void require_in_enclosure(const ikbo::LceProblem& p, const LceOutcome& gpu) {
  INFO(to_string(gpu));
  REQUIRE(gpu.kind == LceOutcome::Kind::Ok);
  REQUIRE(gpu.sentinels_intact);
  const oracle::CheckReport r = oracle::check_lce(p, gpu.output.data());
  INFO(r.summary());
  REQUIRE(r.passed());
}

ikbo_test::LceSpec spec(std::int64_t B, std::int64_t U, std::int64_t M, std::int64_t N,
                        std::int64_t K_c, std::int64_t K_u, DType st, LceRounding r, MapKind map,
                        std::uint64_t seed, bool small_integers = false) {
  ikbo_test::LceSpec s;
  s.shape.B = B;
  s.shape.U = U;
  s.shape.M = M;
  s.shape.N = N;
  s.shape.K_c = K_c;
  s.shape.K_u = K_u;
  s.policy.storage = st;
  s.policy.accumulation = DType::F32;
  s.policy.lce_rounding = r;
  s.map = map;
  s.seed = seed;
  s.small_integers = small_integers;
  return s;
}

/// GPU-sized LCE specs: M, N and K cross the fused kernel's tiles (64, 256, 32) and the 16-byte
/// vector width, K_u = 0 sometimes, B = 0 sometimes, every map kind; FP32 accumulation (the CUDA
/// backend's only one). Work B·M·N·(K_c + K_u) is capped by shrinking B.
rc::Gen<ikbo_test::LceSpec> gen_gpu_lce_spec() {
  return rc::gen::exec([] {
    ikbo_test::LceSpec s;
    s.map = *rc::gen::elementOf(std::vector<MapKind>(std::begin(ikbo::kAllMapKinds),
                                                     std::end(ikbo::kAllMapKinds)));
    s.shape.M = *rc::gen::weightedOneOf<std::int64_t>(
        {{2, rc::gen::inRange<std::int64_t>(1, 100)},
         {1, rc::gen::elementOf(std::vector<std::int64_t>{1, 63, 64, 65, 129})}});
    s.shape.N = *rc::gen::elementOf(
        std::vector<std::int64_t>{1, 2, 3, 7, 8, 16, 17, 40, 255, 256, 257, 264});
    s.shape.K_c = *rc::gen::weightedOneOf<std::int64_t>(
        {{2, rc::gen::inRange<std::int64_t>(1, 80)},
         {1, rc::gen::elementOf(std::vector<std::int64_t>{1, 7, 8, 9, 31, 32, 33, 130})}});
    s.shape.K_u = *rc::gen::weightedOneOf<std::int64_t>(
        {{1, rc::gen::just<std::int64_t>(0)}, {3, rc::gen::inRange<std::int64_t>(1, 80)},
         {1, rc::gen::elementOf(std::vector<std::int64_t>{8, 9, 97})}});
    s.shape.B = *rc::gen::weightedOneOf<std::int64_t>(
        {{1, rc::gen::just<std::int64_t>(0)}, {8, rc::gen::inRange<std::int64_t>(1, 40)}});
    const std::int64_t work_per_b = s.shape.M * s.shape.N * (s.shape.K_c + s.shape.K_u);
    const std::int64_t max_b = std::max<std::int64_t>(1, 20'000'000 / std::max<std::int64_t>(1, work_per_b));
    if (s.shape.B > max_b) s.shape.B = max_b;
    s.shape.U = *rc::gen::inRange<std::int64_t>(s.map == MapKind::UsersWithoutCandidates ? 2 : 1, 9);
    s.policy = *ikbo_test::gen_policy(true);
    s.policy.accumulation = DType::F32;
    s.seed = *rc::gen::arbitrary<std::uint64_t>();
    s.small_integers = *rc::gen::weightedElement<bool>({{3, false}, {1, true}});
    return s;
  });
}

}  // namespace

TEST_CASE("ikbo lce: every stage, storage type and rounding policy in the enclosure",
          "[gpu][ikbo]") {
  int i = 0;
  for (LceStage stage : kStages)
    for (DType st : {DType::F16, DType::BF16, DType::F32})
      for (LceRounding r : kRoundings) {
        // shape A: tails of every tile (M 70 > 64, N 264 > 256, K_c 45 and K_u 33 odd > 32), the
        // 16-byte path; shape B: N odd (scalar E loads), K_u = 0, K_c = 8. Map kinds rotate.
        const MapKind map = ikbo::kAllMapKinds[i++ % 5];
        for (const ikbo_test::LceSpec& s :
             {spec(37, 5, 70, 264, 45, 33, st, r, map, 1000 + i),
              spec(9, 3, 17, 19, 8, 0, st, r, ikbo::kAllMapKinds[(i + 2) % 5], 2000 + i)}) {
          const ikbo::LceCase c = ikbo_test::build(s);
          const ikbo::LceProblem p = c.view();
          INFO(s << " stage=" << cuda::to_string(stage));
          const LceOutcome gpu = run_lce_gpu(p, stage);
          require_in_enclosure(p, gpu);
          REQUIRE(runs_as_requested(stage, st, r, gpu.paths));
        }
      }
}

TEST_CASE("ikbo lce: random shapes, maps, layouts and chunkings in the enclosure", "[gpu][ikbo]") {
  rc::prop("GPU output in the enclosure; bitwise the reference's on small integers", [] {
    const ikbo_test::LceSpec s = *gen_gpu_lce_spec();
    const LceStage stage = *rc::gen::elementOf(std::vector<LceStage>(std::begin(kStages), std::end(kStages)));
    // caller-padded tensors (zero padding of K, as a model keeps them) half of the time
    LcePadding pad;
    if (*rc::gen::arbitrary<bool>()) {
      pad.k_c_pad = round_up8(s.shape.K_c) + *rc::gen::elementOf(std::vector<std::int64_t>{0, 8});
      if (s.shape.K_u > 0) pad.k_u_pad = round_up8(s.shape.K_u);
    }
    // L2Chunked: chunks of a few candidates (several chunks, a last partial one), both schedules
    cuda::LceTuning tuning;
    tuning.chunk_candidates = *rc::gen::elementOf(std::vector<std::int64_t>{0, 1, 2, 5});
    tuning.overlap = *rc::gen::arbitrary<bool>();
    std::ostringstream how;
    how << s << " stage=" << cuda::to_string(stage) << " k_c_pad=" << pad.k_c_pad
        << " k_u_pad=" << pad.k_u_pad << " chunk=" << tuning.chunk_candidates
        << " overlap=" << tuning.overlap;
    RC_LOG() << how.str() << "\n";
    const ikbo::LceCase c = ikbo_test::build(s);
    const ikbo::LceProblem p = c.view();
    LceFailureRecorder rec("ikbo-lce-random", c, how.str());
    rec.run([&] {
      const LceOutcome gpu = run_lce_gpu(p, stage, pad, tuning);
      rec.record(gpu, "cuda LceOp stage " + cuda::to_string(stage));
      RC_LOG() << to_string(gpu) << "\n";
      RC_ASSERT(gpu.kind == LceOutcome::Kind::Ok);
      RC_ASSERT(gpu.sentinels_intact);
      const oracle::CheckReport r = oracle::check_lce(p, gpu.output.data());
      RC_LOG() << r.summary() << "\n";
      RC_ASSERT(r.passed());
      if (s.small_integers) {
        // integers in [-4, 4], K_c + K_u <= 227: every FP32 sum is an exact integer whatever the
        // order, so every stage rounds the same values at the same points as the reference.
        const LceOutcome ref = run_lce_reference(p);
        RC_ASSERT(ref.kind == LceOutcome::Kind::Ok);
        RC_ASSERT(count_element_differences(gpu, ref, s.policy.storage) == 0);
      }
    });
  });
}

TEST_CASE("ikbo lce: small M x N with long K, cuBLAS GEMM reductions round once",
          "[gpu][ikbo]") {
  // A cuBLAS GEMM of few outputs and a long K may split K; in its default math mode it may then
  // reduce the partials in the 16-bit output type (two roundings), which the oracle's FP32
  // accumulation + one rounding rejects. Found by the random-shape property (RC seed 1:
  // M = 6, N = 2, K_c = 1, K_u = 97, BF16, user-rounded, padded-k); LceOp asks for reductions in
  // the compute type (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION).
  std::uint64_t seed = 7000;
  for (LceStage stage : {LceStage::Decomposed, LceStage::PaddedK, LceStage::L2Chunked})
    for (DType st : {DType::F16, DType::BF16})
      for (LceRounding r : kRoundings)
        for (std::int64_t K : {97, 1000, 4099})
          for (std::int64_t MN : {1, 2, 6}) {
            const ikbo_test::LceSpec s = spec(2, 1, MN, 8 / MN + 1, K, K + 3, st, r,
                                              MapKind::OneUser, ++seed);
            const ikbo::LceCase c = ikbo_test::build(s);
            const ikbo::LceProblem p = c.view();
            INFO(s << " stage=" << cuda::to_string(stage));
            require_in_enclosure(p, run_lce_gpu(p, stage));
          }
}

TEST_CASE("ikbo lce: published dimensions at a small batch", "[gpu][ikbo][large]") {
  for (LceStage stage : kStages)
    for (auto [st, r] : {std::pair{DType::F16, LceRounding::RoundOnce},
                         std::pair{DType::BF16, LceRounding::Published},
                         std::pair{DType::F16, LceRounding::UserRounded},
                         std::pair{DType::BF16, LceRounding::UserRounded}}) {
      const ikbo_test::LceSpec s = spec(12, 3, 433, 256, 866, 1178, st, r, MapKind::Unsorted, 7);
      const ikbo::LceCase c = ikbo_test::build(s);
      const ikbo::LceProblem p = c.view();
      INFO(s << " stage=" << cuda::to_string(stage));
      require_in_enclosure(p, run_lce_gpu(p, stage));
    }
}

TEST_CASE("ikbo lce: the lt-epilogue stage runs cuBLASLt under user-rounded", "[gpu][ikbo]") {
  // Shapes whose batch pointers are 16-byte aligned or better (M·N·2 and k·N·2 multiples of 32),
  // as at the published shape: cuBLASLt must accept C in the storage type (measured on H200 with
  // CUDA 13.1), so the stage may not fall back. Small integers: every FP32 sum is exact, so the
  // output is bitwise the reference's user-rounded one; random data: in the enclosure.
  for (DType st : {DType::F16, DType::BF16})
    for (bool small : {true, false})
      for (const ikbo_test::LceSpec& s :
           {spec(37, 5, 70, 264, 45, 33, st, LceRounding::UserRounded, MapKind::Unsorted, 31, small),
            spec(40, 40, 16, 64, 16, 8, st, LceRounding::UserRounded, MapKind::UserPerCandidate, 32, small),
            spec(33, 1, 24, 32, 8, 0, st, LceRounding::UserRounded, MapKind::OneUser, 33, small)}) {
        const ikbo::LceCase c = ikbo_test::build(s);
        const ikbo::LceProblem p = c.view();
        INFO(s);
        const LceOutcome gpu = run_lce_gpu(p, LceStage::LtEpilogue);
        require_in_enclosure(p, gpu);
        REQUIRE(gpu.paths.front() == "lce.lt-epilogue");
        REQUIRE(std::find(gpu.paths.begin(), gpu.paths.end(),
                          "lce.candidate-gemm.cublaslt.pointer-array.epilogue-c") !=
                gpu.paths.end());
        if (small) {
          const LceOutcome ref = run_lce_reference(p);
          REQUIRE(ref.kind == LceOutcome::Kind::Ok);
          REQUIRE(count_element_differences(gpu, ref, st) == 0);
        }
      }
}

TEST_CASE("ikbo lce: an out-of-range map value is the reference's error, output untouched",
          "[gpu][ikbo]") {
  // user-rounded: the lt-epilogue stage runs cuBLASLt (its pointer arrays send D to a scratch on
  // a bad map); round-once: it runs padded-k.
  for (LceRounding r : {LceRounding::RoundOnce, LceRounding::UserRounded})
  for (LceStage stage : kStages)
    for (std::int32_t bad : {4, -1, INT_MAX, INT_MIN})
      for (std::vector<std::int64_t> where : {std::vector<std::int64_t>{0}, {17}, {28}, {28, 5}}) {
        const ikbo_test::LceSpec s = spec(29, 4, 70, 24, 40, 9, DType::F16, r, MapKind::Unsorted, 3);
        ikbo::LceCase c = ikbo_test::build(s);
        for (std::int64_t b : where) c.cand_to_user[b] = bad;
        const ikbo::LceProblem p = c.view();
        INFO("stage=" << cuda::to_string(stage) << " rounding=" << ikbo::to_string(r)
                      << " bad=" << bad << " at " << where.front());
        const LceOutcome ref = run_lce_reference(p);
        const LceOutcome gpu = run_lce_gpu(p, stage);
        INFO("reference: " << to_string(ref) << "\ngpu: " << to_string(gpu));
        if (stage == LceStage::LtEpilogue && r == LceRounding::UserRounded)
          REQUIRE(gpu.paths.front() == "lce.lt-epilogue");
        REQUIRE(ref.kind == LceOutcome::Kind::InvalidArgument);
        REQUIRE(gpu.kind == LceOutcome::Kind::InvalidArgument);
        REQUIRE(gpu.argument == ref.argument);
        REQUIRE(gpu.what == ref.what);
        REQUIRE(gpu.poison_intact);
        REQUIRE(gpu.sentinels_intact);
      }
}

TEST_CASE("ikbo lce: invalid shapes give the reference's InvalidArgument", "[gpu][ikbo]") {
  const ikbo_test::LceSpec s = spec(6, 2, 5, 8, 9, 3, DType::BF16, LceRounding::Published,
                                    MapKind::Sorted, 5);
  const ikbo::LceCase c = ikbo_test::build(s);
  using Mutation = void (*)(ikbo::LceProblem&);
  const std::vector<std::pair<const char*, Mutation>> mutations = {
      {"K_c = 0", [](ikbo::LceProblem& p) { p.K_c = 0; }},
      {"K_u = -1", [](ikbo::LceProblem& p) { p.K_u = -1; }},
      {"M = 0", [](ikbo::LceProblem& p) { p.M = 0; }},
      {"N = 0", [](ikbo::LceProblem& p) { p.N = 0; }},
      {"U = 0", [](ikbo::LceProblem& p) { p.U = 0; }},
      {"B = -1", [](ikbo::LceProblem& p) { p.B = -1; }},
      {"w_c null", [](ikbo::LceProblem& p) { p.w_c = nullptr; }},
      {"e_c null", [](ikbo::LceProblem& p) { p.e_c = nullptr; }},
      {"w_u null", [](ikbo::LceProblem& p) { p.w_u = nullptr; }},
      {"e_u null", [](ikbo::LceProblem& p) { p.e_u = nullptr; }},
      {"map null", [](ikbo::LceProblem& p) { p.cand_to_user = nullptr; }},
      {"storage i32", [](ikbo::LceProblem& p) { p.policy.storage = DType::I32; }},
  };
  for (LceStage stage : kStages)
    for (const auto& [name, mutate] : mutations) {
      ikbo::LceProblem p = c.view();
      mutate(p);
      INFO(name << " stage=" << cuda::to_string(stage));
      const LceOutcome ref = run_lce_reference(p);
      const LceOutcome gpu = run_lce_gpu(p, stage);
      INFO("reference: " << to_string(ref) << "\ngpu: " << to_string(gpu));
      REQUIRE(ref.kind == LceOutcome::Kind::InvalidArgument);
      REQUIRE(gpu.kind == LceOutcome::Kind::InvalidArgument);
      REQUIRE(gpu.argument == ref.argument);
      REQUIRE(gpu.what == ref.what);
    }
}

TEST_CASE("ikbo lce: CUDA limits are InvalidArgument before any launch", "[gpu][ikbo]") {
  const ikbo_test::LceSpec s = spec(4, 2, 5, 8, 9, 3, DType::F32, LceRounding::RoundOnce,
                                    MapKind::Sorted, 9);
  const ikbo::LceCase c = ikbo_test::build(s);
  ikbo::LceProblem p = c.view();
  p.policy.accumulation = DType::F64;  // the reference accepts it, the CUDA backend does not
  REQUIRE(run_lce_reference(p).kind == LceOutcome::Kind::Ok);
  const LceOutcome gpu = run_lce_gpu(p, LceStage::Decomposed);
  REQUIRE(gpu.kind == LceOutcome::Kind::InvalidArgument);
  REQUIRE(gpu.argument == "lce.policy.accumulation");
  // a K pad below K or not a multiple of 8
  const ikbo::LceProblem q = c.view();
  for (std::int64_t bad_pad : {q.K_c - 1, q.K_c + 1}) {
    cuda::LceLayout bad;
    bad.k_c_pad = bad_pad;
    try {
      cuda::LceOp op(q, LceStage::PaddedK, bad);
      FAIL("no error for k_c_pad = " << bad_pad);
    } catch (const InvalidArgument& e) {
      REQUIRE(e.argument() == "layout.k_c_pad");
    }
  }
}

TEST_CASE("ikbo lce: the CUDA IKBO backend runs LceOp (and attention on the GPU)", "[gpu][ikbo]") {
  const std::unique_ptr<ikbo::IkboBackend> gpu = cuda::make_cuda_ikbo_backend();
  const std::unique_ptr<ikbo::IkboBackend> cpu = ikbo::make_reference_ikbo_backend();
  INFO(gpu->name());
  REQUIRE(gpu->name().rfind("cuda:", 0) == 0);
  REQUIRE(gpu->name().find("; attention: ") != std::string::npos);

  const ikbo_test::LceSpec s = spec(21, 4, 67, 40, 35, 12, DType::BF16, LceRounding::Published,
                                    MapKind::UsersWithoutCandidates, 17);
  ikbo::LceCase c = ikbo_test::build(s);
  std::vector<std::byte> out = c.make_output();
  gpu->lce(c.view(), out.data());
  REQUIRE(oracle::check_lce(c.view(), out.data()).passed());
  const LceOutcome op = run_lce_gpu(c.view(), LceStage::PaddedK);  // the backend's default stage
  REQUIRE(op.output == out);  // the same kernels (cuBLAS without atomics: deterministic)

  // The map checked on the device only (a device-resident map's caller), L2Chunked in chunks of
  // 5 candidates (B = 21: 5 chunks, the last partial): an output inside the enclosures.
  cuda::CudaIkboOptions dev_opts;
  dev_opts.stage = LceStage::L2Chunked;
  dev_opts.lce.chunk_candidates = 5;
  dev_opts.map_check = cuda::MapCheck::Device;
  const std::unique_ptr<ikbo::IkboBackend> gpu_dev = cuda::make_cuda_ikbo_backend(dev_opts);
  REQUIRE(gpu_dev->name().find("l2-chunked, 5 candidates per chunk") != std::string::npos);
  REQUIRE(gpu_dev->name().find("map check on device") != std::string::npos);
  std::vector<std::byte> out_dev = c.make_output();
  gpu_dev->lce(c.view(), out_dev.data());
  REQUIRE(oracle::check_lce(c.view(), out_dev.data()).passed());

  // a bad map (a value = U, and a negative one): the reference's error from either check, the
  // host output untouched
  for (const std::int32_t bad : {static_cast<std::int32_t>(c.shape.U), std::int32_t{-1}}) {
    c.cand_to_user[3] = bad;
    std::string cpu_what;
    try {
      std::vector<std::byte> o2 = c.make_output();
      cpu->lce(c.view(), o2.data());
    } catch (const InvalidArgument& e) {
      cpu_what = e.what();
    }
    REQUIRE(!cpu_what.empty());
    for (ikbo::IkboBackend* be : {gpu.get(), gpu_dev.get()}) {
      INFO(be->name() << ", cand_to_user[3] = " << bad);
      std::vector<std::byte> untouched(out.size(), std::byte{0x5a});
      std::string gpu_what;
      try {
        be->lce(c.view(), untouched.data());
      } catch (const InvalidArgument& e) {
        gpu_what = e.what();
        REQUIRE(e.argument() == "cand_to_user[3]");
      }
      REQUIRE(gpu_what == cpu_what);
      REQUIRE(untouched == std::vector<std::byte>(out.size(), std::byte{0x5a}));
    }
  }
  // a null `out`, with either bad map value or a valid one: the reference names `out` before the
  // map (lce_reference's order), and so does every CUDA backend, before any upload or launch
  // (never a failed download)
  for (const std::int32_t v : {static_cast<std::int32_t>(c.shape.U), std::int32_t{-1}, std::int32_t{0}}) {
    c.cand_to_user[3] = v;
    for (ikbo::IkboBackend* be : {cpu.get(), gpu.get(), gpu_dev.get()}) {
      INFO(be->name() << ", out = nullptr, cand_to_user[3] = " << v);
      try {
        be->lce(c.view(), nullptr);
        FAIL("no error for a null out");
      } catch (const InvalidArgument& e) {
        REQUIRE(e.argument() == "out");
        REQUIRE(std::string(e.what()) == "out: null pointer for B·M·N = " +
                                             std::to_string(ikbo::lce_output_numel(c.view())) +
                                             " elements");
      }
    }
  }
  cuda::CudaIkboOptions bad_opts;
  bad_opts.lce.chunk_candidates = -1;
  REQUIRE_THROWS_AS(cuda::make_cuda_ikbo_backend(bad_opts), InvalidArgument);

  // attention runs on the GPU (test_ikbo_attention.cpp): a head dimension without a kernel is an
  // InvalidArgument naming Dh, never a silent CPU fallback; the output stays untouched
  const ikbo::AttentionCase a = ikbo::make_attention_case(ikbo_test::dense_shape(3, 2, 2, 2, 8, 5),
                                                          s.policy, MapKind::Sorted, 4);
  std::vector<std::byte> ga(a.make_output().size(), std::byte{0x5a});
  try {
    gpu->attention(a.view(), ga.data());
    FAIL("no error for Dh = 8");
  } catch (const InvalidArgument& e) {
    REQUIRE(e.argument() == "attention.Dh");
  }
  REQUIRE(ga == std::vector<std::byte>(ga.size(), std::byte{0x5a}));
}
