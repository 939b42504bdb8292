// StopSignals: SIGINT and SIGTERM turned into a byte on a pipe, so a thread can wait for them
// and shut a server down in order. A handler, not a blocked-signal sigwait: whichever thread the
// kernel picks runs it (OpenBLAS starts threads before main, which no mask set later covers).
// One instance at a time; the default actions come back when it dies.
#pragma once

namespace huddle::cli {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Blocks until a stop signal (returns its number) or wake() (returns 0).
  int wait();
  void wake();

 private:
  int fds_[2] = {-1, -1};
};

}  // namespace huddle::cli
