#include "model/gguf_model.h"

#include "core/error.h"
#include "model/architecture.h"
#include "model/gguf_names.h"
#include "model/rope_factors.h"

#include <fmt/format.h>

#include <limits>
#include <map>
#include <span>

namespace huddle {

namespace {

std::int64_t positive(const io::GgufFile& f, const std::string& key,
                      std::optional<std::int64_t> fallback = std::nullopt) {
  std::optional<std::int64_t> v = f.integer(key);
  if (!v) v = fallback;
  if (!v) throw LoadError(fmt::format("{}: metadata '{}' is missing", f.path().string(), key));
  if (*v <= 0 || *v > std::numeric_limits<std::int32_t>::max()) {
    throw LoadError(
        fmt::format("{}: metadata '{}' is {}, not a positive size", f.path().string(), key, *v));
  }
  return *v;
}

// The rope_scaling JSON: none, linear, the huddle.rope_scaling key `huddle quantize` writes beside
// rope_freqs.weight, or the scaling those factors encode (llama.cpp's conversions of Llama 3).
nlohmann::json rope_scaling(const io::GgufFile& f, const std::string& p, double theta,
                            int head_dim) {
  const std::string origin = f.path().string();
  if (const io::GgufTensorInfo* t = f.find_tensor("rope_freqs.weight")) {
    const std::optional<std::string> text = f.string_or_null("huddle.rope_scaling");
    if (!text) {
      if (t->dtype != DType::F32 || t->shape.size() != 1) {
        throw LoadError(fmt::format("{}: tensor 'rope_freqs.weight' is {} {}, not 1-D F32", origin,
                                    dtype_name(t->dtype), shape_str(t->shape)));
      }
      const Tensor factors = f.view("rope_freqs.weight");
      return rope_scaling_from_factors(
          std::span(factors.f32(), static_cast<std::size_t>(factors.numel())), theta, head_dim,
          origin);
    }
    try {
      return nlohmann::json::parse(*text);
    } catch (const nlohmann::json::exception& e) {
      throw LoadError(
          fmt::format("{}: metadata 'huddle.rope_scaling' is not JSON: {}", origin, e.what()));
    }
  }
  std::string type = f.string_or_null(p + "rope.scaling.type").value_or("none");
  std::optional<double> factor = f.number(p + "rope.scaling.factor");
  if (const std::optional<double> legacy = f.number(p + "rope.scale_linear")) {
    type = "linear";
    factor = legacy;
  }
  if (type == "none") return nullptr;
  if (type == "linear") {
    if (!factor || !(*factor > 0)) {
      throw LoadError(fmt::format(
          "{}: rope scaling 'linear' needs a positive '{}rope.scaling.factor'", origin, p));
    }
    return {{"type", "linear"}, {"factor", *factor}};
  }
  throw LoadError(
      fmt::format("{}: metadata '{}rope.scaling.type' is '{}'; Huddle reads none and "
                  "linear from GGUF",
                  origin, p, type));
}

class GgufWeightSource final : public io::WeightSource {
 public:
  GgufWeightSource(io::GgufFile file, std::string arch, int heads, int kv_heads)
      : file_(std::move(file)), arch_(std::move(arch)), heads_(heads), kv_heads_(kv_heads) {
    for (const io::GgufTensorInfo& t : file_.tensors()) {
      if (std::optional<std::string> hf = gguf_to_hf_name(t.name)) hf_to_gguf_.emplace(*hf, t.name);
    }
  }

  std::string origin() const override { return file_.path().string(); }

  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [hf, gguf] : hf_to_gguf_) out.push_back(hf);
    return out;
  }

  io::TensorInfo info(std::string_view name) const override {
    const io::GgufTensorInfo& t = stored(name);
    return {t.dtype, t.shape, file_.path(), t.offset, t.nbytes};
  }

  Tensor view(std::string_view name) const override {
    const io::GgufTensorInfo& t = stored(name);
    Tensor v = file_.view(t.name);
    const int heads = rope_permute_heads(arch_, name, heads_, kv_heads_);
    if (heads == 0) return v;
    const std::int64_t rows = t.shape[0];
    const bool whole_rows = t.shape.size() == 2 || !dtype_is_quantized(t.dtype);
    if (t.shape.size() > 2 || !whole_rows || rows % (2 * heads) != 0) {
      throw LoadError(
          fmt::format("{}: tensor '{}' of shape {} ({}) cannot be split into {} rope "
                      "heads",
                      origin(), t.name, shape_str(t.shape), dtype_name(t.dtype), heads));
    }
    Tensor out = Tensor::empty(t.dtype, t.shape);
    const auto* src = static_cast<const std::byte*>(v.raw());
    // The view's bytes: a k-quant's view is Q8_0, not its stored blocks (t.nbytes).
    const std::size_t nbytes = dtype_bytes(v.dtype(), v.numel());
    permute_rope_rows({src, nbytes}, {static_cast<std::byte*>(out.raw()), nbytes}, rows,
                      nbytes / static_cast<std::size_t>(rows), heads, /*to_gguf=*/false);
    return out;
  }

