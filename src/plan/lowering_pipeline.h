// Lowering of pipeline plans (Plan::pipeline, HPipe); lower() in lowering.h dispatches here.
//
// Device d running stage s holds only the ops of the units [begin_s, end_s) and their weights,
// whole. Its program:
//   pipe_recv from stage s-1's device  every value the earlier units produce and units from
//                                      begin_s on read (the residual stream), in value order;
//                                      stage 0 instead embeds the step's ids itself
//   the stage's ops                    on every token of the slice, with their own KV cache
//   pipe_send to stage s+1's device    every value units from end_s on read, in value order
// The last stage computes the model's outputs: on device 0 they are its program's outputs;
// elsewhere they are sent to device 0 (pipe_send, peer 0), whose session receives them (so the
// primary, busy with its own stage, never waits for a slice's output before its next slice).
// A device that runs no stage has an empty program.
#pragma once

#include "plan/lowering.h"

namespace huddle {

// Program of device `rank` of a validated pipeline plan. PlanError for an op it cannot place or
// a stage boundary that a value other than a [tokens, width] activation crosses.
Program lower_pipeline(const Graph& graph, const ModelConfig& config, const Plan& plan, int rank);

}  // namespace huddle
