// Human-readable text of a bounds-check violation (the what() of BoundsCheckError).
#include "tbe/errors.h"

#include <sstream>

namespace tbe {

std::string to_string(const BoundsViolation& v) {
  // ostringstream rather than operator+ chains (GCC 12 emits a spurious -Wrestrict on those).
  std::ostringstream os;
  os << "bounds check FATAL: ";
  const auto where = [&] { os << " (feature " << v.feature << ", sample " << v.sample << ")"; };
  switch (v.kind) {
    case BoundsViolation::Kind::Index:
      os << "index " << v.value << " at position " << v.position;
      where();
      os << " is outside [0, E=" << v.limit << ")";
      break;
    case BoundsViolation::Kind::LastOffset:
      os << "last offset offsets[" << v.position << "] = " << v.value << " != N = " << v.limit
         << " (len(indices))";
      break;
    case BoundsViolation::Kind::Bag:
      // Bag k is bad if s = offsets[k] < 0, s > e = offsets[k+1], or e > N; `value` is the
      // offending offset (s for the first two, e for the last), `position` the bag index k.
      os << "bag " << v.position;
      where();
      if (v.value < 0) {
        os << " has a negative offset " << v.value << " (offsets must lie in [0, N=" << v.limit
           << "])";
      } else if (v.value > v.limit) {
        os << " has offset " << v.value << " beyond N=" << v.limit << " (len(indices))";
      } else {
        os << " starts at offset " << v.value << " after its end offsets[" << v.position + 1
           << "] (offsets must be non-decreasing, N=" << v.limit << ")";
      }
      break;
  }
  return os.str();
}

}  // namespace tbe