  Tensor load_f32(std::string_view name) const override {
    return io::widen_to_f32(view(name),
                            fmt::format("{}: tensor '{}'", origin(), stored(name).name));
  }

 private:
  const io::GgufTensorInfo& stored(std::string_view hf_name) const {
    const auto it = hf_to_gguf_.find(hf_name);
    if (it == hf_to_gguf_.end()) {
      throw LoadError(fmt::format("{}: no tensor for '{}'", origin(), hf_name));
    }
    return *file_.find_tensor(it->second);
  }

  io::GgufFile file_;
  std::string arch_;
  int heads_ = 0;
  int kv_heads_ = 0;
  std::map<std::string, std::string, std::less<>> hf_to_gguf_;
};

}  // namespace

nlohmann::json gguf_config_json(const io::GgufFile& f) {
  const std::string origin = f.path().string();
  const std::string arch_name = f.string("general.architecture");
  if (arch_name != "llama" && arch_name != "qwen2") {
    throw LoadError(
        fmt::format("{}: general.architecture is '{}'; Huddle reads llama and qwen2 "
                    "GGUF files",
                    origin, arch_name));
  }
  const Architecture* arch = find_architecture(arch_name);
  HUDDLE_CHECK(arch != nullptr, "architecture {} is not registered", arch_name);
  const std::string p = arch_name + ".";

  ModelConfig c;
  c.architecture = arch_name;
  c.hidden = positive(f, p + "embedding_length");
  c.layers = positive(f, p + "block_count");
  c.ffn = positive(f, p + "feed_forward_length");
  c.heads = static_cast<int>(positive(f, p + "attention.head_count"));
  c.kv_heads = static_cast<int>(positive(f, p + "attention.head_count_kv", c.heads));
  c.max_positions = positive(f, p + "context_length");
  c.head_dim = static_cast<int>(positive(f, p + "attention.key_length", c.hidden / c.heads));
  for (const char* key : {"attention.value_length", "rope.dimension_count"}) {
    const std::int64_t v = positive(f, p + key, c.head_dim);
    if (v != c.head_dim) {
      throw LoadError(
          fmt::format("{}: metadata '{}{}' is {} but the head dim is {}; Huddle rotates "
                      "and reads whole heads",
                      origin, p, key, v, c.head_dim));
    }
  }
  const std::optional<double> eps = f.number(p + "attention.layer_norm_rms_epsilon");
  if (!eps) {
    throw LoadError(
        fmt::format("{}: metadata '{}attention.layer_norm_rms_epsilon' is missing", origin, p));
  }
  c.norm_eps = static_cast<float>(*eps);
  c.rope.theta = static_cast<float>(f.number(p + "rope.freq_base").value_or(10000.0));
  c.activation = Activation::Silu;
  c.causal = true;

  const io::GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr || embd->shape.size() != 2) {
    throw LoadError(fmt::format(
        "{}: tensor 'token_embd.weight' [vocab, hidden] is missing or not 2-D", origin));
  }
  c.vocab_size = embd->shape[0];
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  if (arch_name == "llama") {
    c.qkv_bias = c.o_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
    c.mlp_bias = f.find_tensor("blk.0.ffn_gate.bias") != nullptr;
  } else {
    c.qkv_bias = true;
  }

  nlohmann::json j = arch->config_json(c);
  j["rope_scaling"] = rope_scaling(f, p, c.rope.theta, c.head_dim);
  j.erase("bos_token_id");
  j.erase("eos_token_id");
  if (const auto bos = f.integer("tokenizer.ggml.bos_token_id")) j["bos_token_id"] = *bos;
  if (const auto eos = f.integer("tokenizer.ggml.eos_token_id")) j["eos_token_id"] = *eos;
  return j;
}

ModelSource open_gguf_model(const std::filesystem::path& path) {
  io::GgufFile file = io::GgufFile::open(path);
  ModelSource source;
  const nlohmann::json config = gguf_config_json(file);
  source.config_text = config.dump();
  source.config_origin = path.string() + " (GGUF metadata)";
  const std::string arch = file.string("general.architecture");
  const int heads = config.at("num_attention_heads").get<int>();
  const int kv_heads = config.at("num_key_value_heads").get<int>();
  source.tensors = std::make_unique<GgufWeightSource>(std::move(file), arch, heads, kv_heads);
  return source;
}

}  // namespace huddle
