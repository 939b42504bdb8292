// The engine on gpt2-tiny in process: its text is generate()'s, decoded; limits, stop strings,
// cancellation and prompts that do not fit.
#include "serve/engine.h"

#include "model/model.h"
#include "runtime/executor.h"
#include "runtime/generate.h"
#include "serve/request_error.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <thread>

namespace huddle::serve {
namespace {

struct Fixture {
  Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  std::unique_ptr<Tokenizer> tokenizer = Tokenizer::load(testing::fixture_model("gpt2-tiny"));
  Executor executor{model.graph(), model.weights(), model.config().max_positions};
  Engine engine{executor, *tokenizer, options()};

  EngineOptions options() const {
    EngineOptions o;
    o.context = 32;
    o.stop_ids = model.config().eos_ids;
    o.vocab_size = static_cast<std::int32_t>(model.config().vocab_size);
    return o;
  }
  // generate()'s greedy ids for `prompt` on a separate executor (no stop ids).
  std::vector<std::int32_t> reference(const std::vector<std::int32_t>& prompt, int n) {
    Executor other(model.graph(), model.weights(), model.config().max_positions);
    GenerationOptions g;
    g.n_predict = n;
    return generate(other, prompt, g).generated;
  }
};

CompletionRequest greedy(std::vector<std::int32_t> ids, int max_tokens) {
  CompletionRequest r;
  r.prompt_ids = std::move(ids);
  r.max_tokens = max_tokens;
  r.temperature = 0;
  return r;
}

const auto keep_going = [](std::string_view) { return true; };

TEST(Engine, GreedyTextIsGenerateDecodedAndStopsAtLength) {
  Fixture f;
  const std::vector<std::int32_t> prompt = {1, 2, 3, 4};
  const std::vector<std::int32_t> ids = f.reference(prompt, 6);
  ASSERT_EQ(ids.size(), 6u);
  const bool has_eos =
      std::find(ids.begin(), ids.end(), f.model.config().eos_ids.at(0)) != ids.end();
  ASSERT_FALSE(has_eos) << "pick another prompt: the reference stops early";
  std::string streamed;
  const CompletionResult r = f.engine.complete(greedy(prompt, 6), [&](std::string_view t) {
    streamed += t;
    return true;
  });
  EXPECT_EQ(r.text, f.tokenizer->decode(ids, /*skip_special=*/true));
  EXPECT_EQ(streamed, r.text);
  EXPECT_EQ(r.finish_reason, "length");
  EXPECT_EQ(r.prompt_tokens, 4);
  EXPECT_EQ(r.completion_tokens, 6);
}

TEST(Engine, StopStringEndsWithStopAndCancelEndsEarly) {
  Fixture f;
  // gpt2-tiny answers "Hello world" with " st st st ...": one piece of text per token.
  const std::vector<std::int32_t> prompt = f.tokenizer->encode("Hello world");
  const std::string full = f.tokenizer->decode(f.reference(prompt, 8), true);
  ASSERT_GE(full.size(), 8u);
  CompletionRequest r = greedy(prompt, 8);
  r.stop = {full.substr(4, 3)};
  const CompletionResult stopped = f.engine.complete(r, keep_going);
  EXPECT_EQ(stopped.text, full.substr(0, full.find(r.stop[0])));
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_LT(stopped.completion_tokens, 8);

  int pieces = 0;
  const CompletionResult cancelled =
      f.engine.complete(greedy(prompt, 8), [&](std::string_view) { return ++pieces < 2; });
  EXPECT_TRUE(cancelled.cancelled);
  EXPECT_EQ(pieces, 2);
  EXPECT_LT(cancelled.completion_tokens, 8);
}

// A client that left (the probe says so) cancels its request between decode steps, without a
// piece of text to write; one that left while it waited for its turn costs no step at all.
TEST(Engine, AGoneClientCancelsBetweenDecodeSteps) {
  Fixture f;
  const std::vector<std::int32_t> prompt = {1, 2, 3, 4};
  int probes = 0;
  const CompletionResult r =
      f.engine.complete(greedy(prompt, 20), keep_going, [&probes] { return ++probes > 3; });
  EXPECT_TRUE(r.cancelled);
  // Asked once before the prompt and after each token: gone at the fourth ask, after 3 tokens.
  EXPECT_EQ(probes, 4);
  EXPECT_EQ(r.completion_tokens, 3);

  f.executor.reset();
  const CompletionResult left =
      f.engine.complete(greedy(prompt, 20), keep_going, [] { return true; });
  EXPECT_TRUE(left.cancelled);
  EXPECT_EQ(left.completion_tokens, 0);
  EXPECT_EQ(f.executor.position(), 0) << "no step ran";

  const CompletionResult stays =
      f.engine.complete(greedy(prompt, 5), keep_going, [] { return false; });
  EXPECT_FALSE(stays.cancelled);
  EXPECT_EQ(stays.completion_tokens, 5);
}

TEST(Engine, RefusesPromptsThatDoNotFitAndCapsAtTheContext) {
  Fixture f;
  EXPECT_THROW(f.engine.prompt_ids(greedy(std::vector<std::int32_t>(33, 1), 1)), RequestError);
  EXPECT_THROW(f.engine.prompt_ids(greedy({1, 512}, 1)), RequestError);  // vocabulary is 512
  // 30 prompt tokens in a context of 32: three tokens at most (the last needs no new position).
  const CompletionResult r =
      f.engine.complete(greedy(std::vector<std::int32_t>(30, 7), 10), keep_going);
  EXPECT_LE(r.completion_tokens, 3);
  if (r.completion_tokens == 3) {
    EXPECT_EQ(r.finish_reason, "length");
  }
}

TEST(Engine, ConcurrentRequestsGetTheSequentialAnswers) {
  Fixture f;
  std::vector<std::string> expected, got(6);
  for (int i = 0; i < 6; ++i)
    expected.push_back(f.engine.complete(greedy({i + 1, 5, 9}, 5), keep_going).text);
  std::vector<std::thread> threads;
  for (int i = 0; i < 6; ++i) {
    threads.emplace_back([&, i] {
      got[static_cast<std::size_t>(i)] =
          f.engine.complete(greedy({i + 1, 5, 9}, 5), keep_going).text;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(got, expected);
}

// The hook runs once after each request that ran, with the model's turn held; when it throws,
// the engine answers every later request 503 with its reason, as after a lost link.
TEST(Engine, AfterRequestRunsAfterEachRequestAndItsFailureMakesTheModelUnavailable) {
  Fixture f;
  EngineOptions o = f.options();
  int calls = 0;
  bool fail = false;
  o.after_request = [&] {
    ++calls;
    if (fail) throw std::runtime_error("re-planning failed: worker gone");
  };
  Engine engine(f.executor, *f.tokenizer, o);
  const std::string text = engine.complete(greedy({1, 2, 3}, 4), keep_going).text;
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(engine.complete(greedy({1, 2, 3}, 4), keep_going).text, text);
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(engine.failure(), "");
  EXPECT_THROW(engine.prompt_ids(greedy({1, 512}, 1)), RequestError);
  EXPECT_EQ(calls, 2);  // a refused prompt never ran
  fail = true;
  EXPECT_EQ(engine.complete(greedy({1, 2, 3}, 4), keep_going).text, text);  // it had its answer
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(engine.failure(), "re-planning failed: worker gone");
  try {
    engine.complete(greedy({1, 2, 3}, 4), keep_going);
    ADD_FAILURE() << "a request after the failed hook ran";
  } catch (const RequestError& e) {
    EXPECT_EQ(e.status(), 503);
    EXPECT_TRUE(testing::contains(e.what(), "worker gone")) << e.what();
  }
  EXPECT_EQ(calls, 3);
}

}  // namespace
}  // namespace huddle::serve
