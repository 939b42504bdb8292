// Reading tokenizer.json into an HfTokenizer.
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/wordpiece_model.h"

namespace huddle::tok {
namespace {

std::unique_ptr<Model> make_model(const Json& spec) {
  constexpr std::string_view where = "model";
  if (!spec.is_object()) {
    throw LoadError(fmt::format("model: expected an object, got {}", spec.type_name()));
  }
  std::string type;
  if (json_find(spec, "type") != nullptr) {
    type = json_type(spec, where);
  } else if (json_find(spec, "merges") != nullptr) {
    type = "BPE";  // files from before the "type" tag
  } else if (json_find(spec, "max_input_chars_per_word") != nullptr) {
    type = "WordPiece";
  } else {
    throw LoadError("model: missing field 'type'");
  }
  if (type == "BPE") return BpeModel::from_json(spec, where);
  if (type == "WordPiece") return WordPieceModel::from_json(spec, where);
  throw_unsupported(where, type, "BPE, WordPiece");
}

}  // namespace

std::unique_ptr<HfTokenizer> tokenizer_from_json(const Json& root, std::unique_ptr<Model> model) {
  if (!root.is_object()) {
    throw LoadError(fmt::format("expected a JSON object at the top, got {}", root.type_name()));
  }
  HfPipeline pipeline;
  if (const Json* added = json_find(root, "added_tokens")) {
    pipeline.added_tokens = AddedVocabulary::parse(*added, "added_tokens");
  }
  if (const Json* spec = json_find(root, "normalizer")) {
    pipeline.normalizer = make_normalizer(*spec, "normalizer");
  }
  if (const Json* spec = json_find(root, "pre_tokenizer")) {
    pipeline.pre_tokenizer = make_pre_tokenizer(*spec, "pre_tokenizer");
  }
  pipeline.model = model ? std::move(model) : make_model(json_require(root, "model", ""));
  if (const Json* spec = json_find(root, "post_processor")) {
    pipeline.post_processor = make_post_processor(*spec, "post_processor");
  }
  if (const Json* spec = json_find(root, "decoder")) {
    pipeline.decoder = make_decoder(*spec, "decoder");
  }
  return std::make_unique<HfTokenizer>(std::move(pipeline));
}

std::unique_ptr<HfTokenizer> load_tokenizer_json(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw LoadError(fmt::format("{}: cannot open the file", file.string()));
  std::ostringstream buffer;
  buffer << in.rdbuf();
  if (in.bad()) throw LoadError(fmt::format("{}: read error", file.string()));
  Json root;
  try {
    root = Json::parse(buffer.str());
  } catch (const Json::exception& e) {
    throw LoadError(fmt::format("{}: not valid JSON: {}", file.string(), e.what()));
  }
  try {
    return tokenizer_from_json(root);
  } catch (const LoadError& e) {
    throw LoadError(fmt::format("{}: {}", file.string(), e.what()));
  } catch (const Json::exception& e) {
    throw LoadError(fmt::format("{}: {}", file.string(), e.what()));
  }
}

}  // namespace huddle::tok
