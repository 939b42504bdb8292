#include "net/channel_cost.h"

#include "core/error.h"
#include "net/aead.h"
#include "net/key.h"
#include "net/secure_channel.h"
#include "net/socket.h"
#include "net/wire.h"

#include <sodium.h>

#include <array>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

namespace huddle::net {
namespace {

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Tags of the measurement's messages.
constexpr std::uint32_t kData = 1, kStop = 2;

// Two channels over loopback TCP; throws TransportError where they cannot be made.
double over_loopback(std::size_t bytes, double budget_s) {
  Listener listener = Listener::bind(Endpoint{"127.0.0.1", 0});
  const PresharedKey key = PresharedKey::random();
  const ChannelOptions options;
  std::unique_ptr<SecureChannel> server;
  std::exception_ptr failure;
  std::thread responder([&] {
    try {
      std::optional<Socket> socket = listener.accept(options.handshake_timeout);
      if (!socket) throw TransportError("channel cost: no loopback connection arrived");
      server = SecureChannel::respond(std::move(*socket), key, options);
    } catch (...) {
      failure = std::current_exception();
    }
  });
  std::unique_ptr<SecureChannel> client;
  try {
    client = SecureChannel::connect(Endpoint{"127.0.0.1", listener.port()}, key, options);
  } catch (...) {
    listener.interrupt();
    responder.join();
    throw;
  }
  responder.join();
  if (failure) std::rethrow_exception(failure);

  std::exception_ptr receive_failure;
  std::thread receiver([&] {
    try {
      while (server->recv().tag != kStop) {
      }
    } catch (...) {
      receive_failure = std::current_exception();
    }
  });
  const std::vector<std::byte> payload(bytes, std::byte{0x5a});
  client->send(kData, payload);  // warm-up: buffers grown, pages touched
  const double start = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
  double moved = 0, elapsed = 0;
  try {
    do {
      client->send(kData, payload);
      moved += 2.0 * static_cast<double>(bytes);  // sent and received
      elapsed = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - start;
    } while (elapsed < budget_s);
    client->send(kStop, {});
  } catch (...) {
    client->shutdown();
    receiver.join();
    throw;
  }
  receiver.join();
  if (receive_failure) std::rethrow_exception(receive_failure);
  // The receiver may still have been opening the last messages when the clock was read: read it
  // again now that everything sent has been received.
  return (cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - start) / moved;
}

// Sealing and opening in memory, a copy each way standing in for the kernel's.
double in_memory(std::size_t bytes, double budget_s) {
  std::vector<unsigned char> plain(bytes, 0x5a), sealed(bytes + wire::kAeadTagBytes), kernel(bytes);
  AeadKey key{};
  randombytes_buf(key.data(), key.size());
  Aead aead(key);
  sodium_memzero(key.data(), key.size());
  const std::array<unsigned char, wire::kFrameHeaderBytes> head{};
  std::uint64_t counter = 0;
  double moved = 0;
  const double start = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
  double elapsed = 0;
  do {
    const AeadNonce nonce = wire::frame_nonce(counter++);
    aead.seal(nonce, head.data(), head.size(), plain.data(), bytes, sealed.data(),
              sealed.data() + bytes);
    std::memcpy(kernel.data(), sealed.data(), bytes);
    std::memcpy(sealed.data(), kernel.data(), bytes);
    if (!aead.open(nonce, head.data(), head.size(), sealed.data(), bytes, sealed.data() + bytes)) {
      throw Error("channel self-test: a sealed frame did not open");
    }
    moved += 2.0 * static_cast<double>(bytes);
    elapsed = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - start;
  } while (elapsed < budget_s);
  return elapsed / moved;
}

}  // namespace

double measure_channel_cpu_s_per_byte(std::size_t bytes, double budget_s) {
  HUDDLE_CHECK(bytes > 0 && budget_s > 0);
  try {
    return over_loopback(bytes, budget_s);
  } catch (const TransportError&) {
    return in_memory(bytes, budget_s);
  }
}

}  // namespace huddle::net
