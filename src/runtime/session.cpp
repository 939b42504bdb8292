#include "runtime/session.h"

#include "core/error.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace huddle {
namespace {

struct StepHeader {
  std::uint64_t position;
  std::uint8_t all_rows;
  std::uint8_t pad[3];
  std::uint32_t count;
};
static_assert(sizeof(StepHeader) == 16, "wire layout of a step header");

}  // namespace

PrimarySession::PrimarySession(net::Transport& transport, Executor& executor)
    : transport_(transport), executor_(executor) {
  HUDDLE_CHECK(transport.rank() == 0, "the primary is rank 0");
}

PrimarySession::~PrimarySession() {
  try {
    end();
  } catch (const Error&) {
    // Workers that are already gone need no goodbye.
  }
}

void PrimarySession::broadcast(std::uint32_t tag, std::span<const std::byte> payload) {
  for (int r = 1; r < transport_.size(); ++r) transport_.send(r, tag, payload);
}

Tensor PrimarySession::forward(std::span<const std::int32_t> ids, bool all_rows) {
  HUDDLE_CHECK(!ended_, "session already ended");
  std::vector<std::byte> payload(sizeof(StepHeader) + ids.size_bytes());
  const StepHeader header{static_cast<std::uint64_t>(executor_.position()),
                          static_cast<std::uint8_t>(all_rows),
                          {0, 0, 0},
                          static_cast<std::uint32_t>(ids.size())};
  std::memcpy(payload.data(), &header, sizeof header);
  if (!ids.empty()) std::memcpy(payload.data() + sizeof header, ids.data(), ids.size_bytes());
  broadcast(kStepTag, payload);
  return executor_.forward(ids, all_rows);
}

void PrimarySession::reset() {
  broadcast(kResetTag, {});
  executor_.reset();
}

void PrimarySession::end() {
  if (ended_) return;
  ended_ = true;
  broadcast(kEndTag, {});
}

void follow_primary(net::Transport& transport, Executor& executor) {
  for (;;) {
    net::Message m = transport.recv(0);
    if (m.tag == kEndTag) return;
    if (m.tag == kResetTag) {
      executor.reset();
      continue;
    }
    if (m.tag != kStepTag || m.payload.size() < sizeof(StepHeader)) {
      throw TransportError(
          fmt::format("{}: unexpected message (tag {:#x}, {} bytes) instead of a step",
                      transport.peer_name(0), m.tag, m.payload.size()));
    }
    StepHeader header;
    std::memcpy(&header, m.payload.data(), sizeof header);
    if (m.payload.size() != sizeof header + std::size_t{header.count} * sizeof(std::int32_t)) {
      throw TransportError(fmt::format("{}: step of {} tokens carries {} bytes",
                                       transport.peer_name(0), header.count, m.payload.size()));
    }
    if (header.position != static_cast<std::uint64_t>(executor.position())) {
      throw TransportError(fmt::format("{}: step at position {}, but this device is at {}",
                                       transport.peer_name(0), header.position,
                                       executor.position()));
    }
    std::vector<std::int32_t> ids(header.count);
    if (header.count > 0)
      std::memcpy(ids.data(), m.payload.data() + sizeof header, ids.size() * sizeof(std::int32_t));
    executor.forward(ids, header.all_rows != 0);
  }
}

}  // namespace huddle
