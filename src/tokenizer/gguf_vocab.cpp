#include "tokenizer/gguf_vocab.h"

#include "core/error.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/spm_bpe_model.h"
#include "tokenizer/spm_model_file.h"
#include "tokenizer/spm_pipeline.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

namespace huddle::tok {

namespace {

using nlohmann::json;

// llama.cpp's token types (llama_token_type).
constexpr std::int32_t kNormal = 1;
constexpr std::int32_t kControl = 3;
constexpr std::int32_t kUserDefined = 4;
constexpr std::int32_t kUnused = 5;
constexpr std::int32_t kByte = 6;

// The Split regexes of the byte-level BPE pre-tokenizers, as their tokenizer.json files write them
// (llama.cpp's llama-vocab.cpp uses the same expressions for these tokenizer.ggml.pre values).
constexpr const char* kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

json split_then_bytes(const char* regex) {
  json split = json::object();
  split["type"] = "Split";
  split["pattern"] = json::object({{"Regex", regex}});
  split["behavior"] = "Isolated";
  split["invert"] = false;
  json bytes = json::object();
  bytes["type"] = "ByteLevel";
  bytes["add_prefix_space"] = false;
  bytes["trim_offsets"] = true;
  bytes["use_regex"] = false;
  json seq = json::object();
  seq["type"] = "Sequence";
  seq["pretokenizers"] = json::array({split, bytes});
  return seq;
}

std::optional<std::int32_t> token_id(const io::GgufFile& f, const char* key, std::size_t vocab) {
  const std::optional<std::int64_t> id = f.integer(key);
  if (!id) return std::nullopt;
  if (*id < 0 || static_cast<std::uint64_t>(*id) >= vocab) {
    throw LoadError(fmt::format("{}: metadata '{}' is {}, outside the {} tokens", f.path().string(),
                                key, *id, vocab));
  }
  return static_cast<std::int32_t>(*id);
}

// tokenizer.ggml.model "gpt2": byte-level BPE with the pre-tokenizer tokenizer.ggml.pre names,
// as the tokenizer.json pipeline (vocabulary and merges in root["model"]).
void gpt2_pipeline(const io::GgufFile& f, const std::vector<std::string>& tokens,
                   const std::vector<std::int64_t>& types, json& root) {
  const std::string origin = f.path().string();
  const std::string pre = f.string_or_null("tokenizer.ggml.pre").value_or("default");
  if (pre == "llama-bpe" || pre == "llama3") {
    root["pre_tokenizer"] = split_then_bytes(kLlama3Regex);
  } else if (pre == "qwen2") {
    root["normalizer"] = {{"type", "NFC"}};
    root["pre_tokenizer"] = split_then_bytes(kQwen2Regex);
  } else if (pre == "gpt-2") {
    root["pre_tokenizer"] = {{"type", "ByteLevel"},
                             {"add_prefix_space", false},
                             {"trim_offsets", true},
                             {"use_regex", true}};
  } else {
    throw LoadError(
        fmt::format("{}: tokenizer.ggml.pre '{}' is not one Huddle reads (llama-bpe, "
                    "qwen2, gpt-2)",
                    origin, pre));
  }

  json vocab = json::object();
  for (std::size_t id = 0; id < tokens.size(); ++id) vocab[tokens[id]] = id;
  (void)types;
  root["model"] = {{"type", "BPE"},
                   {"vocab", vocab},
                   {"merges", f.string_array("tokenizer.ggml.merges")},
                   {"ignore_merges", pre == "llama-bpe" || pre == "llama3"},
                   {"byte_fallback", false}};
  root["decoder"] = {{"type", "ByteLevel"}};
}

// tokenizer.ggml.model "llama": SentencePiece BPE over tokenizer.ggml.scores, with the
// normalizer and decoder of Hugging Face's Llama tokenizer.json (spaces as U+2581, a leading one
// unless tokenizer.ggml.add_space_prefix is false, byte pieces fused back into text).
std::unique_ptr<Model> spm_pipeline(const io::GgufFile& f, const std::vector<std::string>& tokens,
                                    const std::vector<std::int64_t>& types, json& root) {
  const std::string origin = f.path().string();
  const std::vector<double> scores = f.number_array("tokenizer.ggml.scores");
  if (!scores.empty() && scores.size() != tokens.size()) {
    throw LoadError(fmt::format("{}: tokenizer.ggml.scores has {} entries for {} tokens", origin,
                                scores.size(), tokens.size()));
  }
  std::vector<ScoredPiece> pieces(tokens.size());
  bool byte_pieces = false;
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const std::int64_t type = types.empty() ? kNormal : types[id];
    if (type < kNormal || type > kByte) {
      throw LoadError(fmt::format("{}: tokenizer.ggml.token_type[{}] is {}, not a token type (1-6)",
                                  origin, id, type));
    }
    pieces[id] = {tokens[id], scores.empty() ? 0.0f : static_cast<float>(scores[id]),
                  static_cast<PieceType>(type)};
    byte_pieces = byte_pieces || type == kByte;
  }
  SpmPipelineOptions options;
  options.add_space_prefix = f.boolean("tokenizer.ggml.add_space_prefix").value_or(true);
  spm_pipeline_json(pieces, options, root);
  try {
    return std::make_unique<SpmBpeModel>(pieces, byte_pieces);
  } catch (const LoadError& e) {
    throw LoadError(fmt::format("{}: tokenizer.ggml.tokens: {}", origin, e.what()));
  }
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const io::GgufFile& f) {
  const std::string origin = f.path().string();
  const std::string model = f.string_or_null("tokenizer.ggml.model").value_or("none");
  if (model == "none" || model == "no_vocab") {
    throw LoadError(
        fmt::format("{}: the file has no tokenizer (tokenizer.ggml.model is '{}'); "
                    "give token ids instead of text",
                    origin, model));
  }
  if (model != "gpt2" && model != "llama") {
    throw LoadError(
        fmt::format("{}: tokenizer.ggml.model '{}' is not read by Huddle (it reads "
                    "'gpt2', byte-level BPE, and 'llama', SentencePiece BPE)",
                    origin, model));
  }
  const std::vector<std::string> tokens = f.string_array("tokenizer.ggml.tokens");
  if (tokens.empty()) {
    throw LoadError(
        fmt::format("{}: metadata 'tokenizer.ggml.tokens' is missing or empty", origin));
  }
  const std::vector<std::int64_t> types = f.integer_array("tokenizer.ggml.token_type");
  if (!types.empty() && types.size() != tokens.size()) {
    throw LoadError(fmt::format("{}: tokenizer.ggml.token_type has {} entries for {} tokens",
                                origin, types.size(), tokens.size()));
  }
  json root;
  json added = json::array();
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    const std::int64_t type = types.empty() ? kNormal : types[id];
    if (type == kControl || type == kUserDefined) {
      added.push_back({{"id", id},
                       {"content", tokens[id]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", false},
                       {"special", type == kControl}});
    }
  }
  root["added_tokens"] = added;
  std::unique_ptr<Model> spm;
  if (model == "llama") {
    spm = spm_pipeline(f, tokens, types, root);
  } else {
    gpt2_pipeline(f, tokens, types, root);
  }
  const std::optional<std::int32_t> bos = token_id(f, "tokenizer.ggml.bos_token_id", tokens.size());
  const std::optional<std::int32_t> eos = token_id(f, "tokenizer.ggml.eos_token_id", tokens.size());
  // llama.cpp's defaults when the flags are absent: BOS for SentencePiece vocabularies only.
  const bool add_bos = f.boolean("tokenizer.ggml.add_bos_token").value_or(model == "llama");
  const bool add_eos = f.boolean("tokenizer.ggml.add_eos_token").value_or(false);
  if ((add_bos && !bos) || (add_eos && !eos)) {
    throw LoadError(fmt::format("{}: tokenizer.ggml.add_{}_token is set but the id is missing",
                                origin, add_bos && !bos ? "bos" : "eos"));
  }
  root["post_processor"] =
      template_processor_json(add_bos ? bos : std::nullopt, add_eos ? eos : std::nullopt, tokens);

  std::unique_ptr<Tokenizer> tokenizer;
  try {
    tokenizer = tokenizer_from_json(root, std::move(spm));
  } catch (const LoadError& e) {
    throw LoadError(fmt::format("{}: tokenizer.ggml.*: {}", origin, e.what()));
  }
  TokenizerModelInfo info;
  info.bos_id = bos;
  if (eos) info.eos_ids.push_back(*eos);
  const std::string arch = f.string_or_null("general.architecture").value_or("");
  if (const std::optional<std::int64_t> ctx = f.integer(arch + ".context_length");
      ctx && *ctx > 0) {
    info.context_length = static_cast<std::size_t>(*ctx);
  }
  tokenizer->set_model_info(std::move(info));
  return tokenizer;
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::filesystem::path& file) {
  return load_gguf_tokenizer(io::GgufFile::open(file));
}

namespace {

// Special ids and whether encoding adds them, as Huddle's own tokenizer for the directory does.
void write_specials(io::GgufWriter& w, const Tokenizer& tokenizer) {
  const std::vector<std::int32_t> plain = tokenizer.encode("a", false);
  const std::vector<std::int32_t> with = tokenizer.encode("a", true);
  const bool add_bos =
      tokenizer.bos_id() && with.size() > plain.size() && with.front() == *tokenizer.bos_id();
  const bool add_eos =
      tokenizer.eos_id() && with.size() > plain.size() && with.back() == *tokenizer.eos_id();
  if (tokenizer.bos_id()) {
    w.set("tokenizer.ggml.bos_token_id",
          io::GgufValue::u32(static_cast<std::uint32_t>(*tokenizer.bos_id())));
  }
  if (tokenizer.eos_id()) {
    w.set("tokenizer.ggml.eos_token_id",
          io::GgufValue::u32(static_cast<std::uint32_t>(*tokenizer.eos_id())));
  }
  w.set("tokenizer.ggml.add_bos_token", io::GgufValue::boolean(add_bos));
  w.set("tokenizer.ggml.add_eos_token", io::GgufValue::boolean(add_eos));
}

// tokenizer_config.json's chat_template, when it has one as a string.
void write_chat_template(io::GgufWriter& w, const std::filesystem::path& model_dir) {
  const std::filesystem::path config = model_dir / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::exists(config, ec)) return;
  std::ifstream cin(config, std::ios::binary);
  const json c = json::parse(cin, nullptr, /*allow_exceptions=*/false);
  if (c.is_object() && c.contains("chat_template") && c["chat_template"].is_string()) {
    w.set("tokenizer.chat_template", io::GgufValue::string(c["chat_template"].get<std::string>()));
  }
}

// A SentencePiece tokenizer.model as a "llama" vocabulary: pieces, scores and types as
// llama.cpp's converter writes them, padded to `vocab_size` with unused "[PAD<id>]" pieces.
void write_spm_vocab(io::GgufWriter& w, const std::filesystem::path& model_dir,
                     std::int64_t vocab_size) {
  const std::filesystem::path file = model_dir / "tokenizer.model";
  std::ifstream in(file, std::ios::binary);
  const std::vector<char> raw((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
  const SpmModelFile m = parse_spm_model(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(raw.data()), raw.size()),
      file.string());
  if (static_cast<std::int64_t>(m.pieces.size()) > vocab_size) {
    throw LoadError(fmt::format("{}: {} pieces for the model's {} embeddings", file.string(),
                                m.pieces.size(), vocab_size));
  }
  std::vector<std::string> tokens;
  std::vector<io::GgufValue> scores, types;
  for (const ScoredPiece& p : m.pieces) {
    tokens.push_back(p.text);
    scores.push_back(io::GgufValue::f32(p.score));
    types.push_back(io::GgufValue::i32(static_cast<std::int32_t>(p.type)));
  }
  for (auto id = static_cast<std::int64_t>(tokens.size()); id < vocab_size; ++id) {
    tokens.push_back(fmt::format("[PAD{}]", id));
    scores.push_back(io::GgufValue::f32(0));
    types.push_back(io::GgufValue::i32(kUnused));
  }
  w.set("tokenizer.ggml.model", io::GgufValue::string("llama"));
  w.set("tokenizer.ggml.tokens", io::GgufValue::string_array(tokens));
  w.set("tokenizer.ggml.scores", io::GgufValue::array(io::GgufType::F32, std::move(scores)));
  w.set("tokenizer.ggml.token_type", io::GgufValue::array(io::GgufType::I32, std::move(types)));
  w.set("tokenizer.ggml.add_space_prefix", io::GgufValue::boolean(m.add_dummy_prefix));
  write_specials(w, *Tokenizer::load(model_dir));
}

}  // namespace

std::string write_gguf_vocab(io::GgufWriter& w, const std::filesystem::path& model_dir,
                             std::int64_t vocab_size) {
  const std::filesystem::path file = model_dir / "tokenizer.json";
  std::error_code ec;
  if (!std::filesystem::exists(file, ec) &&
      std::filesystem::exists(model_dir / "tokenizer.model", ec)) {
    write_spm_vocab(w, model_dir, vocab_size);
    write_chat_template(w, model_dir);
    return {};
  }
  if (!std::filesystem::exists(file, ec)) {
    w.set("tokenizer.ggml.model", io::GgufValue::string("none"));
    return fmt::format(
        "{} has no tokenizer.json: the GGUF has no tokenizer (tokenizer.ggml.model "
        "'none'); run it with token ids",
        model_dir.string());
  }
  std::ifstream in(file, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  json root;
  try {
    root = json::parse(text.str());
  } catch (const json::exception& e) {
    throw LoadError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  const std::string origin = file.string();
  const json& model = root.value("model", json::object());
  if (model.value("type", "BPE") != "BPE" || !model.contains("vocab") ||
      !model["vocab"].is_object() || model.value("byte_fallback", false)) {
    throw LoadError(
        fmt::format("{}: model: GGUF's 'gpt2' vocabulary holds byte-level BPE only, "
                    "not this {} model",
                    origin, model.value("type", "?")));
  }
  // tokenizer.ggml.pre from the pre-tokenizer.
  std::string pre;
  const json& pt = root.value("pre_tokenizer", json());
  if (pt.is_object() && pt.value("type", "") == "ByteLevel" && pt.value("use_regex", true)) {
    pre = "gpt-2";
  } else if (pt.is_object() && pt.value("type", "") == "Sequence" &&
             pt.value("pretokenizers", json::array()).size() == 2) {
    const json& split = pt["pretokenizers"][0];
    const std::string regex = split.value("pattern", json::object()).value("Regex", std::string());
    if (regex == kLlama3Regex) pre = "llama-bpe";
    if (regex == kQwen2Regex) pre = "qwen2";
  }
  if (pre.empty()) {
    throw LoadError(
        fmt::format("{}: pre_tokenizer is not one GGUF names (the Llama 3, Qwen2 or "
                    "GPT-2 byte-level split): {}",
                    origin, pt.dump().substr(0, 200)));
  }

  std::vector<std::string> tokens(static_cast<std::size_t>(vocab_size));
  std::vector<io::GgufValue> types(static_cast<std::size_t>(vocab_size),
                                   io::GgufValue::i32(kUnused));
  std::vector<bool> seen(static_cast<std::size_t>(vocab_size), false);
  auto put = [&](const std::string& token, const json& id_json, std::int32_t type) {
    const std::int64_t id = id_json.is_number_integer() ? id_json.get<std::int64_t>() : -1;
    if (id < 0 || id >= vocab_size) {
      throw LoadError(fmt::format("{}: token '{}' has id {}, outside the model's {} embeddings",
                                  origin, token, id_json.dump(), vocab_size));
    }
    tokens[static_cast<std::size_t>(id)] = token;
    types[static_cast<std::size_t>(id)] = io::GgufValue::i32(type);
    seen[static_cast<std::size_t>(id)] = true;
  };
  for (const auto& [token, id] : model["vocab"].items()) put(token, id, kNormal);
  for (const json& a : root.value("added_tokens", json::array())) {
    put(a.value("content", ""), a.value("id", json()),
        a.value("special", false) ? kControl : kUserDefined);
  }
  for (std::size_t id = 0; id < tokens.size(); ++id) {
    if (!seen[id]) tokens[id] = fmt::format("[PAD{}]", id);
  }
  std::vector<std::string> merges;
  for (const json& m : model.value("merges", json::array())) {
    if (m.is_string()) {
      merges.push_back(m.get<std::string>());
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      throw LoadError(fmt::format("{}: model.merges: entry {} is not a merge", origin, m.dump()));
    }
  }

  w.set("tokenizer.ggml.model", io::GgufValue::string("gpt2"));
  w.set("tokenizer.ggml.pre", io::GgufValue::string(pre));
  w.set("tokenizer.ggml.tokens", io::GgufValue::string_array(tokens));
  w.set("tokenizer.ggml.token_type", io::GgufValue::array(io::GgufType::I32, std::move(types)));
  w.set("tokenizer.ggml.merges", io::GgufValue::string_array(merges));
  write_specials(w, *Tokenizer::load(model_dir));

  write_chat_template(w, model_dir);
  return {};
}

}  // namespace huddle::tok
