// Small order statistics shared by the profilers.
#pragma once

#include <vector>

namespace huddle {

// The median of `values` (non-empty; the mean of the two middle values when their count is even).
double median(std::vector<double> values);

}  // namespace huddle
