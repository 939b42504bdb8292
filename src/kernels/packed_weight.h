// A linear layer's weight repacked once, when an executor binds it, into the layout its fastest
// kernel reads: Q4_0, Q8_0, Q4_K, F16 and BF16 weights stored OutIn [N, K] (every decoder
// projection of a GGUF, `huddle quantize` or 16-bit Hugging Face model). Q4_K's layout and
// operations are in packed_quant.h.
//
// Why: a Q4_0 row is a run of 18-byte blocks (an f16 scale, 16 bytes of nibbles). Multiplying one
// row at a time spends most of its instructions on per-block scale handling, unpacking and the
// final horizontal sum (measured 12-13 GB/s of weights on a Zen 4 core, against llama.cpp's
// ~18 GB/s with its repacked rows), and several rows at once read several DRAM streams. Packed,
// sixteen consecutive rows are one stream in which each 32-bit lane of a vector holds four bytes
// of one row: one broadcast of four activation bytes multiplies all sixteen rows
// (_mm512_dpbusd_epi32), the lanes are the sixteen outputs, and the scale of a block is one
// vector of sixteen rows' scales. Nothing is reduced horizontally, and a prompt's tokens share
// each unpacked block (prefill 2.5-3.5x the row tiles).
//
// F16 and BF16 weights pack too (packed_16bit.h): a group is, for every input i, the sixteen
// rows' 16-bit values of element i, so one vector load widened to F32 times one broadcast of x[i]
// feeds sixteen outputs (the row kernels: 15-22 GB/s of F16 at decode, bound by one horizontal
// sum and one activation load per row).
//
// Q4_0/Q8_0 layout, per group of 16 rows (rows r0 .. r0 + 15; the last group is padded with zero
// rows), per block b:
//   scales   [16] f16          the rows' scales of block b
//   quants   [C][16][4] bytes  for chunk c and row j: bytes 4c .. 4c + 3 of row j's quants.
//                              Q4_0 (C = 4): elements 4c .. 4c + 3 in the low nibbles and
//                              16 + 4c .. 16 + 4c + 3 in the high ones; Q8_0 (C = 8): elements
//                              4c .. 4c + 3
// stored in pairs of blocks [scales b, scales b + 1, quants b, quants b + 1] (packed_quant.h), so
// a group is one sequential stream of 64-byte-aligned pieces. Same bytes as the rows (16 row
// blocks: 288 for Q4_0, 544 for Q8_0) but an odd block count's padding; groups start on 64 bytes.
//
// Results: every Q4_0/Q8_0 output is Σ_b fma(d_w[b] · d_x[b], Σ_{i<32} w_i · x_i, acc) in block
// order, with the integer sum exact; every F16/BF16 output two FMA chains (packed_16bit.h). So
// the scalar, AVX2 and AVX-512 paths give the same bits, and a token gets the same bits whatever
// the number of tokens in the call. Against the row kernels (qtile.h, qdot.h) results differ by
// float reassociation only (for Q4_0/Q8_0, the same activation rounding, lowp.h).
#pragma once

#include "core/tensor.h"
#include "kernels/kernels.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

namespace huddle::kernels {

class PackedWeight {
 public:
  static constexpr std::int64_t kGroupRows = 16;

  // w's packed form for linear() in `layout`, or null where none exists (not Q4_0, Q8_0, Q4_K, F16
  // or BF16, or InOut).
  // `consumed`, when given, is told of each run of w's rows once packed (their bytes: a pointer
  // and a length), in order, so a caller that will not read them again can let them go while the
  // rest packs (a model's largest weight is not then held twice at the peak).
  using Consumed = std::function<void(const std::byte* rows, std::size_t bytes)>;
  static std::shared_ptr<const PackedWeight> pack(const Tensor& w, WeightLayout layout,
                                                  const Consumed& consumed = {});

  std::int64_t rows() const { return rows_; }
  std::int64_t cols() const { return cols_; }
  // Q4_0/Q8_0 blocks per row (Q4_K: sub-blocks of 32); 0 for 16-bit.
  std::int64_t blocks() const { return blocks_; }
  std::int64_t groups() const { return (rows_ + kGroupRows - 1) / kGroupRows; }
  DType dtype() const { return dtype_; }
  // Bytes of a group: Q4_0/Q8_0 (blocks + 1) / 2 pairs of blocks (packed_quant.h: Q4_0 576,
  // Q8_0 1088); Q4_K 2368 per super-block; F16/BF16 32 per input, rounded up to 64
  // (packed_16bit.h).
  std::int64_t group_bytes() const;
  const std::byte* group(std::int64_t g) const { return data_.get() + g * group_bytes(); }
  std::size_t nbytes() const { return static_cast<std::size_t>(groups() * group_bytes()); }
  // Row r (< rows()) widened to F32 into out[cols()]: the values dequantize_row gives the row
  // it was packed from, bit for bit (an embedding table tied to the head reads its rows here,
  // so the model holds the table once, packed).
  void unpack_row(std::int64_t r, float* out) const;

 private:
  struct Free {
    void operator()(std::byte* p) const;
  };
  DType dtype_ = DType::Q4_0;
  std::int64_t rows_ = 0, cols_ = 0, blocks_ = 0;
  std::unique_ptr<std::byte[], Free> data_;
};

// embedding() (kernels.h) from a table held packed: the same rows, the same bits.
void embedding(std::span<const std::int32_t> ids, const PackedWeight& table, Tensor& y);

// linear() (kernels.h) with w's packed form: `packed` is PackedWeight::pack(w, layout), or null
// for the plain path. Same contract and shapes.
void linear(const Tensor& x, const Tensor& w, const PackedWeight* packed, WeightLayout layout,
            const Tensor* bias, Tensor& y);

}  // namespace huddle::kernels
