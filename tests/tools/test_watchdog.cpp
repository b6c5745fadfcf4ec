// judge::CallWatchdog and the watched backends (tbe/judge/watchdog.h): a device call that does not
// return within the limit ends the process with exit status 1 and a fail line naming the call (run
// in a forked child: the watchdog ends the process it watches); calls that return in time pass
// through unchanged, and a finished call is never reported later.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "tbe/errors.h"
#include "tbe/judge/fail_line.h"
#include "tbe/judge/watchdog.h"

using namespace tbe;
using namespace tbe::judge;

namespace {

/// A backend whose calls take `seconds` of wall time (a stand-in for a device call: a hung kernel
/// when longer than the limit) and count how often they ran.
class SlowBackend final : public Backend {
 public:
  explicit SlowBackend(double seconds) : seconds_(seconds) {}
  std::string name() const override { return "slow"; }
  ForwardStats forward(const ForwardProblem&, void*, const ForwardStrategy&) override {
    sleep();
    ForwardStats s;
    s.paths = {"slow.forward"};
    return s;
  }
  RepairResult repair(const ForwardProblem&) override {
    sleep();
    return {};
  }
  BackwardStats backward(const BackwardProblem&, const BackwardOutputs&,
                         const BackwardStrategy&) override {
    sleep();
    return {};
  }
  int calls = 0;

 private:
  void sleep() {
    ++calls;
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds_));
  }
  double seconds_;
};

class SlowIkbo final : public ikbo::IkboBackend {
 public:
  explicit SlowIkbo(double seconds) : seconds_(seconds) {}
  std::string name() const override { return "slow-ikbo"; }
  void lce(const ikbo::LceProblem&, void*) override {}
  void attention(const ikbo::AttentionProblem&, void*) override {
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds_));
  }
  std::vector<std::string> last_paths() const override { return {"slow.attention"}; }

 private:
  double seconds_;
};

struct ChildResult {
  int exit_status = -1;
  std::string stderr_text;
};

/// Runs `body` in a forked child with stderr captured; the child exits 0 when body returns.
template <class F>
ChildResult in_child(F body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    body();
    std::fflush(stderr);
    _exit(0);
  }
  close(fds[1]);
  ChildResult r;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) r.stderr_text.append(buf, n);
  close(fds[0]);
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  REQUIRE(WIFEXITED(status));
  r.exit_status = WEXITSTATUS(status);
  return r;
}

}  // namespace

TEST_CASE("watchdog: a call past the limit ends the run with exit 1 and a fail line", "[cli]") {
  const ChildResult r = in_child([] {
    SlowBackend inner(30.0);  // "hung": far past the limit
    CallWatchdog wd(0.3, " --seed 7");
    const std::unique_ptr<Backend> b = watched(inner, wd);
    b->backward(BackwardProblem{}, BackwardOutputs{}, BackwardStrategy{});
  });
  INFO(r.stderr_text);
  REQUIRE(r.exit_status == 1);
  REQUIRE(r.stderr_text.find("slow backward did not return within 0.3 s") != std::string::npos);
  std::optional<FailLine> f;
  for (std::size_t pos = 0; pos < r.stderr_text.size();) {
    const std::size_t end = r.stderr_text.find('\n', pos);
    const std::string line = r.stderr_text.substr(pos, end - pos);
    if (auto p = parse_fail_line(line)) f = p;
    pos = end == std::string::npos ? r.stderr_text.size() : end + 1;
  }
  REQUIRE(f.has_value());
  CHECK(f->section == "backward");
  CHECK(f->row == "slow backward");
  CHECK(f->check == "device watchdog");
  CHECK(f->replay == "tbe-verify --require-gpu --rows backward --seed 7");
}

TEST_CASE("watchdog: an IKBO call past the limit is reported in the ikbo section", "[cli]") {
  const ChildResult r = in_child([] {
    SlowIkbo inner(30.0);
    CallWatchdog wd(0.3);
    const std::unique_ptr<ikbo::IkboBackend> b = watched(inner, wd);
    b->attention(ikbo::AttentionProblem{}, nullptr);
  });
  INFO(r.stderr_text);
  REQUIRE(r.exit_status == 1);
  REQUIRE(r.stderr_text.find("\"section\":\"ikbo\"") != std::string::npos);
  REQUIRE(r.stderr_text.find("slow-ikbo attention did not return") != std::string::npos);
}

TEST_CASE("watchdog: calls within the limit pass through, finished calls are never reported",
          "[cli]") {
  const ChildResult r = in_child([] {
    SlowBackend inner(0.05);
    CallWatchdog wd(0.5);
    const std::unique_ptr<Backend> b = watched(inner, wd);
    for (int i = 0; i < 4; ++i) {
      const ForwardStats s = b->forward(ForwardProblem{}, nullptr, ForwardStrategy{});
      if (s.paths != std::vector<std::string>{"slow.forward"}) _exit(7);
    }
    if (b->name() != "slow" || inner.calls != 4) _exit(8);
    std::this_thread::sleep_for(std::chrono::milliseconds(900));  // past the limit, no call open
    SlowIkbo ik(0.05);
    const std::unique_ptr<ikbo::IkboBackend> bi = watched(ik, wd);
    bi->attention(ikbo::AttentionProblem{}, nullptr);
    if (bi->last_paths() != std::vector<std::string>{"slow.attention"}) _exit(9);
  });
  INFO(r.stderr_text);
  REQUIRE(r.exit_status == 0);
  REQUIRE(r.stderr_text.find("did not return") == std::string::npos);
}

TEST_CASE("watchdog: the limit must be positive", "[cli]") {
  REQUIRE_THROWS_AS(CallWatchdog(0.0), InvalidArgument);
  REQUIRE_THROWS_AS(CallWatchdog(-1.0), InvalidArgument);
}
