#include "io/image.h"

#include "core/error.h"

#include <fmt/format.h>

#define STB_IMAGE_STATIC
#define STB_IMAGE_IMPLEMENTATION
#include <stb/stb_image.h>
#define STB_IMAGE_RESIZE_STATIC
#define STB_IMAGE_RESIZE_IMPLEMENTATION
#include <stb/stb_image_resize.h>

#include <memory>
#include <vector>

namespace huddle::io {

Tensor load_image(const std::filesystem::path& path, const ImageOptions& o) {
  if (o.width <= 0 || o.height <= 0 || o.width > 16384 || o.height > 16384)
    throw InputError(fmt::format("image size {}x{} is invalid", o.width, o.height));
  int w = 0, h = 0, channels = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> pixels(
      stbi_load(path.string().c_str(), &w, &h, &channels, 3), stbi_image_free);
  if (!pixels) {
    throw LoadError(
        fmt::format("{}: cannot decode the image ({})", path.string(), stbi_failure_reason()));
  }
  std::vector<unsigned char> resized(static_cast<std::size_t>(o.width) * o.height * 3);
  if (!stbir_resize_uint8(pixels.get(), w, h, 0, resized.data(), o.width, o.height, 0, 3)) {
    throw LoadError(fmt::format("{}: cannot resize the image", path.string()));
  }
  Tensor t = Tensor::empty(DType::F32, {1, 3, o.height, o.width});
  const std::int64_t plane = static_cast<std::int64_t>(o.width) * o.height;
  for (std::int64_t p = 0; p < plane; ++p) {
    for (std::size_t c = 0; c < 3; ++c) {
      const float v = static_cast<float>(resized[static_cast<std::size_t>(p) * 3 + c]) / 255.0f;
      t.f32()[static_cast<std::int64_t>(c) * plane + p] = (v - o.mean[c]) / o.std[c];
    }
  }
  return t;
}

}  // namespace huddle::io
