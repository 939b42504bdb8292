#include "model/gguf_export.h"

#include "core/error.h"
#include "core/quant.h"
#include "io/checkpoint.h"
#include "io/gguf_writer.h"
#include "model/architecture.h"
#include "model/gguf_names.h"
#include "model/model_config.h"
#include "model/rope_config.h"
#include "tokenizer/gguf_vocab.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <vector>

namespace huddle {

namespace {

// Sort key: globals first (token_embd, output_norm, output), then by layer number.
std::pair<std::int64_t, std::string> order_key(const std::string& gguf_name) {
  if (gguf_name.rfind("blk.", 0) != 0) return {-1, gguf_name};
  const std::size_t dot = gguf_name.find('.', 4);
  return {std::stoll(gguf_name.substr(4, dot - 4)), gguf_name};
}

// llama.cpp's rope_freqs.weight: per frequency pair, the divisor of its base frequency.
std::vector<float> rope_freq_factors(const ModelConfig& c) {
  const auto half = static_cast<std::size_t>(c.head_dim / 2);
  std::vector<double> scaled(half), base(half);
  kernels::RopeSpec plain = c.rope;
  plain.scaling = kernels::RopeScaling::None;
  kernels::rope_inv_freq(c.rope, c.head_dim, 0, scaled);
  kernels::rope_inv_freq(plain, c.head_dim, 0, base);
  std::vector<float> factors(half);
  for (std::size_t i = 0; i < half; ++i) factors[i] = static_cast<float>(base[i] / scaled[i]);
  return factors;
}

}  // namespace

DType gguf_storage_dtype(DType type, const Shape& shape) {
  if (shape.size() < 2) return DType::F32;
  if (!dtype_fits(type, shape.back())) return DType::F16;
  return type;
}

std::uint32_t gguf_file_type(DType type) {
  switch (type) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q8_0:
      return 7;
    default:
      break;
  }
  HUDDLE_CHECK(false, "no GGUF file type for {}", dtype_name(type));
  return 0;
}

