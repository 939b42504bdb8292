// Lowering of operator-assignment plans (Plan::assignment; plan/assignment.h, Lee et al.).
//
// Device d's program holds the ops whose provider is on d, whole, in the model's op order; ops on
// the cpu1 provider get attrs.threads = 1 (the executor runs their kernels on one thread), cpuN
// and remote ops the device's pool. Right after the op that produces a value, its device sends
// it (pipe_send) to every other device that reads it — once per device, however many of its ops
// read it — and each of those receives it (pipe_recv) at the same point of the op order, so every
// link carries its messages in one order on both ends. Model outputs produced elsewhere are sent
// to device 0, whose program has the outputs. Only [tokens, width] F32 activations (received
// with the ids for their row count) and concrete N-D F32 ones (an imported CNN's: a token-less
// pipe_recv of attr shape) cross (assign::movable_value; Provider::capable keeps remote providers
// to ops on such values, reading no imported graph's input).
#pragma once

#include "plan/lowering.h"

namespace huddle {

// Program of device `rank` of a validated assignment plan. PlanError naming the op when the
// assignment does not fit `graph` (unknown or missing op, op on an incapable provider).
Program lower_assign(const Graph& graph, const ModelConfig& config, const Plan& plan, int rank);

}  // namespace huddle
