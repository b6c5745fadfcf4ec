// A watchdog over the device calls of a run. A kernel that never finishes (a deadlock in a
// pipeline's barriers, a spin on a flag that nobody sets) would otherwise stop tbe-verify forever
// inside a stream synchronization, and a main job that never ends catches nothing. Every call made
// through a backend wrapped by watched() is registered with its start time; a monitor thread that
// finds one running longer than the limit prints what hung and a fail line (tbe/judge/fail_line.h;
// check "device watchdog"), then ends the process with exit status 1 (std::_Exit: a hung device
// call cannot be unwound or cancelled). docs/mutation.md: the fault attn_wgmma_empty_parity hangs
// the wgmma attention kernel and is killed this way.
#pragma once

#include <memory>
#include <string>

#include "tbe/backend.h"
#include "tbe/ikbo.h"

namespace tbe::judge {

/// The monitor: one thread, started by the constructor, stopped by the destructor.
class CallWatchdog {
 public:
  /// limit_seconds > 0 (InvalidArgument "--call-timeout" otherwise): a call running longer fails
  /// the run. The monitor checks 10 times a second. `replay_args` (e.g. " --seed 7 --full") is
  /// appended to the fail line's replay command "tbe-verify --require-gpu --rows <section>".
  explicit CallWatchdog(double limit_seconds, std::string replay_args = "");
  ~CallWatchdog();
  CallWatchdog(const CallWatchdog&) = delete;
  CallWatchdog& operator=(const CallWatchdog&) = delete;

  /// A call in flight while the guard lives: `section` ("forward", "backward", "ikbo") and `what`
  /// (the backend and the method) name it in the report.
  class Guard {
   public:
    Guard(Guard&&) = delete;
    ~Guard();

   private:
    friend class CallWatchdog;
    Guard(CallWatchdog& w, unsigned long long id) : w_(w), id_(id) {}
    CallWatchdog& w_;
    unsigned long long id_;
  };
  [[nodiscard]] Guard watch(std::string section, std::string what);

  double limit_seconds() const;

  struct State;

 private:
  std::unique_ptr<State> s_;
};

/// `inner` with every call (forward, repair, backward, training_step) made under `wd` (section
/// "forward" for forward and repair, "backward" for the others); name() unchanged. Both must
/// outlive the result. A call's time includes any wait inside `inner`; tbe-verify's concurrent
/// backward rows serialize their device calls outside the wrapper (judge::BackwardRunner), so
/// waiting for the device is not counted.
std::unique_ptr<Backend> watched(Backend& inner, CallWatchdog& wd);
/// `inner` with lce() and attention() made under `wd` (section "ikbo"); name(), last_paths() and
/// the limits unchanged.
std::unique_ptr<ikbo::IkboBackend> watched(ikbo::IkboBackend& inner, CallWatchdog& wd);

}  // namespace tbe::judge
