// Helpers shared by the test suites: fixture paths, temporary directories, comparisons.
#pragma once

#include "core/tensor.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace huddle::testing {

// Free memory no planner test's model comes near: 1 TiB.
inline constexpr std::int64_t kAmpleBytes = std::int64_t{1} << 40;

// tests/fixtures/<relative>.
std::filesystem::path fixture(const std::string& relative);
// tests/fixtures/models/<name>.
std::filesystem::path fixture_model(const std::string& name);
// A JSON list of ints from a file (the fixtures' *.ids.json).
std::vector<std::int32_t> read_ids(const std::filesystem::path& path);

// A fresh, empty directory removed when the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Copies a model directory (e.g. a fixture) into `dest` so a test can alter it.
void copy_model(const std::filesystem::path& from, const std::filesystem::path& dest);

// Rewrites the checkpoint of model directory `from` into `dest` (config.json and the other files
// copied as they are): `rename` maps each tensor name to its new name, or "" to drop it;
// `extra` tensors are added. F32 tensors are stored as `store_as` when given.
void rewrite_checkpoint(const std::filesystem::path& from, const std::filesystem::path& dest,
                        const std::function<std::string(const std::string&)>& rename,
                        const std::vector<std::pair<std::string, Tensor>>& extra = {},
                        std::optional<DType> store_as = std::nullopt);

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal or the timeout
  std::string out;
  std::string err;
};
// Runs build/huddle with `args` (no shell), stdin closed; kills it after `timeout_s`.
ProcessResult run_huddle(const std::vector<std::string>& args, double timeout_s = 60);

// A `huddle` process running in the background (a worker), killed when the object dies.
class BackgroundHuddle {
 public:
  explicit BackgroundHuddle(const std::vector<std::string>& args);
  ~BackgroundHuddle();
  BackgroundHuddle(const BackgroundHuddle&) = delete;
  BackgroundHuddle& operator=(const BackgroundHuddle&) = delete;

  // Reads stdout (or stderr) lines until one contains `needle`; returns it ("" on timeout).
  std::string wait_for_line(const std::string& needle, double timeout_s, bool from_stderr = false);
  // For a worker: waits for "listening on HOST:PORT" and returns HOST:PORT.
  std::string worker_address(double timeout_s = 20);
  bool alive();
  void kill(int signal);
  int pid() const { return pid_; }

 private:
  int pid_ = -1;
  int out_ = -1, err_ = -1;
  std::string out_buffer_, err_buffer_;
};

// A fresh pre-shared key file (mode 0600) in `dir`.
std::filesystem::path make_key_file(const std::filesystem::path& dir,
                                    const std::string& name = "cluster.key");

// "1,2,3" for a --ids flag.
std::string ids_arg(const std::vector<std::int32_t>& ids);
inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// max |a - b| / max |b|, over equal shapes (b is the reference).
double relative_error(const Tensor& a, const Tensor& b);
// Row-wise argmax of a [R, C] tensor.
std::vector<std::int32_t> row_argmax(const Tensor& t);
// Mean over the rows of [R, C] logits of KL(softmax(ref) || softmax(other)), in nats (float64).
double mean_kl(const Tensor& ref, const Tensor& other);

}  // namespace huddle::testing
