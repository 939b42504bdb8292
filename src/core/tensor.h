// Tensor: a typed, shaped view of memory that it owns or borrows.
//
// Layout: row-major. The last dimension is contiguous; the leading dimensions are packed except
// that a 2-D tensor may have a row stride larger than its column count (a column slice of a
// larger matrix, e.g. the q/k/v blocks of GPT-2's packed c_attn weight). Kernels take the
// stride as BLAS's leading dimension.
//
// Storage is shared between views (a weight view keeps its memory-mapped file alive), so
// copying a Tensor is cheap and never copies data; `clone()` copies.
#pragma once

#include "core/dtype.h"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace huddle {

using Shape = std::vector<std::int64_t>;

std::int64_t shape_numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[2, 3]"

class Tensor {
 public:
  Tensor() = default;

  // Owned, zero-filled storage.
  static Tensor zeros(DType dtype, Shape shape);
  // Owned storage, contents unspecified (use when every element is written next).
  static Tensor empty(DType dtype, Shape shape);
  // Borrowed memory; `keepalive` keeps it valid (may be null when the caller guarantees it).
  static Tensor borrow(DType dtype, Shape shape, void* data,
                       std::shared_ptr<const void> keepalive = nullptr);
  static Tensor from_f32(Shape shape, std::span<const float> values);
  static Tensor from_i32(Shape shape, std::span<const std::int32_t> values);

  bool defined() const { return data_ != nullptr || numel() == 0; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t dim(int i) const;  // negative i counts from the end
  std::int64_t numel() const { return shape_numel(shape_); }
  std::size_t nbytes() const { return dtype_bytes(dtype_, numel()); }

  // For 2-D tensors: elements between the starts of consecutive rows (>= dim(1)).
  std::int64_t row_stride() const { return row_stride_; }
  bool contiguous() const;

  void* raw() { return data_; }
  const void* raw() const { return data_; }
  float* f32();
  const float* f32() const;
  std::int32_t* i32();
  const std::int32_t* i32() const;

  // Views sharing storage. rows(): dimension 0 in [begin, end). cols(): 2-D only, dimension 1.
  Tensor rows(std::int64_t begin, std::int64_t end) const;
  Tensor cols(std::int64_t begin, std::int64_t end) const;
  // Same data, new shape with the same element count; requires contiguous().
  Tensor reshape(Shape shape) const;
  // Deep copy into contiguous owned storage.
  Tensor clone() const;
  // Copies into a contiguous f32 vector (test and debug helper).
  std::vector<float> to_vector() const;
  // What keeps the data alive (shared by views; null for borrowed memory without a keepalive):
  // caches of data derived from a tensor key on it, since an address alone may be reused.
  const std::shared_ptr<const void>& owner() const { return storage_; }

 private:
  DType dtype_ = DType::F32;
  Shape shape_;
  std::int64_t row_stride_ = 0;
  void* data_ = nullptr;
  std::shared_ptr<const void> storage_;
};

}  // namespace huddle
