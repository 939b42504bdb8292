// libFuzzer target: a plan file's text, read as Plan::load reads it (io::parse_strict_json, then
// Plan::from_json) and, when it parses, validated against the gpt2-tiny fixture's config as
// `huddle run --plan` does. Anything but a LoadError from the JSON reader or a PlanError, or a
// crash, is a finding.
#include "core/error.h"
#include "io/strict_json.h"
#include "model/model.h"
#include "plan/plan.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

const huddle::ModelConfig& fixture_config() {
  static const huddle::Model model =
      huddle::Model::load(std::string(HUDDLE_FIXTURES_DIR) + "/models/gpt2-tiny");
  return model.config();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const huddle::ModelConfig& config = fixture_config();
  try {
    const huddle::Plan plan = huddle::Plan::from_json(
        huddle::io::parse_strict_json(std::string_view(reinterpret_cast<const char*>(data), size),
                                      "fuzz-plan.json"),
        "fuzz-plan.json");
    plan.validate(config, "fuzz-plan.json");
  } catch (const huddle::LoadError&) {
  } catch (const huddle::PlanError&) {
  }
  return 0;
}
