// Pipeline plans (HPipe, papers/hpipe-pipeline-sequence-slicing): the model's layer-level units
// are cut into contiguous stages, one device each, and a step's tokens are cut into slices that
// flow through the stages one after another, so every stage works on a different slice at once.
//
// The units of a transformer with L layers (U = 2L + 2: the embedding, the attention and the
// MLP sub-block of each layer, the head) are defined in plan/pipeline_units.h. Between stages
// only the values the later units read cross (the residual stream [T, hidden]).
//
// A stage may also be a group of devices (a fast island: HPipe's hosts of several accelerators)
// that run its units tensor-parallel, Megatron-style: each member computes a range of the
// attention heads and FFN columns, split by the stage's `shares` (at least one of each per
// member), and the partial sums are all-reduced inside the group after the attention output and
// MLP down projections; norms, residuals and the embedding run on every member. The stage's
// leader receives the boundary activations and passes them to the other members; it sends them
// on to the next stage's leader and runs the head (lowering_pipeline.h).
//
// JSON (the "pipeline" object of a plan; "layers" is then empty):
//   {"stages": [{"device": 1, "units": [0, 4]},
//               {"devices": [0, 2], "units": [4, 8], "shares": [3, 1]}],
//    "sliced": true,
//    "slices": [[1], [2], [3], [2, 2], ...]}
// ("shares" is optional: equal shares.)
// `slices[n - 1]` gives the slice lengths for a step of n tokens (they sum to n); the planner
// precomputes every n up to the table's length (HPipe's prepare phase), so no planning happens
// on the request path. An unsliced pipeline ("sliced": false, no table) runs every step as one
// piece: encoders (BERT attends in both directions, so a token's output depends on later tokens)
// and the gpipe baseline.
#pragma once

#include "plan/pipeline_units.h"
#include "plan/split.h"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace huddle {

struct ModelConfig;

struct PipelineStage {
  int device = 0;  // index into Plan::devices; a group stage: its leader (leader())
  Range units;     // [begin, end) of the pipeline units
  // A group stage (two or more devices): its members in group order (collectives run in this
  // order) and their relative speeds; both empty for a one-device stage.
  std::vector<int> group;
  std::vector<double> shares;
  // A group's FFN columns per member when fixed: block-quantised weights cut the down
  // projection's inputs on block boundaries (Plan::aligned_to_blocks). Empty: by `shares`.
  std::vector<Range> columns;

  // A stage of `members` (group order) with `shares` (empty: equal); one member: a one-device
  // stage.
  static PipelineStage of(std::vector<int> members, Range units, std::vector<double> shares = {});
  bool grouped() const { return !group.empty(); }
  // The stage's devices: the group, or {device}.
  std::vector<int> members() const;
  // Whether `d` runs this stage, and its index among members() (-1 if not).
  int member_index(int d) const;
  // The member that receives from the previous stage, sends to the next and runs the head:
  // device 0 when the group holds it (so the primary's link from the leader carries no outputs
  // interleaved with the group's traffic), else the first member.
  static int leader_of(const std::vector<int>& group);
  // Per member: its attention heads of `heads` (split_at_least_one by `shares`).
  std::vector<Range> member_heads(std::int64_t heads) const;
  // Per member: its FFN columns of `ffn`: `columns` where fixed, else split by `shares`.
  std::vector<Range> member_columns(std::int64_t ffn) const;
  bool operator==(const PipelineStage&) const = default;
};

struct Pipeline {
  std::vector<PipelineStage> stages;  // in pipeline order
  bool sliced = false;
  std::vector<std::vector<std::int64_t>> slices;  // slices[n - 1]: lengths for n tokens

  // Slice lengths for a step of `tokens` tokens: one slice when unsliced; InputError when the
  // table has no entry that long.
  std::vector<std::int64_t> slices_for(std::int64_t tokens) const;
  // The stage device `device` runs (alone or as a group member), or -1.
  int stage_of(int device) const;
  // The device of the last stage (its leader) that computes the model's outputs.
  int output_device() const { return stages.back().device; }
  bool operator==(const Pipeline&) const = default;

  nlohmann::json to_json() const;
  // Structure only (types, ranges, the table's sums); PlanError naming `source` and the field.
  static Pipeline from_json(const nlohmann::json& json, const std::string& source);
  // Against the model and the plan's `devices` device count: stages cover the units exactly
  // once, in order; each device at most one stage; the table covers 1..n without gaps, n no
  // longer than the context; an encoder is not sliced; a group stage gives each member at least
  // one attention head and one FFN column.
  void validate(const ModelConfig& config, int devices, const std::string& source) const;
};

// Slices of `tokens` tokens into `count` pieces as equal as possible (the first ones longer).
std::vector<std::int64_t> equal_slices(std::int64_t tokens, std::int64_t count);

}  // namespace huddle
