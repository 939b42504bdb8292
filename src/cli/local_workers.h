// LocalWorkers: `huddle worker` processes on 127.0.0.1 started by this process (the
// `--local-devices N` default of `huddle run`), with a fresh pre-shared key. They are stopped
// when the object dies. Where this process may run on at least N x threads CPUs, each device
// (this process included) is pinned to `threads` of them, as N separate devices would have.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <sys/types.h>

namespace huddle::cli {

class LocalWorkers {
 public:
  // Starts `count` workers and waits (up to `start_timeout_s`) until each prints its address.
  // Error naming the worker that failed to start. The workers get SIGTERM when the thread that
  // made them ends (this process dying included): make LocalWorkers on the main thread.
  LocalWorkers(int count, double peer_timeout_s, int threads, double start_timeout_s = 20);
  ~LocalWorkers();
  LocalWorkers(const LocalWorkers&) = delete;
  LocalWorkers& operator=(const LocalWorkers&) = delete;

  const std::vector<std::string>& addresses() const { return addresses_; }
  const std::filesystem::path& key_file() const { return key_file_; }

 private:
  void start(int count, double peer_timeout_s, int threads, double start_timeout_s);
  void stop();

  std::filesystem::path dir_;
  std::filesystem::path key_file_;
  std::vector<pid_t> pids_;
  std::vector<std::string> addresses_;
};

}  // namespace huddle::cli
