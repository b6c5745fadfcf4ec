// .npy reading and writing (NEP 1: the NumPy array file format, versions 1.0, 2.0 and 3.0).
// Layout: "\x93NUMPY", major, minor, header length (uint16 LE for 1.0, uint32 LE for 2.0/3.0),
// then an ASCII (3.0: UTF-8) Python dict literal {'descr': ..., 'fortran_order': ..., 'shape': ...}
// padded with spaces and ended by '\n', then the C-order payload.
#include "tbe/io/npy.h"

#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include "tbe/errors.h"

namespace tbe::io {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
constexpr std::size_t kAlign = 64;  // NumPy >= 1.14 pads the header so the payload is 64-aligned
constexpr std::size_t kGrowthDigits = 21;  // NumPy >= 1.24 reserves room to grow axis 0

struct DescrInfo {
  const char* descr;
  std::size_t itemsize;
};
// The accepted element types: little-endian (or byte-order-free) bool, integers and IEEE floats.
constexpr DescrInfo kDescrs[] = {{"|b1", 1}, {"|u1", 1}, {"|i1", 1}, {"<u2", 2}, {"<i2", 2},
                                 {"<u4", 4}, {"<i4", 4}, {"<u8", 8}, {"<i8", 8}, {"<f2", 2},
                                 {"<f4", 4}, {"<f8", 8}};

std::optional<std::size_t> descr_itemsize(const std::string& d) {
  for (const DescrInfo& x : kDescrs)
    if (d == x.descr) return x.itemsize;
  return std::nullopt;
}

std::string allowed_descrs() {
  std::string s;
  for (const DescrInfo& x : kDescrs) s += (s.empty() ? "" : ", ") + std::string(x.descr);
  return s;
}

// Printable form of untrusted text for error messages (control bytes escaped, length capped).
std::string printable(const std::string& s) {
  std::string out = "'";
  for (std::size_t i = 0; i < s.size() && i < 60; ++i) {
    const unsigned char ch = static_cast<unsigned char>(s[i]);
    if (ch >= 0x20 && ch < 0x7f) {
      out += static_cast<char>(ch);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  if (s.size() > 60) out += "...";
  return out + "'";
}

[[noreturn]] void fail(const std::string& what, const std::string& field, const std::string& msg) {
  throw InvalidArgument(field, what + ": " + field + ": " + msg);
}

// A strict parser of the header dict NumPy writes: exactly the keys descr (a string),
// fortran_order (True/False) and shape (a tuple of non-negative integers), in any order, each
// once, separated by commas (trailing comma allowed), whitespace between tokens.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  void parse(std::string& descr, bool& fortran, std::vector<std::int64_t>& shape, int max_dims) {
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_ws();
    expect('{', "the header dict must start with '{'");
    skip_ws();
    while (!at('}')) {
      const std::string key = parse_string("a quoted key");
      skip_ws();
      expect(':', "expected ':' after key " + printable(key));
      skip_ws();
      if (key == "descr") {
        if (have_descr) error("header.descr", "key given twice");
        descr = parse_string("a quoted type string");
        have_descr = true;
      } else if (key == "fortran_order") {
        if (have_fortran) error("header.fortran_order", "key given twice");
        fortran = parse_bool();
        have_fortran = true;
      } else if (key == "shape") {
        if (have_shape) error("header.shape", "key given twice");
        parse_shape(shape, max_dims);
        have_shape = true;
      } else {
        error("header", "unknown key " + printable(key) +
                            " (allowed: 'descr', 'fortran_order', 'shape')");
      }
      skip_ws();
      if (at(',')) {
        ++pos_;
        skip_ws();
      } else if (!at('}')) {
        error("header", "expected ',' or '}' at byte " + std::to_string(pos_));
      }
    }
    ++pos_;  // '}'
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\t' ||
                                s_[pos_] == '\r' || s_[pos_] == '\0'))
      ++pos_;
    if (pos_ != s_.size())
      error("header", "unexpected text after the dict at byte " + std::to_string(pos_));
    if (!have_descr) error("header.descr", "missing key 'descr'");
    if (!have_fortran) error("header.fortran_order", "missing key 'fortran_order'");
    if (!have_shape) error("header.shape", "missing key 'shape'");
  }

 private:
  [[noreturn]] void error(const std::string& field, const std::string& msg) const {
    fail(what_, field, msg);
  }
  bool at(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  void skip_ws() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  void expect(char c, const std::string& msg) {
    if (!at(c)) error("header", msg + " (byte " + std::to_string(pos_) + ")");
    ++pos_;
  }
  std::string parse_string(const std::string& expected) {
    if (!at('\'') && !at('"')) error("header", "expected " + expected + " at byte " + std::to_string(pos_));
    const char q = s_[pos_++];
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != q) {
      const char c = s_[pos_++];
      if (c == '\\' || c == '\n') error("header", "escapes and newlines are not allowed in strings");
      out += c;
      if (out.size() > 64) error("header", "string longer than 64 characters");
    }
    if (pos_ >= s_.size()) error("header", "unterminated string");
    ++pos_;
    return out;
  }
  bool parse_bool() {
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    error("header.fortran_order", "expected True or False at byte " + std::to_string(pos_));
  }
  void parse_shape(std::vector<std::int64_t>& shape, int max_dims) {
    shape.clear();
    expect('(', "shape: expected a tuple '('");
    skip_ws();
    bool trailing_comma = false;
    while (!at(')')) {
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9')
        error("header.shape", "expected a non-negative integer at byte " + std::to_string(pos_));
      std::int64_t v = 0;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
        const int digit = s_[pos_++] - '0';
        if (v > (std::numeric_limits<std::int64_t>::max() - digit) / 10)
          error("header.shape", "dimension " + std::to_string(shape.size()) +
                                    " overflows int64");
        v = v * 10 + digit;
      }
      if (at('L')) ++pos_;  // Python 2 long suffix, as old NumPy wrote it
      shape.push_back(v);
      if (static_cast<int>(shape.size()) > max_dims)
        error("header.shape", "more than " + std::to_string(max_dims) + " dimensions (limit)");
      skip_ws();
      trailing_comma = false;
      if (at(',')) {
        ++pos_;
        trailing_comma = true;
        skip_ws();
      } else if (!at(')')) {
        error("header.shape", "expected ',' or ')' at byte " + std::to_string(pos_));
      }
    }
    ++pos_;
    // Python: (3) is not a tuple; one element needs the comma.
    if (shape.size() == 1 && !trailing_comma)
      error("header.shape", "a 1-tuple needs a trailing comma, e.g. (3,)");
  }

  const std::string& s_;
  const std::string& what_;
  std::size_t pos_ = 0;
};

