// fuzz_case_reader: bytes -> the untrusted-input readers of tbe_io.
//  1. The whole input is parsed as a .npy image (tbe::io::parse_npy).
//  2. The input is also split into a case folder: the bytes up to the first marker line are
//     case.json, and each "\n@file NAME\n" marker starts file NAME (names restricted to
//     [A-Za-z0-9._-], at most 16 files), e.g.
//        {"format": "tbe-case", ...}\n@file indices.npy\n<npy bytes>\n@file offsets.npy\n<npy bytes>
//     written to a private temporary folder and read with tbe::io::read_any_case (every operator:
//     forward, backward, ikbo-lce, ikbo-attention).
// Checks (each failure aborts): no crash / sanitizer report; every error is a tbe::Error (an
// InvalidArgument with a non-empty message and argument); anything else thrown is a bug.
// On success: a parsed .npy has data = numel·itemsize and round-trips through serialize_npy; a
// read case round-trips through write_case/read_any_case bit for bit (bitwise_equal), passes its
// operator's validation (tbe::validate, validate(BackwardProblem, strategy), ikbo::validate and
// validate_map), and, when small, runs on the reference: forward_reference (bounds mode not NONE
// with a violation) or backward_reference without an error other than a BoundsCheckError under
// FATAL, lce_reference / attention_reference without any error.
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <omp.h>

#include "fuzz_input.h"
#include "tbe/backward.h"
#include "tbe/bounds_check.h"
#include "tbe/forward.h"
#include "tbe/ikbo.h"
#include "tbe/io/any_case_file.h"
#include "tbe/io/npy.h"

using namespace tbe;
using tbe_fuzz::fail;
namespace fs = std::filesystem;

namespace {

fs::path g_case_dir, g_copy_dir;  // private temporary folders (created once, removed at exit)

void remove_dirs() {
  std::error_code ec;
  if (!g_case_dir.empty()) fs::remove_all(g_case_dir.parent_path(), ec);
}

void reset_dir(const fs::path& d) {
  std::error_code ec;
  fs::remove_all(d, ec);
  fs::create_directories(d);
}

bool good_name(std::string_view n) {
  if (n.empty() || n.size() > 64 || n == "." || n == "..") return false;
  for (char ch : n)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '.' || ch == '_' || ch == '-'))
      return false;
  return true;
}

void write_bytes(const fs::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("cannot write " + p.string());
}

// Every error of the readers must be a tbe::Error; InvalidArgument must name something.
template <class F>
bool expect_only_tbe_errors(const char* what, F&& f) {
  try {
    f();
    return true;
  } catch (const InvalidArgument& e) {
    if (std::getenv("TBE_FUZZ_VERBOSE")) std::fprintf(stderr, "%s rejected: %s\n", what, e.what());
    TBE_FUZZ_CHECK(std::strlen(e.what()) > 0, std::string(what) + ": empty message");
    TBE_FUZZ_CHECK(!e.argument().empty(), std::string(what) + ": empty argument(): " + e.what());
  } catch (const Error& e) {
    TBE_FUZZ_CHECK(std::strlen(e.what()) > 0, std::string(what) + ": empty message");
  } catch (const std::exception& e) {
    fail(std::string(what) + ": non-tbe exception escaped: " + e.what());
  } catch (...) {
    fail(std::string(what) + ": non-standard exception escaped");
  }
  return false;
}

void check_npy(const std::uint8_t* data, std::size_t size) {
  io::NpyArray a;
  if (!expect_only_tbe_errors("parse_npy", [&] {
        a = io::parse_npy(reinterpret_cast<const std::byte*>(data), size, "fuzz.npy");
      }))
    return;
  std::int64_t numel = 1;
  for (auto d : a.shape) {
    TBE_FUZZ_CHECK(d >= 0, "negative dimension accepted");
    numel *= d;
  }
  TBE_FUZZ_CHECK(a.numel() == numel, "numel() != prod(shape)");
  TBE_FUZZ_CHECK(a.data.size() == static_cast<std::size_t>(numel) * a.itemsize(),
                 "payload size != numel·itemsize");
  const std::vector<std::byte> img = io::serialize_npy(a);
  io::NpyArray b;
  try {
    b = io::parse_npy(img.data(), img.size(), "roundtrip.npy");
  } catch (const std::exception& e) {
    fail(std::string("serialize_npy output does not parse: ") + e.what());
  }
  TBE_FUZZ_CHECK(b.descr == a.descr && b.shape == a.shape && b.data == a.data,
                 "npy round trip changed the array");
}

