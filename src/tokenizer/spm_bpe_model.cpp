#include "tokenizer/spm_bpe_model.h"

#include <queue>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace huddle::tok {

namespace {

// "<0x41>" -> 0x41.
std::optional<int> byte_piece_value(std::string_view text) {
  if (text.size() != 6 || !text.starts_with("<0x") || text[5] != '>') return std::nullopt;
  int value = 0;
  for (const char c : text.substr(3, 2)) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) return std::nullopt;
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace

SpmBpeModel::SpmBpeModel(const std::vector<ScoredPiece>& pieces, bool byte_fallback)
    : byte_fallback_(byte_fallback) {
  byte_ids_.fill(-1);
  Json ids = Json::object();
  scores_.reserve(pieces.size());
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const ScoredPiece& p = pieces[i];
    const auto id = static_cast<std::int32_t>(i);
    scores_.push_back(p.score);
    // A repeated text keeps its first id, as SentencePiece's piece map does.
    if (!ids.contains(p.text)) ids[p.text] = id;
    switch (p.type) {
      case PieceType::kNormal:
      case PieceType::kUserDefined:
        mergeable_ids_.emplace(p.text, id);
        break;
      case PieceType::kUnknown:
        if (!unk_id_) unk_id_ = id;
        break;
      case PieceType::kByte: {
        const std::optional<int> value = byte_piece_value(p.text);
        if (!value) {
          throw LoadError(
              fmt::format("piece {} ('{}') has the byte type but is not <0xXX>", id, p.text));
        }
        byte_ids_[static_cast<std::size_t>(*value)] = id;
        break;
      }
      case PieceType::kControl:
      case PieceType::kUnused:
        break;
    }
  }
  vocab_ = Vocab::from_json(ids, "tokenizer pieces");
}

std::optional<SpmBpeModel::Mergeable> SpmBpeModel::mergeable(std::string_view text) const {
  const auto it = mergeable_ids_.find(text);
  if (it == mergeable_ids_.end()) return std::nullopt;
  return Mergeable{it->second, scores_[static_cast<std::size_t>(it->second)]};
}

void SpmBpeModel::emit(std::string_view symbol, std::vector<std::int32_t>& out,
                       bool& previous_unknown) const {
  if (const auto it = mergeable_ids_.find(symbol); it != mergeable_ids_.end()) {
    out.push_back(it->second);
    previous_unknown = false;
    return;
  }
  if (byte_fallback_) {
    bool all = true;
    for (const char c : symbol) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
    if (all) {
      for (const char c : symbol) out.push_back(byte_ids_[static_cast<unsigned char>(c)]);
      previous_unknown = false;
      return;
    }
  }
  // A run of unknown symbols is one unknown piece, as SentencePiece fuses them; without an
  // unknown piece the symbol is dropped.
  if (unk_id_ && (!previous_unknown || out.empty() || out.back() != *unk_id_)) {
    out.push_back(*unk_id_);
  }
  previous_unknown = true;
  return;
}

void SpmBpeModel::tokenize(std::string_view word, std::vector<std::int32_t>& out) const {
  // Symbols as a linked list over spans of `word`; a merged-away symbol has len 0.
  struct Symbol {
    std::size_t begin, len;
    int prev, next;
  };
  std::vector<Symbol> symbols;
  for (std::size_t pos = 0; pos < word.size();) {
    const std::size_t len = utf8_next(word, pos).len;
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, len, index - 1, index + 1});
    pos += len;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;

  struct Bigram {
    float score;
    int left, right;
    std::size_t len;  // bytes of the merged text, to spot stale entries
  };
  auto lower = [](const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(lower)> agenda(lower);
  auto try_add = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<std::size_t>(left)];
    const Symbol& r = symbols[static_cast<std::size_t>(right)];
    const std::size_t len = l.len + r.len;
    if (const auto m = mergeable(word.substr(l.begin, len))) {
      agenda.push({m->score, left, right, len});
    }
  };
  for (std::size_t i = 1; i < symbols.size(); ++i) {
    try_add(static_cast<int>(i) - 1, static_cast<int>(i));
  }
  while (!agenda.empty()) {
    const Bigram b = agenda.top();
    agenda.pop();
    Symbol& l = symbols[static_cast<std::size_t>(b.left)];
    Symbol& r = symbols[static_cast<std::size_t>(b.right)];
    if (l.len == 0 || r.len == 0 || l.next != b.right || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) symbols[static_cast<std::size_t>(r.next)].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  bool previous_unknown = false;
  for (int i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<std::size_t>(i)];
    emit(word.substr(s.begin, s.len), out, previous_unknown);
  }
}

}  // namespace huddle::tok
