// Internal to the ONNX importer: one converter per supported ONNX operator (convert_ops.cpp),
// and load-time evaluation of nodes whose inputs are all constants (fold.cpp).
#pragma once

#include "onnx/import_context.h"

#include <string_view>

namespace huddle::onnx_import {

using Converter = void (*)(ImportContext&);

// The converter of an ONNX op type (default domain), or nullptr when Huddle does not support it.
Converter find_converter(std::string_view op_type);

// When every input of the current node is a load-time constant and the op can be evaluated here
// (Constant, Identity, Shape, Concat, Cast, Reshape, Flatten, Squeeze, Unsqueeze, Gather, Add,
// Sub, Mul, Div, Range-free integer arithmetic), sets its outputs as constants and returns true.
bool fold_constant_node(ImportContext& ctx);

}  // namespace huddle::onnx_import
