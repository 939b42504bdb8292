// WeightSource: the weights of a model, by stored name, wherever they are kept. The loader
// (model/model.cpp) reads through this interface only; a Hugging Face safetensors directory
// (io::Checkpoint) and a GGUF file (model/gguf_model.h) are its two implementations.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::io {

struct TensorInfo {
  DType dtype = DType::F32;
  Shape shape;                 // outermost first: [out, in] for a linear weight
  std::filesystem::path file;  // the file holding it
  std::uint64_t offset = 0;    // absolute byte offset in `file`
  std::uint64_t nbytes = 0;
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;

  // The directory or file, for messages.
  virtual std::string origin() const = 0;
  // Names of the tensors Huddle can load, sorted.
  virtual std::vector<std::string> names() const = 0;
  // LoadError naming the tensor and origin() when absent.
  virtual TensorInfo info(std::string_view name) const = 0;
  // Stored dtype and shape; zero-copy where the stored bytes allow.
  virtual Tensor view(std::string_view name) const = 0;
  // F32 data: the view when stored as F32, else an owned copy widened/dequantised.
  virtual Tensor load_f32(std::string_view name) const = 0;
};

// `stored` as F32: itself when F32, else an owned dequantised copy (F16, BF16, Q8_0, Q4_0).
// LoadError naming `what` for integer tensors.
Tensor widen_to_f32(const Tensor& stored, std::string_view what);

}  // namespace huddle::io
