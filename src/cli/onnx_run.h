// `huddle run` on an ONNX model (one device) and `huddle info MODEL.onnx`.
#pragma once

#include "cli/onnx_distributed.h"

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace huddle::cli {

struct OnnxRunOptions {
  std::string model;
  std::vector<std::string> inputs;  // "FILE.npy" (single-input graphs) or "NAME=FILE.npy"
  std::string image;                // --image: decoded, resized to --size, normalised
  std::string mean, std;            // "0.485,0.456,0.406"
  int size = 224;
  std::string dump_outputs;  // directory: one NAME.npy per graph output
  bool json = false;
  int threads = 0;
  int repeat = 1;
  OnnxDistribution distribution;  // across devices when active()
};

void run_onnx(const OnnxRunOptions& options);
void add_info_command(CLI::App& app);

}  // namespace huddle::cli
