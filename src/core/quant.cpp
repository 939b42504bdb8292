#include "core/quant.h"

#include "core/error.h"
#include "core/kquant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

namespace huddle {

namespace {

void quantize_q8_0(const float* x, BlockQ8_0* y, std::int64_t blocks) {
  for (std::int64_t b = 0; b < blocks; ++b, x += kQuantBlock) {
    float amax = 0.0f;
    for (std::int64_t i = 0; i < kQuantBlock; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    for (std::int64_t i = 0; i < kQuantBlock; ++i) {
      y[b].q[i] = static_cast<std::int8_t>(std::round(x[i] * id));
    }
  }
}

void quantize_q4_0(const float* x, BlockQ4_0* y, std::int64_t blocks) {
  constexpr std::int64_t half = kQuantBlock / 2;
  for (std::int64_t b = 0; b < blocks; ++b, x += kQuantBlock) {
    // The signed value of largest magnitude maps to -8, so the scale keeps its sign.
    float amax = 0.0f, max = 0.0f;
    for (std::int64_t i = 0; i < kQuantBlock; ++i) {
      if (amax < std::fabs(x[i])) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = f32_to_f16(d);
    for (std::int64_t i = 0; i < half; ++i) {
      // Truncation of (v + 8.5) is ggml's rounding; min() clamps the +8 case of the extreme.
      const auto lo = std::min<std::uint8_t>(
          15, static_cast<std::uint8_t>(static_cast<std::int8_t>(x[i] * id + 8.5f)));
      const auto hi = std::min<std::uint8_t>(
          15, static_cast<std::uint8_t>(static_cast<std::int8_t>(x[i + half] * id + 8.5f)));
      y[b].q[i] = static_cast<std::uint8_t>(lo | (hi << 4));
    }
  }
}

void dequantize_q8_0(const BlockQ8_0* y, float* x, std::int64_t blocks) {
  for (std::int64_t b = 0; b < blocks; ++b, x += kQuantBlock) {
    const float d = f16_to_f32(y[b].d);
    for (std::int64_t i = 0; i < kQuantBlock; ++i) x[i] = d * static_cast<float>(y[b].q[i]);
  }
}

void dequantize_q4_0(const BlockQ4_0* y, float* x, std::int64_t blocks) {
  constexpr std::int64_t half = kQuantBlock / 2;
  for (std::int64_t b = 0; b < blocks; ++b, x += kQuantBlock) {
    const float d = f16_to_f32(y[b].d);
    for (std::int64_t i = 0; i < half; ++i) {
      x[i] = d * static_cast<float>((y[b].q[i] & 15) - 8);
      x[i + half] = d * static_cast<float>((y[b].q[i] >> 4) - 8);
    }
  }
}

}  // namespace

Tensor random_blocks(std::mt19937& rng, DType type, std::int64_t rows, std::int64_t cols,
                     float magnitude) {
  HUDDLE_CHECK(!can_quantize(type) && dtype_is_quantized(type), "no random {} blocks",
               dtype_name(type));
  HUDDLE_CHECK(dtype_fits(type, cols), "{} rows of {} elements are not whole blocks",
               dtype_name(type), cols);
  Tensor w = Tensor::empty(type, {rows, cols});
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> size(0.2f * magnitude, magnitude);
  const auto random_bytes = [&](auto& array) {
    for (auto& v : array) v = static_cast<std::remove_reference_t<decltype(v)>>(byte(rng));
  };
  for (std::int64_t b = 0; b < rows * (cols / dtype_block_elems(type)); ++b) {
    if (type == DType::Q5_1) {
      BlockQ5_1& block = static_cast<BlockQ5_1*>(w.raw())[b];
      block.d = f32_to_f16(size(rng) / 16);  // d · q + m within about ±magnitude
      block.m = f32_to_f16(-size(rng));
      random_bytes(block.qh);
      random_bytes(block.q);
    } else if (type == DType::Q5_0) {
      BlockQ5_0& block = static_cast<BlockQ5_0*>(w.raw())[b];
      block.d = f32_to_f16(size(rng) / 16);  // d · (q - 16) within ±magnitude
      random_bytes(block.qh);
      random_bytes(block.q);
    } else if (type == DType::Q4_K) {
      BlockQ4_K& block = static_cast<BlockQ4_K*>(w.raw())[b];
      block.d = f32_to_f16(size(rng) / (63 * 15));  // d · s · q up to about `magnitude`
      block.dmin = f32_to_f16(size(rng) / 63);      // dmin · m likewise
      random_bytes(block.scales);
      random_bytes(block.qs);
    } else if (type == DType::Q5_K) {
      BlockQ5_K& block = static_cast<BlockQ5_K*>(w.raw())[b];
      block.d = f32_to_f16(size(rng) / (63 * 31));
      block.dmin = f32_to_f16(size(rng) / 63);
      random_bytes(block.scales);
      random_bytes(block.qh);
      random_bytes(block.qs);
    } else {
      BlockQ6_K& block = static_cast<BlockQ6_K*>(w.raw())[b];
      block.d = f32_to_f16(size(rng) / (128 * 32));  // d · scale · (q - 32) likewise
      random_bytes(block.ql);
      random_bytes(block.qh);
      random_bytes(block.scales);
    }
  }
  return w;
}

void q5_0_quants(const BlockQ5_0& b, std::uint8_t out[32]) {
  std::uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  for (int i = 0; i < 16; ++i) {
    out[i] = static_cast<std::uint8_t>((b.q[i] & 15) | ((qh >> i) & 1) << 4);
    out[i + 16] = static_cast<std::uint8_t>((b.q[i] >> 4) | ((qh >> (i + 16)) & 1) << 4);
  }
}

void q5_1_quants(const BlockQ5_1& b, std::uint8_t out[32]) {
  BlockQ5_0 as_q5_0;  // the same quants
  std::memcpy(as_q5_0.qh, b.qh, sizeof b.qh);
  std::memcpy(as_q5_0.q, b.q, sizeof b.q);
  q5_0_quants(as_q5_0, out);
}

void quantize_row(DType dtype, const float* x, void* out, std::int64_t n) {
  HUDDLE_CHECK(dtype_fits(dtype, n), "{} row of {} elements is not whole blocks", dtype_name(dtype),
               n);
  switch (dtype) {
    case DType::F32:
      std::memcpy(out, x, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case DType::F16:
    case DType::BF16: {
      auto* bytes = static_cast<std::byte*>(out);
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint16_t h = dtype == DType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
        std::memcpy(bytes + 2 * i, &h, 2);  // the destination may be unaligned
      }
      return;
    }
    case DType::Q8_0:
      quantize_q8_0(x, static_cast<BlockQ8_0*>(out), n / kQuantBlock);
      return;
    case DType::Q4_0:
      quantize_q4_0(x, static_cast<BlockQ4_0*>(out), n / kQuantBlock);
      return;
    case DType::Q5_0:  // read from GGUF files only
    case DType::Q5_1:
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
    case DType::I32:
      break;
  }
  HUDDLE_CHECK(false, "cannot quantise to {}", dtype_name(dtype));
}

void dequantize_row(DType dtype, const void* in, float* x, std::int64_t n) {
  HUDDLE_CHECK(dtype_fits(dtype, n), "{} row of {} elements is not whole blocks", dtype_name(dtype),
               n);
  switch (dtype) {
    case DType::F32:
      std::memcpy(x, in, static_cast<std::size_t>(n) * sizeof(float));
      return;
    case DType::F16:
    case DType::BF16: {
      const auto* bytes = static_cast<const std::byte*>(in);
      for (std::int64_t i = 0; i < n; ++i) {
        std::uint16_t h;
        std::memcpy(&h, bytes + 2 * i, 2);  // the source may be unaligned (safetensors offsets)
        x[i] = dtype == DType::F16 ? f16_to_f32(h) : bf16_to_f32(h);
      }
      return;
    }
    case DType::Q8_0:
      dequantize_q8_0(static_cast<const BlockQ8_0*>(in), x, n / kQuantBlock);
      return;
    case DType::Q4_0:
      dequantize_q4_0(static_cast<const BlockQ4_0*>(in), x, n / kQuantBlock);
      return;
    case DType::Q5_1: {
      const auto* blocks = static_cast<const std::byte*>(in);
      for (std::int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
        BlockQ5_1 block;  // the rows of a mapped file may be unaligned
        std::memcpy(&block, blocks + b * static_cast<std::int64_t>(sizeof block), sizeof block);
        std::uint8_t q[32];
        q5_1_quants(block, q);
        const float d = f16_to_f32(block.d), m = f16_to_f32(block.m);
        for (int i = 0; i < 32; ++i) x[i] = d * static_cast<float>(q[i]) + m;
      }
      return;
    }
    case DType::Q5_0: {
      const auto* blocks = static_cast<const std::byte*>(in);
      for (std::int64_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
        BlockQ5_0 block;  // the rows of a mapped file may be unaligned
        std::memcpy(&block, blocks + b * static_cast<std::int64_t>(sizeof block), sizeof block);
        std::uint8_t q[32];
        q5_0_quants(block, q);
        const float d = f16_to_f32(block.d);
        for (int i = 0; i < 32; ++i) x[i] = d * static_cast<float>(q[i] - 16);
      }
      return;
    }
    case DType::Q4_K:
    case DType::Q5_K:
    case DType::Q6_K:
      dequantize_kquant_row(dtype == DType::Q4_K   ? KQuant::Q4_K
                            : dtype == DType::Q5_K ? KQuant::Q5_K
                                                   : KQuant::Q6_K,
                            {static_cast<const std::byte*>(in), dtype_bytes(dtype, n)},
                            {x, static_cast<std::size_t>(n)});
      return;
    case DType::I32:
      break;
  }
  HUDDLE_CHECK(false, "cannot convert {} to f32", dtype_name(dtype));
}

namespace {

// Calls fn(row pointer, row index) for every row of t seen as [rows, last dim].
template <typename Fn>
void for_each_row(const Tensor& t, const Fn& fn) {
  if (t.rank() == 0) return;
  const std::int64_t cols = t.dim(-1);
  const std::int64_t rows = cols == 0 ? 0 : t.numel() / cols;
  const std::int64_t stride = t.rank() == 2 ? t.row_stride() : cols;
  for (std::int64_t r = 0; r < rows; ++r) {
    fn(static_cast<const std::byte*>(t.raw()) + dtype_bytes(t.dtype(), r * stride), r);
  }
}

}  // namespace

Tensor dequantize(const Tensor& t) {
  HUDDLE_CHECK(t.rank() >= 1, "dequantize of a scalar");
  Tensor out = Tensor::empty(DType::F32, t.shape());
  const std::int64_t cols = t.dim(-1);
  for_each_row(t, [&](const std::byte* row, std::int64_t r) {
    dequantize_row(t.dtype(), row, out.f32() + r * cols, cols);
  });
  return out;
}

Tensor quantize(const Tensor& t, DType dtype) {
  HUDDLE_CHECK(t.dtype() == DType::F32 && t.rank() >= 1, "quantize needs an F32 tensor, got {}",
               dtype_name(t.dtype()));
  Tensor out = Tensor::empty(dtype, t.shape());
  const std::int64_t cols = t.dim(-1);
  for_each_row(t, [&](const std::byte* row, std::int64_t r) {
    quantize_row(dtype, reinterpret_cast<const float*>(row),
                 static_cast<std::byte*>(out.raw()) + dtype_bytes(dtype, r * cols), cols);
  });
  return out;
}

}  // namespace huddle
