// The GGUF layout (llama.cpp / ggml's model file), parsed and validated from bytes; no files, no
// mapping. Hand-written: Debian packages no C++ GGUF library, and the format is small.
//
// File (all little-endian), versions 2 and 3:
//   u32 magic "GGUF" | u32 version | u64 tensor_count | u64 kv_count
//   kv_count × { string key | u32 value type | value }
//   tensor_count × { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type | u64 offset }
//   padding to `general.alignment` (default 32) | data section
// string = u64 length + bytes (no terminator); array value = u32 element type | u64 count | items.
// ne[0] is the innermost (row) length: a [rows, cols] matrix is stored with ne = {cols, rows}.
// Tensor offsets are relative to the data section and multiples of the alignment.
//
// Everything here is untrusted input: every length, count, offset and shape is checked with
// checked arithmetic against the bytes that remain; errors are LoadErrors naming the file and the
// key or tensor at fault.
#pragma once

#include "core/dtype.h"
#include "core/tensor.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::io {

inline constexpr std::uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
inline constexpr std::uint32_t kGgufDefaultAlignment = 32;
// Arrays of arrays are legal GGUF, but no model needs more than one level of nesting; deeper
// input is refused rather than recursed into.
inline constexpr int kGgufMaxArrayDepth = 2;

// X(enum name, id, name in messages)
#define HUDDLE_GGUF_TYPES(X) \
  X(U8, 0, "u8")             \
  X(I8, 1, "i8")             \
  X(U16, 2, "u16")           \
  X(I16, 3, "i16")           \
  X(U32, 4, "u32")           \
  X(I32, 5, "i32")           \
  X(F32, 6, "f32")           \
  X(Bool, 7, "bool")         \
  X(String, 8, "string")     \
  X(Array, 9, "array")       \
  X(U64, 10, "u64")          \
  X(I64, 11, "i64")          \
  X(F64, 12, "f64")

enum class GgufType : std::uint32_t {
#define HUDDLE_GGUF_TYPE_ENUM(name, id, str) name = id,
  HUDDLE_GGUF_TYPES(HUDDLE_GGUF_TYPE_ENUM)
#undef HUDDLE_GGUF_TYPE_ENUM
};

std::string_view gguf_type_name(GgufType t);

// A metadata value. Integers are kept in `i` (signed types) or `u` (unsigned types and bool);
// f32/f64 in `f`; arrays hold `items` of `elem_type` (nested arrays are items of type Array).
struct GgufValue {
  GgufType type = GgufType::U32;
  std::uint64_t u = 0;
  std::int64_t i = 0;
  double f = 0;
  std::string s;
  GgufType elem_type = GgufType::U8;
  std::vector<GgufValue> items;

  static GgufValue u32(std::uint32_t v);
  static GgufValue i32(std::int32_t v);
  static GgufValue u64(std::uint64_t v);
  static GgufValue f32(float v);
  static GgufValue boolean(bool v);
  static GgufValue string(std::string v);
  static GgufValue array(GgufType elem_type, std::vector<GgufValue> items);
  static GgufValue string_array(const std::vector<std::string>& v);

  bool is_integer() const;
  // The value as a signed integer when it is an integer type that fits; nullopt otherwise.
  std::optional<std::int64_t> as_int() const;
};

// ggml tensor types, by id. X(enum name, id): every type a llama.cpp file may hold, so that a
// refused one is named. Huddle reads F32, F16, BF16, Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K and Q6_K
// (ggml_dtype).
// One type per line: clang-format folds this list differently on each run.
// clang-format off
#define HUDDLE_GGML_TYPES(X) \
  X(F32, 0) \
  X(F16, 1) \
  X(Q4_0, 2) \
  X(Q4_1, 3) \
  X(Q5_0, 6) \
  X(Q5_1, 7) \
  X(Q8_0, 8) \
  X(Q8_1, 9) \
  X(Q2_K, 10) \
  X(Q3_K, 11) \
  X(Q4_K, 12) \
  X(Q5_K, 13) \
  X(Q6_K, 14) \
  X(Q8_K, 15) \
  X(IQ2_XXS, 16) \
  X(IQ2_XS, 17) \
  X(IQ3_XXS, 18) \
  X(IQ1_S, 19) \
  X(IQ4_NL, 20) \
  X(IQ3_S, 21) \
  X(IQ2_S, 22) \
  X(IQ4_XS, 23) \
  X(I8, 24) \
  X(I16, 25) \
  X(I32, 26) \
  X(I64, 27) \
  X(F64, 28) \
  X(IQ1_M, 29) \
  X(BF16, 30) \
  X(TQ1_0, 34) \
  X(TQ2_0, 35) \
  X(MXFP4, 39)
// clang-format on

// The ggml type's name ("Q4_K"), or nullopt for an id ggml does not define.
std::optional<std::string_view> ggml_type_name(std::uint32_t id);
// The Huddle dtype of a ggml type id, or nullopt when Huddle does not read it.
std::optional<DType> ggml_dtype(std::uint32_t id);
// The ggml type id of a Huddle dtype; nullopt for I32.
std::optional<std::uint32_t> ggml_type_id(DType dtype);

struct GgufTensorInfo {
  std::string name;
  DType dtype = DType::F32;  // as stored; GgufFile::view returns it
  Shape shape;               // outermost first (ne reversed): [rows, cols] for a matrix
  std::uint64_t offset = 0;  // absolute: from the start of the file
  std::uint64_t nbytes = 0;
};

struct GgufLayout {
  std::uint32_t version = 0;
  std::uint32_t alignment = kGgufDefaultAlignment;
  std::uint64_t data_start = 0;
  // Metadata in file order, and key -> index into it.
  std::vector<std::pair<std::string, GgufValue>> metadata;
  std::map<std::string, std::size_t, std::less<>> metadata_index;
  std::vector<GgufTensorInfo> tensors;  // in file order
  std::map<std::string, std::size_t, std::less<>> tensor_index;
};

// Validates a whole file's bytes: header, metadata and tensor infos are parsed, tensor data is
// bounds- and overlap-checked but not read. Throws LoadError whose message starts with `origin`.
GgufLayout parse_gguf(std::span<const std::byte> file, std::string_view origin);

// Whether `bytes` start with the GGUF magic.
bool has_gguf_magic(std::span<const std::byte> bytes);

}  // namespace huddle::io
