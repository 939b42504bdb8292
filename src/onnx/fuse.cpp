// Conv2d + BatchNorm + activation fusion (see fuse.h).
#include "onnx/fuse.h"

#include "core/error.h"
#include "onnx/rebuild.h"

#include <cmath>
#include <optional>

namespace huddle::onnx_import {
namespace {

struct Chain {
  std::vector<std::size_t> absorbed;  // op indices folded into the conv
  ValueId output = -1;                // the last fused value (old graph)
  std::optional<std::size_t> batch_norm;
  kernels::ActivationSpec act;
};

class Fuser {
 public:
  Fuser(const Graph& g) : g_(g), readers_(g.values().size()), is_output_(g.values().size(), false) {
    for (std::size_t i = 0; i < g.ops().size(); ++i) {
      for (ValueId in : g.ops()[i].inputs) readers_[static_cast<std::size_t>(in)].push_back(i);
    }
    for (ValueId o : g.outputs()) is_output_[static_cast<std::size_t>(o)] = true;
  }

  // The single op reading `v`, when `v` is an internal value read only by it.
  std::optional<std::size_t> sole_reader(ValueId v) const {
    const auto& r = readers_[static_cast<std::size_t>(v)];
    if (is_output_[static_cast<std::size_t>(v)] || r.size() != 1) return std::nullopt;
    return r[0];
  }

  bool is_weight(ValueId v) const { return g_.value(v).kind == ValueKind::Weight; }

  Chain chain_of(std::size_t conv) const {
    Chain c;
    c.output = g_.ops()[conv].output;
    if (auto bn = sole_reader(c.output)) {
      const Op& op = g_.ops()[*bn];
      bool params_are_weights = op.kind == OpKind::BatchNorm && op.inputs[0] == c.output;
      for (std::size_t i = 1; params_are_weights && i < op.inputs.size(); ++i)
        params_are_weights = is_weight(op.inputs[i]);
      if (params_are_weights) {
        c.batch_norm = *bn;
        c.absorbed.push_back(*bn);
        c.output = op.output;
      }
    }
    const auto& readers = readers_[static_cast<std::size_t>(c.output)];
    if (is_output_[static_cast<std::size_t>(c.output)]) return c;
    if (readers.size() == 1) {
      const Op& op = g_.ops()[readers[0]];
      kernels::ActivationSpec act;
      switch (op.kind) {
        case OpKind::Relu:
          act = {kernels::Activation::Relu, 0, 0};
          break;
        case OpKind::Clip:
          act = {kernels::Activation::Clip, op.attrs.act.a, op.attrs.act.b};
          break;
        case OpKind::HardSwish:
          act = {kernels::Activation::HardSwish, 0, 0};
          break;
        case OpKind::HardSigmoid:
          act = {kernels::Activation::HardSigmoid, op.attrs.act.a, op.attrs.act.b};
          break;
        case OpKind::Sigmoid:
          act = {kernels::Activation::Sigmoid, 0, 0};
          break;
        default:
          return c;
      }
      c.absorbed.push_back(readers[0]);
      c.output = op.output;
      c.act = act;
      return c;
    }
    // SiLU = Mul(x, Sigmoid(x)); HardSwish = Mul(x, HardSigmoid(x; 1/6, 1/2)) (how opsets < 14
    // write it): x read by the gate and the Mul (either operand order), the gate only by the Mul.
    if (readers.size() == 2) {
      for (int k = 0; k < 2; ++k) {
        const Op& gate = g_.ops()[readers[static_cast<std::size_t>(k)]];
        const std::size_t mul_index = readers[static_cast<std::size_t>(1 - k)];
        const Op& mul = g_.ops()[mul_index];
        kernels::ActivationSpec fused;
        if (gate.kind == OpKind::Sigmoid) {
          fused = {kernels::Activation::Silu, 0, 0};
        } else if (gate.kind == OpKind::HardSigmoid &&
                   std::fabs(gate.attrs.act.a - 1.0f / 6.0f) < 1e-7f && gate.attrs.act.b == 0.5f) {
          fused = {kernels::Activation::HardSwish, 0, 0};
        } else {
          continue;
        }
        if (mul.kind != OpKind::Mul) continue;
        const auto gate_reader = sole_reader(gate.output);
        if (!gate_reader || *gate_reader != mul_index) continue;
        const bool operands = (mul.inputs[0] == c.output && mul.inputs[1] == gate.output) ||
                              (mul.inputs[1] == c.output && mul.inputs[0] == gate.output);
        if (!operands) continue;
        c.absorbed.push_back(readers[static_cast<std::size_t>(k)]);
        c.absorbed.push_back(mul_index);
        c.output = mul.output;
        c.act = fused;
        return c;
      }
    }
    return c;
  }

