// Tokenizer throughput: encode and decode MB/s for each tokenizer type on generated mixed text.
//
//   build-tok/bench/tokenizer/tokenizer_bench [--mb 4] [--runs 7] [--model DIR]...
//
// The text (seeded, --mb megabytes) mixes English words, digits, punctuation, accented Latin, CJK,
// emoji and newlines, cut into 2 KiB "prompts". Tokenizers: the three fixture models
// (gpt2-tiny: byte-level BPE with the GPT-2 regex; llama-tiny: byte-level BPE with the Llama 3
// split regex; bert-tiny: WordPiece), a SentencePiece BPE model trained here on part of the text
// (vocab 8000), and any --model directories given. For each it prints the median and [min, max]
// over --runs runs of encode MB/s (input bytes / time), decode MB/s (output bytes / time), and the
// median time to encode one 2 KiB prompt. Note the fixture vocabularies have only 512 tokens, so
// they emit far more ids per byte than real 50k-150k vocabularies.
#include <sentencepiece_trainer.h>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> make_prompts(std::size_t total_bytes, std::size_t prompt_bytes) {
  static const std::vector<std::string> words = {
      "the",    "of",        "and",    "to",      "in",      "is",       "that",        "model",
      "tokens", "attention", "layer",  "device",  "network", "latency",  "Transformer", "inference",
      "edge",   "planner",   "split",  "weights", "It's",    "don't",    "naïve",       "café",
      "über",   "résumé",    "Straße", "日本語",  "中文",    "テキスト", "🙂",        "👍🏽",
      "🚀",      "→",         "∑",      "Ω"};
  static const std::string punct = ".,;:!?()\"'-";
  std::mt19937 rng(1234);
  auto pick = [&](std::size_t n) {
    return std::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
  };
  std::vector<std::string> prompts;
  std::size_t total = 0;
  while (total < total_bytes) {
    std::string p;
    while (p.size() < prompt_bytes) {
      const std::size_t r = pick(20);
      if (r < 14) {
        p += words[pick(words.size())];
      } else if (r < 16) {
        p += std::to_string(pick(100000));
      } else if (r < 18) {
        p += punct[pick(punct.size())];
      } else if (r < 19) {
        p += "\n";
      } else {
        p += "  ";
      }
      p += ' ';
    }
    total += p.size();
    prompts.push_back(std::move(p));
  }
  return prompts;
}

struct Stats {
  double median, min, max;
};

Stats stats(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

std::string cpu_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown CPU";
}

void bench(const std::string& name, const huddle::Tokenizer& tokenizer,
           const std::vector<std::string>& prompts, int runs) {
  std::size_t in_bytes = 0;
  for (const auto& p : prompts) in_bytes += p.size();
  std::vector<std::vector<std::int32_t>> ids(prompts.size());
  std::vector<double> encode_rates, decode_rates, prompt_us;
  std::size_t n_ids = 0, out_bytes = 0;
  for (int r = 0; r < runs + 1; ++r) {  // run 0 warms up
    auto t0 = Clock::now();
    for (std::size_t i = 0; i < prompts.size(); ++i) {
      const auto p0 = Clock::now();
      ids[i] = tokenizer.encode(prompts[i], false);
      if (r > 0 && i % 64 == 0) {
        prompt_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - p0).count());
      }
    }
    const double encode_s = std::chrono::duration<double>(Clock::now() - t0).count();
    t0 = Clock::now();
    out_bytes = 0;
    for (const auto& v : ids) out_bytes += tokenizer.decode(v).size();
    const double decode_s = std::chrono::duration<double>(Clock::now() - t0).count();
    if (r == 0) continue;
    encode_rates.push_back(static_cast<double>(in_bytes) / 1e6 / encode_s);
    decode_rates.push_back(static_cast<double>(out_bytes) / 1e6 / decode_s);
  }
  for (const auto& v : ids) n_ids += v.size();
  const Stats e = stats(encode_rates), d = stats(decode_rates), p = stats(prompt_us);
  std::printf("%-26s %-13s %6.2f | %7.2f [%7.2f, %7.2f] | %7.2f [%7.2f, %7.2f] | %8.1f\n",
              name.c_str(), std::string(tokenizer.kind()).c_str(),
              static_cast<double>(in_bytes) / static_cast<double>(n_ids), e.median, e.min, e.max,
              d.median, d.min, d.max, p.median);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Tokenizer throughput (encode / decode MB/s) per tokenizer type"};
  double mb = 4;
  int runs = 7;
  std::vector<std::string> extra_models;
  app.add_option("--mb", mb, "Megabytes of generated text")->check(CLI::Range(0.01, 512.0));
  app.add_option("--runs", runs, "Timed runs (median and [min, max] are printed)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--model", extra_models, "Also benchmark this model directory's tokenizer");
  CLI11_PARSE(app, argc, argv);

  std::string command;
  for (int i = 0; i < argc; ++i) command += std::string(i ? " " : "") + argv[i];
  std::printf("command: %s\nmachine: %s, %u hardware threads; single-threaded\n", command.c_str(),
              cpu_name().c_str(), std::thread::hardware_concurrency());

  const auto prompts = make_prompts(static_cast<std::size_t>(mb * 1e6), 2048);
  std::printf("text: %.2f MB in %zu prompts of ~2 KiB, %d runs\n\n", mb, prompts.size(), runs);
  std::printf("%-26s %-13s %6s | %-27s | %-27s | %8s\n", "tokenizer", "type", "B/id",
              "encode MB/s median [min,max]", "decode MB/s median [min,max]", "us/prompt");

  try {
    const std::filesystem::path fixtures = std::filesystem::path(HUDDLE_FIXTURES_DIR) / "models";
    for (const char* name : {"gpt2-tiny", "llama-tiny", "bert-tiny"}) {
      bench(name, *huddle::Tokenizer::load(fixtures / name), prompts, runs);
    }

    // A SentencePiece model trained on the first prompts, in a temporary directory.
    const auto dir = std::filesystem::temp_directory_path() /
                     fmt::format("huddle_tokenizer_bench_{}", std::random_device{}());
    std::filesystem::create_directories(dir);
    {
      std::ofstream corpus(dir / "corpus.txt");
      for (std::size_t i = 0; i < std::min<std::size_t>(prompts.size(), 200); ++i) {
        corpus << prompts[i] << "\n";
      }
    }
    const auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + (dir / "corpus.txt").string() +
        " --model_prefix=" + (dir / "tokenizer").string() +
        " --model_type=bpe --vocab_size=8000 --hard_vocab_limit=false --byte_fallback=true"
        " --character_coverage=1.0 --minloglevel=2");
    if (status.ok()) {
      std::filesystem::remove(dir / "corpus.txt");
      bench("sentencepiece-bpe-8k", *huddle::Tokenizer::load(dir), prompts, runs);
    } else {
      std::printf("sentencepiece: training failed: %s\n", status.ToString().c_str());
    }
    std::filesystem::remove_all(dir);

    for (const auto& m : extra_models) bench(m, *huddle::Tokenizer::load(m), prompts, runs);
  } catch (const huddle::Error& e) {
    std::fprintf(stderr, "tokenizer_bench: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
