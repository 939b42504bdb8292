#include "io/gguf_writer.h"

#include "core/error.h"
#include "io/atomic_file.h"

#include <fmt/format.h>

#include <cstring>

namespace huddle::io {

namespace {

constexpr std::uint64_t kAlign = kGgufDefaultAlignment;

class Buffer {
 public:
  template <typename T>
  void put(T v) {
    append(&v, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<std::uint64_t>(s.size());
    append(s.data(), s.size());
  }
  void pad_to(std::uint64_t align) {
    bytes_.resize((bytes_.size() + align - 1) / align * align, std::byte{0});
  }
  const std::vector<std::byte>& bytes() const { return bytes_; }

 private:
  void append(const void* p, std::size_t n) {
    if (n == 0) return;
    const std::size_t at = bytes_.size();
    bytes_.resize(at + n);
    std::memcpy(bytes_.data() + at, p, n);
  }
  std::vector<std::byte> bytes_;
};

void put_value(Buffer& b, const GgufValue& v) {
  switch (v.type) {
    case GgufType::U8:
      b.put<std::uint8_t>(static_cast<std::uint8_t>(v.u));
      return;
    case GgufType::I8:
      b.put<std::int8_t>(static_cast<std::int8_t>(v.i));
      return;
    case GgufType::U16:
      b.put<std::uint16_t>(static_cast<std::uint16_t>(v.u));
      return;
    case GgufType::I16:
      b.put<std::int16_t>(static_cast<std::int16_t>(v.i));
      return;
    case GgufType::U32:
      b.put<std::uint32_t>(static_cast<std::uint32_t>(v.u));
      return;
    case GgufType::I32:
      b.put<std::int32_t>(static_cast<std::int32_t>(v.i));
      return;
    case GgufType::U64:
      b.put<std::uint64_t>(v.u);
      return;
    case GgufType::I64:
      b.put<std::int64_t>(v.i);
      return;
    case GgufType::F32:
      b.put<float>(static_cast<float>(v.f));
      return;
    case GgufType::F64:
      b.put<double>(v.f);
      return;
    case GgufType::Bool:
      b.put<std::uint8_t>(v.u != 0 ? 1 : 0);
      return;
    case GgufType::String:
      b.put_string(v.s);
      return;
    case GgufType::Array:
      b.put<std::uint32_t>(static_cast<std::uint32_t>(v.elem_type));
      b.put<std::uint64_t>(v.items.size());
      for (const GgufValue& item : v.items) {
        HUDDLE_CHECK(item.type == v.elem_type, "GGUF array of {} holds a {}",
                     gguf_type_name(v.elem_type), gguf_type_name(item.type));
        put_value(b, item);
      }
      return;
  }
}

}  // namespace

void GgufWriter::set(const std::string& key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(key, std::move(value));
}

void GgufWriter::add_tensor(std::string name, DType dtype, Shape shape, Fill fill) {
  if (!ggml_type_id(dtype)) {
    throw Error(fmt::format("GGUF cannot store tensor '{}' as {}", name, dtype_name(dtype)));
  }
  if (shape.empty() || shape.size() > 4 || !dtype_fits(dtype, shape.back())) {
    throw Error(fmt::format("GGUF cannot store tensor '{}' of shape {} as {}", name,
                            shape_str(shape), dtype_name(dtype)));
  }
  for (const PendingTensor& t : tensors_) {
    if (t.name == name) throw Error(fmt::format("GGUF tensor '{}' added twice", name));
  }
  const std::uint64_t nbytes = dtype_bytes(dtype, shape_numel(shape));
  tensors_.push_back({std::move(name), dtype, std::move(shape), std::move(fill), nbytes});
}

void GgufWriter::write(const std::filesystem::path& path) const {
  Buffer head;
  head.put<std::uint32_t>(kGgufMagic);
  head.put<std::uint32_t>(3);
  head.put<std::uint64_t>(tensors_.size());
  head.put<std::uint64_t>(metadata_.size());
  for (const auto& [key, value] : metadata_) {
    head.put_string(key);
    head.put<std::uint32_t>(static_cast<std::uint32_t>(value.type));
    put_value(head, value);
  }
  std::uint64_t offset = 0;
  for (const PendingTensor& t : tensors_) {
    head.put_string(t.name);
    head.put<std::uint32_t>(static_cast<std::uint32_t>(t.shape.size()));
    for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) {
      head.put<std::uint64_t>(static_cast<std::uint64_t>(*d));
    }
    head.put<std::uint32_t>(*ggml_type_id(t.dtype));
    head.put<std::uint64_t>(offset);
    offset += (t.nbytes + kAlign - 1) / kAlign * kAlign;
  }
  head.pad_to(kAlign);

  AtomicFile out(path);
  out.write(head.bytes());
  std::vector<std::byte> data;
  static constexpr std::byte kZeros[kAlign] = {};
  for (const PendingTensor& t : tensors_) {
    data.assign(static_cast<std::size_t>(t.nbytes), std::byte{0});
    t.fill(data);
    out.write(data);
    const std::uint64_t pad = (kAlign - t.nbytes % kAlign) % kAlign;
    out.write(std::span<const std::byte>(kZeros, static_cast<std::size_t>(pad)));
  }
  out.commit();
}

}  // namespace huddle::io
