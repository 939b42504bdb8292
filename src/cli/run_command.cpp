// `huddle run`: load a model, run a prompt (and optionally generate), print results.
#include "cli/command.h"
#include "core/error.h"
#include "io/npy.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "runtime/executor.h"
#include "runtime/generate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <thread>

namespace huddle::cli {
namespace {

struct RunOptions {
  std::string model_dir;
  std::string ids;
  int n_predict = 0;
  std::string dump_logits;
  int threads = 0;
  bool json = false;
};

void check_ids(const std::vector<std::int32_t>& ids, const ModelConfig& config) {
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= config.vocab_size) {
      throw InputError(fmt::format("token id {} at position {} is outside the vocabulary ({} ids)", ids[i],
                                   i, config.vocab_size));
    }
  }
}

void run(const RunOptions& o) {
  const std::vector<std::int32_t> prompt = parse_id_list(o.ids, "--ids");
  const int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  kernels::set_num_threads(threads);

  const auto load_start = std::chrono::steady_clock::now();
  const Model model = Model::load(o.model_dir);
  const double load_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - load_start).count();
  check_ids(prompt, model.config());
  if (o.n_predict > 0 && !model.config().causal) {
    throw UsageError(fmt::format("--n-predict: {} is an encoder ({}); it does not generate tokens",
                                 o.model_dir, model.architecture().name));
  }

  Executor executor(model.graph(), model.weights(), model.config().max_positions);
  GenerationOptions options;
  options.n_predict = o.n_predict;
  options.keep_prompt_output = !o.dump_logits.empty();
  const GenerationResult result = generate(executor, prompt, options);

  if (!o.dump_logits.empty()) io::write_npy(o.dump_logits, result.prompt_output);

  if (o.json) {
    const nlohmann::json j = {{"model", o.model_dir},
                              {"architecture", model.architecture().name},
                              {"prompt_tokens", prompt.size()},
                              {"generated", result.generated},
                              {"load_ms", load_ms},
                              {"prefill_ms", result.prefill_ms},
                              {"decode_ms_per_token", result.decode_ms_per_token()},
                              {"threads", threads}};
    std::printf("%s\n", j.dump().c_str());
  } else {
    if (!result.generated.empty()) std::printf("%s\n", fmt::format("{}", fmt::join(result.generated, ",")).c_str());
    std::fprintf(stderr, "%s\n",
                 fmt::format("huddle: {} ({}), {} prompt tokens, prefill {:.2f} ms, decode {:.2f} ms/token, "
                             "{} threads",
                             o.model_dir, model.architecture().name, prompt.size(), result.prefill_ms,
                             result.decode_ms_per_token(), threads)
                     .c_str());
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a prompt through a model (prefill, then greedy generation)");
  cmd->add_option("--model", options->model_dir, "Hugging Face model directory")->required();
  cmd->add_option("--ids", options->ids, "Prompt token ids, comma-separated (e.g. 1,2,3)")->required();
  cmd->add_option("--n-predict", options->n_predict, "Tokens to generate greedily")->check(CLI::NonNegativeNumber);
  cmd->add_option("--dump-logits", options->dump_logits,
                  "Write the prompt's logits [T, vocab] (encoders: hidden states [T, hidden]) as .npy");
  cmd->add_option("--threads", options->threads, "Compute threads (default: all cores)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", options->json, "Print one JSON object with the results on stdout");
  cmd->callback([options] { run(*options); });
}

}  // namespace huddle::cli
