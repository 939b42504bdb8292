// What each device of a plan holds, in words, for the dashboard (and anything else that shows a
// plan to a person). Pure: a Plan in, JSON out.
#pragma once

#include "plan/plan.h"

#include <nlohmann/json.hpp>

namespace huddle::serve {

// {"strategy": "galaxy", "layers": 12,
//  "devices": [{"name": "primary", "share": 0.625,
//               "holds": ["layers 0-11: heads 0-7 of 12, FFN columns 0-1919 of 3072, its tokens
//                          of the residual stream"]}, ...]}
// `share` is the device's fraction of the token shares (sums to 1). Consecutive layers that a
// device holds alike are one line; a pipeline stage is "stage S: <units in words>"; a 2D-tiled
// plan names the grid cell; an operator-assignment plan counts the providers.
nlohmann::json plan_view(const Plan& plan);

// The view of running the whole model on one device.
nlohmann::json local_plan_view(const std::string& device, std::int64_t layers);

}  // namespace huddle::serve
