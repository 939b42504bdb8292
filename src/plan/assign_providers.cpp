#include "plan/assign_providers.h"

#include "core/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace huddle::assign {
namespace {

std::vector<std::string> split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = text.find(sep, start);
    out.emplace_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return out;
    start = end + 1;
  }
}

bool starts_provider(std::string_view token) {
  return token == "cpu1" || token == "cpuN" || token.starts_with("cpu1:") ||
         token.starts_with("cpuN:") || token.starts_with("remote:");
}

OpKind parse_kind(const std::string& name, const std::string& entry) {
  const std::optional<OpKind> kind = parse_op_kind(name);
  if (!kind) {
    throw InputError(fmt::format("--providers: '{}': unknown op kind '{}'", entry, name));
  }
  return *kind;
}

Provider parse_one(const std::string& entry) {
  const std::vector<std::string> parts = split(entry, ':');
  Provider p;
  p.spec = entry;
  std::size_t kinds_at = 1;
  if (parts[0] == "cpu1") {
    p.kind = ProviderKind::Cpu1;
  } else if (parts[0] == "cpuN") {
    p.kind = ProviderKind::CpuN;
  } else if (parts[0] == "remote") {
    p.kind = ProviderKind::Remote;
    int port = 0;
    const bool has_port = parts.size() >= 3 && !parts[1].empty();
    const char* port_end = has_port ? parts[2].data() + parts[2].size() : nullptr;
    if (!has_port || std::from_chars(parts[2].data(), port_end, port).ptr != port_end ||
        port <= 0 || port > 65535) {
      throw InputError(
          fmt::format("--providers: '{}': expected remote:HOST:PORT[:kind,...]", entry));
    }
    p.address = parts[1] + ":" + parts[2];
    kinds_at = 3;
  } else {
    throw InputError(fmt::format(
        "--providers: '{}': unknown provider (expected cpu1, cpuN or remote:HOST:PORT)", entry));
  }
  if (parts.size() > kinds_at + 1) {
    throw InputError(fmt::format("--providers: '{}': too many ':' fields", entry));
  }
  if (parts.size() == kinds_at + 1) {
    std::set<OpKind> kinds;
    for (const std::string& k : split(parts[kinds_at], ';')) kinds.insert(parse_kind(k, entry));
    p.kinds = std::move(kinds);
  }
  return p;
}

// An F32 value of concrete shape: an imported graph's (every dimension known at load).
bool concrete_f32(const Value& v) {
  return v.dtype == DType::F32 && !v.shape.empty() &&
         std::all_of(v.shape.begin(), v.shape.end(), [](std::int64_t d) { return d >= 0; });
}

}  // namespace

bool movable_value(const Value& v) {
  const bool token_matrix = v.dtype == DType::F32 && v.shape.size() == 2 && v.shape[0] == kTokens;
  return token_matrix || concrete_f32(v);
}

bool Provider::capable(const Graph& graph, const Op& op) const {
  if (kinds && !kinds->contains(op.kind)) return false;
  if (kind != ProviderKind::Remote) return true;
  if (!movable_value(graph.value(op.output))) return false;
  return std::all_of(op.inputs.begin(), op.inputs.end(), [&](ValueId in) {
    const Value& v = graph.value(in);
    if (v.kind == ValueKind::Activation) return movable_value(v);
    // Every device has the step's ids and positions, but only device 0 an imported graph's
    // inputs (an image).
    return !(v.kind == ValueKind::Input && concrete_f32(v));
  });
}

std::vector<Provider> parse_providers(std::string_view list) {
  // Entries are comma-separated; a token that starts no provider continues the kind list of the
  // provider before it (stored ';'-joined while parsing).
  std::vector<std::string> entries;
  for (const std::string& token : split(list, ',')) {
    if (token.empty()) continue;
    if (starts_provider(token) || entries.empty()) {
      entries.push_back(token);
    } else {
      std::string& last = entries.back();
      const std::size_t fields =
          static_cast<std::size_t>(std::count(last.begin(), last.end(), ':'));
      const bool has_kinds = last.starts_with("remote:") ? fields >= 3 : fields >= 1;
      if (!has_kinds) parse_one(token);  // throws: not a provider, and nothing to continue
      last += ";" + token;
    }
  }
  if (entries.empty()) throw InputError("--providers: the provider list is empty");
  std::vector<Provider> out;
  std::vector<std::string> addresses;
  for (const std::string& entry : entries) {
    Provider p = parse_one(entry);
    std::replace(p.spec.begin(), p.spec.end(), ';', ',');
    for (const Provider& q : out) {
      if (q.spec == p.spec) throw InputError(fmt::format("--providers: '{}' twice", p.spec));
    }
    if (p.kind == ProviderKind::Remote) {
      auto it = std::find(addresses.begin(), addresses.end(), p.address);
      if (it == addresses.end()) it = addresses.insert(addresses.end(), p.address);
      p.device = 1 + static_cast<int>(it - addresses.begin());
    }
    out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::string> provider_specs(const std::vector<Provider>& providers) {
  std::vector<std::string> out;
  for (const Provider& p : providers) out.push_back(p.spec);
  return out;
}

std::vector<std::string> remote_addresses(const std::vector<Provider>& providers) {
  std::vector<std::string> out;
  for (const Provider& p : providers) {
    if (p.kind == ProviderKind::Remote && static_cast<std::size_t>(p.device) > out.size()) {
      out.push_back(p.address);
    }
  }
  return out;
}

}  // namespace huddle::assign
