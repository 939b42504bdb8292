#include "model/model.h"

#include "core/error.h"
#include "core/kquant.h"
#include "core/quant.h"
#include "io/mapped_file.h"
#include "io/strict_json.h"
#include "model/model_source.h"
#include "model/weight_spill.h"

#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

namespace huddle {

Tensor resolve_weight(const WeightMap& weights, const WeightRef& ref) {
  const auto it = weights.find(ref.tensor);
  if (it == weights.end())
    throw PlanError(fmt::format("weight tensor '{}' is not loaded", ref.tensor));
  const Tensor& whole = it->second;
  if (ref.axis < 0) return whole;
  // A k-quant (Q4_K, Q6_K) matrix whose columns are cut inside its super-blocks of 256 but on
  // blocks of 32 (the input of an attention output projection split by heads of 64 or 128): the
  // slice is Q8_0 of its values.
  const auto inside_super_block = [&](int axis, std::int64_t begin, std::int64_t end) {
    return axis == whole.rank() - 1 &&
           (!dtype_fits(whole.dtype(), begin) || !dtype_fits(whole.dtype(), end));
  };
  if (dtype_block_elems(whole.dtype()) == kKQuantBlock && whole.rank() == 2 &&
      (inside_super_block(ref.axis, ref.begin, ref.end) ||
       inside_super_block(ref.axis2, ref.begin2, ref.end2))) {
    WeightMap as_q8_0;
    as_q8_0.emplace(ref.tensor, quantize(dequantize(whole), DType::Q8_0));
    return resolve_weight(as_q8_0, ref);
  }
  if (ref.axis >= whole.rank() || ref.begin < 0 || ref.begin > ref.end ||
      ref.end > whole.dim(ref.axis)) {
    throw PlanError(fmt::format("slice [{}:{}] on axis {} does not fit tensor '{}' of shape {}",
                                ref.begin, ref.end, ref.axis, ref.tensor,
                                shape_str(whole.shape())));
  }
  const auto check_blocks = [&](int axis, std::int64_t begin, std::int64_t end) {
    if (axis == whole.rank() - 1 &&
        (!dtype_fits(whole.dtype(), begin) || !dtype_fits(whole.dtype(), end))) {
      throw PlanError(fmt::format(
          "slice [{}:{}] on axis {} of tensor '{}' ({} {}) cuts a block of {}: columns of a "
          "block-quantised weight split at multiples of {}",
          begin, end, axis, ref.tensor, dtype_name(whole.dtype()), shape_str(whole.shape()),
          dtype_block_elems(whole.dtype()), dtype_block_elems(whole.dtype())));
    }
  };
  check_blocks(ref.axis, ref.begin, ref.end);
  Tensor first;
  if (ref.axis == 0) {
    first = whole.rows(ref.begin, ref.end);
  } else if (ref.axis == 1 && whole.rank() == 2) {
    first = whole.cols(ref.begin, ref.end);
  } else {
    throw PlanError(fmt::format("cannot slice axis {} of tensor '{}'", ref.axis, ref.tensor));
  }
  if (ref.axis2 < 0) return first;
  // A 2-D tile: the other axis of a matrix.
  if (whole.rank() != 2 || ref.axis2 == ref.axis || ref.axis2 > 1 || ref.begin2 < 0 ||
      ref.begin2 > ref.end2 || ref.end2 > whole.dim(ref.axis2)) {
    throw PlanError(fmt::format("slice [{}:{}] on axis {} does not fit tensor '{}' of shape {}",
                                ref.begin2, ref.end2, ref.axis2, ref.tensor,
                                shape_str(whole.shape())));
  }
  check_blocks(ref.axis2, ref.begin2, ref.end2);
  return ref.axis2 == 0 ? first.rows(ref.begin2, ref.end2) : first.cols(ref.begin2, ref.end2);
}

Model Model::load(const std::filesystem::path& path, const LoadOptions& options) {
  // config.json text + tensors under Hugging Face names, from a directory or a GGUF file.
  const ModelSource source = open_model_source(path);
  Model m;
  m.dir_ = path;
  m.options_ = options;
  m.config_text_ = source.config_text;
  const std::string& config_origin = source.config_origin;
  const std::string origin = source.tensors->origin();

  // The architecture is needed to map names; describe_model() below checks the config fully.
  const Architecture& arch =
      architecture_for_config(nlohmann::json::parse(m.config_text_), config_origin);
  const io::WeightSource& checkpoint = *source.tensors;
  // Canonical name -> name in the checkpoint ("transformer.h.0..." -> "h.0...").
  std::unordered_map<std::string, std::string> stored_name;
  for (const std::string& name : checkpoint.names()) {
    const std::optional<std::string> canonical = arch.canonical_name(name);
    if (!canonical) continue;
    const auto [it, inserted] = stored_name.emplace(*canonical, name);
    if (!inserted) {
      throw LoadError(fmt::format("{}: tensors '{}' and '{}' both provide '{}'", origin, it->second,
                                  name, *canonical));
    }
    m.tensor_names_.push_back(*canonical);
  }
  std::sort(m.tensor_names_.begin(), m.tensor_names_.end());
  ModelDescription description = describe_model(m.config_text_, m.tensor_names_, config_origin);
  m.architecture_ = description.architecture;
  m.config_ = description.config;
  m.graph_ = std::move(description.graph);

  const std::map<std::string, WeightUse> uses = weight_uses(m.graph_);
  // Converted 16-bit and quantised weights of at least this size are spilled
  // (model/weight_spill.h); norm scales and biases stay in memory.
  constexpr std::size_t kSpillBytes = 1 << 20;
  WeightSpill spill;
  std::map<std::string, DType> kept_dtypes;  // every tensor the graph uses, read or not
  for (const Value& v : m.graph_.values()) {
    if (v.kind != ValueKind::Weight || kept_dtypes.contains(v.weight.tensor)) continue;
    const auto it = stored_name.find(v.weight.tensor);
    if (it == stored_name.end()) {
      throw LoadError(fmt::format("{}: tensor '{}' is missing from the checkpoint ({} needs it)",
                                  origin, v.weight.tensor, m.architecture_->name));
    }
    const io::TensorInfo info = checkpoint.info(it->second);
    if (info.shape != v.weight.tensor_shape) {
      throw LoadError(fmt::format("{}: tensor '{}' has shape {} but the config implies {}",
                                  info.file.string(), it->second, shape_str(info.shape),
                                  shape_str(v.weight.tensor_shape)));
    }
    const DType kept = kept_dtype(info.dtype, info.shape, uses.at(v.weight.tensor), options);
    if (info.dtype == DType::I32) {
      throw LoadError(fmt::format("{}: tensor '{}' is I32, not a floating-point type",
                                  info.file.string(), it->second));
    }
    kept_dtypes.emplace(v.weight.tensor, kept);
    if (options.only_tensors && !options.only_tensors->contains(v.weight.tensor)) continue;
    const Tensor stored = checkpoint.view(it->second);
    Tensor weight = convert_weight(stored, kept);
    // Converted from a mapped checkpoint: those pages are not read again here.
    if (weight.raw() != stored.raw()) io::release_mapped_pages(stored.raw(), stored.nbytes());
    // A converted (owned) matrix that executors pack goes to the spill file and comes back as a
    // view of it. F32 matrices are read in place by BLAS, so they are resident either way.
    if (kept != DType::F32 && weight.nbytes() >= kSpillBytes && !io::in_mapped_file(weight.raw()) &&
        spill.add(v.weight.tensor, weight)) {
      continue;
    }
    m.weights_.emplace(v.weight.tensor, std::move(weight));
  }
  for (auto& [name, view] : spill.finish()) m.weights_.emplace(name, std::move(view));
  // The graph records each weight's kept dtype: the planners count its bytes from the graph.
  for (std::size_t i = 0; i < m.graph_.values().size(); ++i) {
    const Value& v = m.graph_.values()[i];
    if (v.kind == ValueKind::Weight)
      m.graph_.set_weight_dtype(static_cast<ValueId>(i), kept_dtypes.at(v.weight.tensor));
  }
  return m;
}

ModelDescription describe_model(const std::string& config_text,
                                const std::vector<std::string>& tensor_names,
                                const std::string& source) {
  // The config may come from a peer (a worker's session setup): parsed with bounded nesting.
  const nlohmann::json config = io::parse_strict_json(config_text, source + ": config");
  ModelDescription d;
  d.architecture = &architecture_for_config(config, source);
  d.config = d.architecture->parse_config(ConfigReader(config, source));
  d.config.validate(source);
  const std::set<std::string> names(tensor_names.begin(), tensor_names.end());
  d.graph = d.architecture->build_graph(d.config,
                                        [&](const std::string& n) { return names.contains(n); });
  return d;
}

std::int64_t Model::weight_block() const {
  std::int64_t block = 1;
  for (const auto& [name, tensor] : weights_) {
    block = std::max(block, dtype_block_elems(tensor.dtype()));
  }
  return block;
}

std::size_t Model::weight_bytes() const {
  std::size_t total = 0;
  for (const auto& [name, tensor] : weights_) total += tensor.nbytes();
  return total;
}

}  // namespace huddle