std::uint32_t read_le(const std::byte* p, std::size_t n) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}

std::string shape_repr(const std::vector<std::int64_t>& shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

}  // namespace

std::int64_t NpyArray::numel() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::size_t NpyArray::itemsize() const { return descr_itemsize(descr).value_or(0); }

NpyArray parse_npy(const std::byte* bytes, std::size_t size, const std::string& what,
                   const NpyLimits& limits) {
  if (size < kMagicLen + 2) fail(what, "magic", "file of " + std::to_string(size) + " bytes is shorter than the 8-byte preamble");
  if (std::memcmp(bytes, kMagic, kMagicLen) != 0) fail(what, "magic", "not a .npy file (expected \\x93NUMPY)");
  const int major = static_cast<int>(bytes[6]), minor = static_cast<int>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    fail(what, "version", std::to_string(major) + "." + std::to_string(minor) + " (allowed: 1.0, 2.0, 3.0)");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = kMagicLen + 2 + len_bytes;
  if (size < prefix) fail(what, "header_len", "file of " + std::to_string(size) + " bytes ends inside the header length field");
  const std::uint64_t header_len = read_le(bytes + kMagicLen + 2, len_bytes);
  if (static_cast<std::int64_t>(header_len) > limits.max_header_bytes)
    fail(what, "header_len", std::to_string(header_len) + " bytes exceeds the limit " + std::to_string(limits.max_header_bytes));
  if (header_len > size - prefix)
    fail(what, "header_len", std::to_string(header_len) + " bytes runs past the end of the file (" + std::to_string(size - prefix) + " bytes after the preamble)");
  std::string header(reinterpret_cast<const char*>(bytes + prefix), header_len);
  for (char c : header)
    if (major < 3 && (static_cast<unsigned char>(c) >= 0x80))
      fail(what, "header", "non-ASCII byte in a version " + std::to_string(major) + ".0 header");

  NpyArray a;
  bool fortran = false;
  HeaderParser(header, what).parse(a.descr, fortran, a.shape, limits.max_dims);
  const std::optional<std::size_t> item = descr_itemsize(a.descr);
  if (!item) {
    const bool big = !a.descr.empty() && a.descr[0] == '>';
    fail(what, "header.descr", printable(a.descr) + (big ? " is big-endian (only little-endian is read)" : " is not supported") + " (allowed: " + allowed_descrs() + ")");
  }
  if (fortran) fail(what, "header.fortran_order", "True (only C order is read; save with np.ascontiguousarray)");

  // numel and payload bytes, overflow-checked against the limit before anything is allocated.
  const std::int64_t max_bytes = limits.max_bytes;
  std::int64_t numel = 1;
  bool zero = false;
  for (std::int64_t d : a.shape) zero = zero || d == 0;
  if (!zero) {
    for (std::int64_t d : a.shape) {
      if (numel > max_bytes / d)
        fail(what, "header.shape", shape_repr(a.shape) + ": " + std::to_string(*item) + "-byte elements exceed the limit of " + std::to_string(max_bytes) + " bytes");
      numel *= d;
    }
  } else {
    numel = 0;
  }
  if (numel > max_bytes / static_cast<std::int64_t>(*item))
    fail(what, "header.shape", shape_repr(a.shape) + ": " + std::to_string(numel) + " elements of " + std::to_string(*item) + " bytes exceed the limit of " + std::to_string(max_bytes) + " bytes");
  const std::uint64_t payload = static_cast<std::uint64_t>(numel) * *item;
  const std::uint64_t available = size - prefix - header_len;
  if (payload != available)
    fail(what, "payload", std::to_string(available) + " bytes after the header != prod(shape " + shape_repr(a.shape) + ") * itemsize " + std::to_string(*item) + " = " + std::to_string(payload) + (available < payload ? " (truncated)" : " (trailing bytes)"));
  const std::byte* data = bytes + prefix + header_len;
  a.data.assign(data, data + payload);
  return a;
}

