// tbe-mutate's child processes (child.h).
#include "mutate/child.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "tbe/cuda/mutation.h"

namespace tbe::mutate {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

ChildResult run_child(const ChildSpec& spec) {
  if (spec.argv.empty()) throw std::invalid_argument("run_child: no program");
  int out[2], status_pipe[2];
  if (pipe(out) != 0 || pipe2(status_pipe, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<char*> argv;
  for (const std::string& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {  // child: own process group, output to the pipe, the fault in the environment
    setpgid(0, 0);
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[0]);
    close(out[1]);
    close(status_pipe[0]);
    if (spec.fault.empty()) unsetenv(tbe::cuda::kMutantEnvVar);
    else setenv(tbe::cuda::kMutantEnvVar, spec.fault.c_str(), 1);
    execv(argv[0], argv.data());
    const int e = errno;  // exec failed: tell the parent why
    (void)!write(status_pipe[1], &e, sizeof e);
    _exit(127);
  }
  setpgid(pid, pid);  // also here: no race with the first kill
  close(out[1]);
  close(status_pipe[1]);
  int exec_errno = 0;
  if (read(status_pipe[0], &exec_errno, sizeof exec_errno) == sizeof exec_errno) {
    close(status_pipe[0]);
    close(out[0]);
    waitpid(pid, nullptr, 0);
    throw std::runtime_error("cannot run '" + spec.argv[0] + "': " + std::strerror(exec_errno));
  }
  close(status_pipe[0]);

  ChildResult r;
  std::string partial;  // the current line
  bool stopping = false;
  double term_sent_at = 0.0;
  auto stop = [&] {
    if (stopping) return;
    stopping = true;
    term_sent_at = since(t0);
    kill(-pid, SIGTERM);
  };
  // past the budget: stop, remembering how much output came before (kill_table.h)
  auto stop_at_budget = [&](double now) {
    if (stopping || now < spec.budget_seconds) return;
    r.over_budget = true;
    r.output_before_stop = r.output.size();
    stop();
  };
  char buf[65536];
  for (;;) {
    const double now = since(t0);
    stop_at_budget(now);
    if (stopping && now - term_sent_at >= 5.0) kill(-pid, SIGKILL);
    pollfd p{out[0], POLLIN, 0};
    if (poll(&p, 1, 200) <= 0) continue;
    const ssize_t n = read(out[0], buf, sizeof buf);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      break;
    }
    r.output.append(buf, static_cast<std::size_t>(n));
    partial.append(buf, static_cast<std::size_t>(n));
    for (std::size_t nl; (nl = partial.find('\n')) != std::string::npos;) {
      const std::string line = partial.substr(0, nl);
      partial.erase(0, nl + 1);
      // a failure printed after the budget's stop is the child's reaction to SIGTERM (Catch2
      // reports "FAILED: ... fatal error condition: SIGTERM"), not a check's verdict
      if (r.kill_seconds == 0.0 && !r.over_budget && spec.is_failure && spec.is_failure(line)) {
        r.kill_seconds = since(t0);
        if (spec.stop_at_kill) {
          r.stopped_at_kill = true;
          stop();
        }
      }
    }
  }
  close(out[0]);
  int status = 0;
  // the pipe closed: the child (and whatever kept the pipe) ended; reap it, SIGKILL if it hangs
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid || (w < 0 && errno != EINTR)) break;
    stop_at_budget(since(t0));
    if (stopping && since(t0) - term_sent_at >= 5.0) kill(-pid, SIGKILL);
    usleep(20000);
  }
  r.seconds = since(t0);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  else if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

}  // namespace tbe::mutate
