// Llama 3 rope scaling from llama.cpp's `rope_freqs.weight` (GGUF files converted by llama.cpp
// store the scaling as one factor per frequency pair, not as parameters).
//
// Llama 3's scaling divides pair i's base inverse frequency by a factor that depends only on its
// wavelength λ_i = 2π·θ^(2i/d): 1 for λ < orig/high, `factor` for λ > orig/low, and in between
// 1/f = (1 - s)/factor + s with s = (orig/λ - low)/(high - low) = A/λ - B. So the factors fix
// `factor` (the largest), A and B, not orig, low and high separately: any three with those A and
// B give every pair the same frequency. Huddle takes orig = A/B rounded to an integer (what low =
// 1, Llama 3.1 and 3.2's value, gives), low and high that keep A and B, and accepts the result
// only if it reproduces every factor within 1e-4 relative.
#pragma once

#include <nlohmann/json.hpp>

#include <span>
#include <string>

namespace huddle {

// The rope_scaling JSON (Hugging Face form) equivalent to `factors` (head_dim / 2 of them) for
// base `theta`: null when every factor is 1, linear when all are equal, else llama3. LoadError
// naming `origin` and the tensor when the factors fit none of these.
nlohmann::json rope_scaling_from_factors(std::span<const float> factors, double theta, int head_dim,
                                         const std::string& origin);

}  // namespace huddle
