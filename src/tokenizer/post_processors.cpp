#include "tokenizer/post_processors.h"

#include <string>

#include "core/error.h"

namespace huddle::tok {
namespace {

constexpr std::string_view kSupportedPostProcessors =
    "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence";

// prefix + sequence + suffix: what every supported processor does to a single sequence.
class WrapProcessor final : public PostProcessor {
 public:
  WrapProcessor(std::vector<std::int32_t> prefix, std::vector<std::int32_t> suffix)
      : prefix_(std::move(prefix)), suffix_(std::move(suffix)) {}
  void apply(std::vector<std::int32_t>& ids) const override {
    ids.insert(ids.begin(), prefix_.begin(), prefix_.end());
    ids.insert(ids.end(), suffix_.begin(), suffix_.end());
  }
  std::size_t added_count() const override { return prefix_.size() + suffix_.size(); }

 private:
  std::vector<std::int32_t> prefix_;
  std::vector<std::int32_t> suffix_;
};

class SequenceProcessor final : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> parts)
      : parts_(std::move(parts)) {}
  void apply(std::vector<std::int32_t>& ids) const override {
    for (const auto& part : parts_) part->apply(ids);
  }
  std::size_t added_count() const override {
    std::size_t n = 0;
    for (const auto& part : parts_) n += part->added_count();
    return n;
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> parts_;
};

std::unique_ptr<PostProcessor> make_template(const Json& spec, std::string_view where) {
  const Json& specials = json_require(spec, "special_tokens", where);
  const std::string specials_where = json_path(where, "special_tokens");
  const Json& single = json_array(spec, "single", where);
  std::vector<std::int32_t> prefix;
  std::vector<std::int32_t> suffix;
  bool seen_sequence = false;
  for (std::size_t i = 0; i < single.size(); ++i) {
    const std::string item_where = json_path(json_path(where, "single"), i);
    const Json& item = single[i];
    if (const Json* seq = json_find(item, "Sequence")) {
      const std::string id = json_string(*seq, "id", json_path(item_where, "Sequence"));
      if (id != "A") {
        throw LoadError(fmt::format("{}: the single template can only use sequence A, not '{}'",
                                    item_where, id));
      }
      if (seen_sequence) {
        throw LoadError(fmt::format("{}: sequence A appears twice", item_where));
      }
      seen_sequence = true;
    } else if (const Json* tok = json_find(item, "SpecialToken")) {
      const std::string name = json_string(*tok, "id", json_path(item_where, "SpecialToken"));
      if (!specials.is_object() || !specials.contains(name)) {
        throw LoadError(
            fmt::format("{}: special token '{}' is not in {}", item_where, name, specials_where));
      }
      const std::string entry_where = json_path(specials_where, name);
      const Json& ids = json_array(specials[name], "ids", entry_where);
      for (std::size_t k = 0; k < ids.size(); ++k) {
        (seen_sequence ? suffix : prefix)
            .push_back(json_token_id(ids[k], json_path(json_path(entry_where, "ids"), k)));
      }
    } else {
      throw LoadError(fmt::format("{}: expected {{\"Sequence\": ...}} or {{\"SpecialToken\": ...}}",
                                  item_where));
    }
  }
  if (!seen_sequence) {
    throw LoadError(fmt::format("{}.single: the template has no Sequence A", where));
  }
  return std::make_unique<WrapProcessor>(std::move(prefix), std::move(suffix));
}

// BertProcessing / RobertaProcessing store their tokens as ["[CLS]", 101].
std::int32_t pair_id(const Json& spec, std::string_view key, std::string_view where) {
  const Json& pair = json_array(spec, key, where);
  const std::string pair_where = json_path(where, key);
  if (pair.size() != 2 || !pair[0].is_string()) {
    throw LoadError(fmt::format("{}: expected [token, id]", pair_where));
  }
  return json_token_id(pair[1], json_path(pair_where, 1));
}

}  // namespace

std::unique_ptr<PostProcessor> make_post_processor(const Json& spec, std::string_view where) {
  const std::string type = json_type(spec, where);
  if (type == "TemplateProcessing") return make_template(spec, where);
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    return std::make_unique<WrapProcessor>(std::vector<std::int32_t>{pair_id(spec, "cls", where)},
                                           std::vector<std::int32_t>{pair_id(spec, "sep", where)});
  }
  if (type == "ByteLevel")
    return std::make_unique<WrapProcessor>(std::vector<std::int32_t>{},
                                           std::vector<std::int32_t>{});
  if (type == "Sequence") {
    const Json& list = json_array(spec, "processors", where);
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (std::size_t i = 0; i < list.size(); ++i) {
      parts.push_back(make_post_processor(list[i], json_path(json_path(where, "processors"), i)));
    }
    return std::make_unique<SequenceProcessor>(std::move(parts));
  }
  throw_unsupported(where, type, kSupportedPostProcessors);
}

}  // namespace huddle::tok