 private:
  const Graph& g_;
  std::vector<std::vector<std::size_t>> readers_;
  std::vector<bool> is_output_;
};

}  // namespace

Graph fuse_conv_chains(const Graph& graph, WeightMap& weights, FuseStats* stats) {
  const Fuser fuser(graph);
  const auto& ops = graph.ops();
  std::vector<Chain> chains(ops.size());
  std::vector<bool> absorbed(ops.size(), false);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (ops[i].kind != OpKind::Conv2d || absorbed[i]) continue;
    chains[i] = fuser.chain_of(i);
    for (std::size_t a : chains[i].absorbed) absorbed[a] = true;
  }

  Rebuild rebuild(graph);
  Graph& out = rebuild.out;
  const auto mapped = [&](ValueId old) { return rebuild.mapped(old); };
  auto tensor = [&](ValueId v) -> const Tensor& {
    const Value& val = graph.value(v);
    const auto it = weights.find(val.weight.tensor);
    HUDDLE_CHECK(it != weights.end() && val.weight.axis < 0, "weight '{}'", val.name);
    return it->second;
  };

  FuseStats s;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (absorbed[i]) continue;
    const Op& op = ops[i];
    if (op.kind != OpKind::Conv2d || chains[i].absorbed.empty()) {
      std::vector<ValueId> in;
      for (ValueId v : op.inputs) in.push_back(mapped(v));
      rebuild.set(op.output, out.add_op(op.kind, op.name, in, op.attrs, op.role, op.layer));
      continue;
    }
    const Chain& c = chains[i];
    const std::string name = graph.value(c.output).name;
    std::vector<ValueId> in{mapped(op.inputs[0])};
    if (c.batch_norm) {
      const Op& bn = ops[*c.batch_norm];
      const Tensor& w = tensor(op.inputs[1]);
      const std::int64_t o = w.dim(0), per = w.numel() / o;
      const Tensor &scale = tensor(bn.inputs[1]), &beta = tensor(bn.inputs[2]),
                   &mean = tensor(bn.inputs[3]), &var = tensor(bn.inputs[4]);
      Tensor nw = Tensor::empty(DType::F32, w.shape());
      Tensor nb = Tensor::empty(DType::F32, {o});
      for (std::int64_t oc = 0; oc < o; ++oc) {
        const double k =
            static_cast<double>(scale.f32()[oc]) /
            std::sqrt(static_cast<double>(var.f32()[oc]) + static_cast<double>(bn.attrs.eps));
        for (std::int64_t j = 0; j < per; ++j)
          nw.f32()[oc * per + j] = static_cast<float>(w.f32()[oc * per + j] * k);
        const double b0 = op.inputs.size() == 3 ? tensor(op.inputs[2]).f32()[oc] : 0.0;
        nb.f32()[oc] = static_cast<float>((b0 - mean.f32()[oc]) * k + beta.f32()[oc]);
      }
      const std::string wn = name + ".folded_w", bname = name + ".folded_b";
      weights[wn] = nw;
      weights[bname] = nb;
      in.push_back(out.add_weight(wn, nw.shape(), WeightRef{wn, nw.shape()}));
      in.push_back(out.add_weight(bname, nb.shape(), WeightRef{bname, nb.shape()}));
      ++s.batch_norms_folded;
    } else {
      for (std::size_t k = 1; k < op.inputs.size(); ++k) in.push_back(mapped(op.inputs[k]));
    }
    OpAttrs attrs = op.attrs;
    attrs.act = c.act;
    if (c.act.kind != kernels::Activation::None) ++s.activations_fused;
    rebuild.set(c.output, out.add_op(OpKind::Conv2d, name, in, attrs, op.role, op.layer));
  }
  if (stats) *stats = s;
  return rebuild.finish();
}