// Small enough to run on the reference within the fuzzer's time budget.
constexpr std::int64_t kMaxReferenceWork = std::int64_t{1} << 16;

// Whether the product of non-negative factors is at most kMaxReferenceWork (no overflow).
bool small_work(std::initializer_list<std::int64_t> factors) {
  for (std::int64_t f : factors)
    if (f == 0) return true;
  std::int64_t n = 1;
  for (std::int64_t f : factors) {
    if (f > kMaxReferenceWork || n > kMaxReferenceWork / f) return false;
    n *= f;
  }
  return true;
}

void check_forward(io::CaseFile& c) {
  ForwardProblem p;
  try {
    p = c.problem.view();
  } catch (const std::exception& e) {
    fail(std::string("read_case returned a case whose view() throws: ") + e.what());
  }
  const Status st = validate(p);
  TBE_FUZZ_CHECK(st.ok(), "read_case returned an invalid problem: " + st.message);

  // Run the reference on small cases (NONE trusts the caller: only with valid bounds).
  const OutputLayout layout = make_output_layout(p);
  if (layout.numel > kMaxReferenceWork || p.lookups.num_indices > kMaxReferenceWork) return;
  if (p.options.bounds_check == BoundsCheckMode::None && find_first_violation(p)) return;
  std::vector<std::byte> out(static_cast<std::size_t>(layout.numel) *
                             dtype_size(p.options.policy.output));
  try {
    (void)forward_reference(p, out.data());
  } catch (const BoundsCheckError&) {
    TBE_FUZZ_CHECK(p.options.bounds_check == BoundsCheckMode::Fatal,
                   "BoundsCheckError outside FATAL");
  } catch (const std::exception& e) {
    fail(std::string("forward_reference failed on an accepted case: ") + e.what());
  }
}

void check_backward(io::BackwardCaseFile& c) {
  BackwardProblem p;
  try {
    p = c.problem.view();
  } catch (const std::exception& e) {
    fail(std::string("read_backward_case returned a case whose view() throws: ") + e.what());
  }
  const Status st = validate(p, c.strategy ? c.strategy->strategy : BackwardStrategy{});
  TBE_FUZZ_CHECK(st.ok(), "read_backward_case returned an invalid problem: " + st.message);
  const ForwardProblem& fp = p.forward;
  if (make_output_layout(fp).numel > kMaxReferenceWork || fp.lookups.num_indices > kMaxReferenceWork ||
      c.problem.forward.weights.size() > static_cast<std::size_t>(kMaxReferenceWork) * 4)
    return;
  std::vector<std::byte> weights = c.problem.forward.weights;  // updated in place, as FBGEMM does
  std::vector<float> momentum = c.problem.momentum;
  std::vector<float> psw_grad(fp.lookups.weighted() ? static_cast<std::size_t>(fp.lookups.num_indices) : 0);
  BackwardOutputs out;
  out.weights = weights.data();
  out.momentum = p.momentum != nullptr ? momentum.data() : nullptr;
  out.per_sample_weight_grad = psw_grad.empty() ? nullptr : psw_grad.data();
  try {
    (void)backward_reference(p, out);
  } catch (const BoundsCheckError&) {
    TBE_FUZZ_CHECK(fp.options.bounds_check == BoundsCheckMode::Fatal, "BoundsCheckError outside FATAL");
  } catch (const std::exception& e) {
    fail(std::string("backward_reference failed on an accepted case: ") + e.what());
  }
}

