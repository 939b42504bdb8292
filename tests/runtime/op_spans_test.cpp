// Op spans of a step (runtime/op_spans.h): the wire codec (names once per session, malformed
// payloads refused), and a two-device session over the in-process transport whose primary asks
// for them on some steps only: those steps' reports carry every device's ops, the others none.
#include "runtime/op_spans.h"

#include "core/error.h"
#include "model/model.h"
#include "net/inproc_transport.h"
#include "plan/lowering.h"
#include "planner/strategies.h"
#include "runtime/executor.h"
#include "runtime/session.h"
#include "test_util.h"

#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <thread>

namespace huddle {
namespace {

std::vector<OpSpan> sample_op_spans() {
  return {{"blk.0.qkv", false, 1.5, 20.25},
          {"blk.0.all_reduce", true, 22, 7.5},
          {"blk.0.qkv", false, 30, 19.75}};
}

void expect_same_op_spans(const std::vector<OpSpan>& got, const std::vector<OpSpan>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, want[i].name) << i;
    EXPECT_EQ(got[i].comm, want[i].comm) << i;
    EXPECT_FLOAT_EQ(static_cast<float>(got[i].start_us), static_cast<float>(want[i].start_us));
    EXPECT_FLOAT_EQ(static_cast<float>(got[i].duration_us),
                    static_cast<float>(want[i].duration_us));
  }
}

TEST(OpSpans, NamesTravelOnceAndSpansRoundTrip) {
  OpSpanEncoder encoder;
  OpSpanDecoder decoder;
  const std::vector<OpSpan> spans = sample_op_spans();
  const std::vector<std::byte> first = encoder.encode(spans);
  const std::vector<std::byte> second = encoder.encode(spans);
  // The second step refers to the names the first sent: two names fewer on the wire.
  EXPECT_EQ(first.size() - second.size(), (3 + 9) + (3 + 16));
  expect_same_op_spans(decoder.decode(first, "peer"), spans);
  expect_same_op_spans(decoder.decode(second, "peer"), spans);
  EXPECT_TRUE(decoder.decode(encoder.encode({}), "peer").empty());
}

TEST(OpSpans, MalformedPayloadsAreRefused) {
  OpSpanEncoder encoder;
  const std::vector<std::byte> good = encoder.encode(sample_op_spans());
  auto refused = [](std::vector<std::byte> payload, const std::string& what) {
    OpSpanDecoder decoder;
    try {
      decoder.decode(payload, "worker-7");
      ADD_FAILURE() << "accepted: " << what;
    } catch (const TransportError& e) {
      EXPECT_TRUE(testing::contains(e.what(), "worker-7")) << e.what();
    }
  };
  refused(std::vector<std::byte>(good.begin(), good.end() - 1), "cut short");
  std::vector<std::byte> longer = good;
  longer.push_back(std::byte{0});
  refused(longer, "a trailing byte");
  // Spans whose names were never sent (a decoder that missed the first step).
  OpSpanEncoder seen;
  seen.encode(sample_op_spans());
  refused(seen.encode(sample_op_spans()), "ids of names never sent");
  std::vector<std::byte> huge(8, std::byte{0});
  const std::uint32_t many = 0xffffffffu;
  std::memcpy(huge.data(), &many, sizeof many);
  refused(huge, "more names than the payload holds");
  std::vector<std::byte> negative = good;
  const float minus = -1;
  std::memcpy(negative.data() + negative.size() - sizeof minus, &minus, sizeof minus);
  refused(negative, "a negative duration");
}

TEST(OpSpans, AStepReportCarriesEveryDevicesOpsWhenAsked) {
  const Model model = Model::load(testing::fixture_model("gpt2-tiny"));
  const Plan plan = make_plan("megatron", model.config(), {"a", "b"}, {});
  net::InprocCluster cluster(2);
  std::vector<Program> programs;
  std::vector<WeightMap> weights;
  for (int r = 0; r < 2; ++r) {
    programs.push_back(lower(model.graph(), model.config(), plan, r));
    weights.push_back(extract_weights(programs.back(), model.weights()));
    localize_weights(programs.back());
  }
  std::exception_ptr worker_error;
  std::thread worker([&] {
    try {
      Executor executor(programs[1].graph, weights[1], model.config().max_positions,
                        DeviceGroup{&cluster.rank(1), plan.token_shares});
      StepMeter meter;
      executor.set_observer(meter.observer());
      follow_primary(cluster.rank(1), executor, &meter);
    } catch (...) {
      worker_error = std::current_exception();
      cluster.rank(1).close();
    }
  });
  {
    Executor executor(programs[0].graph, weights[0], model.config().max_positions,
                      DeviceGroup{&cluster.rank(0), plan.token_shares});
    StepMeter meter;
    executor.set_observer(meter.observer());
    PrimarySession session(cluster.rank(0), executor, &meter);
    const std::vector<std::int32_t> prompt = {1, 2, 3, 4};
    const std::vector<std::int32_t> next = {5};
    session.forward(prompt, false);
    for (const StepReport& r : session.last_reports()) EXPECT_TRUE(r.ops.empty());
    session.set_op_spans(true);
    for (int step = 0; step < 2; ++step) {  // the second step's names come from the first's
      session.forward(next, false);
      const std::vector<StepReport>& reports = session.last_reports();
      ASSERT_EQ(reports.size(), 2u);
      for (std::size_t d = 0; d < reports.size(); ++d) {
        const std::vector<OpSpan>& ops = reports[d].ops;
        ASSERT_FALSE(ops.empty()) << "device " << d;
        int comm = 0, compute = 0;
        double end_us = 0;
        for (const OpSpan& op : ops) {
          EXPECT_FALSE(op.name.empty());
          EXPECT_GE(op.start_us, 0);
          EXPECT_GE(op.duration_us, 0);
          end_us = std::max(end_us, op.start_us + op.duration_us);
          (op.comm ? comm : compute) += 1;
        }
        // Megatron: every layer computes its part and all-reduces it.
        EXPECT_GT(compute, 0) << "device " << d;
        EXPECT_GT(comm, 0) << "device " << d;
        // Within the step as that device measured it (its wall time, plus rounding).
        EXPECT_LE(end_us, reports[d].wall_s * 1e6 + 1) << "device " << d;
      }
    }
    session.set_op_spans(false);
    session.forward(next, false);
    for (const StepReport& r : session.last_reports()) EXPECT_TRUE(r.ops.empty());
    session.end();
  }
  worker.join();
  if (worker_error) std::rethrow_exception(worker_error);
}

}  // namespace
}  // namespace huddle
