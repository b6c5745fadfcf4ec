// FNV-1a (64-bit) over the bytes of generated test data, so a test can pin a whole generated case
// to one number: the pins in tests/reference/test_rng.cpp, test_workloads.cpp and
// tests/oracle/test_pinned_streams.cpp prove that the seeded streams and the generators built on
// them still produce, bit for bit, the data recorded when the pins were taken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tbe/host_case.h"

namespace tbe_test {

/// FNV-1a, 64-bit (Fowler, Noll, Vo): offset basis 0xCBF29CE484222325, prime 0x100000001B3.
struct ContentHash {
  std::uint64_t value = 0xCBF29CE484222325ull;
  void bytes(const void* data, std::size_t n) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      value ^= b[i];
      value *= 0x100000001B3ull;
    }
  }
  /// The element count (8 bytes, host order), then the elements' bytes.
  template <class T>
  void add(const std::vector<T>& v) {
    const std::uint64_t n = v.size();
    bytes(&n, sizeof n);
    if (n != 0) bytes(v.data(), v.size() * sizeof(T));
  }
  template <class T>
  void scalar(T v) {
    bytes(&v, sizeof v);
  }
};

/// Hash of a forward case's data: tables (weights, rows, dims, table offsets), the feature map,
/// lookups (indices, offsets, per-sample weights), VBE batch sizes, B and R.
inline std::uint64_t hash_case(const tbe::ForwardCase& c) {
  ContentHash h;
  h.add(c.weights);
  h.add(c.rows);
  h.add(c.dims);
  h.add(c.table_offsets);
  h.add(c.feature_table_map);
  h.add(c.indices);
  h.add(c.offsets);
  h.add(c.per_sample_weights);
  h.add(c.vbe_batch_sizes);
  h.scalar(c.batch_size);
  h.scalar(c.vbe_ranks);
  return h.value;
}

}  // namespace tbe_test
