#include "plan/assignment.h"

#include "core/error.h"
#include "io/json_field.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <set>

namespace huddle {

std::vector<assign::Provider> OpAssignment::parsed_providers() const {
  std::string list;
  for (const std::string& p : providers) list += (list.empty() ? "" : ",") + p;
  return assign::parse_providers(list);
}

std::vector<int> OpAssignment::by_op(const Graph& graph) const {
  std::vector<int> out;
  for (const Op& op : graph.ops()) out.push_back(ops.at(op.name));
  return out;
}

nlohmann::json OpAssignment::to_json() const {
  nlohmann::json op_map = nlohmann::json::object();
  for (const auto& [name, provider] : ops) op_map[name] = provider;
  return {{"providers", providers}, {"ops", op_map}};
}

OpAssignment OpAssignment::from_json(const nlohmann::json& json, const std::string& source) {
  using Reader = io::JsonField<PlanError>;
  const Reader root(json, source, "assignment");
  OpAssignment a;
  const Reader list = root.at("providers");
  for (std::size_t i = 0; i < list.array_size(); ++i) a.providers.push_back(list.at(i).str());
  if (a.providers.empty()) list.fail("the provider list is empty");
  try {
    (void)a.parsed_providers();
  } catch (const InputError& e) {
    list.fail(e.what());
  }
  const Reader ops = root.at("ops");
  if (!json.at("ops").is_object()) ops.fail("expected an object {\"op name\": provider index}");
  for (const auto& [name, value] : json.at("ops").items()) {
    const std::int64_t p = ops.at(name).integer();
    if (p < 0 || p >= static_cast<std::int64_t>(a.providers.size())) {
      ops.at(name).fail(fmt::format("provider {} of {}", p, a.providers.size()));
    }
    a.ops[name] = static_cast<int>(p);
  }
  return a;
}

void OpAssignment::validate(const Graph& graph, const std::string& source) const {
  const std::vector<assign::Provider> parsed = parsed_providers();
  std::set<std::string> names;
  for (const Op& op : graph.ops()) names.insert(op.name);
  for (const auto& [name, provider] : ops) {
    if (!names.contains(name)) {
      throw PlanError(
          fmt::format("{}: assignment.ops: the model has no op '{}' (a plan for "
                      "another model?)",
                      source, name));
    }
  }
  for (const Op& op : graph.ops()) {
    const auto it = ops.find(op.name);
    if (it == ops.end()) {
      throw PlanError(fmt::format("{}: assignment.ops: op '{}' has no provider", source, op.name));
    }
    const assign::Provider& p = parsed[static_cast<std::size_t>(it->second)];
    if (!p.capable(graph, op)) {
      throw PlanError(fmt::format("{}: assignment.ops.{}: provider {} ('{}') cannot run this {} op",
                                  source, op.name, it->second, p.spec, op_name(op.kind)));
    }
  }
}

}  // namespace huddle
