// Trace: per-op spans of compute and communication, written as Chrome trace events (open the file
// in Perfetto or chrome://tracing): one process per device, one complete ("X") event per op.
#pragma once

#include "runtime/executor.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <vector>

namespace huddle {

struct Span {
  std::string name;      // op name, e.g. "blk.3.attn_out"
  std::string category;  // "compute" or "comm"
  int layer = -1;
  double start_us = 0;  // steady clock, microseconds (one clock per machine)
  double duration_us = 0;
  std::int64_t rows = -1;  // rows of the op's output (a pipeline slice's tokens), -1: unknown
  double cpu_us = -1;      // the process's CPU time over the op (all threads), -1: not measured
};

class TraceRecorder {
 public:
  // An observer to install with Executor::set_observer.
  OpObserver observer();
  const std::vector<Span>& spans() const { return spans_; }
  nlohmann::json to_json() const;
  static std::vector<Span> from_json(const nlohmann::json& j);

 private:
  std::vector<Span> spans_;
};

// Writes Chrome trace JSON; spans[d] are device d's, named device_names[d].
void write_chrome_trace(const std::string& path, const std::vector<std::string>& device_names,
                        const std::vector<std::vector<Span>>& spans);

// Communication time of one device that no compute overlapped: the length of its comm spans
// less the compute spans (GEMM tiles run inside a collective) that lie within them.
double exposed_comm_us(const std::vector<Span>& spans);
// A device's spans of `runs` runs of one program (each run records the same ops, in order): per
// run, the process CPU seconds of its compute spans. Error when the spans do not divide into
// `runs` runs or a compute span's CPU was not measured (a recorder without measure_cpu).
std::vector<double> compute_cpu_by_run_s(const std::vector<Span>& spans, int runs);
// The same by the layer of each comm span (the layer of the value a collective moves): element
// l + 1 for layer l, element 0 for communication outside the blocks (embedding, head, outputs);
// one element more than the largest layer seen (at least one).
std::vector<double> exposed_comm_by_layer_us(const std::vector<Span>& spans);

}  // namespace huddle
