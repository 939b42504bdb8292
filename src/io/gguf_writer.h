// Writes a GGUF v3 file (layout: io/gguf_format.h) that llama.cpp and Huddle both read.
//
//   GgufWriter w;
//   w.set("general.architecture", GgufValue::string("llama"));
//   w.add_tensor("token_embd.weight", DType::Q8_0, {vocab, hidden}, [&](std::span<std::byte> out) {
//     ... fill exactly dtype_bytes(Q8_0, vocab * hidden) bytes ...
//   });
//   w.write("model.gguf");  // atomically: a crash never leaves a partial file under that name
//
// Tensors are produced one at a time while writing, so a model larger than memory can be
// converted. Metadata and tensors keep the order they were added in.
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"
#include "io/gguf_format.h"

#include <cstddef>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace huddle::io {

class GgufWriter {
 public:
  // Fills the tensor's bytes (the buffer is exactly the tensor's size, zeroed).
  using Fill = std::function<void(std::span<std::byte> out)>;

  // Adds or replaces a metadata key.
  void set(const std::string& key, GgufValue value);
  // shape: outermost first ([rows, cols]); the row length must hold whole blocks of `dtype`.
  // Throws huddle::Error on a duplicate name or a dtype GGUF cannot store.
  void add_tensor(std::string name, DType dtype, Shape shape, Fill fill);

  // Writes the file with general.alignment 32 (the default, so not stored). Throws huddle::Error
  // naming the path on I/O failure; the target is untouched then.
  void write(const std::filesystem::path& path) const;

  std::size_t num_tensors() const { return tensors_.size(); }

 private:
  struct PendingTensor {
    std::string name;
    DType dtype;
    Shape shape;
    Fill fill;
    std::uint64_t nbytes = 0;
  };
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<PendingTensor> tensors_;
};

}  // namespace huddle::io
