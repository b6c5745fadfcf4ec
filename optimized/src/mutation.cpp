// The mutation build's fault selection (include/tbe/cuda/mutation.h, docs/mutation.md): compiled
// only with -DTBE_MUTATION=ON.
#include "tbe/cuda/mutation.h"

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace tbe::cuda {

Fault active_fault() {
  static const Fault fault = [] {
    const char* value = std::getenv(kMutantEnvVar);
    if (value == nullptr || *value == '\0') return Fault::kNone;
    try {
      return parse_fault(value).fault;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "tbe mutation build: %s\n", e.what());
      std::exit(3);
    }
  }();
  return fault;
}

namespace {

/// At start-up of every program linked with the mutation build: the fault is parsed (an unknown
/// name ends the program before it does anything) and, when one is active, announced on stderr as
/// "tbe mutation build: fault NAME active" (tbe-mutate checks that its children applied it).
[[maybe_unused]] const bool announced = [] {
  const Fault f = active_fault();
  for (const FaultInfo& info : kFaults)
    if (info.fault == f) std::fprintf(stderr, "%s\n", fault_announcement(info.name).c_str());
  return true;
}();

}  // namespace

}  // namespace tbe::cuda
