// OnnxModel::load: file -> protobuf -> checks (opset, inputs) -> node conversion -> fusion.
#include "onnx/onnx_model.h"

#include "core/error.h"
#include "onnx/converters.h"
#include "onnx/fuse.h"
#include "onnx/import_context.h"
#include "onnx/schedule.h"

#include <fmt/format.h>

#include <fstream>
#include <iterator>
#include <new>
#include <set>
#include <sstream>

namespace huddle::onnx_import {
namespace {

constexpr std::int64_t kMinOpset = 11, kMaxOpset = 17;

// The whole file in one read (a character-by-character stream copy took a 0.15-core worker
// most of a second for YOLOv5s's 28 MB).
std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw LoadError(fmt::format("{}: cannot open the file", path.string()));
  const std::streamoff size = in.tellg();
  if (size < 0) throw LoadError(fmt::format("{}: cannot read the file", path.string()));
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(bytes.data(), size))
    throw LoadError(fmt::format("{}: cannot read the file", path.string()));
  return bytes;
}

onnx::ModelProto parse_proto(const std::string& bytes, const std::string& file) {
  if (bytes.empty()) throw LoadError(fmt::format("{}: the file is empty", file));
  if (bytes.size() > (std::size_t{1} << 31) - 1)
    throw LoadError(fmt::format("{}: larger than protobuf's 2 GB limit", file));
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) {
    throw LoadError(
        fmt::format("{}: not a valid ONNX model (protobuf parse failed: truncated or "
                    "corrupt)",
                    file));
  }
  if (!model.has_graph())
    throw LoadError(fmt::format("{}: not an ONNX model (it has no graph)", file));
  return model;
}

}  // namespace

bool is_onnx_path(const std::string& model) {
  return model.size() > 5 && model.substr(model.size() - 5) == ".onnx";
}

std::string read_onnx_file(const std::filesystem::path& path) {
  return read_bytes(path);
}

namespace {

std::int64_t default_opset(const onnx::ModelProto& model, const std::string& file) {
  std::int64_t opset = -1;
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  if (opset < 0)
    throw LoadError(fmt::format("{}: the model imports no default-domain opset", file));
  if (opset < kMinOpset || opset > kMaxOpset) {
    throw LoadError(fmt::format("{}: opset {} is not supported (Huddle reads opsets {}-{})", file,
                                opset, kMinOpset, kMaxOpset));
  }
  return opset;
}

Shape input_shape(const onnx::ValueInfoProto& vi, const ImportOptions& options,
                  const std::string& file) {
  const std::string what = fmt::format("{}: graph input '{}'", file, vi.name());
  if (!vi.type().has_tensor_type()) throw LoadError(what + " is not a tensor");
  const auto& tt = vi.type().tensor_type();
  if (tt.elem_type() != onnx::TensorProto::FLOAT)
    throw LoadError(fmt::format("{} has element type {}; only float32 inputs are supported", what,
                                static_cast<int>(tt.elem_type())));
  if (!tt.has_shape()) throw LoadError(what + " has no shape");
  const auto given = options.input_shapes.find(vi.name());
  Shape s;
  const int rank = tt.shape().dim_size();
  if (given != options.input_shapes.end() && static_cast<int>(given->second.size()) != rank) {
    throw InputError(fmt::format("input '{}' is {}, the model's input has rank {}", vi.name(),
                                 shape_str(given->second), rank));
  }
  for (int d = 0; d < rank; ++d) {
    const auto& dim = tt.shape().dim(d);
    const std::int64_t want =
        given != options.input_shapes.end() ? given->second[static_cast<std::size_t>(d)] : -1;
    if (dim.has_dim_value()) {
      if (dim.dim_value() <= 0 || dim.dim_value() > (std::int64_t{1} << 32))
        throw LoadError(fmt::format("{} has invalid dimension {}", what, dim.dim_value()));
      if (want >= 0 && want != dim.dim_value()) {
        throw InputError(
            fmt::format("input '{}' has shape {}, the model expects dimension {} to "
                        "be {}",
                        vi.name(), shape_str(given->second), d, dim.dim_value()));
      }
      s.push_back(dim.dim_value());
    } else if (want > 0) {
      s.push_back(want);
    } else if (d == 0) {
      s.push_back(1);  // symbolic batch
    } else {
      throw LoadError(fmt::format("{} has symbolic dimension {} ('{}'); give its shape", what, d,
                                  dim.dim_param()));
    }
  }
  return s;
}

}  // namespace

