#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "core/error.h"

namespace huddle::tok {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  const int n = pcre2_get_error_message(code, buffer, sizeof(buffer));
  return n < 0 ? fmt::format("PCRE2 error {}", code) : std::string(reinterpret_cast<char*>(buffer));
}

struct CodeDeleter {
  void operator()(pcre2_code* p) const { pcre2_code_free(p); }
};
struct MatchDataDeleter {
  void operator()(pcre2_match_data* p) const { pcre2_match_data_free(p); }
};
struct MatchContextDeleter {
  void operator()(pcre2_match_context* p) const { pcre2_match_context_free(p); }
};
struct JitStackDeleter {
  void operator()(pcre2_jit_stack* p) const { pcre2_jit_stack_free(p); }
};

// Per-thread scratch for matching: the default 32 KiB JIT stack is too small for long runs of a
// repeated class, so each thread gets a larger one, created on first use.
struct ThreadScratch {
  std::unique_ptr<pcre2_match_context, MatchContextDeleter> context;
  std::unique_ptr<pcre2_jit_stack, JitStackDeleter> jit_stack;
};

pcre2_match_context* thread_match_context() {
  thread_local ThreadScratch scratch;
  if (!scratch.context) {
    scratch.context.reset(pcre2_match_context_create(nullptr));
    scratch.jit_stack.reset(pcre2_jit_stack_create(64 * 1024, 8 * 1024 * 1024, nullptr));
    HUDDLE_CHECK(scratch.context && scratch.jit_stack, "out of memory creating PCRE2 context");
    pcre2_jit_stack_assign(scratch.context.get(), nullptr, scratch.jit_stack.get());
  }
  return scratch.context.get();
}

}  // namespace

struct Regex::Impl {
  std::unique_ptr<pcre2_code, CodeDeleter> code;
};

Regex::Regex(std::string_view pattern) : impl_(std::make_unique<Impl>()), pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset,
                                  nullptr));
  if (!impl_->code) {
    throw LoadError(
        fmt::format("invalid regex '{}' at offset {}: {}", pattern, offset, pcre2_message(error)));
  }
  // JIT is an optimisation: if this PCRE2 build lacks it, the interpreter matches the same way.
  pcre2_jit_compile(impl_->code.get(), PCRE2_JIT_COMPLETE);
}

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

std::vector<std::pair<std::size_t, std::size_t>> Regex::find_all(std::string_view s) const {
  std::vector<std::pair<std::size_t, std::size_t>> matches;
  std::unique_ptr<pcre2_match_data, MatchDataDeleter> data(
      pcre2_match_data_create_from_pattern(impl_->code.get(), nullptr));
  HUDDLE_CHECK(data != nullptr, "out of memory creating PCRE2 match data");
  pcre2_match_context* context = thread_match_context();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(s.data());
  std::size_t start = 0;
  while (start < s.size()) {
    const int rc = pcre2_match(impl_->code.get(), subject, s.size(), start, 0, data.get(), context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      throw InputError(fmt::format("pre-tokenizer regex '{}' failed on a {}-byte text: {}",
                                   pattern_, s.size(), pcre2_message(rc)));
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data.get());
    const std::size_t begin = ovector[0];
    const std::size_t end = ovector[1];
    if (end > begin) {
      matches.emplace_back(begin, end);
      start = end;
    } else {
      // An empty match yields no piece; step over one byte (and any continuation bytes).
      start = begin + 1;
      while (start < s.size() && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) ++start;
    }
  }
  return matches;
}

}  // namespace huddle::tok
