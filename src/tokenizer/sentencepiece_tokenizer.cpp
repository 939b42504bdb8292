#include "tokenizer/sentencepiece_tokenizer.h"

#include <sentencepiece_processor.h>

#include <algorithm>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace huddle::tok {

SentencePieceTokenizer::SentencePieceTokenizer(const std::filesystem::path& model_file,
                                               SentencePieceOptions options)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()),
      options_(options),
      file_(model_file.string()) {
  const auto status = sp_->Load(file_);
  if (!status.ok()) {
    throw LoadError(fmt::format("{}: not a SentencePiece model: {}", file_, status.ToString()));
  }
  for (int id = 0; id < sp_->GetPieceSize(); ++id) {
    if (sp_->IsControl(id) && !sp_->IdToPiece(id).empty()) {
      control_pieces_.emplace_back(sp_->IdToPiece(id), id);
    }
  }
  std::sort(control_pieces_.begin(), control_pieces_.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

std::optional<std::int32_t> SentencePieceTokenizer::sp_bos_id() const {
  const int id = sp_->bos_id();
  return id >= 0 ? std::optional<std::int32_t>(id) : std::nullopt;
}

std::optional<std::int32_t> SentencePieceTokenizer::sp_eos_id() const {
  const int id = sp_->eos_id();
  return id >= 0 ? std::optional<std::int32_t>(id) : std::nullopt;
}

void SentencePieceTokenizer::encode_plain(std::string_view text,
                                          std::vector<std::int32_t>& ids) const {
  if (text.empty()) return;
  std::vector<int> piece_ids;
  // SentencePiece expects UTF-8; invalid bytes are repaired first (byte_fallback models would
  // otherwise see the replacement anyway).
  const std::string valid = repair_utf8(text);
  const auto status = sp_->Encode(valid, &piece_ids);
  if (!status.ok()) {
    throw InputError(
        fmt::format("{}: SentencePiece could not encode the text: {}", file_, status.ToString()));
  }
  ids.insert(ids.end(), piece_ids.begin(), piece_ids.end());
}

std::vector<std::int32_t> SentencePieceTokenizer::do_encode_ordinary(std::string_view text) const {
  std::vector<std::int32_t> ids;
  std::size_t last = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const auto hit =
        std::find_if(control_pieces_.begin(), control_pieces_.end(),
                     [&](const auto& p) { return text.substr(pos).starts_with(p.first); });
    if (hit == control_pieces_.end()) {
      ++pos;
      continue;
    }
    encode_plain(text.substr(last, pos - last), ids);
    ids.push_back(hit->second);
    pos += hit->first.size();
    last = pos;
  }
  encode_plain(text.substr(last), ids);
  return ids;
}

void SentencePieceTokenizer::do_add_special_tokens(std::vector<std::int32_t>& ids) const {
  if (options_.add_bos && sp_->bos_id() >= 0) ids.insert(ids.begin(), sp_->bos_id());
  if (options_.add_eos && sp_->eos_id() >= 0) ids.push_back(sp_->eos_id());
}

std::size_t SentencePieceTokenizer::do_num_special_tokens_to_add() const {
  return static_cast<std::size_t>(options_.add_bos && sp_->bos_id() >= 0) +
         static_cast<std::size_t>(options_.add_eos && sp_->eos_id() >= 0);
}

std::string SentencePieceTokenizer::do_decode(std::span<const std::int32_t> ids,
                                              bool skip_special) const {
  std::string text;
  std::vector<int> run;
  auto flush = [&] {
    if (run.empty()) return;
    std::string piece_text;
    const auto status = sp_->Decode(run, &piece_text);
    if (!status.ok()) {
      throw InputError(
          fmt::format("{}: SentencePiece could not decode: {}", file_, status.ToString()));
    }
    text.append(piece_text);
    run.clear();
  };
  for (const std::int32_t id : ids) {
    if (sp_->IsControl(id)) {
      flush();
      if (!skip_special) text.append(sp_->IdToPiece(id));
    } else {
      run.push_back(id);
    }
  }
  flush();
  return repair_utf8(text);
}

std::optional<std::int32_t> SentencePieceTokenizer::do_token_to_id(std::string_view token) const {
  const int id = sp_->PieceToId(token);
  // PieceToId answers unk_id for unknown pieces; tell that apart from the unk piece itself.
  if (id == sp_->unk_id() && sp_->IdToPiece(id) != token) return std::nullopt;
  return id;
}

std::optional<std::string> SentencePieceTokenizer::do_id_to_token(std::int32_t id) const {
  if (id < 0 || id >= sp_->GetPieceSize()) return std::nullopt;
  return sp_->IdToPiece(id);
}

bool SentencePieceTokenizer::do_is_special(std::int32_t id) const {
  return id >= 0 && id < sp_->GetPieceSize() && sp_->IsControl(id);
}

std::size_t SentencePieceTokenizer::do_vocab_size() const {
  return static_cast<std::size_t>(sp_->GetPieceSize());
}

}  // namespace huddle::tok