OnnxModel OnnxModel::load(const std::filesystem::path& path, const ImportOptions& options) {
  return load_bytes(read_bytes(path), path, options);
}

OnnxModel OnnxModel::load_bytes(const std::string& bytes, const std::filesystem::path& path,
                                const ImportOptions& options) {
  const std::string file = path.string();
  try {
    const onnx::ModelProto proto = parse_proto(bytes, file);
    OnnxModel m;
    m.path_ = path;
    m.opset_ = default_opset(proto, file);
    m.producer_ = proto.producer_name() + " " + proto.producer_version();
    const onnx::GraphProto& g = proto.graph();
    ImportContext ctx(file, m.opset_, m.graph_, m.weights_);

    std::set<std::string> initializer_names;
    for (const auto& t : g.initializer()) {
      if (t.name().empty()) throw LoadError(fmt::format("{}: an initializer has no name", file));
      if (!initializer_names.insert(t.name()).second)
        throw LoadError(fmt::format("{}: initializer '{}' is defined twice", file, t.name()));
      Constant c = constant_from_proto(t, file);
      if (!c.is_int) m.parameters_ += c.numel();
      ctx.define_constant(t.name(), std::move(c));
    }
    if (g.sparse_initializer_size() > 0)
      throw LoadError(fmt::format("{}: sparse initializers are not supported", file));
    for (const auto& vi : g.input()) {
      if (initializer_names.contains(vi.name())) continue;  // IR < 4 lists initializers as inputs
      if (vi.name().empty() || m.graph_.find(vi.name()))
        throw LoadError(
            fmt::format("{}: graph input '{}' is unnamed or repeated", file, vi.name()));
      Shape s = input_shape(vi, options, file);
      ctx.define_value(vi.name(), m.graph_.add_input(vi.name(), s, DType::F32));
      m.inputs_.push_back({vi.name(), std::move(s)});
    }
    for (const auto& [name, shape] : options.input_shapes) {
      bool found = false;
      for (const auto& in : m.inputs_) found = found || in.name == name;
      if (!found) throw InputError(fmt::format("'{}' is not an input of {}", name, file));
    }

    for (const auto& node : g.node()) ++m.op_counts_[node.op_type()];
    for (const auto& node : g.node()) {
      ctx.begin_node(node);
      if (!node.domain().empty() && node.domain() != "ai.onnx")
        ctx.fail(fmt::format("operator domain '{}' is not supported", node.domain()));
      if (node.output_size() < 1) ctx.fail("the node has no outputs");
      if (!fold_constant_node(ctx)) {
        const Converter convert = find_converter(node.op_type());
        if (!convert) ctx.fail(fmt::format("operator {} is not supported", node.op_type()));
        convert(ctx);
      }
      ctx.end_node();
    }

    for (const auto& out : g.output()) {
      const auto id = ctx.find_value(out.name());
      if (!id) {
        throw LoadError(fmt::format("{}: graph output '{}' is {}", file, out.name(),
                                    ctx.is_constant_name(out.name()) ? "a constant (not supported)"
                                                                     : "not computed by any node"));
      }
      ValueId oid = *id;
      const Value& v = m.graph_.value(oid);
      if (v.kind != ValueKind::Activation || v.name != out.name()) {
        // An alias (Identity) or an input: a named copy, so outputs keep their ONNX names.
        OpAttrs a;
        a.shape = v.shape;
        oid = m.graph_.add_op(OpKind::Reshape, out.name(), {oid}, a);
      }
      m.graph_.add_output(oid);
      m.outputs_.push_back({out.name(), m.graph_.value(oid).shape});
    }
    if (m.outputs_.empty()) throw LoadError(fmt::format("{}: the graph has no outputs", file));
    m.graph_.validate();
    if (options.fuse) m.graph_ = fuse_conv_chains(m.graph_, m.weights_);
    m.graph_ = outputs_early(m.graph_);
    return m;
  } catch (const PlanError& e) {
    throw LoadError(fmt::format("{}: {}", file, e.what()));
  } catch (const std::bad_alloc&) {
    throw LoadError(fmt::format("{}: out of memory while importing (corrupt sizes?)", file));
  } catch (const std::length_error&) {
    throw LoadError(fmt::format("{}: a size in the file is too large", file));
  }
}

}  // namespace huddle::onnx_import
