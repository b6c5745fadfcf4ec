// The verdict of one judged fuzz case, whatever its operator (forward, backward, IKBO): what the
// shrinker preserves (the failed check) and the campaign counts.
#pragma once

#include <string>

namespace tbe::fuzz {

/// One case's verdict: `check` names the first failed check (e.g. "oracle", "invalid_argument",
/// "fatal", "counters", "deterministic"), `detail` says what was expected and what came back.
struct Verdict {
  bool failed = false;
  std::string check;
  std::string detail;
  bool device_lost = false;  ///< a DeviceError came back (the CUDA context may be lost)
};

}  // namespace tbe::fuzz
