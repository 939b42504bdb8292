// Execution providers for operator assignment (Lee et al.): where one op of the model may run.
//
//   cpu1                this process, one thread (the kernels run serially for that op)
//   cpuN                this process, the kernels' thread pool
//   remote:HOST:PORT    a `huddle worker`; the op's inputs and output cross the link
// A spec may restrict the op kinds it takes: "remote:10.0.0.2:7001:linear,attention" (the kinds
// are graph op names, OpKind). A provider list is comma-separated; a bare op name continues the
// kind list of the provider before it: "cpuN,remote:h:7001:linear,attention,cpu1".
//
// Devices: cpu1 and cpuN are device 0 (the primary); each distinct remote address is one more
// device, numbered in order of first appearance. Order in the list is the priority order.
#pragma once

#include "graph/graph.h"

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace huddle::assign {

enum class ProviderKind : std::uint8_t { Cpu1, CpuN, Remote };

struct Provider {
  std::string spec;  // as written, e.g. "remote:127.0.0.1:7001:linear"
  ProviderKind kind = ProviderKind::CpuN;
  std::string address;                    // Remote: "HOST:PORT"
  std::optional<std::set<OpKind>> kinds;  // nullopt: every kind the engine runs
  int device = 0;                         // 0: this process; Remote: 1 + index of its address

  // Whether this provider runs `op` of `graph`: its kind is allowed, and for a remote provider
  // every activation it reads or writes moves between devices (movable_value; so the head after
  // last_row, [R, C], stays home) and it reads no imported graph's input (only device 0 holds
  // the image; every device has the ids).
  bool capable(const Graph& graph, const Op& op) const;
};

// Whether the engine moves value `v` between devices (pipe_send / pipe_recv): a [tokens, width]
// F32 matrix (the receive takes the ids for its row count) or an F32 value of concrete shape, an
// imported CNN's N-D activation (the token-less receive).
bool movable_value(const Value& v);

// Parses a provider list. InputError naming the entry for an empty list, an unknown provider,
// an unknown op kind, a malformed address or a duplicate spec.
std::vector<Provider> parse_providers(std::string_view list);

// The canonical spec of each provider (what plans store).
std::vector<std::string> provider_specs(const std::vector<Provider>& providers);

// Distinct remote addresses in device order (device d >= 1 is addresses[d - 1]).
std::vector<std::string> remote_addresses(const std::vector<Provider>& providers);

}  // namespace huddle::assign
