// Images for CNN inputs: decode (JPEG, PNG, BMP, ... via stb_image), resize, normalise to NCHW.
#pragma once

#include "core/tensor.h"

#include <array>
#include <filesystem>

namespace huddle::io {

struct ImageOptions {
  int width = 224, height = 224;                      // output size (bilinear resize)
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};  // per RGB channel, on [0, 1] values
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
};

// F32 [1, 3, height, width]: RGB in [0, 1], resized, then (x - mean) / std per channel.
// LoadError naming the file when it cannot be read or decoded.
Tensor load_image(const std::filesystem::path& path, const ImageOptions& options);

}  // namespace huddle::io