namespace {

std::optional<kernels::ActivationSpec> activation_op(const Op& op) {
  switch (op.kind) {
    case OpKind::Relu:
      return kernels::ActivationSpec{kernels::Activation::Relu, 0, 0};
    case OpKind::Clip:
      return kernels::ActivationSpec{kernels::Activation::Clip, op.attrs.act.a, op.attrs.act.b};
    case OpKind::Sigmoid:
      return kernels::ActivationSpec{kernels::Activation::Sigmoid, 0, 0};
    case OpKind::HardSwish:
      return kernels::ActivationSpec{kernels::Activation::HardSwish, 0, 0};
    case OpKind::HardSigmoid:
      return kernels::ActivationSpec{kernels::Activation::HardSigmoid, op.attrs.act.a,
                                     op.attrs.act.b};
    default:
      return std::nullopt;
  }
}

// A conv2d's fusion with the Add after it (and the activation after that).
struct ResidualFusion {
  ValueId residual = -1;
  std::size_t last = 0;  // index of the last absorbed op, whose output the fused op computes
  kernels::ActivationSpec act;
};

}  // namespace

Graph fuse_residual_adds(const Graph& graph, int* fused) {
  const Fuser fuser(graph);
  const auto& ops = graph.ops();
  std::vector<int> producer(graph.values().size(), -1);
  for (std::size_t i = 0; i < ops.size(); ++i)
    producer[static_cast<std::size_t>(ops[i].output)] = static_cast<int>(i);
  std::vector<std::optional<ResidualFusion>> fusion(ops.size());
  std::vector<bool> absorbed(ops.size(), false);
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const Op& conv = ops[i];
    if (conv.kind != OpKind::Conv2d || !conv.attrs.channels_last || conv.attrs.residual ||
        conv.attrs.act.kind == kernels::Activation::HardSigmoid)
      continue;
    const auto add_index = fuser.sole_reader(conv.output);
    if (!add_index || ops[*add_index].kind != OpKind::Add || absorbed[*add_index]) continue;
    const Op& add = ops[*add_index];
    const ValueId other = add.inputs[0] == conv.output ? add.inputs[1] : add.inputs[0];
    // The residual must exist when the conv runs (of two convs meeting at an Add, the later one
    // takes the other's output), and be a separate value of the output's shape.
    if (other == conv.output || producer[static_cast<std::size_t>(other)] >= static_cast<int>(i) ||
        graph.value(other).shape != graph.value(conv.output).shape)
      continue;
    ResidualFusion f{other, *add_index, {}};
    absorbed[*add_index] = true;
    if (const auto act_index = fuser.sole_reader(add.output)) {
      if (const auto act = activation_op(ops[*act_index])) {
        f.act = *act;
        f.last = *act_index;
        absorbed[*act_index] = true;
      }
    }
    fusion[i] = f;
  }

  Rebuild rebuild(graph);
  Graph& out = rebuild.out;
  const auto mapped = [&](ValueId old) { return rebuild.mapped(old); };
  int count = 0;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    if (absorbed[i]) continue;
    const Op& op = ops[i];
    std::vector<ValueId> in;
    for (ValueId v : op.inputs) in.push_back(mapped(v));
    if (!fusion[i]) {
      rebuild.set(op.output, out.add_op(op.kind, op.name, in, op.attrs, op.role, op.layer));
      continue;
    }
    // The conv's place holds for the fused op: its inputs and the residual exist by now, and
    // nothing between it and the Add reads its output.
    in.push_back(mapped(fusion[i]->residual));
    OpAttrs attrs = op.attrs;
    attrs.residual = true;
    attrs.residual_act = fusion[i]->act;
    const ValueId last = ops[fusion[i]->last].output;
    rebuild.set(last,
                out.add_op(OpKind::Conv2d, graph.value(last).name, in, attrs, op.role, op.layer));
    ++count;
  }
  if (fused) *fused = count;
  return rebuild.finish();
}

}  // namespace huddle::onnx_import
