// An output buffer for a judged call: every byte poisoned before the call (0xFF: NaN in FP32, FP16
// and BF16) and followed by a canary tail of poisoned elements that no backend may write
// (sentinels past the end of outputs, docs/oracle.md). After the call: canary_intact() says the
// tail survived, untouched() that nothing at all was written (required when the call raised).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tbe/types.h"

namespace tbe::judge {

class PoisonedOutput {
 public:
  static constexpr std::byte kPoison{0xFF};
  static constexpr std::int64_t kCanaryElements = 64;

  /// `numel` output elements of `type` (host memory), then `canary_elements` more, every byte
  /// `poison`. numel >= 0, canary_elements >= 0.
  PoisonedOutput(DType type, std::int64_t numel, std::int64_t canary_elements = kCanaryElements,
                 std::byte poison = kPoison);

  DType type() const { return type_; }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  /// Bytes of the output proper (numel · dtype_size(type)), without the canary tail.
  std::size_t output_bytes() const { return size_; }
  /// A copy of the output proper: [numel] elements of type().
  std::vector<std::byte> output() const;

  bool canary_intact() const { return all_poison(size_, bytes_.size()); }
  bool untouched() const { return all_poison(0, bytes_.size()); }

 private:
  bool all_poison(std::size_t from, std::size_t to) const;
  DType type_;
  std::byte poison_;
  std::size_t size_;
  std::vector<std::byte> bytes_;
};

}  // namespace tbe::judge
