#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace huddle::tok {

struct BpeModel::Merges {
  struct Result {
    std::uint32_t rank;
    std::int32_t id;
  };
  std::unordered_map<std::uint64_t, Result> table;

  static std::uint64_t key(std::int32_t a, std::int32_t b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) |
           static_cast<std::uint32_t>(b);
  }
  const Result* find(std::int32_t a, std::int32_t b) const {
    const auto it = table.find(key(a, b));
    return it == table.end() ? nullptr : &it->second;
  }
};

BpeModel::BpeModel(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)), merges_(std::make_unique<Merges>()) {
  const std::size_t prefix_len = options_.continuing_subword_prefix.size();
  merges_->table.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const auto a_id = vocab_.find(a);
    const auto b_id = vocab_.find(b);
    if (!a_id || !b_id) {
      throw LoadError(
          fmt::format("model.merges[{}]: '{}' is not in the vocabulary", rank, !a_id ? a : b));
    }
    // The merged token drops the right part's continuing-subword prefix ("a" + "##b" -> "ab").
    const std::string_view b_tail =
        b.compare(0, prefix_len, options_.continuing_subword_prefix) == 0
            ? std::string_view(b).substr(prefix_len)
            : std::string_view(b);
    const std::string merged = a + std::string(b_tail);
    const auto merged_id = vocab_.find(merged);
    if (!merged_id) {
      throw LoadError(fmt::format("model.merges[{}]: merged token '{}' is not in the vocabulary",
                                  rank, merged));
    }
    // A repeated pair keeps its first (lowest) rank.
    merges_->table.emplace(Merges::key(*a_id, *b_id),
                           Merges::Result{static_cast<std::uint32_t>(rank), *merged_id});
  }
  // An unk_token missing from the vocabulary is an error only when a word needs it (as in
  // Hugging Face), so such files still load.
  if (options_.unk_token) unk_id_ = vocab_.find(*options_.unk_token);
  for (std::size_t b = 0; b < byte_ids_.size(); ++b) {
    byte_ids_[b] = vocab_.find(fmt::format("<0x{:02X}>", b)).value_or(-1);
  }
}

BpeModel::~BpeModel() = default;

std::optional<std::int32_t> BpeModel::symbol_id(std::string_view chars, bool first,
                                                bool last) const {
  const bool add_prefix = !first && !options_.continuing_subword_prefix.empty();
  const bool add_suffix = last && !options_.end_of_word_suffix.empty();
  if (!add_prefix && !add_suffix) return vocab_.find(chars);
  std::string s;
  if (add_prefix) s = options_.continuing_subword_prefix;
  s.append(chars);
  if (add_suffix) s.append(options_.end_of_word_suffix);
  return vocab_.find(s);
}

