// `huddle worker --model DIR` across real processes: a worker with its own copy of the model reads
// and checks only the tensors its program uses. A pipeline plan gives the worker the second half
// of llama-tiny's units; its copy is corrupted in one tensor, inside or outside that half.
#include "io/npy.h"
#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace huddle {
namespace {

using testing::contains;
using testing::fixture_model;
using testing::ids_arg;
using testing::run_huddle;

// llama-tiny's 8 pipeline units (embedding, attention and MLP of 3 layers, head): the primary
// runs units 0-3 (through layer 1's attention), the worker 4-7 (layer 1's MLP onwards).
constexpr const char* kOwnCopyPlan = R"({"version": 1, "strategy": "test",
    "model": {"architecture": "llama", "layers": 3, "hidden": 128, "heads": 4, "kv_heads": 2,
              "ffn": 344},
    "devices": [{"name": "primary"}, {"name": "worker"}],
    "token_shares": [1, 1], "layers": [],
    "pipeline": {"stages": [{"device": 0, "units": [0, 4]}, {"device": 1, "units": [4, 8]}],
                 "sliced": false}})";

// Whether the worker's stage (units 4-7 above) reads checkpoint tensor `name`.
bool own_copy_worker_reads(const std::string& name) {
  return name.starts_with("model.layers.2.") || name.starts_with("model.layers.1.mlp.") ||
         name == "model.layers.1.post_attention_layernorm.weight" || name == "model.norm.weight" ||
         name == "lm_head.weight";
}

// The names of the tensors in the safetensors file `file`, and the byte range of each one's
// data in the file (from the header's data_offsets).
struct OwnCopyTensorSpan {
  std::uint64_t begin = 0, end = 0;
};
std::map<std::string, OwnCopyTensorSpan> own_copy_tensor_spans(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::uint64_t header_bytes = 0;
  in.read(reinterpret_cast<char*>(&header_bytes), sizeof header_bytes);  // little-endian host
  std::string header(header_bytes, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_bytes));
  const nlohmann::json h = nlohmann::json::parse(header);
  std::map<std::string, OwnCopyTensorSpan> spans;
  for (const auto& [name, entry] : h.items()) {
    if (name == "__metadata__") continue;
    const auto offsets = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
    spans[name] = {8 + header_bytes + offsets.at(0), 8 + header_bytes + offsets.at(1)};
  }
  return spans;
}

// A copy of llama-tiny in `dest` whose tensor `name` has its first 64 bytes of data inverted.
void copy_with_corrupt_tensor(const std::filesystem::path& dest, const std::string& name) {
  testing::copy_model(fixture_model("llama-tiny"), dest);
  const std::filesystem::path file = dest / "model.safetensors";
  const OwnCopyTensorSpan span = own_copy_tensor_spans(file).at(name);
  ASSERT_GE(span.end - span.begin, 64u);
  std::fstream f(file, std::ios::binary | std::ios::in | std::ios::out);
  std::string bytes(64, '\0');
  f.seekg(static_cast<std::streamoff>(span.begin));
  f.read(bytes.data(), 64);
  for (char& c : bytes) c = static_cast<char>(~c);
  f.seekp(static_cast<std::streamoff>(span.begin));
  f.write(bytes.data(), 64);
  ASSERT_TRUE(f.good());
}

struct OwnCopyRun {
  nlohmann::json json;                  // huddle run --json
  std::filesystem::path logits;         // --dump-logits
  std::string read_line, differs_line;  // the worker's log lines ("" when absent)
};

