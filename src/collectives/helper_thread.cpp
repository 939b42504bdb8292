#include "collectives/helper_thread.h"

#include <map>
#include <memory>
#include <utility>

namespace huddle::collectives {

HelperThread::HelperThread() : thread_([this] { loop(); }) {}

HelperThread::~HelperThread() {
  {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [&] { return !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void HelperThread::start(std::function<void()> task) {
  {
    std::lock_guard lock(mutex_);
    task_ = std::move(task);
    busy_ = true;
  }
  cv_.notify_all();
}

void HelperThread::wait() {
  std::unique_lock lock(mutex_);
  cv_.wait(lock, [&] { return !busy_; });
}

void HelperThread::loop() {
  std::unique_lock lock(mutex_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || (busy_ && task_); });
    if (stop_) return;
    std::function<void()> task = std::move(task_);
    task_ = nullptr;
    lock.unlock();
    task();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

HelperThread& sender_helper() {
  thread_local HelperThread helper;
  return helper;
}

HelperThread& receiver_helper() {
  thread_local HelperThread helper;
  return helper;
}

HelperThread& peer_sender(int peer) {
  thread_local std::map<int, std::unique_ptr<HelperThread>> helpers;
  std::unique_ptr<HelperThread>& helper = helpers[peer];
  if (!helper) helper = std::make_unique<HelperThread>();
  return *helper;
}

}  // namespace huddle::collectives
