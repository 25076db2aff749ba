// Starts `salamander node` processes on loopback (tests, benchmarks, local
// clusters) and always stops them: the destructor sends SIGTERM, waits up to
// 5 s, then SIGKILLs. Nothing is left running, even after a failure, and
// a node whose starter dies without its destructor running (killed, or a
// test timeout's SIGKILL) is sent SIGTERM by the kernel.
#pragma once

#include <chrono>
#include "actors/cluster/cluster_file.hpp"

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace salamander::actors {

/// The salamander binary to start ($SALAMANDER_BIN, set by ctest and
/// bench/run.sh).
inline std::string salamander_bin() {
  const char* bin = std::getenv("SALAMANDER_BIN");
  if (!bin || !*bin) {
    throw std::runtime_error("SALAMANDER_BIN is not set (ctest and bench/run.sh set it)");
  }
  return bin;
}

/// A child process started with its standard output on a pipe.
struct piped_child {
  pid_t pid = -1;
  FILE* out = nullptr; ///< the child's stdout; the caller closes it
};

/// Starts `args` (args[0] a path) with its stdout on a pipe. The kernel
/// sends the child `death_signal` if the starter dies first, so nothing is
/// left running after a crash or a test timeout's SIGKILL.
inline piped_child spawn_piped(std::vector<std::string> args, int death_signal = SIGTERM) {
  int fds[2];
  if (pipe(fds) != 0) {
    throw std::runtime_error("pipe failed");
  }
  pid_t parent = getpid();
  piped_child c;
  c.pid = fork();
  if (c.pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, death_signal);
    if (getppid() != parent) {
      _exit(127); // the starter died before the line above
    }
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  c.out = fdopen(fds[0], "r");
  return c;
}

class node_process {
public:
  explicit node_process(const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {salamander_bin(), "--log-level", "warn", "node", "--name",
                                     name, "--listen", "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto child = spawn_piped(std::move(args));
    pid_ = child.pid;
    FILE* out = child.out;
    char line[256] = {0};
    // "node NAME listening on 127.0.0.1:PORT"
    if (!out || !fgets(line, sizeof line, out)) {
      if (out) {
        fclose(out);
      }
      stop();
      throw std::runtime_error("node " + name + " did not start");
    }
    fclose(out);
    std::string text(line);
    auto colon = text.rfind(':');
    port_ = static_cast<uint16_t>(std::stoi(text.substr(colon + 1)));
  }
  node_process(const node_process&) = delete;
  node_process& operator=(const node_process&) = delete;
  ~node_process() { stop(); }

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

  void signal(int sig) {
    if (pid_ > 0) {
      ::kill(pid_, sig);
    }
  }

  /// Exit status after SIGTERM, or -1 if it had to be killed.
  int stop() {
    if (pid_ <= 0) {
      return status_;
    }
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 100; ++i) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        pid_ = -1;
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    status_ = -1;
    return status_;
  }

private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  int status_ = -1;
};

/// Several node processes on loopback, named PREFIX1, PREFIX2, ..., with
/// the cluster entries to connect to them; all stopped with the object.
class process_cluster {
public:
  process_cluster(int n, const std::string& prefix,
                  const std::vector<std::vector<std::string>>& extra = {}) {
    for (int i = 0; i < n; ++i) {
      auto name = prefix + std::to_string(i + 1);
      procs_.push_back(std::make_unique<node_process>(
          name, static_cast<size_t>(i) < extra.size() ? extra[static_cast<size_t>(i)]
                                                       : std::vector<std::string>{}));
      nodes_.push_back({name, "127.0.0.1", procs_.back()->port()});
    }
  }
  /// Node i, 0-based.
  node_process& operator[](size_t i) { return *procs_[i]; }
  const std::vector<cluster_node>& nodes() const { return nodes_; }

private:
  std::vector<std::unique_ptr<node_process>> procs_;
  std::vector<cluster_node> nodes_;
};

} // namespace salamander::actors
