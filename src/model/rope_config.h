// RoPE parameters from config.json: `rope_theta` and `rope_scaling` (Hugging Face's
// modeling_rope_utils: "rope_type", or the legacy "type"), to kernels::RopeSpec and back.
#pragma once

#include "kernels/kernels.h"
#include "model/model_config.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>

namespace huddle {

// Reads rope_theta (absent: `default_theta`) and rope_scaling: null/absent or rope_type
// "default" = none; "linear" {factor}; "dynamic" {factor}, original context
// `max_position_embeddings`; "llama3" {factor, low_freq_factor, high_freq_factor,
// original_max_position_embeddings}. Any other rope_type, or a key of rope_scaling not listed for
// its type, is a LoadError naming it (they change the frequencies: never silently ignored).
kernels::RopeSpec parse_rope(const ConfigReader& r, double default_theta,
                             std::int64_t max_position_embeddings);

// The positions a model accepts: max_position_embeddings, times the factor for "dynamic" (the
// context NTK scaling is meant to stretch to; the others keep max_position_embeddings, which
// Hugging Face configs already give as the scaled context).
std::int64_t context_length(const kernels::RopeSpec& rope, std::int64_t max_position_embeddings);

// rope_scaling as config.json writes it (null for RopeScaling::None).
nlohmann::json rope_scaling_json(const kernels::RopeSpec& rope);

}  // namespace huddle
