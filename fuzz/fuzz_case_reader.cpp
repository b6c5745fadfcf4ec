// fuzz_case_reader: bytes -> the untrusted-input readers of tbe_io.
//  1. The whole input is parsed as a .npy image (tbe::io::parse_npy).
//  2. The input is also split into a case folder: the bytes up to the first marker line are
//     case.json, and each "\n@file NAME\n" marker starts file NAME (names restricted to
//     [A-Za-z0-9._-], at most 16 files), e.g.
//        {"format": "tbe-case", ...}\n@file indices.npy\n<npy bytes>\n@file offsets.npy\n<npy bytes>
//     written to a private temporary folder and read with tbe::io::read_case.
// Checks (each failure aborts): no crash / sanitizer report; every error is a tbe::Error (an
// InvalidArgument with a non-empty message and argument); anything else thrown is a bug.
// On success: a parsed .npy has data = numel·itemsize and round-trips through serialize_npy; a
// read case passes tbe::validate, round-trips through write_case/read_case unchanged, and (when
// small and its bounds mode is not NONE) runs forward_reference without error other than a
// BoundsCheckError under FATAL.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <omp.h>

#include "fuzz_input.h"
#include "tbe/bounds_check.h"
#include "tbe/forward.h"
#include "tbe/io/case_file.h"
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

bool same_problem(const ForwardCase& a, const ForwardCase& b) {
  return a.weights_dtype == b.weights_dtype && a.weights == b.weights && a.rows == b.rows &&
         a.dims == b.dims && a.table_offsets == b.table_offsets &&
         a.feature_table_map == b.feature_table_map && a.index_dtype == b.index_dtype &&
         a.indices == b.indices && a.offsets == b.offsets &&
         a.per_sample_weights.size() == b.per_sample_weights.size() &&
         (a.per_sample_weights.empty() ||  // bitwise: NaN and -0 weights must survive too
          std::memcmp(a.per_sample_weights.data(), b.per_sample_weights.data(),
                      a.per_sample_weights.size() * sizeof(float)) == 0) &&
         a.batch_size == b.batch_size && a.vbe_batch_sizes == b.vbe_batch_sizes &&
         a.vbe_ranks == b.vbe_ranks && a.options.pooling == b.options.pooling &&
         a.options.bounds_check == b.options.bounds_check && a.options.policy == b.options.policy;
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

  io::CaseFile c;
  if (!expect_only_tbe_errors("read_case", [&] { c = io::read_case(g_case_dir.string()); })) return;

  if (std::getenv("TBE_FUZZ_VERBOSE")) std::fprintf(stderr, "read_case accepted %s\n", c.name.c_str());
  // Accepted: the problem is valid, and writing + reading it back gives the same case.
  ForwardProblem p;
  try {
    p = c.problem.view();
  } catch (const std::exception& e) {
    fail(std::string("read_case returned a case whose view() throws: ") + e.what());
  }
  const Status st = validate(p);
  TBE_FUZZ_CHECK(st.ok(), "read_case returned an invalid problem: " + st.message);
  io::CaseFile back;
  try {
    reset_dir(g_copy_dir);
    io::write_case(g_copy_dir.string(), c);
    back = io::read_case(g_copy_dir.string());
  } catch (const std::exception& e) {
    fail(std::string("write_case/read_case round trip failed: ") + e.what());
  }
  TBE_FUZZ_CHECK(back.name == c.name && back.provenance == c.provenance && back.seed == c.seed,
                 "round trip changed the metadata");
  TBE_FUZZ_CHECK(same_problem(back.problem, c.problem), "round trip changed the problem");
  TBE_FUZZ_CHECK(back.recorded.has_value() == c.recorded.has_value() &&
                     back.expect.has_value() == c.expect.has_value(),
                 "round trip changed recorded/expect presence");
  if (c.recorded) {
    TBE_FUZZ_CHECK(back.recorded->output == c.recorded->output &&
                       back.recorded->output_dtype == c.recorded->output_dtype &&
                       back.recorded->warnings == c.recorded->warnings &&
                       back.recorded->error == c.recorded->error &&
                       back.recorded->implementation == c.recorded->implementation,
                   "round trip changed the recorded outputs");
  }
  if (c.expect)
    TBE_FUZZ_CHECK(back.expect->verdict == c.expect->verdict && back.expect->rule == c.expect->rule,
                   "round trip changed the expectation");

  // Run the reference on small cases (NONE trusts the caller: only with valid bounds).
  const OutputLayout layout = make_output_layout(p);
  if (layout.numel > (1 << 16) || p.lookups.num_indices > (1 << 16)) return;
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
