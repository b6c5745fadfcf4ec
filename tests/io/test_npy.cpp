// .npy reading/writing: bytes equal to what NumPy writes (headers derived by hand from NEP 1 and
// numpy/lib/format.py: sorted-key dict repr, 21 - len(repr(shape[0])) growth spaces, padding to a
// multiple of 64 bytes, '\n' last), round trips, and rejection of malformed files.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "tbe/errors.h"
#include "tbe/io/npy.h"

using namespace tbe;
using namespace tbe::io;

namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> out(s.size());
  if (!s.empty()) std::memcpy(out.data(), s.data(), s.size());
  return out;
}

// Preamble of a version 1.0 file with the given header length.
std::string preamble_v1(std::uint16_t hlen) {
  std::string s = "\x93NUMPY";
  s += '\x01';
  s += '\x00';
  s += static_cast<char>(hlen & 0xff);
  s += static_cast<char>(hlen >> 8);
  return s;
}

// A v1.0 file with the given dict text (padded as NumPy pads) and payload.
std::string npy_file(const std::string& dict, const std::string& payload) {
  std::string header = dict;
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append(64 - unpadded % 64, ' ');
  header += '\n';
  return preamble_v1(static_cast<std::uint16_t>(header.size())) + header + payload;
}

// Expects parse_npy to throw InvalidArgument whose message contains every part of `parts`.
void expect_rejected(const std::string& file, std::vector<std::string> parts) {
  const std::vector<std::byte> b = bytes_of(file);
  try {
    (void)parse_npy(b.data(), b.size(), "t.npy");
    FAIL("accepted a malformed file; expected an error mentioning " << parts.front());
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.rfind("t.npy: ", 0) == 0);
    for (const auto& p : parts) CHECK(msg.find(p) != std::string::npos);
  }
}

const std::string kDictI8 = "{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }";

}  // namespace

TEST_CASE("npy: bytes equal NumPy's np.save for hand-checked headers", "[io][npy]") {
  SECTION("int64, shape (3,): header length 118 (0x76 = 'v')") {
    const std::int64_t v[] = {0, 1, 2};
    const std::vector<std::byte> got = serialize_npy(make_npy(DType::I64, {3}, v));
    // 57-character dict, 20 growth spaces (21 - len('3')) and 40 more to reach 128 bytes.
    std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + kDictI8 +
                           std::string(60, ' ') + "\n";
    REQUIRE(expected.size() == 128);
    for (std::int64_t x : v)
      for (int k = 0; k < 8; ++k) expected += static_cast<char>((x >> (8 * k)) & 0xff);
    CHECK(got == bytes_of(expected));
  }
  SECTION("float32, shape (2, 3)") {
    const float v[6] = {0, 1, 2, 3, 4, 5};
    const std::vector<std::byte> got = serialize_npy(make_npy(DType::F32, {2, 3}, v));
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
    std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict +
                           std::string(58, ' ') + "\n";
    REQUIRE(expected.size() == 128);
    expected.append(reinterpret_cast<const char*>(v), sizeof v);
    CHECK(got == bytes_of(expected));
  }
  SECTION("float64 scalar, shape (): no growth spaces") {
    const double v = 1.5;
    const std::vector<std::byte> got = serialize_npy(make_npy(DType::F64, {}, &v));
    const std::string dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (), }";
    std::string expected = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict +
                           std::string(62, ' ') + "\n";
    expected.append(reinterpret_cast<const char*>(&v), 8);
    CHECK(got == bytes_of(expected));
  }
  SECTION("a header that needs a second 64-byte block") {
    const std::vector<std::int64_t> shape = {0, 1000000000000, 1000000000000, 1000000000000};
    const std::vector<std::byte> got = serialize_npy(make_npy(DType::BF16, shape, nullptr));
    const std::size_t hlen = static_cast<std::size_t>(got[8]) | static_cast<std::size_t>(got[9]) << 8;
    CHECK((10 + hlen) % 64 == 0);
    CHECK(hlen == 182);  // 10 + 101-char dict + 20 spaces + '\n' = 132 bytes -> 192
    CHECK(got.size() == 192);
    CHECK(static_cast<char>(got[10 + hlen - 1]) == '\n');
  }
}

TEST_CASE("npy: every dtype round-trips, and other spellings NumPy writes are read", "[io][npy]") {
  for (DType t : {DType::F16, DType::BF16, DType::F32, DType::F64, DType::I32, DType::I64}) {
    std::vector<std::byte> raw(7 * dtype_size(t));
    for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = static_cast<std::byte>(i * 37 + 1);
    const NpyArray a = make_npy(t, {7}, raw.data());
    const std::vector<std::byte> b = serialize_npy(a);
    const NpyArray back = parse_npy(b.data(), b.size());
    CHECK(back.descr == npy_descr(t));
    CHECK(back.shape == std::vector<std::int64_t>{7});
    CHECK(back.data == raw);
    CHECK(back.numel() == 7);
    CHECK(back.itemsize() == dtype_size(t));
  }
  CHECK(npy_descr(DType::BF16) == "<u2");
  // Old NumPy: 16-byte alignment, no trailing comma, double quotes, keys in another order; 2.0.
  SECTION("variants") {
    std::string dict = "{\"shape\": (2,), \"fortran_order\": False, \"descr\": \"<i4\"}";
    std::string file = preamble_v1(static_cast<std::uint16_t>(dict.size() + 1)) + dict + "\n" +
                       std::string("\x05\x00\x00\x00\x07\x00\x00\x00", 8);
    std::vector<std::byte> b = bytes_of(file);
    NpyArray a = parse_npy(b.data(), b.size());
    CHECK(a.descr == "<i4");
    CHECK(a.shape == std::vector<std::int64_t>{2});
    std::string v2 = std::string("\x93NUMPY\x02\x00", 8);
    const std::string d2 = kDictI8 + "\n";
    v2 += static_cast<char>(d2.size());
    v2 += std::string(3, '\0');
    v2 += d2 + std::string(24, '\0');
    b = bytes_of(v2);
    a = parse_npy(b.data(), b.size());
    CHECK(a.shape == std::vector<std::int64_t>{3});
    CHECK(a.data.size() == 24);
  }
  SECTION("zero-size arrays") {
    const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 99999999999), }";
    const std::vector<std::byte> b = bytes_of(npy_file(dict, ""));
    const NpyArray a = parse_npy(b.data(), b.size());
    CHECK(a.numel() == 0);
    CHECK(a.data.empty());
  }
  SECTION("files") {
    const std::string path = (std::filesystem::temp_directory_path() / "tbe_test_io_rt.npy").string();
    const std::int32_t v[] = {-1, 2, 3};
    write_npy(path, make_npy(DType::I32, {3}, v));
    const NpyArray a = read_npy(path);
    CHECK(a.descr == "<i4");
    CHECK(std::memcmp(a.data.data(), v, sizeof v) == 0);
    std::filesystem::remove(path);
    CHECK_THROWS_AS(read_npy(path), InvalidArgument);
  }
}

