// The chat templates of Llama 3/3.1/3.2, Qwen2/2.5, Mistral, Phi-3 and Gemma-2 render exactly as
// Python's jinja2 renders them (tests/fixtures/chat_templates/expected.json, made by
// make_expected.py there): the same bytes, or the same raise_exception message.
#include "jinja/template.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <ctime>
#include <fstream>
#include <sstream>

namespace huddle::jinja {
namespace {

using json = nlohmann::ordered_json;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

json read_json(const std::string& name) {
  return json::parse(read_file(testing::fixture("chat_templates/" + name)));
}

// make_expected.py's strftime_now clock: 2025-03-09 12:00 local time.
std::time_t fixed_now() {
  std::tm t{};
  t.tm_year = 2025 - 1900;
  t.tm_mon = 2;
  t.tm_mday = 9;
  t.tm_hour = 12;
  t.tm_isdst = -1;
  return std::mktime(&t);
}

TEST(ChatTemplates, RenderAsJinja2Does) {
  const json spec = read_json("cases.json");
  const json expected = read_json("expected.json");
  RenderOptions options;
  options.now = fixed_now;
  int compared = 0;
  for (const auto& [name, info] : spec["templates"].items()) {
    const Template tmpl(
        read_file(testing::fixture("chat_templates/" + info["file"].get<std::string>())));
    for (const json& c : spec["cases"]) {
      for (const bool gen : {false, true}) {
        Map vars;
        vars.set("messages", Value::from_json(c["messages"]));
        vars.set("tools", Value(nullptr));
        vars.set("documents", Value(nullptr));
        vars.set("add_generation_prompt", Value(gen));
        for (const char* token : {"bos_token", "eos_token"})
          if (info.contains(token)) vars.set(token, Value(info[token].get<std::string>()));
        if (c.contains("variables"))
          for (const auto& [k, v] : c["variables"].items()) vars.set(k, Value::from_json(v));
        const std::string key =
            name + "/" + c["name"].get<std::string>() + (gen ? "/gen" : "/nogen");
        SCOPED_TRACE(key);
        ASSERT_TRUE(expected.contains(key)) << "regenerate expected.json (make_expected.py)";
        const json& want = expected[key];
        ++compared;
        if (want.contains("output")) {
          try {
            EXPECT_EQ(tmpl.render(vars, options), want["output"].get<std::string>());
          } catch (const TemplateError& e) {
            ADD_FAILURE() << e.what();
          }
          continue;
        }
        try {
          const std::string got = tmpl.render(vars, options);
          ADD_FAILURE() << "jinja2 fails (" << want["error"] << ") but this rendered:\n" << got;
        } catch (const TemplateError& e) {
          if (want["error_type"] == "TemplateError") {
            EXPECT_EQ(e.kind(), TemplateError::Kind::kRaised) << e.what();
            EXPECT_EQ(e.message(), want["error"].get<std::string>());
          } else {
            EXPECT_EQ(e.kind(), TemplateError::Kind::kRender) << e.what();
          }
        }
      }
    }
  }
  EXPECT_EQ(compared, static_cast<int>(expected.size())) << "expected.json has stale entries";
}

}  // namespace
}  // namespace huddle::jinja
