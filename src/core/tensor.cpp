#include "core/tensor.h"

#include "core/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <cstring>

namespace huddle {

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

namespace {

std::int64_t default_row_stride(const Shape& shape) {
  return shape.size() >= 2 ? shape.back() : 0;
}

struct AlignedDeleter {
  void operator()(const void* p) const { std::free(const_cast<void*>(p)); }
};

std::shared_ptr<const void> allocate(std::size_t bytes, void** data) {
  // 64-byte alignment for AVX-512 loads; at least one byte so that empty tensors have storage.
  const std::size_t rounded = ((bytes + 63) / 64) * 64 + 64;
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) throw Error(fmt::format("out of memory allocating {} bytes", bytes));
  *data = p;
  return std::shared_ptr<const void>(p, AlignedDeleter{});
}

// Rows of a block-quantised tensor hold whole blocks.
void check_whole_blocks(DType dtype, const Shape& shape) {
  HUDDLE_CHECK(shape.empty() || dtype_fits(dtype, shape.back()),
               "a {} tensor's rows hold whole blocks of {} elements, not {}", dtype_name(dtype),
               dtype_block_elems(dtype), shape_str(shape));
}

}  // namespace

Tensor Tensor::empty(DType dtype, Shape shape) {
  for (std::int64_t d : shape) HUDDLE_CHECK(d >= 0, "negative dimension in {}", shape_str(shape));
  check_whole_blocks(dtype, shape);
  Tensor t;
  t.dtype_ = dtype;
  t.row_stride_ = default_row_stride(shape);
  t.shape_ = std::move(shape);
  t.storage_ = allocate(t.nbytes(), &t.data_);
  return t;
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t = empty(dtype, std::move(shape));
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::borrow(DType dtype, Shape shape, void* data, std::shared_ptr<const void> keepalive) {
  check_whole_blocks(dtype, shape);
  Tensor t;
  t.dtype_ = dtype;
  t.row_stride_ = default_row_stride(shape);
  t.shape_ = std::move(shape);
  t.data_ = data;
  t.storage_ = std::move(keepalive);
  return t;
}

Tensor Tensor::from_f32(Shape shape, std::span<const float> values) {
  HUDDLE_CHECK(static_cast<std::int64_t>(values.size()) == shape_numel(shape));
  Tensor t = empty(DType::F32, std::move(shape));
  std::memcpy(t.data_, values.data(), values.size_bytes());
  return t;
}

Tensor Tensor::from_i32(Shape shape, std::span<const std::int32_t> values) {
  HUDDLE_CHECK(static_cast<std::int64_t>(values.size()) == shape_numel(shape));
  Tensor t = empty(DType::I32, std::move(shape));
  std::memcpy(t.data_, values.data(), values.size_bytes());
  return t;
}

std::int64_t Tensor::dim(int i) const {
  const int r = rank();
  if (i < 0) i += r;
  HUDDLE_CHECK(i >= 0 && i < r, "dim {} of rank-{} tensor", i, r);
  return shape_[static_cast<std::size_t>(i)];
}

bool Tensor::contiguous() const {
  return rank() < 2 || row_stride_ == shape_.back();
}

float* Tensor::f32() {
  HUDDLE_CHECK(dtype_ == DType::F32, "tensor is {}, not F32", dtype_name(dtype_));
  return static_cast<float*>(data_);
}
const float* Tensor::f32() const {
  HUDDLE_CHECK(dtype_ == DType::F32, "tensor is {}, not F32", dtype_name(dtype_));
  return static_cast<const float*>(data_);
}
std::int32_t* Tensor::i32() {
  HUDDLE_CHECK(dtype_ == DType::I32, "tensor is {}, not I32", dtype_name(dtype_));
  return static_cast<std::int32_t*>(data_);
}
const std::int32_t* Tensor::i32() const {
  HUDDLE_CHECK(dtype_ == DType::I32, "tensor is {}, not I32", dtype_name(dtype_));
  return static_cast<const std::int32_t*>(data_);
}

Tensor Tensor::rows(std::int64_t begin, std::int64_t end) const {
  HUDDLE_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0], "rows [{}, {}) of {}",
               begin, end, shape_str(shape_));
  Tensor t = *this;
  t.shape_[0] = end - begin;
  const std::int64_t stride =
      rank() == 2 ? row_stride_ : shape_numel(shape_) / std::max<std::int64_t>(shape_[0], 1);
  t.data_ = static_cast<char*>(data_) + dtype_bytes(dtype_, begin * stride);
  return t;
}

Tensor Tensor::cols(std::int64_t begin, std::int64_t end) const {
  HUDDLE_CHECK(rank() == 2 && 0 <= begin && begin <= end && end <= shape_[1], "cols [{}, {}) of {}",
               begin, end, shape_str(shape_));
  HUDDLE_CHECK(dtype_fits(dtype_, begin) && dtype_fits(dtype_, end),
               "cols [{}, {}) of a {} tensor cut a block of {}", begin, end, dtype_name(dtype_),
               dtype_block_elems(dtype_));
  Tensor t = *this;
  t.shape_[1] = end - begin;
  t.data_ = static_cast<char*>(data_) + dtype_bytes(dtype_, begin);
  return t;
}

Tensor Tensor::reshape(Shape shape) const {
  HUDDLE_CHECK(contiguous(), "reshape of a strided view");
  HUDDLE_CHECK(shape_numel(shape) == numel(), "reshape {} -> {}", shape_str(shape_),
               shape_str(shape));
  Tensor t = *this;
  t.row_stride_ = default_row_stride(shape);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t = empty(dtype_, shape_);
  if (contiguous()) {
    std::memcpy(t.data_, data_, nbytes());
  } else {
    const std::size_t row_bytes = dtype_bytes(dtype_, shape_[1]);
    for (std::int64_t r = 0; r < shape_[0]; ++r) {
      std::memcpy(static_cast<char*>(t.data_) + static_cast<std::size_t>(r) * row_bytes,
                  static_cast<const char*>(data_) + dtype_bytes(dtype_, r * row_stride_),
                  row_bytes);
    }
  }
  return t;
}

std::vector<float> Tensor::to_vector() const {
  const Tensor c = contiguous() ? *this : clone();
  const float* p = c.f32();
  return std::vector<float>(p, p + c.numel());
}

}  // namespace huddle