TEST_CASE("npy: malformed files are rejected with the field named", "[io][npy][untrusted]") {
  const std::string payload(24, '\0');
  const std::string good = npy_file(kDictI8, payload);
  {
    const std::vector<std::byte> b = bytes_of(good);
    REQUIRE_NOTHROW(parse_npy(b.data(), b.size()));
  }
  SECTION("truncated anywhere") {
    for (std::size_t n = 0; n < good.size(); ++n) {
      const std::vector<std::byte> b = bytes_of(good.substr(0, n));
      CHECK_THROWS_AS(parse_npy(b.data(), b.size(), "t.npy"), InvalidArgument);
    }
    expect_rejected(good.substr(0, good.size() - 1), {"payload", "truncated", "24"});
    expect_rejected(good.substr(0, 4), {"magic"});
  }
  SECTION("trailing bytes") { expect_rejected(good + "x", {"payload", "trailing"}); }
  SECTION("bad magic") {
    std::string f = good;
    f[1] = 'n';
    expect_rejected(f, {"magic"});
  }
  SECTION("unknown version") {
    std::string f = good;
    f[6] = '\x04';
    expect_rejected(f, {"version", "4.0"});
  }
  SECTION("header length past EOF") {
    std::string f = good;
    f[8] = '\xff';
    f[9] = '\x7f';
    expect_rejected(f, {"header_len", "32767", "past the end"});
  }
  SECTION("header length over the limit (v2.0)") {
    std::string f = std::string("\x93NUMPY\x02\x00", 8) + std::string("\xff\xff\xff\x7f", 4) + "{";
    expect_rejected(f, {"header_len", "2147483647", "limit 65536"});
  }
  SECTION("shape product overflow and huge shapes") {
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", ""),
                    {"header.shape", "limit"});
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (99999999999999999999,), }", ""),
                    {"header.shape", "overflows int64"});
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (536870913,), }", ""),
                    {"header.shape", "exceed the limit of 4294967296 bytes"});
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", ""),
                    {"header.shape", "more than 8 dimensions"});
  }
  SECTION("payload size mismatch") {
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (4,), }", payload),
                    {"payload", "24 bytes", "32"});
  }
  SECTION("fortran order") {
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': True, 'shape': (3,), }", payload),
                    {"header.fortran_order", "True"});
  }
  SECTION("unknown or big-endian descr") {
    expect_rejected(npy_file("{'descr': '<c16', 'fortran_order': False, 'shape': (3,), }", payload),
                    {"header.descr", "<c16", "allowed"});
    expect_rejected(npy_file("{'descr': '>i8', 'fortran_order': False, 'shape': (3,), }", payload),
                    {"header.descr", "big-endian"});
    expect_rejected(npy_file("{'descr': [('a', '<i8')], 'fortran_order': False, 'shape': (3,), }", payload),
                    {"header"});
  }
  SECTION("dict syntax") {
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': False}", payload), {"header.shape", "missing"});
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (3), }", payload),
                    {"header.shape", "trailing comma"});
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (-3,), }", payload),
                    {"header.shape", "non-negative"});
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), 'x': 1}", payload),
                    {"header", "unknown key 'x'"});
    expect_rejected(npy_file("{'descr': '<i8', 'descr': '<i8', 'fortran_order': False, 'shape': (3,)}", payload),
                    {"header.descr", "twice"});
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': 0, 'shape': (3,), }", payload),
                    {"header.fortran_order", "True or False"});
    expect_rejected(npy_file("{'descr': '<i8' 'fortran_order': False, 'shape': (3,), }", payload),
                    {"header", "expected ',' or '}'"});
    expect_rejected(npy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), } junk", payload),
                    {"header", "after the dict"});
    expect_rejected(npy_file("{'descr': '<i8, 'fortran_order': False, 'shape': (3,), }", payload),
                    {"header"});
  }
}

TEST_CASE("npy: writer refuses inconsistent arrays", "[io][npy]") {
  NpyArray a;
  a.descr = "<f4";
  a.shape = {3};
  a.data.resize(8);
  CHECK_THROWS_AS(serialize_npy(a), InvalidArgument);
  a.descr = "<c8";
  a.data.resize(24);
  CHECK_THROWS_AS(serialize_npy(a), InvalidArgument);
  a.descr = "<f4";
  a.shape = {-1};
  CHECK_THROWS_AS(serialize_npy(a), InvalidArgument);
}
