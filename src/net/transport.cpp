#include "net/transport.h"

namespace huddle::net {

std::chrono::microseconds LinkEmulation::delay(std::size_t bytes) const {
  double us =
      static_cast<double>(std::chrono::duration_cast<std::chrono::microseconds>(latency).count());
  if (bytes_per_second > 0) us += static_cast<double>(bytes) / bytes_per_second * 1e6;
  return std::chrono::microseconds(static_cast<std::int64_t>(us));
}

}  // namespace huddle::net
