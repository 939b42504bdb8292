// Post-processors: add the special tokens around an encoded sequence (when add_special is set).
//
// Supported "type"s: TemplateProcessing (its "single" template), BertProcessing,
// RobertaProcessing, ByteLevel (changes offsets only, so nothing here), Sequence. Others throw
// LoadError naming the type. Huddle encodes single sequences, so "pair" templates are not used.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "tokenizer/json_fields.h"

namespace huddle::tok {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // Adds the special tokens to one sequence of ids.
  virtual void apply(std::vector<std::int32_t>& ids) const = 0;
  // How many ids apply() adds.
  virtual std::size_t added_count() const = 0;
};

std::unique_ptr<PostProcessor> make_post_processor(const Json& spec, std::string_view where);

}  // namespace huddle::tok
