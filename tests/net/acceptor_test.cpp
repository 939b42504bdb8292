// The accept machinery that a worker's Server and a primary's admission port share
// (net/acceptor.h), over real loopback TCP: the bound on connections in flight, stop() while
// connections are in flight, and the deadline that drops a silent peer. Timeouts here are hang
// guards; the assertions are on outcomes (who was served, who was refused and why, threads left).
#include "net/acceptor.h"

#include "net_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <thread>

namespace huddle::net {
namespace {

using testing::error_of;
using ::testing::HasSubstr;
using testing::loopback;
using ::testing::StartsWith;

// Generous everywhere: only a failing test waits this long.
ChannelOptions hang_guard_options() {
  ChannelOptions o;
  o.handshake_timeout = Duration(20000);
  o.io_timeout = Duration(20000);
  return o;
}

std::size_t threads_in_process() {
  const std::filesystem::directory_iterator tasks("/proc/self/task");
  return static_cast<std::size_t>(std::distance(begin(tasks), end(tasks)));
}

// An Acceptor whose handler echoes one message (tag + 1) and returns. It records every
// connection served or refused, how many handlers run now and the most that ever ran at once.
class AcceptorProbe {
 public:
  AcceptorProbe(const PresharedKey& key, ChannelOptions options, std::size_t max_handshakes)
      : acceptor_(Listener::bind(loopback()), key,
                  AcceptorOptions{.channel = options,
                                  .max_handshakes = max_handshakes,
                                  .refused =
                                      [this](const std::string& peer, const std::string& why) {
                                        record("refused " + peer + ": " + why);
                                      },
                                  .log = [this](const std::string& line) { record(line); }},
                  [this](std::unique_ptr<SecureChannel> channel, const std::string& peer,
                         Clock::time_point) { echo_once(*channel, peer); }) {
    acceptor_.start();
  }

  Acceptor& acceptor() { return acceptor_; }
  Endpoint endpoint() const { return loopback(acceptor_.port()); }
  std::vector<std::string> events() const {
    std::lock_guard lock(mutex_);
    return events_;
  }
  int peak() const {
    std::lock_guard lock(mutex_);
    return peak_;
  }
  // Waits (bounded: a hang guard) until `count` handlers run at once; whether they did.
  bool wait_for_active(int count) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return active_ == count; });
  }
  // Waits (bounded) until `count` events are recorded; whether they were.
  bool wait_for_events(std::size_t count) {
    std::unique_lock lock(mutex_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return events_.size() >= count; });
  }

 private:
  void echo_once(SecureChannel& channel, const std::string& peer) {
    {
      std::lock_guard lock(mutex_);
      peak_ = std::max(peak_, ++active_);
      cv_.notify_all();
    }
    struct Leave {
      AcceptorProbe& probe;
      ~Leave() {
        std::lock_guard lock(probe.mutex_);
        --probe.active_;
        probe.cv_.notify_all();
      }
    } leave{*this};
    const Message m = channel.recv();
    channel.send(m.tag + 1, m.payload);
    record("served " + peer);
  }

  void record(const std::string& event) {
    std::lock_guard lock(mutex_);
    events_.push_back(event);
    cv_.notify_all();
  }

  mutable std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<std::string> events_;
  int active_ = 0;
  int peak_ = 0;
  Acceptor acceptor_;  // last: its threads use the members above
};

// Receives the acceptor's HELLO on a raw socket: its handshake thread is running.
void await_hello(Socket& socket) {
  std::vector<std::byte> hello(wire::kHelloBytes);
  socket.recv_exact(hello, Wait::idle_for(Duration(10000)), "the acceptor's HELLO");
}

TEST(Acceptor, ConnectionsBeyondTheBoundWaitInTheBacklogUntilOneEnds) {
  const PresharedKey key = PresharedKey::random();
  AcceptorProbe probe(key, hang_guard_options(), /*max_handshakes=*/2);
  auto first = SecureChannel::connect(probe.endpoint(), key, hang_guard_options());
  auto second = SecureChannel::connect(probe.endpoint(), key, hang_guard_options());
  ASSERT_TRUE(probe.wait_for_active(2));

  // Both slots are held: the third connection is not accepted, so no HELLO comes back.
  Socket third = Socket::connect(probe.endpoint(), Duration(10000));
  std::vector<std::byte> hello(wire::kHelloBytes);
  ASSERT_THAT(error_of([&] { third.recv_exact(hello, Wait::idle_for(Duration(300)), "HELLO"); }),
              HasSubstr("timed out"));

  // The first one ends: the third is served in its place.
  EXPECT_EQ(testing::echo(*first, "one"), "one");
  auto third_channel = SecureChannel::initiate(std::move(third), key, hang_guard_options());
  EXPECT_EQ(testing::echo(*third_channel, "three"), "three");
  EXPECT_EQ(testing::echo(*second, "two"), "two");
  ASSERT_TRUE(probe.wait_for_events(3));
  EXPECT_EQ(probe.peak(), 2);
  for (const std::string& event : probe.events()) EXPECT_THAT(event, StartsWith("served "));
}

