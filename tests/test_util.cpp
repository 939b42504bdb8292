#include "test_util.h"

#include "core/error.h"
#include "io/checkpoint.h"
#include "io/safetensors_writer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <fstream>
#include <random>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace huddle::testing {

std::filesystem::path fixture(const std::string& relative) {
  return std::filesystem::path(HUDDLE_FIXTURES_DIR) / relative;
}

std::filesystem::path fixture_model(const std::string& name) {
  return fixture("models/" + name);
}

std::vector<std::int32_t> read_ids(const std::filesystem::path& path) {
  std::ifstream in(path);
  HUDDLE_CHECK(in.good(), "cannot open {}", path.string());
  return nlohmann::json::parse(in).get<std::vector<std::int32_t>>();
}

TempDir::TempDir() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  path_ = std::filesystem::temp_directory_path() /
          ("huddle-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
           std::to_string(rd()));
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void copy_model(const std::filesystem::path& from, const std::filesystem::path& dest) {
  std::filesystem::create_directories(dest);
  for (const auto& entry : std::filesystem::directory_iterator(from)) {
    std::filesystem::copy_file(entry.path(), dest / entry.path().filename(),
                               std::filesystem::copy_options::overwrite_existing);
    std::filesystem::permissions(dest / entry.path().filename(),
                                 std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::add);
  }
}

void rewrite_checkpoint(const std::filesystem::path& from, const std::filesystem::path& dest,
                        const std::function<std::string(const std::string&)>& rename,
                        const std::vector<std::pair<std::string, Tensor>>& extra,
                        std::optional<DType> store_as) {
  copy_model(from, dest);
  std::filesystem::remove(dest / "model.safetensors");
  const io::Checkpoint checkpoint = io::Checkpoint::open(from);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const std::string& name : checkpoint.names()) {
    const std::string renamed = rename(name);
    if (!renamed.empty()) tensors.emplace_back(renamed, checkpoint.view(name));
  }
  for (const auto& e : extra) tensors.push_back(e);
  io::write_safetensors(dest / "model.safetensors", tensors, {}, store_as);
}

ProcessResult run_huddle(const std::vector<std::string>& args, double timeout_s) {
  int out_pipe[2], err_pipe[2];
  HUDDLE_CHECK(::pipe(out_pipe) == 0 && ::pipe(err_pipe) == 0);
  std::vector<std::string> argv_storage = {HUDDLE_BINARY};
  argv_storage.insert(argv_storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argv_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  HUDDLE_CHECK(pid >= 0);
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out_pipe[1], 1);
    ::dup2(err_pipe[1], 2);
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out_pipe[1]);
  ::close(err_pipe[1]);
  ProcessResult result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  bool killed = false;
  while (open_fds > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      ::kill(pid, SIGKILL);
      killed = true;
      break;
    }
    if (::poll(fds, 2, static_cast<int>(std::min<long>(left.count(), 1000))) < 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[65536];
      const ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? result.out : result.err).append(buf, static_cast<std::size_t>(n));
      }
    }
  }
  for (pollfd& f : fds) {
    if (f.fd >= 0) ::close(f.fd);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = (!killed && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  return result;
}

BackgroundHuddle::BackgroundHuddle(const std::vector<std::string>& args) {
  int out[2], err[2];
  HUDDLE_CHECK(::pipe(out) == 0 && ::pipe(err) == 0);
  std::vector<std::string> storage = {HUDDLE_BINARY};
  storage.insert(storage.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_ = ::fork();
  HUDDLE_CHECK(pid_ >= 0);
  if (pid_ == 0) {
    const int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::close(out[0]);
    ::close(err[0]);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  out_ = out[0];
  err_ = err[0];
}

BackgroundHuddle::~BackgroundHuddle() {
  if (alive()) kill(SIGKILL);
  int status = 0;
  ::waitpid(pid_, &status, 0);
  ::close(out_);
  ::close(err_);
}

std::string BackgroundHuddle::wait_for_line(const std::string& needle, double timeout_s,
                                            bool from_stderr) {
  const int fd = from_stderr ? err_ : out_;
  std::string& buffer = from_stderr ? err_buffer_ : out_buffer_;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    for (std::size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
      std::string line = buffer.substr(0, nl);
      buffer.erase(0, nl + 1);
      if (line.find(needle) != std::string::npos) return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return {};
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char chunk[4096];
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n <= 0) return {};
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
}

std::string BackgroundHuddle::worker_address(double timeout_s) {
  const std::string line = wait_for_line("listening on ", timeout_s);
  if (line.empty()) return {};
  const auto begin = line.find("listening on ") + 13;
  return line.substr(begin, line.find(' ', begin) - begin);
}

bool BackgroundHuddle::alive() {
  int status = 0;
  return pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == 0;
}

void BackgroundHuddle::kill(int signal) {
  ::kill(pid_, signal);
}

std::filesystem::path make_key_file(const std::filesystem::path& dir, const std::string& name) {
  const std::filesystem::path path = dir / name;
  const ProcessResult r = run_huddle({"keygen", "-o", path.string()});
  HUDDLE_CHECK(r.exit_code == 0, "keygen failed: {}", r.err);
  return path;
}

std::string ids_arg(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (std::int32_t id : ids) {
    if (!s.empty()) s += ',';
    s += std::to_string(id);
  }
  return s;
}

double relative_error(const Tensor& a, const Tensor& b) {
  HUDDLE_CHECK(a.shape() == b.shape(), "{} vs {}", shape_str(a.shape()), shape_str(b.shape()));
  const std::vector<float> x = a.to_vector(), y = b.to_vector();
  double max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (std::isnan(x[i])) return INFINITY;
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(x[i] - y[i])));
    max_ref = std::max(max_ref, static_cast<double>(std::fabs(y[i])));
  }
  return max_ref > 0 ? max_diff / max_ref : max_diff;
}

std::vector<std::int32_t> row_argmax(const Tensor& t) {
  std::vector<std::int32_t> out;
  const std::vector<float> v = t.to_vector();
  const std::int64_t cols = t.dim(1);
  for (std::int64_t r = 0; r < t.dim(0); ++r) {
    const auto row = v.begin() + r * cols;
    out.push_back(static_cast<std::int32_t>(std::max_element(row, row + cols) - row));
  }
  return out;
}

double mean_kl(const Tensor& ref, const Tensor& other) {
  HUDDLE_CHECK(ref.shape() == other.shape() && ref.shape().size() == 2, "{} vs {}",
               shape_str(ref.shape()), shape_str(other.shape()));
  const std::vector<float> p = ref.to_vector(), q = other.to_vector();
  const auto cols = static_cast<std::size_t>(ref.dim(1));
  const auto rows = static_cast<std::size_t>(ref.dim(0));
  // log_softmax of one row, float64.
  auto log_softmax = [cols](const float* row) {
    const double top = *std::max_element(row, row + cols);
    double sum = 0;
    for (std::size_t c = 0; c < cols; ++c) sum += std::exp(row[c] - top);
    std::vector<double> out(cols);
    for (std::size_t c = 0; c < cols; ++c) out[c] = row[c] - top - std::log(sum);
    return out;
  };
  double total = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    const std::vector<double> lp = log_softmax(p.data() + r * cols);
    const std::vector<double> lq = log_softmax(q.data() + r * cols);
    for (std::size_t c = 0; c < cols; ++c) total += std::exp(lp[c]) * (lp[c] - lq[c]);
  }
  return rows > 0 ? total / static_cast<double>(rows) : 0.0;
}

}  // namespace huddle::testing
