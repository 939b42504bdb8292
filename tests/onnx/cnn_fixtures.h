// Test helpers for the CNN fixtures (tests/fixtures/cnn, README there): manifest entries, inputs,
// references and the error measure the tolerances are stated in.
#pragma once

#include "core/tensor.h"
#include "io/npy.h"
#include "test_util.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>

namespace huddle::testing {

inline nlohmann::json cnn_manifest() {
  std::ifstream in(fixture("cnn/manifest.json"));
  return nlohmann::json::parse(in);
}

// Paths of fixture `name`'s model and input.
inline std::string cnn_model(const std::string& name) {
  return fixture("cnn/" + name + ".onnx").string();
}
inline std::string cnn_input_file(const std::string& name) {
  return fixture("cnn/" + name + ".input.npy").string();
}

// The manifest's entry for model `name` (vgg-tiny, resnet-tiny, yolo-tiny).
inline nlohmann::json cnn_entry(const std::string& name) {
  const nlohmann::json all = cnn_manifest();
  for (const auto& m : all["models"]) {
    if (m["name"] == name) return m;
  }
  ADD_FAILURE() << "no manifest entry " << name;
  return {};
}

// The model's input tensor, by its graph input name.
inline std::map<std::string, Tensor> cnn_input(const nlohmann::json& entry) {
  return {{entry["input"]["onnx_name"].get<std::string>(),
           io::read_npy(fixture("cnn/" + entry["input"]["file"].get<std::string>()))}};
}

inline double max_abs_diff(const Tensor& a, const Tensor& b) {
  EXPECT_EQ(a.shape(), b.shape());
  const auto va = a.to_vector(), vb = b.to_vector();
  double m = 0;
  for (std::size_t i = 0; i < va.size() && i < vb.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(va[i]) - vb[i]));
  return m;
}

}  // namespace huddle::testing
