// The `huddle` command: a thin layer over the library. Each subcommand lives in its own file and
// registers itself on the CLI11 app; its callback does the work and throws huddle::Error
// subclasses on failure, which main() turns into a message and an exit code:
//   0 success, 1 error (bad model, bad input, peer failure), 2 usage (bad flags).
#pragma once

#include "core/wire_format.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace huddle::cli {

void add_run_command(CLI::App& app);
void add_synth_command(CLI::App& app);
void add_worker_command(CLI::App& app);  // also `keygen`
void add_profile_command(CLI::App& app);
void add_serve_command(CLI::App& app);
void add_quantize_command(CLI::App& app);

// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
std::vector<std::string> split_list(const std::string& text);

// "5,3,1" -> {5, 3, 1}: relative device speeds; UsageError naming --shares on anything else.
std::vector<double> parse_shares(const std::string& text);

inline constexpr const char* kGatherChunksHelp =
    "Chunks each device's rows of an all-gather travel in, the linears reading them running on "
    "each as it lands (default: the planner's choice, else 1; docs/distributed.md, 'Chunks')";
inline constexpr const char* kWireHelp =
    "Form activations travel in between devices: f32 (exact, default), f16, bf16, int8 "
    "(docs/distributed.md, 'Activations on the wire')";

// Parses "1,2,3" (spaces allowed) into token ids; UsageError naming `flag` on bad syntax.
std::vector<std::int32_t> parse_id_list(const std::string& text, const std::string& flag);

}  // namespace huddle::cli
