// `huddle profile`: measure every device of a cluster (compute curves at a model's shapes, free
// memory) and every link between them; write the planner's cluster file (docs/planner.md).
//
//   huddle profile (--workers A,B --key-file K | --local-devices N) [--model DIR] [--seq-len T]
//                  [--names L,M,S] [--budget-s S] [--threads N] [-o cluster.json]
#include "cli/command.h"
#include "cli/local_workers.h"
#include "core/error.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/profile_session.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>

namespace huddle::cli {
namespace {

struct ProfileArgs {
  std::string workers;
  std::string key_file;
  int local_devices = 1;
  std::string model_dir;
  std::int64_t seq_len = 128;
  std::string names;
  double budget_s = 1.0;
  int threads = 0;
  double timeout_s = 10;
  int link_latency_ms = 0;
  double link_mbps = 0;
  std::string output;
};

void profile(const ProfileArgs& a) {
  const int threads = a.threads > 0
                          ? a.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kernels::set_num_threads(threads);
  if (!a.workers.empty() && a.local_devices > 1)
    throw UsageError("give --workers or --local-devices, not both");
  if (!a.workers.empty() && a.key_file.empty()) throw UsageError("--workers needs --key-file");

  ProfileOptions options;
  if (!a.model_dir.empty()) {
    const Model model = Model::load(a.model_dir);
    options.shapes = profile::ProbeShapes::of(model.config(), model.graph(), a.seq_len);
  } else {
    options.shapes.tokens = a.seq_len;
  }
  options.workers = split_list(a.workers);
  std::unique_ptr<LocalWorkers> local;
  if (a.local_devices > 1) {
    local = std::make_unique<LocalWorkers>(a.local_devices - 1, a.timeout_s, threads);
    options.workers = local->addresses();
  }
  if (!options.workers.empty()) {
    options.key = net::load_key_file(local ? local->key_file().string() : a.key_file);
  }
  options.names = split_list(a.names);
  if (!options.names.empty() && options.names.size() != options.workers.size() + 1) {
    throw UsageError(
        fmt::format("--names gives {} names for {} devices (this primary and {} "
                    "workers)",
                    options.names.size(), options.workers.size() + 1, options.workers.size()));
  }
  options.timeout = net::Duration(static_cast<std::int64_t>(a.timeout_s * 1000));
  options.link.latency = net::Duration(a.link_latency_ms);
  options.link.bytes_per_second = a.link_mbps * 1e6 / 8;
  options.compute_budget_s = a.budget_s;
  options.log = [](const std::string& line) {
    std::fprintf(stderr, "huddle: profile: %s\n", line.c_str());
  };
  const ClusterProfile result = profile_cluster(options);
  const std::string text = result.to_json().dump(1);
  if (a.output.empty()) {
    std::printf("%s\n", text.c_str());
    return;
  }
  std::ofstream out(a.output, std::ios::binary | std::ios::trunc);
  out << text << '\n';
  if (!out) throw InputError(fmt::format("{}: cannot write the cluster file", a.output));
  std::fprintf(stderr, "huddle: profile: wrote %s (%d devices, %.1f s)\n", a.output.c_str(),
               result.cluster.size(), result.details.at("seconds").get<double>());
}

}  // namespace

void add_profile_command(CLI::App& app) {
  auto a = std::make_shared<ProfileArgs>();
  CLI::App* cmd = app.add_subcommand(
      "profile",
      "Measure each device (compute, memory) and link (bandwidth, latency); write a cluster file");
  cmd->add_option("--workers", a->workers, "Workers HOST:PORT,... (devices 1..n after this one)");
  cmd->add_option("--key-file", a->key_file, "Pre-shared key file of the cluster");
  cmd->add_option("--local-devices", a->local_devices,
                  "Start N-1 workers on 127.0.0.1 and profile N devices (each pinned to "
                  "cores of its own where this process may use enough)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--model", a->model_dir,
                  "Measure at this model's layer shapes (default: GPT-2 small's)");
  cmd->add_option("--seq-len", a->seq_len, "Tokens per step to measure at (default 128)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--names", a->names,
                  "Device names, this primary first (default: primary, then the worker addresses)");
  cmd->add_option("--budget-s", a->budget_s, "Seconds of compute probing per device (default 1)")
      ->check(CLI::Range(0.05, 60.0));
  cmd->add_option("--threads", a->threads, "Compute threads (default: all cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--timeout-s", a->timeout_s, "Seconds a silent peer is waited for")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--link-latency-ms", a->link_latency_ms,
                  "Emulated latency of each message this primary sends (testbed)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--link-mbps", a->link_mbps, "Emulated send bandwidth, Mbit/s (0: unlimited)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-o,--output", a->output, "Cluster file to write (default: stdout)");
  cmd->callback([a] { profile(*a); });
}

}  // namespace huddle::cli
