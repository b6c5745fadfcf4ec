// Poisoned output buffers with a canary tail (poisoned_output.h).
#include "tbe/judge/poisoned_output.h"

namespace tbe::judge {

PoisonedOutput::PoisonedOutput(DType type, std::int64_t numel, std::int64_t canary_elements,
                               std::byte poison)
    : type_(type),
      poison_(poison),
      size_(static_cast<std::size_t>(numel) * dtype_size(type)),
      bytes_(size_ + static_cast<std::size_t>(canary_elements) * dtype_size(type), poison) {}

std::vector<std::byte> PoisonedOutput::output() const {
  const auto end = bytes_.begin() + static_cast<std::ptrdiff_t>(size_);
  return std::vector<std::byte>(bytes_.begin(), end);
}

bool PoisonedOutput::all_poison(std::size_t from, std::size_t to) const {
  for (std::size_t i = from; i < to; ++i)
    if (bytes_[i] != poison_) return false;
  return true;
}

}  // namespace tbe::judge
