// Shared pieces of the fuzz harnesses: a reader that turns the fuzzer's bytes into bounded choices
// (past the end it yields zeros, so every input decodes to something), and a hard failure that
// prints what broke before aborting (libFuzzer and the replay main both report an abort as a crash).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <string>

namespace tbe_fuzz {

/// Prints `what` and aborts: a harness only calls it for a bug in the code under test.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "FUZZ FAILURE: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}
#define TBE_FUZZ_CHECK(cond, msg)                                                              \
  do {                                                                                          \
    if (!(cond)) ::tbe_fuzz::fail(std::string(__FILE__ ":") + std::to_string(__LINE__) + ": " + \
                                  #cond + ": " + (msg));                                        \
  } while (0)

/// Sequential decoder over the input bytes.
class ByteReader {
 public:
  ByteReader(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

  std::uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(u16()) | (static_cast<std::uint32_t>(u16()) << 16); }
  std::uint64_t u64() { return static_cast<std::uint64_t>(u32()) | (static_cast<std::uint64_t>(u32()) << 32); }
  /// Uniform-ish in [lo, hi] (inclusive), from one byte (ranges here are small).
  int range(int lo, int hi) { return lo + static_cast<int>(u8() % static_cast<unsigned>(hi - lo + 1)); }
  bool flag() { return (u8() & 1) != 0; }
  std::size_t remaining() const { return size_ - pos_; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

/// Runs `run_one(reader)` on the input; any exception escaping it is a harness failure (the code
/// under test reports bad input with tbe::Error, which run_one catches where it is expected).
template <class RunOne>
int run_bytes(const std::uint8_t* data, std::size_t size, RunOne&& run_one) {
  ByteReader in(data, size);
  try {
    run_one(in);
  } catch (const std::exception& e) {
    fail(std::string("unexpected exception: ") + e.what());
  }
  return 0;
}

}  // namespace tbe_fuzz