void BpeModel::tokenize(std::string_view word, std::vector<std::int32_t>& out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto id = vocab_.find(word)) {
      out.push_back(*id);
      return;
    }
  }

  struct Symbol {
    std::int32_t id;
    std::int32_t prev;
    std::int32_t next;
    bool alive;
  };
  thread_local std::vector<Symbol> symbols;
  symbols.clear();
  auto add_symbol = [&](std::int32_t id) {
    const auto n = static_cast<std::int32_t>(symbols.size());
    if (n > 0) symbols.back().next = n;
    symbols.push_back({id, n - 1, -1, true});
  };

  bool pending_unk = false;
  for (std::size_t pos = 0; pos < word.size();) {
    const std::size_t len = utf8_next(word, pos).len;
    const std::string_view chars = word.substr(pos, len);
    const bool first = pos == 0;
    pos += len;
    if (const auto id = symbol_id(chars, first, pos == word.size())) {
      if (pending_unk) add_symbol(*unk_id_);
      pending_unk = false;
      add_symbol(*id);
      continue;
    }
    if (options_.byte_fallback) {
      bool all = true;
      for (const char c : chars) all = all && byte_ids_[static_cast<unsigned char>(c)] >= 0;
      if (all) {
        if (pending_unk) add_symbol(*unk_id_);
        pending_unk = false;
        for (const char c : chars) add_symbol(byte_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (options_.unk_token) {
      if (!unk_id_) {
        throw InputError(
            fmt::format("'{}' is not in the BPE vocabulary and neither is its unk_token '{}'",
                        repair_utf8(chars), *options_.unk_token));
      }
      if (pending_unk && !options_.fuse_unk) add_symbol(*unk_id_);
      pending_unk = true;
    }
  }
  if (pending_unk) add_symbol(*unk_id_);

  // Candidate merges, lowest rank first, then leftmost. Entries go stale when a neighbour merges;
  // a stale entry is recognised because its pair no longer produces the recorded id.
  struct Candidate {
    std::uint32_t rank;
    std::int32_t pos;
    std::int32_t id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  thread_local std::vector<Candidate> heap;
  heap.clear();
  const auto push = [&](Candidate c) {
    heap.push_back(c);
    std::push_heap(heap.begin(), heap.end(), std::greater<>{});
  };
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const auto* m = merges_->find(symbols[i].id, symbols[i + 1].id)) {
      push({m->rank, static_cast<std::int32_t>(i), m->id});
    }
  }
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>{});
    const Candidate top = heap.back();
    heap.pop_back();
    Symbol& left = symbols[static_cast<std::size_t>(top.pos)];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = symbols[static_cast<std::size_t>(left.next)];
    const auto* m = merges_->find(left.id, right.id);
    if (m == nullptr || m->id != top.id) continue;
    left.id = top.id;
    right.alive = false;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<std::size_t>(left.next)].prev = top.pos;
    if (left.prev >= 0) {
      const Symbol& prev = symbols[static_cast<std::size_t>(left.prev)];
      if (const auto* pm = merges_->find(prev.id, left.id)) push({pm->rank, left.prev, pm->id});
    }
    if (left.next >= 0) {
      const Symbol& next = symbols[static_cast<std::size_t>(left.next)];
      if (const auto* nm = merges_->find(left.id, next.id)) push({nm->rank, top.pos, nm->id});
    }
  }
  for (const Symbol& s : symbols) {
    if (s.alive) out.push_back(s.id);
  }
}

std::unique_ptr<BpeModel> BpeModel::from_json(const Json& spec, std::string_view where) {
  Vocab vocab = Vocab::from_json(json_object(spec, "vocab", where), json_path(where, "vocab"));
  std::vector<std::pair<std::string, std::string>> merges;
  if (const Json* list = json_find(spec, "merges")) {
    const std::string list_where = json_path(where, "merges");
    if (!list->is_array()) {
      throw LoadError(fmt::format("{}: expected an array, got {}", list_where, list->type_name()));
    }
    merges.reserve(list->size());
    for (std::size_t i = 0; i < list->size(); ++i) {
      const Json& m = (*list)[i];
      if (m.is_string()) {
        const std::string& s = m.get_ref<const std::string&>();
        const std::size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
          throw LoadError(
              fmt::format("{}: expected \"left right\", got \"{}\"", json_path(list_where, i), s));
        }
        merges.emplace_back(s.substr(0, space), s.substr(space + 1));
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      } else {
        throw LoadError(fmt::format("{}: expected \"left right\" or [left, right], got {}",
                                    json_path(list_where, i), m.dump()));
      }
    }
  }
  BpeOptions options;
  if (const Json* unk = json_find(spec, "unk_token")) {
    if (!unk->is_string()) {
      throw LoadError(
          fmt::format("{}.unk_token: expected a string, got {}", where, unk->type_name()));
    }
    options.unk_token = unk->get<std::string>();
  }
  options.continuing_subword_prefix = json_string_or(spec, "continuing_subword_prefix", "", where);
  options.end_of_word_suffix = json_string_or(spec, "end_of_word_suffix", "", where);
  options.fuse_unk = json_bool_or(spec, "fuse_unk", false, where);
  options.byte_fallback = json_bool_or(spec, "byte_fallback", false, where);
  options.ignore_merges = json_bool_or(spec, "ignore_merges", false, where);
  return std::make_unique<BpeModel>(std::move(vocab), merges, std::move(options));
}

}  // namespace huddle::tok
