// Message tags used by the collectives (internal). Every message of a collective carries
// kCollectiveTagBase | op << 24 | part, so that ranks that drift out of step fail loudly.
#pragma once

#include <cstdint>

namespace huddle::collectives {

inline constexpr std::uint32_t kCollectiveTagBase = 0xC0000000u;

enum class CollectiveOp : std::uint32_t {
  kAllGather = 1,
  kReduceScatter = 2,
  kTensorHeader = 3,
  kTensorData = 4,
  kBroadcast = 5,
  kGather = 6,
};

constexpr std::uint32_t collective_tag(CollectiveOp op, int part = 0) {
  return kCollectiveTagBase | (static_cast<std::uint32_t>(op) << 24) |
         (static_cast<std::uint32_t>(part) & 0xFFFFFFu);
}

}  // namespace huddle::collectives
