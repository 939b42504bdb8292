#include "core/statistics.h"

#include "core/error.h"

#include <algorithm>
#include <cstddef>

namespace huddle {

double median(std::vector<double> values) {
  HUDDLE_CHECK(!values.empty(), "median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t m = values.size() / 2;
  return values.size() % 2 ? values[m] : 0.5 * (values[m - 1] + values[m]);
}

}  // namespace huddle
