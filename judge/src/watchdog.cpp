// CallWatchdog and the watched backends (tbe/judge/watchdog.h).
#include "tbe/judge/watchdog.h"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "tbe/errors.h"
#include "tbe/judge/fail_line.h"

namespace tbe::judge {

namespace {
using Clock = std::chrono::steady_clock;

struct Call {
  std::string section, what;
  Clock::time_point start;
};
}  // namespace

struct CallWatchdog::State {
  double limit = 0;
  std::string replay_args;
  std::mutex m;
  std::condition_variable cv;
  bool stop = false;
  unsigned long long next_id = 0;
  std::map<unsigned long long, Call> calls;
  std::thread monitor;

  /// The first call past the limit, reported; the process ends here.
  [[noreturn]] void fail(const Call& c, double seconds) {
    FailLine f;
    f.section = c.section;
    f.row = c.what;
    f.check = "device watchdog";
    f.replay = "tbe-verify --require-gpu --rows " + c.section + replay_args;
    std::ostringstream msg;
    msg << "tbe-verify: FAILED: " << c.what << " did not return within " << limit << " s (" << seconds
        << " s and counting): a hung kernel or a deadlock in the backend (--call-timeout); "
           "stopping the run\n"
        << format_fail_line(f) << "\n";
    std::fputs(msg.str().c_str(), stderr);
    std::fflush(stderr);
    std::fflush(stdout);
    std::_Exit(1);
  }

  void run() {
    std::unique_lock<std::mutex> lock(m);
    while (!stop) {
      cv.wait_for(lock, std::chrono::milliseconds(100));
      const Clock::time_point now = Clock::now();
      for (const auto& [id, c] : calls) {
        const double s = std::chrono::duration<double>(now - c.start).count();
        if (s > limit) fail(c, s);
      }
    }
  }
};

CallWatchdog::CallWatchdog(double limit_seconds, std::string replay_args)
    : s_(std::make_unique<State>()) {
  if (!(limit_seconds > 0))
    throw InvalidArgument("--call-timeout", "--call-timeout: " + std::to_string(limit_seconds) +
                                                " must be > 0 seconds");
  s_->limit = limit_seconds;
  s_->replay_args = std::move(replay_args);
  s_->monitor = std::thread([st = s_.get()] { st->run(); });
}

CallWatchdog::~CallWatchdog() {
  {
    std::lock_guard<std::mutex> lock(s_->m);
    s_->stop = true;
  }
  s_->cv.notify_all();
  s_->monitor.join();
}

double CallWatchdog::limit_seconds() const { return s_->limit; }

CallWatchdog::Guard CallWatchdog::watch(std::string section, std::string what) {
  std::lock_guard<std::mutex> lock(s_->m);
  const unsigned long long id = s_->next_id++;
  s_->calls.emplace(id, Call{std::move(section), std::move(what), Clock::now()});
  return Guard(*this, id);
}

CallWatchdog::Guard::~Guard() {
  std::lock_guard<std::mutex> lock(w_.s_->m);
  w_.s_->calls.erase(id_);
}

namespace {

class WatchedBackend final : public Backend {
 public:
  WatchedBackend(Backend& b, CallWatchdog& wd) : b_(b), wd_(wd), name_(b.name()) {}
  std::string name() const override { return name_; }
  ForwardStats forward(const ForwardProblem& p, void* output, const ForwardStrategy& s) override {
    const auto g = wd_.watch("forward", name_ + " forward");
    return b_.forward(p, output, s);
  }
  RepairResult repair(const ForwardProblem& p) override {
    const auto g = wd_.watch("forward", name_ + " repair");
    return b_.repair(p);
  }
  BackwardStats backward(const BackwardProblem& p, const BackwardOutputs& out,
                         const BackwardStrategy& s) override {
    const auto g = wd_.watch("backward", name_ + " backward");
    return b_.backward(p, out, s);
  }
  TrainingStepStats training_step(const BackwardProblem& p, void* output,
                                  const BackwardOutputs& out, const BackwardStrategy& s) override {
    const auto g = wd_.watch("backward", name_ + " training_step");
    return b_.training_step(p, output, out, s);
  }

 private:
  Backend& b_;
  CallWatchdog& wd_;
  std::string name_;
};

class WatchedIkboBackend final : public ikbo::IkboBackend {
 public:
  WatchedIkboBackend(ikbo::IkboBackend& b, CallWatchdog& wd) : b_(b), wd_(wd), name_(b.name()) {}
  std::string name() const override { return name_; }
  void lce(const ikbo::LceProblem& p, void* out) override {
    const auto g = wd_.watch("ikbo", name_ + " lce");
    b_.lce(p, out);
  }
  void attention(const ikbo::AttentionProblem& p, void* out) override {
    const auto g = wd_.watch("ikbo", name_ + " attention");
    b_.attention(p, out);
  }
  std::vector<std::string> last_paths() const override { return b_.last_paths(); }
  Status lce_limits(const ikbo::LceProblem& p) const override { return b_.lce_limits(p); }
  Status attention_limits(const ikbo::AttentionProblem& p) const override {
    return b_.attention_limits(p);
  }

 private:
  ikbo::IkboBackend& b_;
  CallWatchdog& wd_;
  std::string name_;
};

}  // namespace

std::unique_ptr<Backend> watched(Backend& inner, CallWatchdog& wd) {
  return std::make_unique<WatchedBackend>(inner, wd);
}
std::unique_ptr<ikbo::IkboBackend> watched(ikbo::IkboBackend& inner, CallWatchdog& wd) {
  return std::make_unique<WatchedIkboBackend>(inner, wd);
}

}  // namespace tbe::judge
