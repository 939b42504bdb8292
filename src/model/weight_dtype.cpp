#include "model/weight_dtype.h"

#include "core/error.h"
#include "core/kquant.h"
#include "core/quant.h"
#include "kernels/thread_pool.h"

#include <algorithm>
#include <cctype>
#include <numeric>
#include <vector>

namespace huddle {

std::optional<DType> parse_weight_dtype(std::string_view name) {
  std::string upper(name);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0}) {
    if (dtype_name(t) == upper) return t;
  }
  return std::nullopt;
}

std::map<std::string, WeightUse> weight_uses(const Graph& graph) {
  std::map<std::string, WeightUse> uses;
  for (const Value& v : graph.values()) {
    if (v.kind != ValueKind::Weight) continue;
    WeightUse& u = uses[v.weight.tensor];
    const int last = static_cast<int>(v.weight.tensor_shape.size()) - 1;
    const auto cut = [&](int axis, std::int64_t begin, std::int64_t end) {
      if (axis != last || last < 0) return;
      u.last_axis_cut = true;
      u.cut_granule = std::gcd(u.cut_granule, std::gcd(begin, end));
    };
    cut(v.weight.axis, v.weight.begin, v.weight.end);
    cut(v.weight.axis2, v.weight.begin2, v.weight.end2);
  }
  for (const Op& op : graph.ops()) {
    if ((op.kind == OpKind::Linear || op.kind == OpKind::Embedding) && op.inputs.size() >= 2) {
      const Value& w = graph.value(op.inputs[1]);
      if (w.kind == ValueKind::Weight) uses[w.weight.tensor].matrix = true;
    }
  }
  return uses;
}

DType kept_dtype(DType stored, const Shape& shape, const WeightUse& use,
                 const LoadOptions& options) {
  if (!use.matrix || shape.size() != 2) return DType::F32;
  const DType wanted = options.weight_dtype.value_or(stored);
  if (!dtype_is_quantized(wanted)) return wanted;
  const std::int64_t block = dtype_block_elems(wanted);
  const bool fits =
      shape.back() % block == 0 && (!use.last_axis_cut || use.cut_granule % block == 0);
  if (fits) return wanted;
  // A k-quant matrix cut inside its super-blocks of 256 keeps 8 bits where its cuts allow.
  if (dtype_block_elems(wanted) == kKQuantBlock &&
      use.cut_granule % dtype_block_elems(DType::Q8_0) == 0) {
    return DType::Q8_0;
  }
  return stored == DType::BF16 ? DType::BF16 : DType::F16;
}

Tensor convert_weight(const Tensor& stored, DType wanted) {
  if (stored.dtype() == wanted) return stored;
  HUDDLE_CHECK(stored.rank() >= 1 && stored.contiguous(), "convert_weight of {} {}",
               dtype_name(stored.dtype()), shape_str(stored.shape()));
  Tensor out = Tensor::empty(wanted, stored.shape());
  const std::int64_t cols = stored.dim(-1);
  const std::int64_t rows = cols == 0 ? 0 : stored.numel() / cols;
  const auto* in = static_cast<const std::byte*>(stored.raw());
  auto* dst = static_cast<std::byte*>(out.raw());
  kernels::parallel_for(
      0, rows,
      [&](std::int64_t b, std::int64_t e) {
        std::vector<float> row(static_cast<std::size_t>(cols));
        for (std::int64_t r = b; r < e; ++r) {
          dequantize_row(stored.dtype(), in + dtype_bytes(stored.dtype(), r * cols), row.data(),
                         cols);
          quantize_row(wanted, row.data(), dst + dtype_bytes(wanted, r * cols), cols);
        }
      },
      std::max<std::int64_t>(1, 65536 / std::max<std::int64_t>(cols, 1)));
  return out;
}

}  // namespace huddle
