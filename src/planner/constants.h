// Constants the planners share.
#pragma once

#include <cstdint>
#include <limits>

namespace huddle {

inline constexpr std::int64_t kF32Bytes = 4;  // an F32 activation or KV-cache element
inline constexpr double kInf = std::numeric_limits<double>::infinity();

}  // namespace huddle
