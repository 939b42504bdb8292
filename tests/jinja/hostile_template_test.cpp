// Hostile templates end with a TemplateError, quickly, instead of hanging or exhausting memory or
// the stack: unterminated tags, huge loops, exponential strings, deep nesting, runaway macros.
#include "jinja/template.h"

#include <gtest/gtest.h>

namespace huddle::jinja {
namespace {

TemplateError::Kind failure_kind(const std::string& source, const RenderOptions& options = {}) {
  try {
    Template(source).render({}, options);
  } catch (const TemplateError& e) {
    return e.kind();
  }
  ADD_FAILURE() << "no error for: " << source.substr(0, 200);
  return TemplateError::Kind::kRender;
}

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(HostileTemplate, UnterminatedTagsAreSyntaxErrors) {
  for (const char* source : {"{{", "{%", "{#", "{{ x", "{% if", "{% for x in", "{{ 'x", "{{ (1",
                             "{{ [1, 2", "{{ {'a': 1", "{% if x %}", "{% set x %}abc",
                             "{% macro m() %}x", "{{ x | }}", "{{ x. }}", "{{ x[ }}", "{%- -%}"}) {
    SCOPED_TRACE(source);
    EXPECT_EQ(failure_kind(source), TemplateError::Kind::kSyntax);
  }
}

TEST(HostileTemplate, LoopsAreBoundedByTheIterationLimit) {
  RenderOptions options;
  options.limits.max_iterations = 10'000;
  EXPECT_EQ(failure_kind("{% for i in range(1000000000) %}{% endfor %}", options),
            TemplateError::Kind::kRender);  // range() refuses more items than the limit
  EXPECT_EQ(
      failure_kind("{% for i in range(9000) %}{% for j in range(9000) %}{% endfor %}{% endfor %}",
                   options),
      TemplateError::Kind::kLimit);
  // Lists that globals make count too.
  EXPECT_EQ(failure_kind("{% for i in range(100) %}{% set x = range(9000) %}{% endfor %}", options),
            TemplateError::Kind::kLimit);
  // Within the limit it runs.
  EXPECT_EQ(Template("{% for i in range(3) %}{{ i }}{% endfor %}").render({}, options), "012");
}

TEST(HostileTemplate, GrowingStringsAreBoundedByTheWorkAndOutputLimits) {
  RenderOptions options;
  options.limits.max_work_bytes = 1 << 20;
  options.limits.max_output_bytes = 1 << 16;
  // Doubling a string 64 times would need 2^64 bytes.
  EXPECT_EQ(failure_kind("{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
                         "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s | length }}",
                         options),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(failure_kind("{{ 'x' * 100000000000 }}", options), TemplateError::Kind::kLimit);
  EXPECT_EQ(failure_kind("{{ [1] * 100000000000 }}", options), TemplateError::Kind::kLimit);
  // Quadratic appending is charged for every copy.
  EXPECT_EQ(failure_kind("{% set ns = namespace(s='') %}{% for i in range(20000) %}"
                         "{% set ns.s = ns.s + 'xxxxxxxx' %}{% endfor %}",
                         options),
            TemplateError::Kind::kLimit);
  // Results are charged before they are built.
  EXPECT_EQ(failure_kind("{% set s = 'x' * 2000 %}{{ s.replace('', s) | length }}", options),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(failure_kind("{{ range(1000) | join('y' * 20000) | length }}", options),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(failure_kind("{{ ('y' * 20000).join(['a'] * 1000) | length }}", options),
            TemplateError::Kind::kLimit);
  // Output alone.
  EXPECT_EQ(failure_kind("{% for i in range(20000) %}xxxxxxxxxx{% endfor %}", options),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(Template("{{ '' * 100000000000 }}|{{ 2 ** 62 }}").render({}, options),
            "|4611686018427387904");
  EXPECT_EQ(failure_kind("{{ 2 ** 64 }}"), TemplateError::Kind::kRender);  // no big integers
  EXPECT_EQ(failure_kind("{{ 1 ** 1000000000000000000 }}x{{ 3 ** 1000000000000000000 }}"),
            TemplateError::Kind::kRender);
}

TEST(HostileTemplate, DeepNestingIsRefusedBeforeTheStackRunsOut) {
  EXPECT_EQ(failure_kind("{{ " + repeat("(", 20000) + "1" + repeat(")", 20000) + " }}"),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(failure_kind(repeat("{% if true %}", 10000) + "x" + repeat("{% endif %}", 10000)),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(failure_kind("{{ " + repeat("not ", 20000) + "x }}"), TemplateError::Kind::kLimit);
  EXPECT_EQ(failure_kind("{{ " + repeat("[", 20000) + repeat("]", 20000) + " }}"),
            TemplateError::Kind::kLimit);
  EXPECT_EQ(failure_kind("{{ x" + repeat(" + x", 20000) + " }}"), TemplateError::Kind::kLimit);
  EXPECT_EQ(failure_kind("{{ x" + repeat("|trim", 20000) + " }}"), TemplateError::Kind::kLimit);
  EXPECT_EQ(failure_kind("{{ x" + repeat(".a", 20000) + " }}"), TemplateError::Kind::kLimit);
  EXPECT_EQ(failure_kind("{{ 1" + repeat(" if 1 else 1", 20000) + " }}"),
            TemplateError::Kind::kLimit);
  // Moderate nesting, as real templates have, is fine.
  EXPECT_EQ(Template(repeat("{% if true %}", 20) + "x" + repeat("{% endif %}", 20)).render({}),
            "x");
  EXPECT_EQ(Template("{{ " + repeat("(", 20) + "1" + repeat(")", 20) + " }}").render({}), "1");
}

TEST(HostileTemplate, RecursiveMacrosAreBounded) {
  EXPECT_EQ(failure_kind("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
            TemplateError::Kind::kLimit);
}

TEST(HostileTemplate, ArbitraryBytesNeverCrash) {
  // Every prefix of a real template and some binary noise: each parses or fails with a
  // TemplateError, nothing else.
  const std::string source =
      "{%- for m in messages %}{{- '<|' + m['role'] + '|>\\n' + m.content | trim }}"
      "{%- if not loop.last %}{{ '\\n' }}{% endif %}{%- endfor %}{# done #}";
  int failed = 0;
  for (std::size_t n = 0; n <= source.size(); ++n) {
    try {
      Template(source.substr(0, n)).render({});
    } catch (const TemplateError&) {
      ++failed;
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_NO_THROW(Template(source).render({}));
  std::string noise;
  for (int i = 0; i < 4096; ++i) noise += static_cast<char>((i * 131 + 7) % 256);
  EXPECT_NO_THROW(Template(noise).render({}));  // no tag opens: plain text
  EXPECT_THROW(Template("{{" + noise + "}}").render({}), TemplateError);
  EXPECT_THROW(Template("{%" + noise + "%}").render({}), TemplateError);
}

}  // namespace
}  // namespace huddle::jinja
