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
//
// A group stage (PipelineStage::group) runs its units tensor-parallel over its members, as a 1D
// megatron plan over the group: member k computes heads member_heads(..)[k] / FFN columns
// member_columns(..)[k] (column- and row-parallel linears, LoweringEngine::attention_heads /
// mlp_columns), and the row-parallel partial sums are all-reduced over the group (attrs.group = the
// members, in group order) before the residual add; the embedding, norms and residual adds run on
// every member on the whole [T, C], so every member holds the residual stream. Around it:
//   the leader      pipe_recv from the previous stage's leader, then pipe_send of each received
//                   value to every other member; at the end pipe_send to the next stage's leader
//                   (or the outputs to device 0); it alone runs the head ops (role head);
//   other members   pipe_recv of the boundary values from the leader; they send nothing.
#pragma once

#include "plan/lowering.h"

namespace huddle {

// Program of device `rank` of a validated pipeline plan. PlanError for an op it cannot place or
// a stage boundary that a value other than a [tokens, width] activation crosses.
Program lower_pipeline(const Graph& graph, const ModelConfig& config, const Plan& plan, int rank);

}  // namespace huddle