TEST(Acceptor, StopWakesConnectionsInFlightAndJoinsEveryThread) {
  // ThreadSanitizer starts its own background thread at the process's first pthread_create: start
  // (and join) one thread first, so that the count below holds only the acceptor's threads.
  std::thread([] {}).join();
  const std::size_t threads_before = threads_in_process();
  const PresharedKey key = PresharedKey::random();
  {
    AcceptorProbe probe(key, hang_guard_options(), /*max_handshakes=*/4);
    // Two connections in their handshake, one in its handler: each would wait 20 s.
    Socket silent1 = Socket::connect(probe.endpoint(), Duration(10000));
    Socket silent2 = Socket::connect(probe.endpoint(), Duration(10000));
    await_hello(silent1);
    await_hello(silent2);
    auto waiting = SecureChannel::connect(probe.endpoint(), key, hang_guard_options());
    ASSERT_TRUE(probe.wait_for_active(1));

    auto stopped = std::async(std::launch::async, [&] { probe.acceptor().stop(); });
    ASSERT_EQ(stopped.wait_for(std::chrono::seconds(10)), std::future_status::ready);
    EXPECT_TRUE(probe.acceptor().stopping());
    // Every connection was refused before stop() returned, and its peer sees it closed.
    const auto events = probe.events();
    EXPECT_EQ(events.size(), 3u);
    for (const std::string& event : events) EXPECT_THAT(event, StartsWith("refused "));
    std::byte byte{};
    for (Socket* s : {&silent1, &silent2}) {
      EXPECT_THAT(error_of([&] {
                    s->recv_exact(std::span(&byte, 1), Wait::idle_for(Duration(10000)), "EOF");
                  }),
                  HasSubstr("closed"));
    }
    EXPECT_THAT(error_of([&] { waiting->recv(); }), HasSubstr("closed"));
    // Nothing is accepted any more.
    ChannelOptions impatient = hang_guard_options();
    impatient.handshake_timeout = Duration(500);
    EXPECT_THAT(error_of([&] { SecureChannel::connect(probe.endpoint(), key, impatient); }),
                HasSubstr("timed out"));
  }
  // The accept thread and every connection thread are gone. A joined thread's task may linger
  // for a moment in /proc: waited for, bounded.
  for (int i = 0; i < 500 && threads_in_process() != threads_before; ++i)
    std::this_thread::sleep_for(Duration(10));
  EXPECT_EQ(threads_in_process(), threads_before);
}

TEST(Acceptor, ASilentPeerIsDroppedAtItsDeadlineWhileOthersAreServed) {
  const PresharedKey key = PresharedKey::random();
  ChannelOptions options = hang_guard_options();
  options.handshake_timeout = Duration(1500);
  AcceptorProbe probe(key, options, /*max_handshakes=*/2);
  Socket silent = Socket::connect(probe.endpoint(), Duration(10000));
  await_hello(silent);

  // Served while the silent one holds the other slot.
  auto peer = SecureChannel::connect(probe.endpoint(), key, hang_guard_options());
  EXPECT_EQ(testing::echo(*peer, "on time"), "on time");

  // The silent one is dropped at its deadline, with the reason.
  std::byte byte{};
  EXPECT_THAT(error_of([&] {
                silent.recv_exact(std::span(&byte, 1), Wait::idle_for(Duration(10000)), "EOF");
              }),
              HasSubstr("closed"));
  ASSERT_TRUE(probe.wait_for_events(2));
  const auto events = probe.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_THAT(events[0], StartsWith("served "));
  EXPECT_THAT(events[1], StartsWith("refused "));
  EXPECT_THAT(events[1], HasSubstr("timed out after 1.5s waiting for HELLO"));
}

}  // namespace
}  // namespace huddle::net