QuantizeSummary quantize_to_gguf(const std::filesystem::path& in_dir,
                                 const std::filesystem::path& out, DType type) {
  HUDDLE_CHECK(
      type == DType::F32 || type == DType::F16 || type == DType::Q8_0 || type == DType::Q4_0,
      "quantize_to_gguf to {}", dtype_name(type));
  const std::filesystem::path config_path = in_dir / "config.json";
  const nlohmann::json config_json = read_json_file(config_path);
  const Architecture& arch = architecture_for_config(config_json, config_path.string());
  if (arch.name != "llama" && arch.name != "qwen2") {
    throw LoadError(fmt::format("{}: huddle quantize writes llama and qwen2 models to GGUF, not {}",
                                config_path.string(), arch.name));
  }
  ModelConfig c = arch.parse_config(ConfigReader(config_json, config_path.string()));
  c.validate(config_path.string());
  if (c.rope.scaling == kernels::RopeScaling::Dynamic) {
    throw LoadError(
        fmt::format("{}: rope_scaling 'dynamic' has no llama.cpp equivalent; GGUF "
                    "cannot hold it",
                    config_path.string()));
  }
  if (c.sliding_window != 0) {
    throw LoadError(
        fmt::format("{}: sliding_window attention has no llama.cpp llama/qwen2 "
                    "equivalent; GGUF cannot hold it",
                    config_path.string()));
  }

  const io::Checkpoint ckpt = io::Checkpoint::open(in_dir);
  struct Entry {
    std::string gguf;
    std::string stored;
    std::string canonical;
  };
  std::vector<Entry> entries;
  for (const std::string& name : ckpt.names()) {
    const std::optional<std::string> canonical = arch.canonical_name(name);
    if (!canonical) continue;
    if (*canonical == "lm_head.weight" && c.tie_word_embeddings) continue;
    const std::optional<std::string> gguf = hf_to_gguf_name(*canonical);
    if (!gguf) {
      throw LoadError(
          fmt::format("{}: tensor '{}' has no GGUF name (llama.cpp's {} has no such "
                      "tensor)",
                      in_dir.string(), name, arch.name));
    }
    entries.push_back({*gguf, name, *canonical});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return order_key(a.gguf) < order_key(b.gguf); });

  io::GgufWriter w;
  const std::string p = arch.name + ".";
  w.set("general.architecture", io::GgufValue::string(arch.name));
  w.set("general.name", io::GgufValue::string(in_dir.filename().string()));
  w.set("general.file_type", io::GgufValue::u32(gguf_file_type(type)));
  if (dtype_is_quantized(type)) w.set("general.quantization_version", io::GgufValue::u32(2));
  const auto u32 = [](std::int64_t v) { return io::GgufValue::u32(static_cast<std::uint32_t>(v)); };
  w.set(p + "vocab_size", u32(c.vocab_size));
  w.set(p + "context_length", u32(c.max_positions));
  w.set(p + "embedding_length", u32(c.hidden));
  w.set(p + "block_count", u32(c.layers));
  w.set(p + "feed_forward_length", u32(c.ffn));
  w.set(p + "attention.head_count", u32(c.heads));
  w.set(p + "attention.head_count_kv", u32(c.kv_heads));
  if (static_cast<std::int64_t>(c.head_dim) * c.heads != c.hidden) {
    w.set(p + "attention.key_length", u32(c.head_dim));
    w.set(p + "attention.value_length", u32(c.head_dim));
  }
  w.set(p + "rope.dimension_count", u32(c.head_dim));
  w.set(p + "rope.freq_base", io::GgufValue::f32(c.rope.theta));
  w.set(p + "attention.layer_norm_rms_epsilon", io::GgufValue::f32(c.norm_eps));
  if (c.rope.scaling == kernels::RopeScaling::Linear) {
    w.set(p + "rope.scaling.type", io::GgufValue::string("linear"));
    w.set(p + "rope.scaling.factor", io::GgufValue::f32(c.rope.factor));
  }

  QuantizeSummary summary;
  summary.architecture = arch.name;
  summary.note = tok::write_gguf_vocab(w, in_dir, c.vocab_size);

  if (c.rope.scaling == kernels::RopeScaling::Llama3) {
    w.set("huddle.rope_scaling", io::GgufValue::string(rope_scaling_json(c.rope).dump()));
    const std::vector<float> factors = rope_freq_factors(c);
    w.add_tensor("rope_freqs.weight", DType::F32, {static_cast<std::int64_t>(factors.size())},
                 [factors](std::span<std::byte> bytes) {
                   std::memcpy(bytes.data(), factors.data(), bytes.size());
                 });
    ++summary.tensors_by_dtype[DType::F32];
  }

  for (const Entry& e : entries) {
    const io::TensorInfo info = ckpt.info(e.stored);
    if (info.shape.empty() || info.shape.size() > 2) {
      throw LoadError(fmt::format("{}: tensor '{}' of shape {} is not a vector or matrix",
                                  in_dir.string(), e.stored, shape_str(info.shape)));
    }
    const DType dtype = gguf_storage_dtype(type, info.shape);
    const int heads = rope_permute_heads(arch.name, e.canonical, c.heads, c.kv_heads);
    const std::int64_t rows = info.shape.size() == 2 ? info.shape[0] : 1;
    const std::int64_t cols = info.shape.back();
    if (heads != 0 && info.shape[0] % (2 * heads) != 0) {
      throw LoadError(fmt::format("{}: tensor '{}' of shape {} cannot be split into {} rope heads",
                                  in_dir.string(), e.stored, shape_str(info.shape), heads));
    }
    ++summary.tensors_by_dtype[dtype];
    w.add_tensor(
        e.gguf, dtype, info.shape,
        [&ckpt, e, heads, rows, cols, dtype, shape = info.shape](std::span<std::byte> bytes) {
          const Tensor f32 = ckpt.load_f32(e.stored);
          std::span<const std::byte> src(static_cast<const std::byte*>(f32.raw()), f32.nbytes());
          std::vector<std::byte> permuted;
          if (heads != 0) {
            // A bias is rows of one element; a weight rows of `cols`.
            const std::int64_t prows = shape[0];
            permuted.resize(src.size());
            permute_rope_rows(src, permuted, prows, src.size() / static_cast<std::size_t>(prows),
                              heads, /*to_gguf=*/true);
            src = permuted;
          }
          const auto* x = reinterpret_cast<const float*>(src.data());
          const std::size_t row_bytes = dtype_bytes(dtype, cols);
          for (std::int64_t r = 0; r < rows; ++r) {
            quantize_row(dtype, x + r * cols,
                         bytes.data() + static_cast<std::size_t>(r) * row_bytes, cols);
          }
        });
  }

  w.write(out);
  std::error_code ec;
  summary.file_bytes = std::filesystem::file_size(out, ec);
  return summary;
}

}  // namespace huddle
