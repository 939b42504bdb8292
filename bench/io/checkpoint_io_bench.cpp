// Checkpoint I/O throughput: streams a synthetic F32 checkpoint to disk with SafetensorsWriter,
// then opens it (map + validate) and touches every page of every weight through
// Checkpoint::load_f32 (zero-copy views, so this is page-fault cost).
//
//   build-io/bench/io/checkpoint_io_bench [size_mb=256] [repetitions=3] [dir=$TMPDIR]
//
// Prints median and min/max over the repetitions, and the peak resident set size after the
// writes (which stays near the 16 MB write buffer whatever the file size). Reads run with the
// file in the page cache (it was just written), so they measure mapping and validation, not disk.
#include "io/checkpoint.h"
#include "io/safetensors_writer.h"

#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// megabytes <= 0: no throughput column (the step does not scale with the data).
void report(const char* what, std::vector<double> seconds, double megabytes) {
  std::sort(seconds.begin(), seconds.end());
  const double median = seconds[seconds.size() / 2];
  std::printf("%-26s median %9.3f ms  (min %.3f, max %.3f)", what, 1e3 * median,
              1e3 * seconds.front(), 1e3 * seconds.back());
  if (megabytes > 0) std::printf("  %6.0f MB/s", megabytes / median);
  std::printf("\n");
}

long peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024;
}

}  // namespace

int main(int argc, char** argv) {
  const long size_mb = argc > 1 ? std::atol(argv[1]) : 256;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::filesystem::path base = argc > 3 ? argv[3] : std::filesystem::temp_directory_path();
  const std::filesystem::path dir = base / ("huddle-io-bench-" + std::to_string(::getpid()));
  if (size_mb <= 0 || reps <= 0) {
    std::fprintf(stderr, "usage: %s [size_mb>0] [repetitions>0] [dir]\n", argv[0]);
    return 2;
  }

  utsname machine{};
  uname(&machine);
  std::printf("checkpoint_io_bench: %ld MB F32 in 64 tensors, %d repetitions, %s %s, %ld CPUs\n",
              size_mb, reps, machine.sysname, machine.machine, sysconf(_SC_NPROCESSORS_ONLN));
  std::printf("command: %s %ld %d %s\n", argv[0], size_mb, reps, base.c_str());

  // 64 tensors of [rows, 4096] F32 adding up to size_mb.
  const std::int64_t rows = std::max<std::int64_t>(1, size_mb * (1 << 20) / 64 / (4096 * 4));
  const double megabytes = static_cast<double>(64 * rows * 4096 * 4) / (1 << 20);
  const auto make_sources = [&] {
    std::vector<huddle::io::TensorSource> sources;
    for (int k = 0; k < 64; ++k) {
      sources.push_back({"layers." + std::to_string(k) + ".weight",
                         huddle::DType::F32,
                         {rows, 4096},
                         huddle::io::float_fill(
                             huddle::DType::F32, [k](std::int64_t first, std::span<float> out) {
                               for (std::size_t i = 0; i < out.size(); ++i) {
                                 out[i] = static_cast<float>(
                                     (first + static_cast<std::int64_t>(i) + k) % 251);
                               }
                             })});
    }
    return sources;
  };

  try {
    std::vector<double> write_s, open_s, read_s;
    double checksum = 0;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = Clock::now();
      huddle::io::write_checkpoint(dir, make_sources(), UINT64_MAX);
      write_s.push_back(seconds_since(t0));
    }
    const long write_rss = peak_rss_mb();
    for (int r = 0; r < reps; ++r) {
      auto t0 = Clock::now();
      const huddle::io::Checkpoint c = huddle::io::Checkpoint::open(dir);
      open_s.push_back(seconds_since(t0));
      t0 = Clock::now();
      for (const std::string& name : c.names()) {
        const huddle::Tensor t = c.load_f32(name);
        const float* p = t.f32();
        for (std::int64_t i = 0; i < t.numel(); i += 1024) checksum += p[i];  // one per page
      }
      read_s.push_back(seconds_since(t0));
    }
    report("write (incl. fsync)", write_s, megabytes);
    report("open (map + validate)", open_s, 0);
    report("load_f32 + touch pages", read_s, megabytes);
    std::printf("file %.0f MB, peak RSS after writes %ld MB, checksum %.6g\n", megabytes, write_rss,
                checksum);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "checkpoint_io_bench: %s\n", e.what());
    std::filesystem::remove_all(dir);
    return 1;
  }
  std::filesystem::remove_all(dir);
  return 0;
}
