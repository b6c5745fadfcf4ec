// Workspace arithmetic shared by the CUDA operators (ForwardOp, TransposeOp, BackwardOp, LceOp):
// the 256-byte alignment of every workspace and metadata piece, a layout builder that places
// pieces one after another, and the power-of-two rounding of thread-group sizes. Header-only,
// constexpr, no CUDA dependency.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tbe::cuda {

/// Alignment in bytes of every piece of an operator's workspace and device metadata: what
/// cudaMalloc guarantees for a base pointer, so each piece starts as aligned as a fresh allocation
/// (LceOp's cuBLASLt alignment preferences count on it for the pieces it points into).
inline constexpr std::size_t kWorkspaceAlignment = 256;

/// Smallest multiple of kWorkspaceAlignment >= bytes (0 stays 0).
constexpr std::size_t align_up(std::size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

/// Pieces laid out one after another, each starting at a multiple of kWorkspaceAlignment:
///   WorkspaceLayout L;  const std::size_t a = L.add(bytes_a), b = L.add(bytes_b);
///   L.total  // bytes to allocate (a multiple of kWorkspaceAlignment)
/// A piece of 0 bytes gets an offset (the current end) and takes no space.
struct WorkspaceLayout {
  std::size_t total = 0;  ///< bytes used so far (aligned)
  /// Places a piece of `bytes` at the current end; returns its byte offset.
  constexpr std::size_t add(std::size_t bytes) {
    const std::size_t at = total;
    total = align_up(total + bytes);
    return at;
  }
};

/// Smallest power of two >= x (1 for x <= 1). Thread-group sizes: lanes needed for a row of D
/// columns. Precondition: x <= 2^30 (the result fits in int).
constexpr int next_pow2(std::int64_t x) {
  int g = 1;
  while (g < x) g <<= 1;
  return g;
}

}  // namespace tbe::cuda
