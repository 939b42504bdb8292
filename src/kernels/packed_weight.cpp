// PackedWeight (kernels/packed_weight.h): packing, the scalar kernel (the portable path and the
// reference of the vector ones), and linear() on packed weights.
#include "kernels/packed_weight.h"

#include "core/error.h"
#include "core/quant.h"
#include "kernels/packed_quant.h"
#include "kernels/shapes.h"
#include "kernels/thread_pool.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <vector>

namespace huddle::kernels {
namespace {

constexpr std::int64_t kRows = PackedWeight::kGroupRows;
// Weight bytes per chunk of groups below which a thread is not worth waking (as linear_lowp.cpp).
constexpr std::int64_t kMinPackedChunkBytes = 1 << 19;
// Groups a thread takes at a time: their weights (16 x 16 rows) stay in L2 while every tile of
// tokens passes over them.
constexpr std::int64_t kChunkGroups = 16;

template <DType T>
void pack_group(const Tensor& w, std::int64_t g, std::int64_t group_bytes, std::byte* out) {
  using Block = std::conditional_t<T == DType::Q4_0, BlockQ4_0, BlockQ8_0>;
  constexpr int kChunks = T == DType::Q4_0 ? 4 : 8;
  const std::int64_t blocks = w.dim(1) / detail::kQBlock;
  const std::int64_t r0 = g * kRows;
  const std::int64_t rows = std::min(kRows, w.dim(0) - r0);
  const auto* base = static_cast<const std::byte*>(w.raw());
  std::memset(out, 0, static_cast<std::size_t>(group_bytes));
  for (std::int64_t j = 0; j < rows; ++j) {
    const auto* row =
        reinterpret_cast<const Block*>(base + dtype_bytes(T, (r0 + j) * w.row_stride()));
    for (std::int64_t b = 0; b < blocks; ++b) {
      std::memcpy(detail::packed_scales<T>(out, b) + 2 * j, &row[b].d, 2);
      std::byte* quants = detail::packed_quants<T>(out, b);
      for (int c = 0; c < kChunks; ++c) std::memcpy(quants + c * 64 + j * 4, row[b].q + 4 * c, 4);
    }
  }
}

// The scalar kernels: the operations packed_quant.h states, one output at a time.
template <DType T>
void group_scalar(const std::byte* group, std::int64_t blocks, int rows, const detail::BlockQ8A* x,
                  const std::int32_t* seeds, std::int64_t x_row_blocks, int tokens, float* y,
                  std::int64_t ldy) {
  for (int t = 0; t < tokens; ++t) {
    for (int j = 0; j < rows; ++j) {
      float acc = 0.0f;
      for (std::int64_t b = 0; b < blocks; ++b) {
        const detail::BlockQ8A& xb = x[t * x_row_blocks + b];
        const auto* q = reinterpret_cast<const std::uint8_t*>(detail::packed_quants<T>(group, b));
        std::int32_t sum = 0;
        if constexpr (T == DType::Q4_0) {
          sum = seeds[t * x_row_blocks + b];
          for (int c = 0; c < 4; ++c) {
            for (int e = 0; e < 4; ++e) {
              const std::uint8_t v = q[c * 64 + j * 4 + e];
              sum += (v & 15) * xb.q[4 * c + e] + (v >> 4) * xb.q[16 + 4 * c + e];
            }
          }
        } else {
          for (int c = 0; c < 8; ++c) {
            for (int e = 0; e < 4; ++e) {
              sum += static_cast<std::int8_t>(q[c * 64 + j * 4 + e]) * xb.q[4 * c + e];
            }
          }
        }
        std::uint16_t scale;
        std::memcpy(&scale, detail::packed_scales<T>(group, b) + 2 * j, 2);
        acc = std::fma(f16_to_f32(scale) * xb.d, static_cast<float>(sum), acc);
      }
      y[t * ldy + j] = acc;
    }
  }
}

void linear_packed(const Tensor& x, const PackedWeight& w, const float* bias, Tensor& y) {
  const std::int64_t t = x.dim(0), k = x.dim(1), n = w.rows();
  const std::int64_t blocks = k / detail::kQBlock;
  thread_local std::vector<detail::BlockQ8A> xq;
  thread_local std::vector<std::int32_t> seeds;
  xq.resize(static_cast<std::size_t>(t * blocks));
  seeds.resize(xq.size());
  for (std::int64_t r = 0; r < t; ++r) {
    detail::quantize_activation(x.f32() + r * x.row_stride(), xq.data() + r * blocks, k);
  }
  const bool q4 = w.dtype() == DType::Q4_0;
  for (std::size_t i = 0; q4 && i < xq.size(); ++i) {
    std::int32_t sum = 0;
    for (std::int8_t q : xq[i].q) sum += q;
    seeds[i] = -8 * sum;
  }
  const detail::PackedFn fn = detail::packed_fn(w.dtype(), active_isa());
  // Pointers taken here: inside the loop, on a pool thread, the thread_locals are that thread's.
  const detail::BlockQ8A* xqd = xq.data();
  const std::int32_t* seedd = q4 ? seeds.data() : nullptr;
  float* yd = y.f32();
  const std::int64_t ldy = y.row_stride();
  const std::int64_t chunks = (w.groups() + kChunkGroups - 1) / kChunkGroups;
  parallel_for(
      0, chunks,
      [&](std::int64_t cb, std::int64_t ce) {
        for (std::int64_t c = cb; c < ce; ++c) {
          const std::int64_t g_end = std::min(w.groups(), (c + 1) * kChunkGroups);
          for (std::int64_t t0 = 0; t0 < t; t0 += detail::kPackedTokens) {
            const int tokens =
                static_cast<int>(std::min<std::int64_t>(detail::kPackedTokens, t - t0));
            for (std::int64_t g = c * kChunkGroups; g < g_end; ++g) {
              const int rows = static_cast<int>(std::min(kRows, n - g * kRows));
              fn(w.group(g), blocks, rows, xqd + t0 * blocks,
                 seedd != nullptr ? seedd + t0 * blocks : nullptr, blocks, tokens,
                 yd + t0 * ldy + g * kRows, ldy);
            }
          }
          if (bias != nullptr) {
            for (std::int64_t r = 0; r < t; ++r) {
              for (std::int64_t col = c * kChunkGroups * kRows; col < std::min(n, g_end * kRows);
                   ++col) {
                yd[r * ldy + col] += bias[col];
              }
            }
          }
        }
      },
      std::max<std::int64_t>(
          1, kMinPackedChunkBytes / std::max<std::int64_t>(1, kChunkGroups * w.group_bytes())));
}

}  // namespace

std::int64_t PackedWeight::group_bytes() const {
  return (blocks_ + 1) / 2 * detail::packed_pair_bytes(dtype_);
}

void PackedWeight::Free::operator()(std::byte* p) const {
  ::operator delete[](p, std::align_val_t{64});
}

std::shared_ptr<const PackedWeight> PackedWeight::pack(const Tensor& w, WeightLayout layout) {
  const DType t = w.dtype();
  if ((t != DType::Q4_0 && t != DType::Q8_0) || layout != WeightLayout::OutIn || w.rank() != 2) {
    return nullptr;
  }
  auto p = std::make_shared<PackedWeight>();
  p->dtype_ = t;
  p->rows_ = w.dim(0);
  p->cols_ = w.dim(1);
  p->blocks_ = p->cols_ / detail::kQBlock;
  p->data_.reset(static_cast<std::byte*>(
      ::operator new[](std::max<std::size_t>(p->nbytes(), 64), std::align_val_t{64})));
  const auto pack = t == DType::Q4_0 ? &pack_group<DType::Q4_0> : &pack_group<DType::Q8_0>;
  parallel_for(0, p->groups(), [&](std::int64_t b, std::int64_t e) {
    for (std::int64_t g = b; g < e; ++g) {
      pack(w, g, p->group_bytes(), p->data_.get() + g * p->group_bytes());
    }
  });
  return p;
}

void linear(const Tensor& x, const Tensor& w, const PackedWeight* packed, WeightLayout layout,
            const Tensor* bias, Tensor& y) {
  if (packed == nullptr) {
    linear(x, w, layout, bias, y);
    return;
  }
  const auto [t, k, n] = detail::check_linear(x, w, layout, bias, y);
  HUDDLE_CHECK(packed->rows() == n && packed->cols() == k,
               "packed weight [{}, {}] for a linear of {} outputs and {} inputs", packed->rows(),
               packed->cols(), n, k);
  if (t == 0 || n == 0) return;
  if (k == 0) {
    linear(x, w, layout, bias, y);
    return;
  }
  linear_packed(x, *packed, bias != nullptr ? bias->f32() : nullptr, y);
}

namespace detail {

PackedFn packed_fn(DType dtype, Isa isa) {
  HUDDLE_CHECK(isa_supported(isa), "path {} is not supported on this CPU", isa_name(isa));
  HUDDLE_CHECK(dtype == DType::Q4_0 || dtype == DType::Q8_0, "no packed kernel for {} weights",
               dtype_name(dtype));
  PackedFn fn = nullptr;
  switch (isa) {
    case Isa::Avx512Vnni:
      fn = avx512vnni_packed(dtype);
      break;
    case Isa::Avx512:
    case Isa::Avx2:
      fn = avx2_packed(dtype);
      break;
    case Isa::Scalar:
      break;
  }
  if (fn != nullptr) return fn;
  return dtype == DType::Q4_0 ? &group_scalar<DType::Q4_0> : &group_scalar<DType::Q8_0>;
}

}  // namespace detail
}  // namespace huddle::kernels
