// Internal to the ONNX importer: constant tensors known at load (initializers, Constant nodes and
// whatever is folded from them), float or integer.
#pragma once

#include "core/tensor.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace huddle::onnx_import {

struct Constant {
  Shape shape;  // may hold zeros (an empty tensor) and be rank 0 (a scalar)
  bool is_int = false;
  std::vector<float> f;         // !is_int
  std::vector<std::int64_t> i;  // is_int
  std::int64_t numel() const { return shape_numel(shape); }
  // Value k as a double, whichever the type.
  double at(std::int64_t k) const {
    return is_int ? static_cast<double>(i[static_cast<std::size_t>(k)])
                  : static_cast<double>(f[static_cast<std::size_t>(k)]);
  }
};

// Converts a TensorProto (FLOAT, DOUBLE, INT64, INT32 and smaller ints, BOOL; raw_data or typed
// fields). LoadError with `where` + the tensor's name on anything malformed or unsupported
// (external data, bad sizes, overflowing dimensions).
Constant constant_from_proto(const onnx::TensorProto& t, const std::string& where);

// Elements of `shape` with overflow and size checks (<= 2^40); LoadError naming `what`.
std::int64_t checked_numel(const Shape& shape, const std::string& what);

}  // namespace huddle::onnx_import