// Runs llama-tiny's 16 reference ids (+ 4 greedy tokens) on one device, or across the primary
// and a worker whose own copy is `copy`, with the pipeline plan above.
OwnCopyRun run_own_copy(const testing::TempDir& dir, const std::string& tag,
                        const std::filesystem::path* copy, const std::vector<std::string>& extra) {
  const auto ids = testing::read_ids(testing::fixture("references/llama-tiny.16.ids.json"));
  OwnCopyRun out;
  out.logits = dir / (tag + ".npy");
  std::vector<std::string> args = {"run",
                                   "--model",
                                   fixture_model("llama-tiny"),
                                   "--ids",
                                   ids_arg(ids),
                                   "--n-predict",
                                   "4",
                                   "--json",
                                   "--dump-logits",
                                   out.logits.string()};
  args.insert(args.end(), extra.begin(), extra.end());
  if (copy == nullptr) {
    const auto r = run_huddle(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    out.json = nlohmann::json::parse(r.out, nullptr, false);
    return out;
  }
  std::ofstream(dir / "plan.json") << kOwnCopyPlan;
  const auto key = testing::make_key_file(dir.path(), tag + ".key");
  testing::BackgroundHuddle worker({"worker", "--listen", "127.0.0.1:0", "--key-file", key.string(),
                                    "--threads", "1", "--model", copy->string()});
  const std::string address = worker.worker_address();
  EXPECT_FALSE(address.empty());
  args.insert(args.end(), {"--workers", address, "--key-file", key.string(), "--plan",
                           (dir / "plan.json").string()});
  const auto r = run_huddle(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  out.json = nlohmann::json::parse(r.out, nullptr, false);
  // The worker logs, before it is ready, either what it read or why it did not use its copy.
  for (;;) {
    const std::string line = worker.wait_for_line("session ", 10, /*from_stderr=*/true);
    if (line.empty()) break;
    if (contains(line, " differs ")) {
      out.differs_line = line;
      break;
    }
    if (contains(line, " read ")) {
      out.read_line = line;
      break;
    }
  }
  return out;
}

// The one-device answer: same greedy tokens, logits within float32 reassociation.
void expect_one_device_answer(const OwnCopyRun& run, const OwnCopyRun& one) {
  ASSERT_FALSE(run.json.is_discarded());
  ASSERT_FALSE(one.json.is_discarded());
  EXPECT_EQ(run.json["generated"], one.json["generated"]);
  EXPECT_LE(testing::relative_error(io::read_npy(run.logits), io::read_npy(one.logits)), 1e-5);
}

class OwnCopyCli : public ::testing::TestWithParam<std::string> {
 protected:
  // --weight-dtype for both runs ("" keeps the stored F32).
  std::vector<std::string> dtype_args() const {
    if (GetParam().empty()) return {};
    return {"--weight-dtype", GetParam()};
  }
  // Runs llama-tiny on one device, then split with a worker whose own copy (dir/copy) has
  // `corrupt` damaged; checks the split run gives the one-device answer and returns it.
  OwnCopyRun run_with_corrupt_copy(const testing::TempDir& dir, const std::string& corrupt) const {
    copy_with_corrupt_tensor(dir / "copy", corrupt);
    const std::filesystem::path copy = dir / "copy";
    const OwnCopyRun one = run_own_copy(dir, "one", nullptr, dtype_args());
    OwnCopyRun two = run_own_copy(dir, "two", &copy, dtype_args());
    expect_one_device_answer(two, one);
    return two;
  }
};

// A tensor the worker's stage does not use is corrupted in its copy: the worker still maps its
// weights from the copy (a whole-model check would refuse it), reads exactly its stage's tensors
// (converted to the primary's dtype), and the answer is one device's.
TEST_P(OwnCopyCli, CorruptTensorOutsideTheShardIsNotReadAndTheCopyIsUsed) {
  testing::TempDir dir;
  const std::string corrupt = "model.layers.0.self_attn.q_proj.weight";
  ASSERT_FALSE(own_copy_worker_reads(corrupt));
  const OwnCopyRun two = run_with_corrupt_copy(dir, corrupt);
  ASSERT_TRUE(two.json["devices"].is_array());
  EXPECT_TRUE(two.json["devices"][1]["weights_mapped_locally"].get<bool>());

  // What it read: its stage's tensors, not the model's.
  const auto spans = own_copy_tensor_spans(dir / "copy" / "model.safetensors");
  std::size_t stage_tensors = 0;
  for (const auto& [name, span] : spans) stage_tensors += own_copy_worker_reads(name) ? 1 : 0;
  ASSERT_LT(stage_tensors, spans.size());
  EXPECT_TRUE(contains(two.read_line,
                       fmt::format(" read {} of the {} tensors of ", stage_tensors, spans.size())))
      << two.read_line;
  EXPECT_TRUE(two.differs_line.empty()) << two.differs_line;
}

// A tensor the worker's stage uses is corrupted in its copy: the worker says which, receives its
// weights from the primary instead, and the answer is still one device's.
TEST_P(OwnCopyCli, CorruptTensorInsideTheShardMeansTheWeightsAreReceived) {
  testing::TempDir dir;
  const std::string corrupt = "model.layers.2.mlp.up_proj.weight";
  ASSERT_TRUE(own_copy_worker_reads(corrupt));
  const OwnCopyRun two = run_with_corrupt_copy(dir, corrupt);
  ASSERT_TRUE(two.json["devices"].is_array());
  EXPECT_FALSE(two.json["devices"][1]["weights_mapped_locally"].get<bool>());
  EXPECT_TRUE(contains(two.differs_line, "(tensor '" + corrupt + "'); receiving weights"))
      << two.differs_line;
  EXPECT_TRUE(two.read_line.empty()) << two.read_line;
}

INSTANTIATE_TEST_SUITE_P(WeightDtypes, OwnCopyCli, ::testing::Values("", "q8_0"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param.empty() ? std::string("stored") : p.param;
                         });

}  // namespace
}  // namespace huddle