NpyArray read_npy(const std::string& path, const NpyLimits& limits) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw InvalidArgument("file", path + ": not a readable regular file");
  const std::uintmax_t fsize = std::filesystem::file_size(path, ec);
  if (ec) throw InvalidArgument("file", path + ": cannot get its size (" + ec.message() + ")");
  const std::uint64_t cap = static_cast<std::uint64_t>(limits.max_bytes) + static_cast<std::uint64_t>(limits.max_header_bytes) + 16;
  if (fsize > cap)
    throw InvalidArgument("file", path + ": file: " + std::to_string(fsize) + " bytes exceeds the limit " + std::to_string(cap));
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InvalidArgument("file", path + ": cannot open");
  std::vector<std::byte> buf(static_cast<std::size_t>(fsize));
  in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  if (static_cast<std::uintmax_t>(in.gcount()) != fsize)
    throw InvalidArgument("file", path + ": short read (" + std::to_string(in.gcount()) + " of " + std::to_string(fsize) + " bytes)");
  return parse_npy(buf.data(), buf.size(), path, limits);
}

namespace {

// The version 1.0 preamble and header of an array with `a`'s descr and shape (as NumPy writes it),
// after checking that `data_bytes` equals prod(shape)·itemsize.
std::string npy_header(const std::string& descr, const std::vector<std::int64_t>& shape,
                       std::size_t data_bytes) {
  const std::optional<std::size_t> item = descr_itemsize(descr);
  if (!item) throw InvalidArgument("descr", "serialize_npy: descr " + printable(descr) + " is not supported (allowed: " + allowed_descrs() + ")");
  for (std::int64_t d : shape)
    if (d < 0) throw InvalidArgument("shape", "serialize_npy: negative dimension " + std::to_string(d));
  // numel without overflow: the data size bounds it when no dimension is 0.
  std::uint64_t numel = 1;
  bool zero = false;
  for (std::int64_t d : shape) zero = zero || d == 0;
  if (zero) {
    numel = 0;
  } else {
    for (std::int64_t d : shape) {
      if (numel > data_bytes / static_cast<std::uint64_t>(d) + 1)
        throw InvalidArgument("shape", "serialize_npy: shape " + shape_repr(shape) + " does not match " + std::to_string(data_bytes) + " data bytes");
      numel *= static_cast<std::uint64_t>(d);
    }
  }
  if (numel > data_bytes || numel * *item != data_bytes)
    throw InvalidArgument("data", "serialize_npy: " + std::to_string(data_bytes) + " data bytes != prod(shape " + shape_repr(shape) + ") * " + std::to_string(*item));
  // The dict exactly as NumPy's np.lib.format writes it (keys sorted, repr values).
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_repr(shape) + ", }";
  if (!shape.empty()) header.append(kGrowthDigits - std::to_string(shape[0]).size(), ' ');
  const std::size_t unpadded = kMagicLen + 2 + 2 + header.size() + 1;
  header.append(kAlign - unpadded % kAlign, ' ');  // 1..64 spaces, as NumPy pads
  header += '\n';
  if (header.size() > 65535) throw InvalidArgument("shape", "serialize_npy: header too long for format 1.0");
  std::string out(kMagic, kMagicLen);
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header;
}

void write_file(const std::string& path, const std::string& header, const void* data,
                std::size_t bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw InvalidArgument("file", path + ": cannot open for writing");
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  if (bytes > 0) out.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  out.close();
  if (!out) throw InvalidArgument("file", path + ": write failed");
}

}  // namespace

