// A graph rebuilt op by op from another (the import's passes: fusion, scheduling): the old
// graph's inputs first, each weight where it is first read, each op as the pass adds it.
#pragma once

#include "core/error.h"
#include "graph/graph.h"

#include <utility>
#include <vector>

namespace huddle::onnx_import {

// A graph rebuilt from `old`, op by op: its inputs first, each weight where it is first read.
struct Rebuild {
  explicit Rebuild(const Graph& source) : old(source), map(source.values().size(), -1) {
    for (std::size_t v = 0; v < old.values().size(); ++v) {
      const Value& val = old.values()[v];
      if (val.kind == ValueKind::Input) map[v] = out.add_input(val.name, val.shape, val.dtype);
    }
  }
  // The new id of old value `v`.
  ValueId mapped(ValueId v) {
    ValueId& m = map[static_cast<std::size_t>(v)];
    if (m < 0) {
      const Value& val = old.value(v);
      HUDDLE_CHECK(val.kind == ValueKind::Weight, "value '{}' used before defined", val.name);
      m = out.add_weight(val.name, val.shape, val.weight, val.dtype);
    }
    return m;
  }
  void set(ValueId v, ValueId now) { map[static_cast<std::size_t>(v)] = now; }
  // The rebuilt graph with the old one's outputs, checked.
  Graph finish() {
    for (ValueId o : old.outputs()) out.add_output(map[static_cast<std::size_t>(o)]);
    out.validate();
    return std::move(out);
  }

  const Graph& old;
  Graph out;
  std::vector<ValueId> map;
};

}  // namespace huddle::onnx_import
