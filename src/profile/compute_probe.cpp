#include "profile/compute_probe.h"

#include "core/error.h"
#include "core/kquant.h"
#include "core/quant.h"
#include "core/tensor.h"
#include "kernels/kernels.h"
#include "kernels/packed_weight.h"
#include "net/channel_cost.h"
#include "profile/cpu_quota.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <utility>

#include <time.h>

namespace huddle::profile {
namespace {

// FLOPs per element the cost model charges (planner/cost_model.cpp): the fit must use the same
// definitions for its curves to mean the same thing there.
constexpr double kNormFlops = 8, kResidualFlops = 1, kActivationFlops = 10;
// Bytes of weights that overflow any last-level cache of the devices we target.
constexpr std::int64_t kCacheFlushBytes = std::int64_t{96} << 20;

using Clock = std::chrono::steady_clock;

Tensor random_tensor(Shape shape, std::mt19937& rng) {
  Tensor t = Tensor::empty(DType::F32, std::move(shape));
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  float* p = t.f32();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

// A [rows, cols] weight in `dtype` (not F32) to time kernels on: quantised from random values,
// or random blocks of the types Huddle only reads (the kernels' time does not depend on the
// values).
Tensor random_weight(DType dtype, std::int64_t rows, std::int64_t cols, std::mt19937& rng) {
  if (!can_quantize(dtype)) return random_blocks(rng, dtype, rows, cols, 0.5f);
  return quantize(random_tensor({rows, cols}, rng), dtype);
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// A kernel the probe times, and its FLOPs.
struct TimedKernel {
  std::function<void()> run;
  double flops = 0;
};

// Passes over all the kernels the probe times (after one warm-up pass): at least kMinPasses, then
// more until the budget is spent, at most kMaxPasses.
constexpr int kMinPasses = 4, kMaxPasses = 50;

// Median seconds of each kernel's runs, timed in passes that run every kernel once. The host's
// speed drifts (a shared machine's neighbours: gpt2's prefill on one thread ran 200-300 ms within
// minutes): timed one kernel after the other, those timed in a slow minute would bend the curves;
// in passes every kernel sees every minute. Between two runs of one kernel all others run, which
// also moves their weights through the cache. On one thread the time is this thread's CPU time:
// a sample short beside a CPU quota's period (100 ms) may run whole or be throttled half-way, so
// wall time would be noise; the quota enters through the CPU share instead (measure_cpu_share).
std::vector<double> time_in_passes(const std::vector<TimedKernel>& timed, double budget_s) {
  const bool cpu_clock = kernels::num_threads() == 1;
  const auto now = [&] {
    return cpu_clock ? thread_cpu_seconds()
                     : std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
  };
  for (const TimedKernel& k : timed) k.run();
  std::vector<std::vector<double>> times(timed.size());
  const auto begin = Clock::now();
  for (int pass = 0; pass < kMaxPasses; ++pass) {
    if (pass >= kMinPasses &&
        std::chrono::duration<double>(Clock::now() - begin).count() > budget_s)
      break;
    for (std::size_t i = 0; i < timed.size(); ++i) {
      const double t0 = now();
      timed[i].run();
      times[i].push_back(now() - t0);
    }
  }
  std::vector<double> medians;
  for (std::vector<double>& t : times) {
    std::nth_element(t.begin(), t.begin() + static_cast<std::ptrdiff_t>(t.size() / 2), t.end());
    medians.push_back(std::max(t[t.size() / 2], 1e-9));
  }
  return medians;
}

// The copies of one weight that the linears over it rotate through.
struct WeightCopies {
  Tensor first;              // gives the shapes (F32: [K, N]; others: [N, K])
  std::vector<Tensor> rows;  // F32: the copies
  std::vector<std::shared_ptr<const kernels::PackedWeight>> packed;  // others: the packed copies
  std::size_t next = 0;
};

// The sample shapes: the layer's own GEMMs and attention, and slices of them as a split gives a
// device (a quarter of the heads / columns, a quarter of the rows).
struct GemmShape {
  std::int64_t m, k, n;
};

std::vector<GemmShape> gemm_shapes(const ProbeShapes& s) {
  const std::int64_t qkv = static_cast<std::int64_t>(s.heads + 2 * s.kv_heads) * s.head_dim;
  const std::int64_t q = static_cast<std::int64_t>(s.heads) * s.head_dim;
  std::vector<GemmShape> out;
  for (const std::int64_t m : {s.tokens, std::max<std::int64_t>(1, s.tokens / 4)}) {
    out.push_back({m, s.hidden, qkv});
    out.push_back({m, s.hidden, std::max<std::int64_t>(1, qkv / 4)});
    out.push_back({m, q, s.hidden});
    out.push_back({m, s.hidden, s.ffn});
    out.push_back({m, s.hidden, std::max<std::int64_t>(1, s.ffn / 4)});
    out.push_back({m, s.ffn, s.hidden});
    out.push_back({m, std::max<std::int64_t>(1, s.ffn / 4), s.hidden});
  }
  return out;
}

// Shrinks a dimension so a [k, n] weight fits `max_bytes`.
GemmShape fit_memory(GemmShape g, std::int64_t max_bytes) {
  while (g.k * g.n * 4 > max_bytes && std::max(g.k, g.n) > 16) {
    (g.k >= g.n ? g.k : g.n) /= 2;
  }
  return g;
}

double to_gflops(double flops, double seconds) {
  return flops / seconds / 1e9;
}

double median_of_three(double a, double b, double c) {
  return std::max(std::min(a, b), std::min(std::max(a, b), c));
}

// The fraction of wall time this thread gets to run: CPU time over wall time while spinning.
double measure_cpu_share(double seconds) {
  const auto start = Clock::now();
  const double cpu0 = thread_cpu_seconds();
  volatile double sink = 1;
  while (std::chrono::duration<double>(Clock::now() - start).count() < seconds) {
    for (int i = 0; i < 10000; ++i) sink = sink * 1.0000001 + 1e-9;
  }
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  return std::clamp((thread_cpu_seconds() - cpu0) / wall, 0.01, 1.0);
}

}  // namespace

ProbeShapes ProbeShapes::of(const ModelConfig& c, std::int64_t tokens) {
  ProbeShapes s;
  s.hidden = c.hidden;
  s.ffn = c.ffn;
  s.heads = c.heads;
  s.kv_heads = c.kv_heads;
  s.head_dim = c.head_dim;
  s.tokens = tokens;
  s.causal = c.causal;
  s.vocab = c.vocab_size;
  s.gated = c.activation == Activation::Silu;
  return s;
}

ProbeShapes ProbeShapes::of(const ModelConfig& c, const Graph& graph, std::int64_t tokens) {
  ProbeShapes s = of(c, tokens);
  std::map<DType, std::size_t> bytes;
  for (const Op& op : graph.ops()) {
    if (op.kind != OpKind::Linear || op.inputs.size() < 2) continue;
    const Value& w = graph.values()[static_cast<std::size_t>(op.inputs[1])];
    if (w.kind == ValueKind::Weight) bytes[w.dtype] += weight_value_bytes(w);
  }
  const auto most = std::max_element(
      bytes.begin(), bytes.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  if (most != bytes.end()) s.weight_dtype = most->first;
  return s;
}

nlohmann::json ProbeShapes::to_json() const {
  return {{"hidden", hidden},     {"ffn", ffn},
          {"heads", heads},       {"kv_heads", kv_heads},
          {"head_dim", head_dim}, {"tokens", tokens},
          {"causal", causal},     {"gated", gated},
          {"vocab", vocab},       {"weight_dtype", std::string(dtype_name(weight_dtype))}};
}

ProbeShapes ProbeShapes::from_json(const nlohmann::json& j) {
  ProbeShapes s;
  s.hidden = j.at("hidden").get<std::int64_t>();
  s.ffn = j.at("ffn").get<std::int64_t>();
  s.heads = j.at("heads").get<int>();
  s.kv_heads = j.at("kv_heads").get<int>();
  s.head_dim = j.at("head_dim").get<int>();
  s.tokens = j.at("tokens").get<std::int64_t>();
  s.causal = j.at("causal").get<bool>();
  s.gated = j.at("gated").get<bool>();
  s.vocab = j.at("vocab").get<std::int64_t>();
  if (j.contains("weight_dtype")) {
    const auto dtype = parse_dtype(j.at("weight_dtype").get<std::string>());
    if (!dtype || !is_weight_dtype(*dtype)) throw InputError("probe shapes: unknown weight dtype");
    s.weight_dtype = *dtype;
  }
  const auto in = [](std::int64_t v, std::int64_t hi) { return v >= 1 && v <= hi; };
  if (!in(s.hidden, 1 << 16) || !in(s.ffn, 1 << 18) || !in(s.heads, 1024) ||
      !in(s.kv_heads, s.heads) || s.heads % s.kv_heads != 0 || !in(s.head_dim, 1024) ||
      !in(s.tokens, 1 << 16) || s.vocab < 0 || s.vocab > (1 << 22)) {
    throw InputError("probe shapes out of range");
  }
  return s;
}

nlohmann::json ComputeProfile::to_json() const {
  const auto curve = [](const OpCurve& c) {
    return nlohmann::json{{"gflops", c.gflops}, {"overhead_us", c.overhead_s * 1e6}};
  };
  nlohmann::json op_curves = {{"gemm", curve(curves.gemm)},
                              {"attention", curve(curves.attention)},
                              {"elementwise", curve(curves.elementwise)},
                              {"gemv", curve(curves.gemv)}};
  if (curves.gemm_weights.gflops > 0) op_curves["gemm_weights"] = curve(curves.gemm_weights);
  return {
      {"op_curves", std::move(op_curves)},
      {"gflops_by_block",
       {{"attention", attention_gflops}, {"mlp", mlp_gflops}, {"connection", connection_gflops}}},
      {"fit_error", fit_error},
      {"cpu_share", cpu_share},
      {"quota_share", quota_share},
      {"comm_cpu_ns_per_byte", comm_cpu_ns_per_byte},
      {"samples", samples},
      {"seconds", seconds},
      {"threads", threads}};
}

ComputeProfile ComputeProfile::from_json(const nlohmann::json& j) {
  const auto curve = [](const nlohmann::json& c) {
    const OpCurve fitted{c.at("gflops").get<double>(), c.at("overhead_us").get<double>() * 1e-6};
    if (!(fitted.gflops > 0) || !std::isfinite(fitted.gflops) || !(fitted.overhead_s >= 0) ||
        !std::isfinite(fitted.overhead_s)) {
      throw InputError("a cost curve needs gflops > 0 and overhead_us >= 0");
    }
    return fitted;
  };
  ComputeProfile p;
  const nlohmann::json& c = j.at("op_curves");
  p.curves = OpCurves{curve(c.at("gemm")), curve(c.at("attention")), curve(c.at("elementwise")),
                      curve(c.at("gemv"))};
  if (c.contains("gemm_weights")) p.curves.gemm_weights = curve(c.at("gemm_weights"));
  const nlohmann::json& b = j.at("gflops_by_block");
  p.attention_gflops = b.at("attention").get<double>();
  p.mlp_gflops = b.at("mlp").get<double>();
  p.connection_gflops = b.at("connection").get<double>();
  p.fit_error = j.at("fit_error").get<double>();
  p.cpu_share = j.at("cpu_share").get<double>();
  p.quota_share = j.value("quota_share", 0.0);
  if (!(p.quota_share >= 0 && p.quota_share <= 1))
    throw InputError("a compute profile's quota_share must be in [0, 1]");
  p.comm_cpu_ns_per_byte = j.value("comm_cpu_ns_per_byte", 0.0);
  if (!(p.comm_cpu_ns_per_byte >= 0) || !std::isfinite(p.comm_cpu_ns_per_byte))
    throw InputError("a compute profile's comm_cpu_ns_per_byte must be >= 0");
  p.samples = j.at("samples").get<int>();
  p.seconds = j.at("seconds").get<double>();
  p.threads = j.at("threads").get<int>();
  return p;
}

void derive_block_speeds(const ProbeShapes& s, ComputeProfile& p) {
  const double T = static_cast<double>(s.tokens), H = static_cast<double>(s.hidden),
               F = static_cast<double>(s.ffn), hd = s.head_dim;
  const double q = s.heads * hd, kv = s.kv_heads * hd, in_linears = s.gated ? 2 : 1;
  const OpCurves& c = p.curves;
  // Attention block: q, k, v, attention, out projection.
  const double qkv_flops = 2 * T * H * (q + 2 * kv), core_flops = 4 * T * T * q,
               out_flops = 2 * T * q * H;
  const OpCurve& weights = c.weights_of_gemm();
  p.attention_gflops =
      to_gflops(qkv_flops + core_flops + out_flops,
                3 * c.gemm.overhead_s + (qkv_flops + out_flops) / (c.gemm.gflops * 1e9) +
                    weights.seconds((qkv_flops + out_flops) / T) + c.attention.seconds(core_flops));
  // MLP block: up (and gate), activation, down.
  const double up_flops = 2 * T * H * F * in_linears,
               act_flops = kActivationFlops * T * F * in_linears, down_flops = 2 * T * F * H;
  p.mlp_gflops = to_gflops(
      up_flops + act_flops + down_flops,
      (in_linears + 1) * c.gemm.overhead_s + (up_flops + down_flops) / (c.gemm.gflops * 1e9) +
          weights.seconds((up_flops + down_flops) / T) + c.elementwise.seconds(act_flops));
  // Connection blocks: two norms and two residual adds per layer.
  const double conn_flops = T * H * (2 * kNormFlops + 2 * kResidualFlops);
  p.connection_gflops = to_gflops(
      conn_flops, 4 * c.elementwise.overhead_s + conn_flops / (c.elementwise.gflops * 1e9));
}

ComputeProfile probe_compute(const ProbeShapes& s, double budget_s, std::int64_t max_bytes) {
  const auto start = Clock::now();
  std::mt19937 rng(1234);
  const std::vector<GemmShape> gemms = gemm_shapes(s);
  const std::int64_t per_buffer = std::max<std::int64_t>(max_bytes / 4, 1 << 16);
  std::vector<TimedKernel> timed;  // every sample, timed together in passes (below)

  // Linears: in a forward pass every linear reads weights no other op has touched since the last
  // step, so they come from memory, not cache: each run takes the next of a weight's copies, and
  // the copies of every weight shape together overflow the last-level cache (within the memory
  // budget, which they share); the passes run the other shapes in between. The linears over one
  // weight (all rows, a quarter of them, one row) share its copies. One-row linears (decode
  // steps, the head) are bound by that read; the head's own shape is measured too.
  // F32 weights are timed InOut (the GEMM on [K, N]); others OutIn [N, K] in their dtype and
  // packed, as an executor binds a model's weights (kernels/packed_weight.h).
  const DType dtype = s.weight_dtype;
  const bool f32 = dtype == DType::F32;
  const kernels::WeightLayout layout =
      f32 ? kernels::WeightLayout::InOut : kernels::WeightLayout::OutIn;
  const std::int64_t granule = dtype_block_elems(dtype);
  std::vector<GemmShape> linears;  // m x k x n; m = 1: the GEMVs
  for (const GemmShape& g : gemms) {
    if (g.m == s.tokens) linears.push_back({1, g.k, g.n});
  }
  if (s.vocab > 0) linears.push_back({1, s.hidden, s.vocab});
  const std::size_t gemv_count = linears.size();
  linears.insert(linears.end(), gemms.begin(), gemms.end());
  std::map<std::pair<std::int64_t, std::int64_t>, std::shared_ptr<WeightCopies>> weights;
  for (const GemmShape& g : linears) weights[{g.k, g.n}] = nullptr;
  const std::int64_t per_weight = per_buffer / static_cast<std::int64_t>(weights.size());
  const std::int64_t flush_per_weight =
      std::min(kCacheFlushBytes, per_buffer) / static_cast<std::int64_t>(weights.size());
  for (auto& [kn, copies] : weights) {
    GemmShape g = fit_memory({1, kn.first, kn.second}, per_weight);
    g.k = std::max(granule, g.k / granule * granule);  // whole blocks per row
    copies = std::make_shared<WeightCopies>();
    copies->first = f32 ? random_tensor({g.k, g.n}, rng) : random_weight(dtype, g.n, g.k, rng);
    const auto weight_bytes = static_cast<std::int64_t>(dtype_bytes(dtype, g.k * g.n));
    const std::int64_t count =
        std::clamp<std::int64_t>((flush_per_weight + weight_bytes - 1) / weight_bytes, 1,
                                 std::max<std::int64_t>(1, per_weight / weight_bytes));
    // The copies the runs rotate through: of the rows (F32), or of the packed form only (the
    // kernel reads nothing else; `first` gives the shapes).
    for (std::int64_t c = 0; c < count; ++c) {
      if (f32) copies->rows.push_back(c == 0 ? copies->first : copies->first.clone());
      if (!f32) copies->packed.push_back(kernels::PackedWeight::pack(copies->first, layout));
    }
  }
  std::vector<double> weight_flops;  // per linear, 2·K·N of the weight it ran on
  for (std::size_t i = 0; i < linears.size(); ++i) {
    const std::shared_ptr<WeightCopies> w = weights.at({linears[i].k, linears[i].n});
    const std::int64_t m = linears[i].m, k = w->first.dim(f32 ? 0 : 1),
                       n = w->first.dim(f32 ? 1 : 0);
    auto x = std::make_shared<Tensor>(random_tensor({m, k}, rng));
    auto y = std::make_shared<Tensor>(Tensor::empty(DType::F32, {m, n}));
    weight_flops.push_back(2.0 * static_cast<double>(k * n));
    timed.push_back({[w, x, y, f32, layout] {
                       const std::size_t c = w->next++ % std::max(w->rows.size(), w->packed.size());
                       if (f32) {
                         kernels::linear(*x, w->rows[c], layout, nullptr, *y);
                       } else {
                         kernels::linear(*x, w->first, w->packed[c].get(), layout, nullptr, *y);
                       }
                     },
                     2.0 * static_cast<double>(m * k * n)});
  }

  // Attention: all heads and a quarter of them, over all rows and a quarter of them.
  const std::size_t attention_first = timed.size();
  for (const int heads : {s.heads, std::max(1, s.heads / 4)}) {
    const int kv_heads = std::max(1, heads * s.kv_heads / s.heads);
    const int group = s.heads / s.kv_heads;
    const int q_heads = kv_heads * group;  // whole groups, as a split into kv groups gives
    for (const std::int64_t rows : {s.tokens, std::max<std::int64_t>(1, s.tokens / 4)}) {
      auto q = std::make_shared<Tensor>(
          random_tensor({rows, static_cast<std::int64_t>(q_heads) * s.head_dim}, rng));
      auto k = std::make_shared<Tensor>(
          random_tensor({rows, static_cast<std::int64_t>(kv_heads) * s.head_dim}, rng));
      auto v = std::make_shared<Tensor>(
          random_tensor({rows, static_cast<std::int64_t>(kv_heads) * s.head_dim}, rng));
      auto out = std::make_shared<Tensor>(Tensor::empty(DType::F32, q->shape()));
      const int head_dim = s.head_dim;
      const bool causal = s.causal;
      timed.push_back(
          {[=] { kernels::attention(*q, *k, *v, q_heads, kv_heads, head_dim, 0, causal, *out); },
           4.0 * static_cast<double>(rows * rows) * q_heads * s.head_dim});
    }
  }

  // Element-wise: a norm and a residual add over the hidden state, the activation over the FFN
  // intermediate, at all rows and a quarter of them.
  const std::size_t elementwise_first = timed.size();
  const std::int64_t ffn = std::min(s.ffn, std::max<std::int64_t>(16, per_buffer / 4 / s.tokens));
  for (const std::int64_t rows : {s.tokens, std::max<std::int64_t>(1, s.tokens / 4)}) {
    auto a = std::make_shared<Tensor>(random_tensor({rows, s.hidden}, rng));
    auto b = std::make_shared<Tensor>(random_tensor({rows, s.hidden}, rng));
    auto gamma = std::make_shared<Tensor>(random_tensor({s.hidden}, rng));
    auto beta = std::make_shared<Tensor>(random_tensor({s.hidden}, rng));
    auto f = std::make_shared<Tensor>(random_tensor({rows, ffn}, rng));
    auto y = std::make_shared<Tensor>(Tensor::empty(DType::F32, {rows, s.hidden}));
    auto fy = std::make_shared<Tensor>(Tensor::empty(DType::F32, {rows, ffn}));
    const double elements = static_cast<double>(rows * s.hidden);
    const bool gated = s.gated;
    timed.push_back(
        {[=] { kernels::layer_norm(*a, *gamma, *beta, 1e-5f, *y); }, kNormFlops * elements});
    timed.push_back({[=] { kernels::add(*a, *b, *y); }, kResidualFlops * elements});
    timed.push_back({[=] {
                       if (gated) {
                         kernels::silu(*f, *fy);
                       } else {
                         kernels::gelu_tanh(*f, *fy);
                       }
                     },
                     kActivationFlops * static_cast<double>(rows * ffn)});
  }

  const std::vector<double> seconds = time_in_passes(timed, budget_s);
  const auto samples_of = [&](std::size_t first, std::size_t last) {
    std::vector<Sample> out;
    for (std::size_t i = first; i < last; ++i) out.push_back({timed[i].flops, seconds[i]});
    return out;
  };
  const std::vector<Sample> gemv_samples = samples_of(0, gemv_count);
  const std::vector<Sample> attention_samples = samples_of(attention_first, elementwise_first);
  const std::vector<Sample> elementwise_samples = samples_of(elementwise_first, timed.size());
  // A multi-row linear costs what it spends on its weights per call plus its multiply-adds: both
  // fitted over the shapes at two row counts, so the cost model can charge a linear of few rows
  // over large weights (sequence splits) right.
  const OpCurve read = fit_curve(gemv_samples);
  std::vector<LinearSample> linear_samples;
  for (std::size_t i = gemv_count; i < linears.size(); ++i)
    linear_samples.push_back({timed[i].flops, weight_flops[i], seconds[i]});
  const LinearCurves linear = fit_linear_curves(linear_samples, read);

  ComputeProfile p;
  p.curves = OpCurves{linear.gemm, fit_curve(attention_samples), fit_curve(elementwise_samples),
                      read, linear.weights};
  std::vector<double> errors;
  for (const auto& [curve, samples] : {std::pair{p.curves.attention, &attention_samples},
                                       std::pair{p.curves.elementwise, &elementwise_samples},
                                       std::pair{p.curves.gemv, &gemv_samples}}) {
    const std::vector<double> e = relative_errors(curve, *samples);
    errors.insert(errors.end(), e.begin(), e.end());
  }
  for (const LinearSample& l : linear_samples) {
    const double predicted = linear.gemm.seconds(l.flops) + linear.weights.seconds(l.weight_flops);
    errors.push_back(std::abs(predicted - l.seconds) / l.seconds);
  }
  std::nth_element(errors.begin(), errors.begin() + static_cast<std::ptrdiff_t>(errors.size() / 2),
                   errors.end());
  p.fit_error = errors[errors.size() / 2];
  p.samples = static_cast<int>(errors.size());
  // On one thread the samples are CPU time: what the device delivers is that at its CPU share,
  // the median of three windows of two CFS periods each (a quota shows up whole; a burst of
  // other load in one window does not decide it).
  p.cpu_share =
      median_of_three(measure_cpu_share(0.2), measure_cpu_share(0.2), measure_cpu_share(0.2));
  if (kernels::num_threads() == 1) p.curves.scale(p.cpu_share);
  p.threads = kernels::num_threads();
  p.quota_share = cpu_quota_share(p.threads);
  // 1 MiB messages (a collective's chunk) through a loopback connection, CPU time turned into
  // wall time at the CPU share.
  p.comm_cpu_ns_per_byte =
      net::measure_channel_cpu_s_per_byte(std::size_t{1} << 20, 0.05) * 1e9 / p.cpu_share;
  derive_block_speeds(s, p);
  p.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return p;
}

}  // namespace huddle::profile
