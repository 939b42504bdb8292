#include "io/weight_source.h"

#include "core/error.h"
#include "core/quant.h"

#include <fmt/format.h>

namespace huddle::io {

Tensor widen_to_f32(const Tensor& stored, std::string_view what) {
  switch (stored.dtype()) {
    case DType::F32:
      return stored;
    case DType::F16:
    case DType::BF16:
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q5_0:
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K: {
      Tensor out = Tensor::empty(DType::F32, stored.shape());
      const Tensor src = stored.contiguous() ? stored : stored.clone();
      dequantize_row(src.dtype(), src.raw(), out.f32(), out.numel());
      return out;
    }
    case DType::I32:
      break;
  }
  throw LoadError(
      fmt::format("{} is {}, not a floating-point type", what, dtype_name(stored.dtype())));
}

}  // namespace huddle::io
