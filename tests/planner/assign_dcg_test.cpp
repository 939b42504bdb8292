// The DCG of the fixture models and provider lists: node, edge and DA-edge counts against hand
// counts, capability rules, and provider-list errors; the plan `huddle assign` writes.
#include "core/error.h"
#include "model/model.h"
#include "plan/assign_providers.h"
#include "planner/assign_planner.h"
#include "planner/dcg.h"
#include "test_util.h"

#include <gtest/gtest.h>

namespace huddle::assign {
namespace {

Dcg fixture_dcg(const std::string& model, const std::string& providers, std::int64_t tokens) {
  const Model m = Model::load(huddle::testing::fixture_model(model));
  return Dcg(make_problem(m.graph(), parse_providers(providers), tokens));
}

// gpt2-tiny: hidden H = 128, FFN F = 512, vocab 512, 3 layers. At T = 16 tokens, F32:
//   [T,H] = 8192 bytes: every edge but these three kinds;
//   [T,F] = 32768 bytes: mlp_up -> mlp_act -> mlp_down (2 per layer);
//   [1,H] = 512 bytes: last -> logits (after last_row, 1 row); logits [1,V] -> end: 2048 bytes.
// Ops: tok_embed, pos_embed, embed + 12 per layer + final_norm, last, logits = 42.
// Tensor edges: embed 2; per layer attn_norm 1, q 1, k 1, v 1, attn 3, attn_out 1,
// attn_residual 2, mlp_norm 1, mlp_up 1, mlp_act 1, mlp_down 1, mlp_residual 2 = 16 (48);
// final_norm 1, last 1, logits 1; the output to the end 1: 54.
TEST(AssignDcg, Gpt2HandCounts) {
  {
    // cpu1 and cpuN run everything. Nodes 42·2 + start + end. DCG edges: 53 op-to-op tensor
    // edges x 4 provider pairs + 2 to the end + start edges to tok_embed, pos_embed on 2
    // providers (4) = 218. DA: (cpu1->cpuN), (cpuN->cpu1) x {8192, 32768, 512} = 6; the
    // output edges cost nothing (both providers are on device 0).
    const Dcg dcg = fixture_dcg("gpt2-tiny", "cpu1,cpuN", 16);
    EXPECT_EQ(dcg.problem().num_ops(), 42);
    EXPECT_EQ(dcg.problem().edges.size(), 54u);
    EXPECT_EQ(dcg.nodes().size(), 86u);
    EXPECT_EQ(dcg.edges().size(), 218u);
    EXPECT_EQ(dcg.num_da(), 6);
  }
  {
    // cpuN and a remote: the remote cannot run last and logits (their [1, *] rows are not
    // [tokens, width] matrices, the only values moved between devices), so the 512-byte edge
    // never crosses. DA: 2 directions x {8192, 32768} = 4; the end edge comes from logits, on
    // cpuN only: free.
    const Dcg dcg = fixture_dcg("gpt2-tiny", "cpuN,remote:127.0.0.1:7001", 16);
    EXPECT_EQ(dcg.nodes().size(), 40u * 2 + 2 + 2);
    EXPECT_EQ(dcg.num_da(), 4);
    // cpu1, cpuN and the remote: 6 ordered pairs x {8192, 32768} + cpu1 <-> cpuN x {512} = 14.
    EXPECT_EQ(fixture_dcg("gpt2-tiny", "cpu1,cpuN,remote:127.0.0.1:7001", 16).num_da(), 14);
  }
  {
    // A remote restricted to linears takes q, k, v, attn_out, mlp_up, mlp_down: 6 per layer
    // (the head is a linear too, but of [1, *] rows): 18 remote nodes.
    const Dcg dcg = fixture_dcg("gpt2-tiny", "cpuN,remote:127.0.0.1:7001:linear", 16);
    EXPECT_EQ(dcg.nodes().size(), 42u + 18u + 2u);
    // Linears read and write [T,H] or [T,F]: both sizes cross both ways: 4 DA edges.
    EXPECT_EQ(dcg.num_da(), 4);
  }
}

// bert-tiny: H = 128, F = 512, 3 layers, no head: the output is the last mlp_norm's [T,H].
// At T = 16 every edge is [T,H] (8192 bytes) but mlp_up -> mlp_act -> mlp_down ([T,F], 32768).
TEST(AssignDcg, BertHandCounts) {
  // cpu1, cpuN: 2 directions x 2 sizes = 4 DA; the output is on device 0 either way.
  EXPECT_EQ(fixture_dcg("bert-tiny", "cpu1,cpuN", 16).num_da(), 4);
  // cpuN, remote: 4 between them + the remote's output to the end ([T,H] from the remote) = 5.
  const Dcg dcg = fixture_dcg("bert-tiny", "cpuN,remote:127.0.0.1:7001", 16);
  EXPECT_EQ(dcg.num_da(), 5);
  // Ops: tok/pos/type embeddings, pos_add, type_add, embed_norm (6) + 12 per layer (q, k, v,
  // attn, attn_out, attn_residual, attn_norm, mlp_up, mlp_act, mlp_down, mlp_residual,
  // mlp_norm) = 42; the remote runs every one (all [T, *]).
  EXPECT_EQ(dcg.problem().num_ops(), 42);
  EXPECT_EQ(dcg.nodes().size(), 42u * 2 + 2);
  // At T = 4, [T,F] = 8192 bytes = [T,H] at 16 tokens, but each length has 2 sizes: still 5.
  EXPECT_EQ(fixture_dcg("bert-tiny", "cpuN,remote:127.0.0.1:7001", 4).num_da(), 5);
}

TEST(AssignDcg, ProviderLists) {
  const std::vector<Provider> p = parse_providers("cpuN,remote:h:7001:linear,attention,cpu1");
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(p[0].kind, ProviderKind::CpuN);
  EXPECT_EQ(p[1].kind, ProviderKind::Remote);
  EXPECT_EQ(p[1].address, "h:7001");
  EXPECT_EQ(p[1].device, 1);
  EXPECT_EQ(p[1].spec, "remote:h:7001:linear,attention");
  ASSERT_TRUE(p[1].kinds.has_value());
  EXPECT_EQ(p[1].kinds->size(), 2u);
  EXPECT_EQ(p[2].kind, ProviderKind::Cpu1);
  EXPECT_EQ(p[2].device, 0);
  EXPECT_EQ(remote_addresses(p), std::vector<std::string>{"h:7001"});
}

TEST(AssignDcg, TheChosenPlanListsRemotesOnlyWhenItUsesOne) {
  // gpt2-tiny over cpuN, a remote and cpu1: an assignment with no op on the remote is written
  // without it (one device, cpuN and cpu1 renumbered); one remote op keeps the provider list.
  const Model m = Model::load(huddle::testing::fixture_model("gpt2-tiny"));
  const std::vector<Provider> providers = parse_providers("cpuN,remote:h:7001,cpu1");
  const PlanModel facts = PlanModel::of(m.config());
  Assignment a(m.graph().ops().size(), 2);
  a[0] = 0;
  const Plan local = trimmed_assignment_plan(facts, m.graph(), providers, a);
  EXPECT_EQ(local.num_devices(), 1);
  ASSERT_TRUE(local.assignment.has_value());
  EXPECT_EQ(local.assignment->providers, (std::vector<std::string>{"cpuN", "cpu1"}));
  EXPECT_EQ(local.assignment->ops.at(m.graph().ops()[0].name), 0);
  EXPECT_EQ(local.assignment->ops.at(m.graph().ops()[1].name), 1);
  a[1] = 1;
  const Plan remote = trimmed_assignment_plan(facts, m.graph(), providers, a);
  EXPECT_EQ(remote.num_devices(), 2);
  EXPECT_EQ(remote.assignment->providers, provider_specs(providers));
  EXPECT_EQ(remote.assignment->ops.at(m.graph().ops()[1].name), 1);
}

TEST(AssignDcg, BadProviderListsAreNamed) {
  auto message = [](const std::string& list) {
    try {
      parse_providers(list);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("").find("empty"), std::string::npos);
  EXPECT_NE(message(",").find("empty"), std::string::npos);
  EXPECT_NE(message("gpu").find("unknown provider"), std::string::npos);
  EXPECT_NE(message("cpuN,linear").find("'linear'"), std::string::npos);
  EXPECT_NE(message("remote:h").find("remote:HOST:PORT"), std::string::npos);
  EXPECT_NE(message("remote:h:99999").find("remote:HOST:PORT"), std::string::npos);
  EXPECT_NE(message("cpuN:convolution").find("unknown op kind 'convolution'"), std::string::npos);
  EXPECT_NE(message("cpuN,cpuN").find("twice"), std::string::npos);
}

TEST(AssignDcg, AnOpNoProviderRunsIsAnError) {
  const Model m = Model::load(huddle::testing::fixture_model("gpt2-tiny"));
  try {
    make_problem(m.graph(), parse_providers("cpuN:linear"), 8);
    FAIL() << "no error";
  } catch (const PlanError& e) {
    EXPECT_NE(std::string(e.what()).find("op 'tok_embed' (embedding)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace huddle::assign
