// Writes the seed corpora fuzz/corpus/<harness>/ (deterministic): hand-picked edge cases for each
// harness's byte format plus a few seeded pseudo-random inputs. Run after changing a decoder:
//   cmake --build build --target fuzz_make_corpus && build/fuzz/fuzz_make_corpus fuzz/corpus
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tbe/backward.h"
#include "tbe/case_builder.h"
#include "tbe/host_case.h"
#include "tbe/ikbo_workloads.h"
#include "tbe/io/any_case_file.h"
#include "tbe/io/npy.h"

namespace fs = std::filesystem;
using namespace tbe;

namespace {

// Little-endian byte string builder, fields in the order a harness decodes them.
struct Bytes {
  std::string s;
  Bytes& u8(int v) { s.push_back(static_cast<char>(v & 0xff)); return *this; }
  Bytes& u8s(std::initializer_list<int> vs) { for (int v : vs) u8(v); return *this; }
  Bytes& u64(std::uint64_t v) { for (int i = 0; i < 8; ++i) u8(static_cast<int>(v >> (8 * i))); return *this; }
};

void put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string random_bytes(std::uint64_t seed, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) {
    seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
    s.push_back(static_cast<char>(seed >> 24));
  }
  return s;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A case folder framed as fuzz_case_reader reads it: case.json, then "\n@file NAME\n" + bytes.
std::string frame_case(const io::AnyCaseFile& c, const fs::path& tmp) {
  fs::remove_all(tmp);
  io::write_case(tmp.string(), c);
  std::string out = slurp(tmp / "case.json");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(tmp))
    if (e.path().filename() != "case.json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) out += "\n@file " + f.filename().string() + "\n" + slurp(f);
  return out;
}

ForwardCase small_case(DType w, DType o, PoolingMode pool, DType idx, bool weighted, bool vbe) {
  ForwardCaseSpec spec;
  spec.weights = w;
  spec.rows = {3, 2};
  spec.dims = {4, pool == PoolingMode::None ? 4 : 3};
  spec.fill = [](std::int64_t t, std::int64_t r, std::int64_t d) {
    return t == 0 ? static_cast<double>(r - d) * 0.5 : static_cast<double>(r + d);
  };
  spec.feature_table_map = {0, 1};
  spec.index_dtype = idx;
  if (vbe) {
    spec.vbe_ranks = 2;
    spec.vbe_batch_sizes = {1, 0, 2, 1};
  } else {
    spec.batch_size = 2;
  }
  spec.bags = {{0, 2}, {}, {1}, {0, 1}};  // offsets 0 2 2 3 5
  if (weighted) spec.per_sample_weights = {1.0f, 0.5f, -2.0f, 0.25f, 3.0f};
  spec.options.pooling = pool;
  spec.options.bounds_check = BoundsCheckMode::Warning;
  spec.options.policy = make_policy(PolicyKind::SeedDefault, w, o);
  return build_case(spec);
}

// The reference's backward outputs for `c` (updated weights, momentum, per-sample-weight grads).
io::BackwardRecordedOutputs backward_recording(BackwardCase& c) {
  io::BackwardRecordedOutputs r;
  r.implementation = "cpu-reference (fuzz seed)";
  std::vector<std::byte> w = c.forward.weights;
  std::vector<float> m = c.momentum;
  std::vector<float> g(c.forward.per_sample_weights.size());
  BackwardOutputs out{w.data(), m.empty() ? nullptr : m.data(), g.empty() ? nullptr : g.data()};
  r.warnings = backward_reference(c.view(), out).warnings;
  r.weights = w;
  if (!m.empty()) r.momentum = m;
  if (!g.empty()) r.per_sample_weight_grad = g;
  return r;
}

void backward_cases(const fs::path& dir, const fs::path& tmp) {
  // Rowwise Adagrad (L2), FP16 weights, SR write-back, weighted, a bad index under WARNING,
  // clipping, a strategy, everything recorded by the reference.
  io::BackwardCaseFile a;
  a.name = "backward-adagrad-sr";
  a.provenance = "fuzz seed";
  a.seed = 11;
  a.problem.forward = small_case(DType::F16, DType::F32, PoolingMode::Sum, DType::I64, true, false);
  a.problem.forward.indices[1] = 9;
  a.problem.forward.options.policy.write_back = RoundingMode::Stochastic;
  a.problem.options.optimizer = OptimizerConfig{OptimizerKind::ExactRowwiseAdagrad, 0.05, 1e-6, 0.01, WeightDecayMode::L2, 0.0, 2.5};
  a.problem.options.sr_seed = 77;
  a.problem.options.sr_offset = 2;
  a.problem.reset_momentum();
  a.problem.resize_grad_output();
  for (std::int64_t i = 0; i < 14; ++i) a.problem.set_grad(i, 0.25 * static_cast<double>(i % 5) - 0.5);
  for (std::size_t r = 0; r < a.problem.momentum.size(); ++r) a.problem.momentum[r] = 0.125f * static_cast<float>(r);
  a.strategy = io::BackwardStrategyRecord{BackwardStrategy{1, 32, BackwardStrategy::LongRuns::Chunked, false}, true};
  a.recorded = backward_recording(a.problem);
  put(dir, "case_backward_adagrad_sr", frame_case(a, tmp));
  // SGD, BF16 weights and output, MEAN over VBE under FATAL, max_norm, only the weights recorded.
  io::BackwardCaseFile b;
  b.name = "backward-sgd-vbe";
  b.problem.forward = small_case(DType::BF16, DType::BF16, PoolingMode::Mean, DType::I32, false, true);
  b.problem.forward.options.bounds_check = BoundsCheckMode::Fatal;
  b.problem.options.optimizer = OptimizerConfig{OptimizerKind::ExactSgd, 0.5, 1e-8, 0.0, WeightDecayMode::None, 1.5, 0.0};
  b.problem.resize_grad_output();
  for (std::int64_t i = 0; i < 12; ++i) b.problem.set_grad(i, static_cast<double>(i) - 6.0);
  b.recorded = backward_recording(b.problem);
  b.recorded->warnings.reset();
  b.expect = io::Expectation{"fail", "docs/backward.md Semantics: max_norm"};
  put(dir, "case_backward_sgd_vbe", frame_case(b, tmp));
}

void ikbo_cases(const fs::path& dir, const fs::path& tmp) {
  // LCE, FP16, user-rounded, unsorted map, the reference's output recorded.
  io::LceCaseFile l;
  l.name = "lce-fp16-user-rounded";
  l.provenance = "fuzz seed";
  l.problem = ikbo::make_lce_case({4, 3, 2, 3, 5, 2}, {DType::F16, DType::F32, ikbo::LceRounding::UserRounded},
                                  ikbo::MapKind::Unsorted, 3);
  l.recorded = io::IkboRecordedOutput{"cpu-reference (fuzz seed)", l.problem.make_output(), std::nullopt};
  ikbo::lce_reference(l.problem.view(), l.recorded->output->data());
  put(dir, "case_lce_fp16", frame_case(l, tmp));
  // LCE without a user part (K_u = 0), BF16, FP64 accumulation, users without candidates, an
  // implementation that raised.
  io::LceCaseFile n;
  n.name = "lce-bf16-no-user-part";
  n.problem = ikbo::make_lce_case({3, 4, 1, 2, 3, 0}, {DType::BF16, DType::F64, ikbo::LceRounding::Published},
                                  ikbo::MapKind::UsersWithoutCandidates, 4);
  n.recorded = io::IkboRecordedOutput{"somebody else", std::nullopt, std::string("device_error")};
  put(dir, "case_lce_bf16_no_user_part", frame_case(n, tmp));
  // Dense attention, FP32, scale 0.5, one user per candidate.
  io::AttentionCaseFile d;
  d.name = "attention-dense-fp32";
  ikbo::AttentionShape ds;
  ds.B = 3;
  ds.U = 3;
  ds.n_seed = 2;
  ds.H = 1;
  ds.Dh = 3;
  ds.S = 2;
  ds.scale = 0.5;
  d.problem = ikbo::make_attention_case(ds, {DType::F32, DType::F64, ikbo::LceRounding::RoundOnce},
                                        ikbo::MapKind::UserPerCandidate, 5);
  d.recorded = io::IkboRecordedOutput{"cpu-reference (fuzz seed)", d.problem.make_output(), std::nullopt};
  ikbo::attention_reference(d.problem.view(), d.recorded->output->data());
  put(dir, "case_attention_dense_fp32", frame_case(d, tmp));
  // Jagged attention, BF16, lengths 0, 3, 1 (an empty user), sorted map.
  io::AttentionCaseFile g;
  g.name = "attention-jagged-bf16";
  ikbo::AttentionShape gs = ds;
  gs.B = 4;
  gs.H = 2;
  gs.scale = 0.0;
  gs.jagged = true;
  gs.lengths = {0, 3, 1};
  g.problem = ikbo::make_attention_case(gs, {DType::BF16, DType::F32, ikbo::LceRounding::RoundOnce},
                                        ikbo::MapKind::Sorted, 6);
  g.recorded = io::IkboRecordedOutput{"cpu-reference (fuzz seed)", g.problem.make_output(), std::nullopt};
  ikbo::attention_reference(g.problem.view(), g.recorded->output->data());
  put(dir, "case_attention_jagged_bf16", frame_case(g, tmp));
}

void case_reader(const fs::path& dir) {
  const fs::path tmp = fs::temp_directory_path() / "tbe-make-corpus";
  io::CaseFile a;
  a.name = "sum-fp32";
  a.provenance = "fuzz seed";
  a.seed = 7;
  a.problem = small_case(DType::F32, DType::F32, PoolingMode::Sum, DType::I64, false, false);
  put(dir, "case_sum_fp32", frame_case(a, tmp));
  io::CaseFile b;
  b.name = "mean-vbe-fp16-weighted";
  b.problem = small_case(DType::F16, DType::BF16, PoolingMode::Mean, DType::I32, true, true);
  b.problem.options.bounds_check = BoundsCheckMode::Fatal;
  put(dir, "case_mean_vbe_fp16", frame_case(b, tmp));
  io::CaseFile c;
  c.name = "none-bf16-recorded";
  c.problem = small_case(DType::BF16, DType::F16, PoolingMode::None, DType::I64, false, false);
  c.problem.indices = {0, 7, -1, 0, 1};  // out of range: repaired under WARNING
  io::RecordedOutputs rec;
  rec.implementation = "fuzz seed";
  rec.output_dtype = DType::F16;
  rec.output.assign(5 * 4 * 2, std::byte{0});
  rec.warnings = 2;
  c.recorded = rec;
  c.expect = io::Expectation{"fail", "bounds check repair"};
  put(dir, "case_none_bf16_recorded", frame_case(c, tmp));
  backward_cases(dir, tmp);
  ikbo_cases(dir, tmp);
  fs::remove_all(tmp);
  // Plain .npy images (the whole input is also parsed as one).
  const float f[6] = {1.0f, -0.0f, 3.5f, 1e-45f, 3.4e38f, 2.0f};
  put(dir, "npy_f4_2x3", [&] { auto v = io::serialize_npy(io::make_npy(DType::F32, {2, 3}, f));
                               return std::string(reinterpret_cast<const char*>(v.data()), v.size()); }());
  const std::int64_t i[1] = {-5};
  put(dir, "npy_i8_scalar", [&] { auto v = io::serialize_npy(io::make_npy(DType::I64, {}, i));
                                  return std::string(reinterpret_cast<const char*>(v.data()), v.size()); }());
  put(dir, "npy_u2_empty", [&] { auto v = io::serialize_npy(io::make_npy(DType::BF16, {0, 4}, nullptr));
                                 return std::string(reinterpret_cast<const char*>(v.data()), v.size()); }());
  put(dir, "npy_v2_header",
      std::string("\x93NUMPY\x02\x00", 8) + std::string("\x36\x00\x00\x00", 4) +
          "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }      \n" +
          std::string("\x01\x00\x00\x00\x02\x00\x00\x00", 8));
  put(dir, "npy_truncated", std::string("\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'shape': (99999999999,", 50));
  put(dir, "json_garbage", "{\"format\": \"tbe-case\", \"version\": 1, \"tables\": [[[[[[[]]]]]]], \"x\": 1e999}");
}

void bounds_repair(const fs::path& dir) {
  // Field order (fuzz_bounds_repair.cpp run_one): tables (nt, wdt, per table E, D), T, map,
  // pooling, mode, policy, output, index dtype, VBE selector (R, sizes) or B, N, indices
  // (selector [+ payload]), offsets (how [+ wild]), last-offset fix, weighted, corruption.
  Bytes ok;  // 1 table 4x2 fp32, T=1, B=2, N=4, indices 0..3, offsets 0 2 2 4, WARNING: valid
  ok.u8s({0, 0, 3, 1, 1, 0, 0, 0, 0, 0, 0, 1, 2, 4, 0, 1, 0, 2, 0, 3, 0, 4, 0, 2, 0, 0, 0, 0});
  put(dir, "valid_warning", ok.s);
  // 2 tables (3x1 fp16, 255x4), T=2, B=2, MEAN, FATAL, int32, N=6: indices -1, 255 (= E),
  // INT32_MAX-1, raw bits, decreasing, 2; offsets -4, INT32_MIN, INT32_MIN+1, decreasing, +2.
  Bytes bad;
  bad.u8s({1, 1, 2, 0, 250, 3, 2, 0, 1, 1, 2, 1, 0, 1, 1, 2, 6});
  bad.u8s({10, 0, 11, 13, 1, 15, 1, 2, 3, 4, 9, 1, 0, 3});
  bad.u8s({170, 10, 3, 170, 14, 0, 1, 170, 9, 0, 2, 1, 0, 0});
  put(dir, "fatal_int32_wild", bad.s);
  Bytes warn = bad;
  warn.s[10] = 0;  // the same values under WARNING
  put(dir, "warning_int32_wild", warn.s);
  // 2 tables, T=2, VBE R=2 sizes 1 0 2 1, IGNORE, int64, index E, offsets past N and INT64_MAX,
  // weighted.
  Bytes vbe;
  vbe.u8s({1, 2, 1, 3, 2, 2, 2, 0, 1, 0, 1, 0, 0, 0, 0, 1, 1, 0, 2, 1, 6});
  vbe.u8s({0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 12, 0});
  vbe.u8s({1, 2, 200, 12, 0, 0, 200, 13, 0, 1, 1, 0});
  put(dir, "vbe_ignore_past_end", vbe.s);
  Bytes t0;  // T = 0 (one offset: the last one, a huge raw value), N = 3, FATAL
  t0.u8s({0, 0, 1, 1, 0, 0, 2, 0, 0, 0, 3, 3, 15, 1, 2, 3, 4, 5, 6, 7, 8, 0, 1, 0, 2});
  t0.u8s({200, 15, 9, 9, 9, 9, 9, 9, 9, 9, 1, 0, 0});
  put(dir, "no_features_fatal", t0.s);
  for (int k = 0; k < 11; ++k) {  // every shape corruption (kind = byte % 11, byte >= 224)
    Bytes c = ok;
    c.s.back() = static_cast<char>(224 + (k + 11 - 224 % 11) % 11);
    c.u8(k).u8(1);
    put(dir, "corrupt_" + std::to_string(k), c.s);
  }
  Bytes none = ok;  // NONE pooling (for the per-sample-weights corruption)
  none.s[6] = 2;
  none.s.erase(none.s.size() - 2, 1);  // NONE reads no weighted flag
  none.s.back() = static_cast<char>(224 + (7 + 11 - 224 % 11) % 11);
  put(dir, "corrupt_none_weighted", none.s);
  put(dir, "empty", "");
  for (int k = 0; k < 4; ++k) put(dir, "random_" + std::to_string(k), random_bytes(100 + k, 96));
}

// One value as fuzz_forward_emulation's value_bits decodes it: class byte, then its payload.
void value(Bytes& b, int cls, DType t, int payload = 5) {
  b.u8(cls);
  switch (cls & 0x0f) {
    case 0: case 1: case 4: break;
    case 5: case 6: case 7:
      for (std::size_t i = 0; i < (t == DType::F32 ? 4u : 2u); ++i) b.u8(payload * 37 + static_cast<int>(i) * 91);
      break;
    default: b.u8(payload); break;
  }
}

void forward_emulation(const fs::path& dir) {
  // Field order (fuzz_forward_emulation.cpp build): wdt, odt, policy, pooling, nt, per table
  // (E, D), weight values, T, map, VBE selector (R, sizes) or B, leading selector [+ count and
  // indices], per bag (L byte, indices), weighted flag (+ values), index dtype, bounds mode, seed.
  auto values = [](Bytes& b, int n, std::vector<int> classes, DType t) {
    for (int i = 0; i < n; ++i) value(b, classes[i % classes.size()], t, i);
  };
  Bytes big;  // FP16 4x3 table at ±65504, one bag of L=12, FP16 output, fbgemm-cuda (FP32 acc)
  big.u8s({1, 1, 1, 0, 0, 3, 2});
  values(big, 12, {0x01, 0x81, 0x01}, DType::F16);
  big.u8s({0, 0, 1, 1, 1, 194, 0, 1, 2, 3, 0, 0, 0, 0, 2, 2, 2, 2, 0, 0, 1});
  big.u64(1);
  put(dir, "fp16_max_sum", big.s);
  // BF16 6x9 table of subnormals and ±0, MEAN, FP32 output, VBE (R=2, sizes 1 0 3 2), one
  // leading index before offsets[0], weighted with extreme per-sample weights, int32.
  Bytes sub;
  sub.u8s({2, 0, 0, 1, 0, 5, 8});
  values(sub, 54, {0x02, 0x83, 0x00, 0x80, 0x04, 0x08}, DType::BF16);
  sub.u8s({1, 0, 0, 0, 1, 1, 0, 3, 2, 0, 0, 3});
  const int L[6] = {3, 12, 0, 1, 4, 2};
  int n = 1;
  for (int l : L) {
    sub.u8(l == 12 ? 194 : l);
    for (int q = 0; q < l; ++q) sub.u8(q * 5 + l);
    n += l;
  }
  sub.u8(1);
  values(sub, n, {0x01, 0x82, 0x03, 0x85, 0x08, 0x00, 0x84, 0x0e}, DType::F32);
  sub.u8s({1, 0});
  sub.u64(42);
  put(dir, "bf16_subnormal_mean_vbe_weighted", sub.s);
  // NONE pooling, FP32 8x9 table of raw bit patterns, BF16 output, T=2, B=2, int32, FATAL.
  Bytes seq;
  seq.u8s({0, 2, 0, 2, 0, 7, 8});
  values(seq, 72, {0x05, 0x86, 0x07, 0x0a}, DType::F32);
  seq.u8s({1, 0, 0, 1, 2, 1, 3, 0, 1, 2, 1, 7, 194, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 0, 1, 2});
  seq.u64(3);
  put(dir, "none_fp32_raw_bits", seq.s);
  // FP32 2x2 table under seed-default (FP64 acc), MEAN of 12 alternating ±max, weighted with raw
  // FP32 weights: cancellation.
  Bytes mean;
  mean.u8s({0, 0, 0, 1, 0, 1, 1});
  values(mean, 4, {0x01, 0x81}, DType::F32);
  mean.u8s({0, 0, 1, 1, 1, 194, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1});
  values(mean, 12, {0x05, 0x85, 0x06}, DType::F32);
  mean.u8s({0, 3});
  mean.u64(9);
  put(dir, "fp32_mean_cancel", mean.s);
  put(dir, "empty", "");
  for (int k = 0; k < 4; ++k) put(dir, "random_" + std::to_string(k), random_bytes(200 + k, 300));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_ROOT (e.g. fuzz/corpus)\n", argv[0]);
    return 2;
  }
  const fs::path root(argv[1]);
  case_reader(root / "fuzz_case_reader");
  bounds_repair(root / "fuzz_bounds_repair");
  forward_emulation(root / "fuzz_forward_emulation");
  std::printf("seed corpora written under %s\n", root.c_str());
  return 0;
}
