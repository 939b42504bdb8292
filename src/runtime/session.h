// A distributed inference session: device 0 (the primary) drives every step, the other devices
// follow. Each device runs its own Program with an Executor; the primary tells the others which
// tokens to process next, and the data-movement ops inside the programs do the rest.
//
// Control messages (primary -> each worker, tags kStepTag / kResetTag / kEndTag):
//   step:  u64 position, u8 all_rows, u32 count, then count little-endian i32 token ids
//   reset: empty;  end: empty
#pragma once

#include "net/transport.h"
#include "runtime/executor.h"
#include "runtime/step_runner.h"

#include <cstdint>

namespace huddle {

inline constexpr std::uint32_t kStepTag = 0x10000001u;
inline constexpr std::uint32_t kResetTag = 0x10000002u;
inline constexpr std::uint32_t kEndTag = 0x10000003u;

// The primary's side. forward() sends the step to every worker, then runs device 0's program and
// returns its output. The transport and executor must outlive it; end() (or the destructor)
// tells the workers the session is over.
class PrimarySession final : public StepRunner {
 public:
  PrimarySession(net::Transport& transport, Executor& executor);
  ~PrimarySession() override;

  Tensor forward(std::span<const std::int32_t> ids, bool all_rows) override;
  void reset() override;
  std::int64_t position() const override { return executor_.position(); }
  std::int64_t max_positions() const override { return executor_.max_positions(); }
  void end();

 private:
  void broadcast(std::uint32_t tag, std::span<const std::byte> payload);

  net::Transport& transport_;
  Executor& executor_;
  bool ended_ = false;
};

// A worker's side: follows the primary's steps until it ends the session. TransportError when
// the primary or a peer fails; InputError/PlanError from the step itself propagate.
void follow_primary(net::Transport& transport, Executor& executor);

}  // namespace huddle
