// config.json as real hub configs write it: nulls, absent optional fields, field aliases.
#include "core/error.h"
#include "model/architecture.h"
#include "model/model_config.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace huddle {
namespace {

ModelConfig parse(const nlohmann::json& j) {
  const Architecture& arch = architecture_for_config(j, "config.json");
  ModelConfig c = arch.parse_config(ConfigReader(j, "config.json"));
  c.validate("config.json");
  return c;
}

nlohmann::json gpt2_config() {
  return {{"model_type", "gpt2"}, {"vocab_size", 100}, {"n_embd", 64},      {"n_layer", 2},
          {"n_head", 4},          {"n_positions", 32}, {"n_inner", nullptr}};
}

nlohmann::json llama_config() {
  return {{"architectures", {"LlamaForCausalLM"}},
          {"vocab_size", 100},
          {"hidden_size", 64},
          {"intermediate_size", 96},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 4},
          {"max_position_embeddings", 32},
          {"rope_scaling", nullptr}};
}

TEST(Config, Gpt2NullInnerMeansFourTimesHidden) {
  const ModelConfig c = parse(gpt2_config());
  EXPECT_EQ(c.architecture, "gpt2");
  EXPECT_EQ(c.ffn, 256);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.activation, Activation::GeluTanh);
  nlohmann::json j = gpt2_config();
  j["n_inner"] = 100;
  EXPECT_EQ(parse(j).ffn, 100);
}

TEST(Config, LlamaDefaultsForAbsentFields) {
  const ModelConfig c = parse(llama_config());  // picked by "architectures", no model_type
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.kv_heads, 4);             // absent num_key_value_heads: multi-head attention
  EXPECT_EQ(c.rope.theta, 10000.0f);    // absent rope_theta
  EXPECT_FALSE(c.tie_word_embeddings);  // absent tie_word_embeddings
  nlohmann::json j = llama_config();
  j["num_key_value_heads"] = 2;
  j["rope_theta"] = 500000.0;
  j["eos_token_id"] = {5, 7};
  const ModelConfig g = parse(j);
  EXPECT_EQ(g.kv_heads, 2);
  EXPECT_EQ(g.rope.theta, 500000.0f);
  EXPECT_EQ(g.eos_ids, (std::vector<std::int32_t>{5, 7}));
}

TEST(Config, ErrorsNameTheField) {
  auto expect_error = [](nlohmann::json j, const std::string& needle) {
    try {
      parse(j);
      ADD_FAILURE() << "no error for " << j.dump();
    } catch (const LoadError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("config.json"), std::string::npos) << e.what();
    }
  };
  nlohmann::json j = gpt2_config();
  j.erase("n_embd");
  expect_error(j, "n_embd");
  j = gpt2_config();
  j["n_head"] = "four";
  expect_error(j, "n_head");
  j = gpt2_config();
  j["n_head"] = 5;  // 64 not divisible by 5
  expect_error(j, "n_head");
  j = llama_config();
  j["num_key_value_heads"] = 3;
  expect_error(j, "num_key_value_heads");
  j = llama_config();
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 2.0}};
  expect_error(j, "rope_scaling.rope_type 'yarn'");
  expect_error({{"model_type", "opt"}, {"architectures", {"OPTForCausalLM"}}}, "opt");
  expect_error({{"hidden_size", 4}}, "model_type");
  j = gpt2_config();
  j["activation_function"] = "relu";
  expect_error(j, "relu");
}

TEST(Config, BertUsesExactGeluAndIsAnEncoder) {
  const ModelConfig c = parse({{"model_type", "bert"},
                               {"vocab_size", 100},
                               {"hidden_size", 64},
                               {"num_hidden_layers", 2},
                               {"num_attention_heads", 4},
                               {"intermediate_size", 128},
                               {"hidden_act", "gelu"}});
  EXPECT_EQ(c.activation, Activation::GeluErf);
  EXPECT_FALSE(c.causal);
  EXPECT_EQ(c.max_positions, 512);
  EXPECT_EQ(c.type_vocab_size, 2);
}

TEST(Config, CanonicalNames) {
  const Architecture* gpt2 = find_architecture("gpt2");
  ASSERT_NE(gpt2, nullptr);
  EXPECT_EQ(gpt2->canonical_name("transformer.h.0.ln_1.weight"), "h.0.ln_1.weight");
  EXPECT_EQ(gpt2->canonical_name("h.0.ln_1.weight"), "h.0.ln_1.weight");
  EXPECT_EQ(gpt2->canonical_name("transformer.h.3.attn.masked_bias"), std::nullopt);
  const Architecture* bert = find_architecture("bert");
  ASSERT_NE(bert, nullptr);
  EXPECT_EQ(bert->canonical_name("bert.encoder.layer.0.output.LayerNorm.gamma"),
            "encoder.layer.0.output.LayerNorm.weight");
  EXPECT_EQ(bert->canonical_name("bert.pooler.dense.weight"), std::nullopt);
  EXPECT_EQ(bert->canonical_name("cls.predictions.bias"), std::nullopt);
}

}  // namespace
}  // namespace huddle
