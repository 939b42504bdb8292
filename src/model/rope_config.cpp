#include "model/rope_config.h"

#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace huddle {
namespace {

using kernels::RopeScaling;
using kernels::RopeSpec;

// A positive number field of rope_scaling, required.
float positive_field(const ConfigReader& s, const std::string& key) {
  if (!s.has(key)) throw LoadError(fmt::format("{}: missing field '{}'", s.source(), s.field(key)));
  const double v = s.number_or(key, 0.0);
  if (!(v > 0.0) || !std::isfinite(v)) {
    throw LoadError(fmt::format("{}: field '{}' must be a positive number, is {}", s.source(),
                                s.field(key), v));
  }
  return static_cast<float>(v);
}

}  // namespace

RopeSpec parse_rope(const ConfigReader& r, double default_theta,
                    std::int64_t max_position_embeddings) {
  RopeSpec spec;
  const double theta = r.number_or("rope_theta", default_theta);
  if (!(theta > 0.0) || !std::isfinite(theta)) {
    throw LoadError(fmt::format("{}: field '{}' must be a positive number, is {}", r.source(),
                                r.field("rope_theta"), theta));
  }
  spec.theta = static_cast<float>(theta);
  if (!r.has("rope_scaling")) return spec;
  const ConfigReader s = r.object("rope_scaling");
  // transformers reads "rope_type" and falls back to the legacy "type".
  const std::string type = s.string_or("rope_type", s.string_or("type", ""));
  std::vector<std::string> allowed = {"rope_type", "type"};
  if (type == "default") {
    // No scaling.
  } else if (type == "linear") {
    spec.scaling = RopeScaling::Linear;
    spec.factor = positive_field(s, "factor");
    allowed.push_back("factor");
  } else if (type == "dynamic") {
    spec.scaling = RopeScaling::Dynamic;
    spec.factor = positive_field(s, "factor");
    spec.original_max_positions = max_position_embeddings;
    allowed.push_back("factor");
  } else if (type == "llama3") {
    spec.scaling = RopeScaling::Llama3;
    spec.factor = positive_field(s, "factor");
    spec.low_freq_factor = positive_field(s, "low_freq_factor");
    spec.high_freq_factor = positive_field(s, "high_freq_factor");
    spec.original_max_positions = s.integer("original_max_position_embeddings");
    if (spec.original_max_positions <= 0 || !(spec.high_freq_factor > spec.low_freq_factor)) {
      throw LoadError(fmt::format(
          "{}: rope_scaling (llama3) needs original_max_position_embeddings > 0 and "
          "high_freq_factor > low_freq_factor, has {} and {} <= {}",
          r.source(), spec.original_max_positions, spec.high_freq_factor, spec.low_freq_factor));
    }
    allowed.insert(allowed.end(), {"factor", "low_freq_factor", "high_freq_factor",
                                   "original_max_position_embeddings"});
  } else if (type.empty()) {
    throw LoadError(
        fmt::format("{}: field 'rope_scaling' has no 'rope_type' (or 'type')", r.source()));
  } else {
    throw LoadError(fmt::format(
        "{}: rope_scaling.rope_type '{}' is not supported (supported: default, linear, dynamic, "
        "llama3)",
        r.source(), type));
  }
  for (const std::string& key : s.keys()) {
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      throw LoadError(fmt::format(
          "{}: field '{}' is not understood for rope_type '{}' (Huddle reads {}); refusing "
          "rather than computing other frequencies than the model was trained with",
          r.source(), s.field(key), type, fmt::join(allowed, ", ")));
    }
  }
  return spec;
}

std::int64_t context_length(const RopeSpec& rope, std::int64_t max_position_embeddings) {
  if (rope.scaling != RopeScaling::Dynamic) return max_position_embeddings;
  return static_cast<std::int64_t>(
      std::floor(static_cast<double>(max_position_embeddings) * rope.factor));
}

nlohmann::json rope_scaling_json(const RopeSpec& rope) {
  switch (rope.scaling) {
    case RopeScaling::None:
      return nullptr;
    case RopeScaling::Linear:
      return {{"rope_type", "linear"}, {"factor", rope.factor}};
    case RopeScaling::Dynamic:
      return {{"rope_type", "dynamic"}, {"factor", rope.factor}};
    case RopeScaling::Llama3:
      return {{"rope_type", "llama3"},
              {"factor", rope.factor},
              {"low_freq_factor", rope.low_freq_factor},
              {"high_freq_factor", rope.high_freq_factor},
              {"original_max_position_embeddings", rope.original_max_positions}};
  }
  return nullptr;
}

}  // namespace huddle
