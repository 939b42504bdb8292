// NumPy .npy arrays: little-endian float32 ('<f4') and int32 ('<i4'), C order.
//
// Reads format versions 1.0, 2.0 and 3.0 (they differ only in the header length field); writes
// 1.0 with the header padded to a 64-byte boundary, as NumPy does. Used for golden references
// (tests/fixtures/references/*.npy) and for dumping intermediate tensors to compare with Python.
#pragma once

#include "core/tensor.h"

#include <filesystem>

namespace huddle::io {

// An owned, contiguous tensor of the file's shape (rank 0 for shape ()). Throws LoadError naming
// the file for bad magic or version, a malformed header, an unsupported dtype (named, e.g.
// '<f8'), fortran_order True, or a data size that does not match the shape.
Tensor read_npy(const std::filesystem::path& path);

// Writes an F32 or I32 tensor (strided 2-D views included) atomically (through path.tmp).
// Throws huddle::Error naming the path when the file cannot be written.
void write_npy(const std::filesystem::path& path, const Tensor& t);

}  // namespace huddle::io
