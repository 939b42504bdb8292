// A thread that lives as long as the thread that owns it and runs one task at a time for it:
// the ring collectives' sender and receiver (collectives/ring.h), which would otherwise start
// two threads per collective (tens of microseconds each, dozens of collectives per step).
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace huddle::collectives {

class HelperThread {
 public:
  HelperThread();
  ~HelperThread();  // waits for the running task, then ends the thread
  HelperThread(const HelperThread&) = delete;
  HelperThread& operator=(const HelperThread&) = delete;

  // Starts `task` on the helper. The task must not throw; one task at a time: the previous one
  // must have been waited for.
  void start(std::function<void()> task);
  // Blocks until the task started last has returned.
  void wait();

 private:
  void loop();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> task_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread thread_;  // last: starts once the state above exists
};

// The calling thread's own pair of helpers (created on first use, ended with that thread).
// Per calling thread, not per process: ranks of an in-process cluster run their collectives
// at once from their own threads, and must not queue behind each other's helpers.
HelperThread& sender_helper();
HelperThread& receiver_helper();
// The calling thread's helper for messages to `peer` (created on first use): a row exchange sends
// to several peers at once, one helper each, so that a slow link holds up only its own peer.
HelperThread& peer_sender(int peer);

}  // namespace huddle::collectives
