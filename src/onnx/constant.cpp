#include "onnx/constant.h"

#include "core/error.h"

#include <fmt/format.h>

#include <cstring>

namespace huddle::onnx_import {

std::int64_t checked_numel(const Shape& shape, const std::string& what) {
  constexpr std::int64_t kLimit = std::int64_t{1} << 40;
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    if (d < 0 || d > kLimit) throw LoadError(fmt::format("{}: dimension {} is invalid", what, d));
    if (d != 0 && n > kLimit / d)
      throw LoadError(fmt::format("{}: shape {} is too large", what, shape_str(shape)));
    n *= d;
  }
  return n;
}

namespace {

template <typename T>
std::vector<T> from_raw(const std::string& raw, std::int64_t n, const std::string& what) {
  if (static_cast<std::int64_t>(raw.size()) != n * static_cast<std::int64_t>(sizeof(T))) {
    throw LoadError(fmt::format("{}: raw data holds {} bytes, the shape needs {}", what, raw.size(),
                                n * static_cast<std::int64_t>(sizeof(T))));
  }
  std::vector<T> v(static_cast<std::size_t>(n));
  if (n > 0) std::memcpy(v.data(), raw.data(), raw.size());
  return v;
}

template <typename Field>
void check_count(const Field& field, std::int64_t n, const std::string& what) {
  if (static_cast<std::int64_t>(field.size()) != n) {
    throw LoadError(fmt::format("{}: holds {} values, its shape needs {}", what, field.size(), n));
  }
}

}  // namespace

Constant constant_from_proto(const onnx::TensorProto& t, const std::string& where) {
  const std::string what = fmt::format("{}: tensor '{}'", where, t.name());
  if (t.data_location() == onnx::TensorProto::EXTERNAL || t.external_data_size() > 0) {
    throw LoadError(fmt::format("{}: external data is not supported", what));
  }
  if (t.has_segment())
    throw LoadError(fmt::format("{}: segmented tensors are not supported", what));
  Constant c;
  for (std::int64_t d : t.dims()) c.shape.push_back(d);
  const std::int64_t n = checked_numel(c.shape, what);
  const bool raw = t.has_raw_data();
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      if (raw) {
        c.f = from_raw<float>(t.raw_data(), n, what);
      } else {
        check_count(t.float_data(), n, what);
        c.f.assign(t.float_data().begin(), t.float_data().end());
      }
      return c;
    case onnx::TensorProto::DOUBLE: {
      std::vector<double> d;
      if (raw) {
        d = from_raw<double>(t.raw_data(), n, what);
      } else {
        check_count(t.double_data(), n, what);
        d.assign(t.double_data().begin(), t.double_data().end());
      }
      c.f.assign(d.begin(), d.end());
      return c;
    }
    case onnx::TensorProto::INT64:
      c.is_int = true;
      if (raw) {
        c.i = from_raw<std::int64_t>(t.raw_data(), n, what);
      } else {
        check_count(t.int64_data(), n, what);
        c.i.assign(t.int64_data().begin(), t.int64_data().end());
      }
      return c;
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::BOOL:
      c.is_int = true;
      if (raw && t.data_type() == onnx::TensorProto::INT32) {
        const auto v = from_raw<std::int32_t>(t.raw_data(), n, what);
        c.i.assign(v.begin(), v.end());
      } else if (raw) {
        throw LoadError(fmt::format("{}: raw data of this element type is not supported", what));
      } else {
        check_count(t.int32_data(), n, what);
        c.i.assign(t.int32_data().begin(), t.int32_data().end());
      }
      return c;
    default:
      throw LoadError(fmt::format("{}: element type {} is not supported (float32 models only)",
                                  what, static_cast<int>(t.data_type())));
  }
}

}  // namespace huddle::onnx_import