void check_lce(const io::LceCaseFile& c) {
  const ikbo::LceProblem p = c.problem.view();
  const Status st = ikbo::validate(p);
  TBE_FUZZ_CHECK(st.ok(), "read_lce_case returned an invalid problem: " + st.message);
  const Status sm = ikbo::validate_map(c.problem.cand_to_user, p.U);
  TBE_FUZZ_CHECK(sm.ok(), "read_lce_case returned an invalid map: " + sm.message);
  // Work: B·M·N·K_c for the candidate part, U·M·N·K_u for the user part.
  if (!small_work({p.B, p.M, p.N, p.K_c}) || !small_work({p.U, p.M, p.N, p.K_u}) ||
      !small_work({p.U}))
    return;
  std::vector<std::byte> out = c.problem.make_output();
  try {
    ikbo::lce_reference(p, out.data());
  } catch (const std::exception& e) {
    fail(std::string("lce_reference failed on an accepted case: ") + e.what());
  }
}

void check_attention(const io::AttentionCaseFile& c) {
  const ikbo::AttentionProblem p = c.problem.view();
  const Status st = ikbo::validate(p);
  TBE_FUZZ_CHECK(st.ok(), "read_attention_case returned an invalid problem: " + st.message);
  const Status sm = ikbo::validate_map(c.problem.cand_to_user, p.U);
  TBE_FUZZ_CHECK(sm.ok(), "read_attention_case returned an invalid map: " + sm.message);
  // Work: every query row against its user's keys, bounded by B·n_seed·H·Dh·(max keys of a user).
  const std::int64_t rows = static_cast<std::int64_t>(c.problem.q.size() / dtype_size(p.policy.storage));
  const std::int64_t keys = p.total_keys();
  if (!small_work({rows, std::max<std::int64_t>(keys, 1)}) || !small_work({p.U})) return;
  std::vector<std::byte> out = c.problem.make_output();
  try {
    ikbo::attention_reference(p, out.data());
  } catch (const std::exception& e) {
    fail(std::string("attention_reference failed on an accepted case: ") + e.what());
  }
}

void check_case(const std::uint8_t* data, std::size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  static constexpr std::string_view kMark = "\n@file ";
  reset_dir(g_case_dir);
  std::size_t pos = all.find(kMark);
  write_bytes(g_case_dir / "case.json", all.substr(0, pos));
  int files = 0;
  while (pos != std::string_view::npos && files < 16) {
    const std::size_t name_begin = pos + kMark.size();
    const std::size_t name_end = all.find('\n', name_begin);
    if (name_end == std::string_view::npos) break;
    const std::size_t next = all.find(kMark, name_end);
    const std::string_view name = all.substr(name_begin, name_end - name_begin);
    const std::string_view body =
        all.substr(name_end + 1, next == std::string_view::npos ? std::string_view::npos
                                                                : next - name_end - 1);
    if (good_name(name) && name != "case.json") {
      write_bytes(g_case_dir / std::string(name), body);
      ++files;
    }
    pos = next;
  }

  io::AnyCaseFile c;
  if (!expect_only_tbe_errors("read_any_case", [&] { c = io::read_any_case(g_case_dir.string()); })) return;

  if (std::getenv("TBE_FUZZ_VERBOSE"))
    std::fprintf(stderr, "read_any_case accepted a case of operator %s\n", io::to_string(io::case_operator(c)).c_str());
  // Accepted: writing + reading it back gives the same case, bit for bit.
  io::AnyCaseFile back;
  try {
    reset_dir(g_copy_dir);
    io::write_case(g_copy_dir.string(), c);
    back = io::read_any_case(g_copy_dir.string());
  } catch (const std::exception& e) {
    fail(std::string("write_case/read_any_case round trip failed: ") + e.what());
  }
  TBE_FUZZ_CHECK(io::bitwise_equal(back, c), "round trip changed the case");

  if (auto* f = std::get_if<io::CaseFile>(&c)) check_forward(*f);
  if (auto* b = std::get_if<io::BackwardCaseFile>(&c)) check_backward(*b);
  if (auto* l = std::get_if<io::LceCaseFile>(&c)) check_lce(*l);
  if (auto* a = std::get_if<io::AttentionCaseFile>(&c)) check_attention(*a);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  omp_set_num_threads(1);
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + "/tbe-fuzz-case-XXXXXX";
  if (!mkdtemp(templ.data())) fail("mkdtemp failed for " + templ);
  g_case_dir = fs::path(templ) / "case";
  g_copy_dir = fs::path(templ) / "copy";
  std::atexit(remove_dirs);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_npy(data, size);
  check_case(data, size);
  return 0;
}
