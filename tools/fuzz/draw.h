// The draws tbe-fuzz's generators share (generate.cpp, backward.cpp, ikbo_case.cpp): all from one
// tbe::Rng stream per case, so a case is a pure function of (seed, case index).
#pragma once

#include <cstdint>
#include <initializer_list>

#include "tbe/rng.h"

namespace tbe::fuzz {

/// true with probability p.
inline bool chance(Rng& r, double p) { return r.uniform() < p; }

/// One of `xs`, uniformly.
template <class T>
T pick(Rng& r, std::initializer_list<T> xs) {
  return *(xs.begin() + r.uniform_int(static_cast<std::int64_t>(xs.size())));
}

/// Uniform in [lo, hi] (both included).
inline std::int64_t in_range(Rng& r, std::int64_t lo, std::int64_t hi) {
  return lo + r.uniform_int(hi - lo + 1);
}

}  // namespace tbe::fuzz
