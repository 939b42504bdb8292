#include "io/npy.h"

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/mapped_file.h"

#include <cctype>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace huddle::io {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

struct NpyHeader {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// The header is a Python dict literal with three keys, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (16, 512), }
// Parsed by hand: the grammar is this tiny, and no Debian package parses Python literals.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, std::string_view origin) : s_(text), origin_(origin) {}

  NpyHeader parse() {
    NpyHeader h;
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        h.descr = string_literal();
        has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        has_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        has_shape = true;
      } else {
        fail(fmt::format("unexpected key '{}'", key));
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != '}') fail("expected ',' or '}'");
    }
    ++pos_;
    if (!has_descr || !has_order || !has_shape) {
      fail("header needs the keys 'descr', 'fortran_order' and 'shape'");
    }
    return h;
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    throw LoadError(
        fmt::format("{}: malformed .npy header at byte {} of \"{}\": {}", origin_, pos_, s_, what));
  }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(fmt::format("expected '{}'", c));
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') fail("expected a quoted string");
    const std::size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{"True", true}, std::pair{"False", false}}) {
      if (s_.substr(pos_).starts_with(word)) {
        pos_ += std::strlen(word);
        return value;
      }
    }
    fail("expected True or False");
  }
  Shape tuple() {
    expect('(');
    Shape shape;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("expected a dimension");
      std::int64_t d = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (__builtin_mul_overflow(d, 10, &d) || __builtin_add_overflow(d, peek() - '0', &d)) {
          fail("dimension overflows");
        }
        ++pos_;
      }
      shape.push_back(d);
      skip_space();
      if (peek() == ',') {
        ++pos_;
      } else if (peek() != ')') {
        fail("expected ',' or ')' in shape");
      }
    }
    ++pos_;
    return shape;
  }

  std::string_view s_;
  std::string_view origin_;
  std::size_t pos_ = 0;
};

std::optional<DType> npy_dtype(std::string_view descr) {
  if (descr == "<f4") return DType::F32;
  if (descr == "<i4") return DType::I32;
  return std::nullopt;
}

std::uint32_t read_le(const std::byte* p, int bytes) {
  std::uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<std::uint32_t>(p[i]);
  return v;
}

}  // namespace

Tensor read_npy(const std::filesystem::path& path) {
  const std::string origin = path.string();
  const auto file = MappedFile::open(path);
  const std::span<const std::byte> bytes = file->bytes();
  if (bytes.size() < kMagic.size() ||
      std::memcmp(bytes.data(), kMagic.data(), kMagic.size()) != 0) {
    throw LoadError(fmt::format("{}: not a .npy file (bad magic)", origin));
  }
  if (bytes.size() < 10) {
    throw LoadError(fmt::format("{}: truncated .npy header ({} bytes)", origin, bytes.size()));
  }
  const auto major = static_cast<int>(bytes[6]);
  if (major < 1 || major > 3) {
    throw LoadError(fmt::format("{}: unsupported .npy version {}.{}", origin, major,
                                static_cast<int>(bytes[7])));
  }
  const int len_bytes = major == 1 ? 2 : 4;
  const std::size_t prefix = 8 + static_cast<std::size_t>(len_bytes);
  if (bytes.size() < prefix) throw LoadError(fmt::format("{}: truncated .npy header", origin));
  const std::uint64_t header_len = read_le(bytes.data() + 8, len_bytes);
  if (header_len > bytes.size() - prefix) {
    throw LoadError(fmt::format("{}: .npy header length {} runs past the end of the {}-byte file",
                                origin, header_len, bytes.size()));
  }
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()) + prefix,
                              static_cast<std::size_t>(header_len));
  const NpyHeader header = HeaderParser(text, origin).parse();

  const std::optional<DType> dtype = npy_dtype(header.descr);
  if (!dtype) {
    throw LoadError(fmt::format("{}: unsupported dtype '{}' (Huddle reads '<f4' and '<i4')", origin,
                                header.descr));
  }
  if (header.fortran_order) {
    throw LoadError(
        fmt::format("{}: fortran_order True is not supported (write the array with "
                    "np.ascontiguousarray)",
                    origin));
  }
  std::int64_t numel = 1;
  for (std::int64_t d : header.shape) {
    if (__builtin_mul_overflow(numel, d, &numel) ||
        __builtin_mul_overflow(numel, static_cast<std::int64_t>(dtype_size(*dtype)), &numel)) {
      throw LoadError(fmt::format("{}: shape {} overflows", origin, shape_str(header.shape)));
    }
    numel /= static_cast<std::int64_t>(dtype_size(*dtype));
  }
  const std::uint64_t needed = static_cast<std::uint64_t>(numel) * dtype_size(*dtype);
  const std::uint64_t have = bytes.size() - prefix - header_len;
  if (needed != have) {
    throw LoadError(fmt::format("{}: shape {} {} needs {} bytes of data but the file holds {}",
                                origin, shape_str(header.shape), header.descr, needed, have));
  }
  Tensor t = Tensor::empty(*dtype, header.shape);
  if (needed > 0) std::memcpy(t.raw(), bytes.data() + prefix + header_len, needed);
  return t;
}

void write_npy(const std::filesystem::path& path, const Tensor& t) {
  HUDDLE_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::I32, "write_npy of a {} tensor",
               dtype_name(t.dtype()));
  std::string shape;
  for (std::int64_t d : t.shape()) shape += fmt::format("{}, ", d);
  if (t.rank() > 1) shape.resize(shape.size() - 2);  // (16, 512) but (5,) and ()
  if (t.rank() == 1) shape.pop_back();
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                   t.dtype() == DType::F32 ? "<f4" : "<i4", shape);
  // Pad with spaces so that magic + version + length + header + '\n' is a multiple of 64.
  header.append(63 - (10 + header.size()) % 64, ' ');
  header.push_back('\n');

  AtomicFile out(path);
  std::byte prefix[10];
  std::memcpy(prefix, kMagic.data(), kMagic.size());
  prefix[6] = std::byte{1};
  prefix[7] = std::byte{0};
  prefix[8] = static_cast<std::byte>(header.size() & 0xff);
  prefix[9] = static_cast<std::byte>(header.size() >> 8);
  out.write(prefix);
  out.write(std::as_bytes(std::span(header)));
  const std::size_t esize = dtype_size(t.dtype());
  const auto* data = static_cast<const std::byte*>(t.raw());
  if (t.contiguous()) {
    out.write(std::span(data, t.nbytes()));
  } else {
    const std::size_t row_bytes = static_cast<std::size_t>(t.dim(1)) * esize;
    for (std::int64_t r = 0; r < t.dim(0); ++r) {
      out.write(std::span(data + static_cast<std::size_t>(r * t.row_stride()) * esize, row_bytes));
    }
  }
  out.commit();
}

}  // namespace huddle::io