std::vector<std::byte> serialize_npy(const NpyArray& a) {
  const std::string header = npy_header(a.descr, a.shape, a.data.size());
  std::vector<std::byte> out(header.size() + a.data.size());
  std::memcpy(out.data(), header.data(), header.size());
  if (!a.data.empty()) std::memcpy(out.data() + header.size(), a.data.data(), a.data.size());
  return out;
}

void write_npy(const std::string& path, const NpyArray& a) {
  write_file(path, npy_header(a.descr, a.shape, a.data.size()), a.data.data(), a.data.size());
}

void write_npy(const std::string& path, DType t, std::int64_t n, const void* data) {
  if (n < 0) throw InvalidArgument("shape", "write_npy: negative length " + std::to_string(n));
  write_npy(path, t, std::vector<std::int64_t>{n}, data);
}

void write_npy(const std::string& path, DType t, const std::vector<std::int64_t>& shape,
               const void* data) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0) throw InvalidArgument("shape", "write_npy: negative dimension " + std::to_string(d) + " in " + shape_repr(shape));
    if (d != 0 && n > std::numeric_limits<std::int64_t>::max() / d)
      throw InvalidArgument("shape", "write_npy: prod(shape " + shape_repr(shape) + ") overflows int64");
    n *= d;
  }
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(t);
  if (bytes > 0 && data == nullptr) throw InvalidArgument("data", "write_npy: null data for " + std::to_string(n) + " elements");
  write_file(path, npy_header(npy_descr(t), shape, bytes), data, bytes);
}

std::string npy_descr(DType t) {
  switch (t) {
    case DType::F16: return "<f2";
    case DType::BF16: return "<u2";
    case DType::F32: return "<f4";
    case DType::F64: return "<f8";
    case DType::I32: return "<i4";
    case DType::I64: return "<i8";
  }
  throw InvalidArgument("dtype", "npy_descr: unknown dtype");
}

NpyArray make_npy(DType t, std::vector<std::int64_t> shape, const void* data) {
  NpyArray a;
  a.descr = npy_descr(t);
  a.shape = std::move(shape);
  std::int64_t n = 1;
  for (std::int64_t d : a.shape) {
    if (d < 0) throw InvalidArgument("shape", "make_npy: negative dimension " + std::to_string(d));
    n *= d;
  }
  const std::size_t bytes = static_cast<std::size_t>(n) * dtype_size(t);
  if (bytes > 0 && data == nullptr) throw InvalidArgument("data", "make_npy: null data for " + std::to_string(n) + " elements");
  const std::byte* p = static_cast<const std::byte*>(data);
  if (bytes > 0) a.data.assign(p, p + bytes);
  return a;
}

}  // namespace tbe::io
