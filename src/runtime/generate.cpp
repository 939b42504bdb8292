#include "runtime/generate.h"

#include "core/error.h"

#include <algorithm>
#include <chrono>
#include <numeric>

namespace huddle {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

std::span<const float> last_row(const Tensor& t) {
  const std::int64_t cols = t.dim(-1);
  return {t.f32() + (t.dim(0) - 1) * t.row_stride(), static_cast<std::size_t>(cols)};
}

}  // namespace

std::int32_t argmax(std::span<const float> values) {
  HUDDLE_CHECK(!values.empty());
  return static_cast<std::int32_t>(std::max_element(values.begin(), values.end()) - values.begin());
}

double GenerationResult::decode_ms_per_token() const {
  if (decode_ms.empty()) return 0.0;
  return std::accumulate(decode_ms.begin(), decode_ms.end(), 0.0) /
         static_cast<double>(decode_ms.size());
}

GenerationResult generate(StepRunner& runner, std::span<const std::int32_t> prompt,
                          const GenerationOptions& options) {
  if (prompt.empty()) throw InputError("the prompt is empty");
  const auto needed = static_cast<std::int64_t>(prompt.size()) + std::max(options.n_predict - 1, 0);
  if (needed > runner.max_positions()) {
    throw InputError(
        fmt::format("prompt of {} tokens plus {} generated needs {} positions; the model's "
                    "context is {}",
                    prompt.size(), options.n_predict, needed, runner.max_positions()));
  }
  const TokenPicker pick =
      options.pick ? options.pick
                   : TokenPicker([](std::span<const float> logits, std::span<const std::int32_t>) {
                       return argmax(logits);
                     });
  std::vector<std::int32_t> history(prompt.begin(), prompt.end());
  GenerationResult result;
  runner.reset();

  auto start = std::chrono::steady_clock::now();
  Tensor out = runner.forward(prompt, options.keep_prompt_output);
  result.prefill_ms = ms_since(start);
  if (options.keep_prompt_output) result.prompt_output = out;

  auto emit = [&](std::int32_t id) {
    result.generated.push_back(id);
    history.push_back(id);
    if (options.on_token) options.on_token(id);
    return std::find(options.stop_ids.begin(), options.stop_ids.end(), id) !=
           options.stop_ids.end();
  };
  if (options.n_predict <= 0) return result;
  if (emit(pick(last_row(out), history))) return result;
  while (static_cast<int>(result.generated.size()) < options.n_predict) {
    const std::int32_t previous = result.generated.back();
    start = std::chrono::steady_clock::now();
    out = runner.forward(std::span(&previous, 1), false);
    const std::int32_t next = pick(last_row(out), history);
    result.decode_ms.push_back(ms_since(start));
    if (emit(next)) break;
  }
  return result;
}

}  // namespace huddle
