#include "planner/cost_model.h"

#include "planner/constants.h"
#include "planner/pipeline_planners.h"

#include "core/error.h"
#include "plan/pipeline_units.h"
#include "plan/split.h"

#include <fmt/format.h>

#include <algorithm>

namespace huddle {
namespace {

// FLOPs per element of the element-wise ops (norm: mean, variance, scale, shift; GELU/SiLU).
constexpr double kNormFlops = 8, kResidualFlops = 1, kActivationFlops = 10, kRopeFlops = 6;

double step_time(const ClusterSpec& cluster, const std::vector<int>& ring,
                 const std::vector<double>& bytes_from) {
  double worst = 0;
  const std::size_t n = ring.size();
  for (std::size_t r = 0; r < n; ++r) {
    if (bytes_from[r] <= 0) continue;
    // In a ring step every device sends and receives at once.
    worst =
        std::max(worst, cluster.link(ring[r], ring[(r + 1) % n]).duplex_transfer_s(bytes_from[r]));
  }
  return worst;
}

// Each rank r sends part (r - s - shift) mod n in step s; shift 0: all-gather, 1: reduce-scatter.
double ring_time(const ClusterSpec& cluster, const std::vector<int>& ring,
                 const std::vector<double>& part_bytes, int shift) {
  const auto n = static_cast<int>(ring.size());
  double total = 0;
  std::vector<double> sent(ring.size());
  for (int s = 0; s < n - 1; ++s) {
    for (int r = 0; r < n; ++r) {
      sent[static_cast<std::size_t>(r)] =
          part_bytes[static_cast<std::size_t>(((r - s - shift) % n + n) % n)];
    }
    total += step_time(cluster, ring, sent);
  }
  return total;
}

// Bulk-synchronous replay of one step: compute accumulates per device until a collective.
class Simulator {
 public:
  Simulator(const ModelConfig& c, const ModelFootprint& f, bool rotary, WireFormat wire,
            const Plan& plan, const ClusterSpec& cluster, std::int64_t tokens, std::int64_t context)
      : c_(c),
        f_(f),
        rotary_(rotary),
        wire_(wire),
        plan_(plan),
        cluster_(cluster),
        tokens_(tokens),
        context_(context) {
    n_ = plan.num_devices();
    for (const std::string& name : plan.devices) ring_.push_back(cluster.index_of(name));
    rows_ = split_proportional(tokens, plan.token_shares);
    pending_.assign(static_cast<std::size_t>(n_), 0.0);
    devices_.resize(static_cast<std::size_t>(n_));
    for (int d = 0; d < n_; ++d) {
      devices_[static_cast<std::size_t>(d)].name = plan.devices[static_cast<std::size_t>(d)];
    }
  }

  double run(std::vector<DevicePrediction>* out) {
    const double H = static_cast<double>(c_.hidden);
    ResidualLayout prev = plan_.layers.front().residual;
    for (std::size_t l = 0; l < plan_.layers.size(); ++l) {
      const LayerPlan& lp = plan_.layers[l];
      const bool tok = lp.residual == ResidualLayout::Tokens;
      if (l == 0) embedding(tok);
      if (prev == ResidualLayout::Tokens && !tok) collective(all_gather(H), {});
      prev = lp.residual;
      each([&](int d) { return conn(d, tok, H * kNormFlops, 1); });
      attention(lp, tok);
      each([&](int d) { return conn(d, tok, H * (kResidualFlops + kNormFlops), 2); });
      mlp(lp, tok);
      each([&](int d) { return conn(d, tok, H * kResidualFlops, 1); });
    }
    const bool tok = plan_.layers.back().residual == ResidualLayout::Tokens;
    each([&](int d) { return conn(d, tok, H * kNormFlops, 1); });
    if (plan_.vocab.empty() || f_.head_outputs <= 0) {
      head_on_primary(tok);
    } else {
      head_by_vocab(tok);
    }
    latency_ += *std::max_element(pending_.begin(), pending_.end());
    bool split = false;
    for (const LayerPlan& lp : plan_.layers) {
      split = split || lp.residual == ResidualLayout::Tokens ||
              lp.attention == BlockSplit::Tokens || lp.mlp == BlockSplit::Tokens;
    }
    for (int d = 0; d < n_; ++d)
      devices_[static_cast<std::size_t>(d)].tokens = split ? rows(d) : tokens_;
    if (out) *out = devices_;
    return latency_;
  }

 private:
  std::int64_t rows(int d) const { return rows_[static_cast<std::size_t>(d)]; }

  // `ops` linears of `block` over `rows` rows totalling `flops` FLOPs on device d.
  double linear_time(int d, BlockType block, double rows, double flops, int ops = 1) const {
    if (flops <= 0) return 0;
    return cluster_.device(ring_[static_cast<std::size_t>(d)])
        .linear_seconds(block, rows, flops, ops);
  }

  // Seconds device d spends on `ops` ops of class `op` in a `block` totalling `flops`.
  double op_time(int d, OpClass op, BlockType block, double flops, int ops = 1) const {
    if (flops <= 0) return 0;
    return cluster_.device(ring_[static_cast<std::size_t>(d)]).op_seconds(op, block, flops, ops);
  }

  // RoPE over `elements` values of q and k (Llama); other architectures have none.
  double rope(int d, double elements) const {
    return rotary_
               ? op_time(d, OpClass::Elementwise, BlockType::Attention, kRopeFlops * elements, 2)
               : 0.0;
  }

  // `ops` element-wise ops of a connection block over the device's rows.
  double conn(int d, bool token_split, double flops_per_row, int ops) const {
    const double r = static_cast<double>(token_split ? rows(d) : tokens_);
    return op_time(d, OpClass::Elementwise, BlockType::Connection, r * flops_per_row, ops);
  }

  template <typename F>
  void each(F seconds) {
    for (int d = 0; d < n_; ++d) {
      const double t = seconds(d);
      pending_[static_cast<std::size_t>(d)] += t;
      devices_[static_cast<std::size_t>(d)].compute_s += t;
    }
  }

  std::vector<double> parts(double width) const {
    std::vector<double> b;
    const double bytes = wire_bytes_per_value(wire_, static_cast<std::int64_t>(width));
    for (int d = 0; d < n_; ++d) b.push_back(static_cast<double>(rows(d)) * width * bytes);
    return b;
  }
  double all_gather(double width) const { return ring_all_gather_s(cluster_, ring_, parts(width)); }
  double reduce_scatter(double width) const {
    return ring_reduce_scatter_s(cluster_, ring_, parts(width));
  }
  double all_reduce(double width) const {
    return ring_all_reduce_s(
        cluster_, ring_,
        static_cast<double>(tokens_) * width * wire_bytes_per_value(wire_, kWireAllReduceRow));
  }

  // A collective taking `comm` seconds; `overlapped[d]` is compute device d runs inside it, which
  // hides communication only on a device with a core to spare for it; `tail[d]` (empty: none) is
  // the part of it that can only start once the transfers are done.
  // `moved[d]` (empty: unknown) is the bytes device d sends and receives in it: on a device with
  // no core to spare whose CPU cost per byte is known, that CPU time cannot overlap compute but
  // the rest of the collective (the link) can.
  void collective(double comm, const std::vector<double>& overlapped,
                  const std::vector<double>& tail = {}, const std::vector<double>& moved = {}) {
    double phase = 0;
    for (int d = 0; d < n_; ++d) {
      const auto i = static_cast<std::size_t>(d);
      const double inside = overlapped.empty() ? 0.0 : overlapped[i];
      const double after = tail.empty() ? 0.0 : tail[i];
      const DeviceSpec& device = cluster_.device(ring_[i]);
      // The part of the collective compute cannot hide on this device.
      double busy = 0;
      if (!device.overlaps_communication()) {
        busy = comm;
        if (inside > 0 && !moved.empty() && device.comm_cpu_s_per_byte > 0)
          busy = std::min(comm, moved[i] * device.comm_cpu_s_per_byte);
      }
      const double waiting = comm - busy;  // on the link: overlaps compute
      devices_[i].compute_s += inside;
      devices_[i].comm_s += comm;
      devices_[i].exposed_comm_s += busy + std::max(0.0, waiting - (inside - after));
      phase = std::max(phase, pending_[i] + busy + std::max(waiting, inside - after) + after);
      pending_[i] = 0;
    }
    latency_ += phase;
  }

  // Wire bytes each device sends plus receives in a ring all-gather (shift 0: it never sends its
  // successor's part, receives all but its own) or reduce-scatter (shift 1: it sends all but its
  // own part, receives all but its predecessor's) of `width` columns.
  std::vector<double> ring_moved(double width, int shift) const {
    const std::vector<double> b = parts(width);
    double total = 0;
    for (double x : b) total += x;
    std::vector<double> moved;
    for (int d = 0; d < n_; ++d) {
      const auto not_sent = static_cast<std::size_t>(shift == 0 ? (d + 1) % n_ : d);
      const auto not_received = static_cast<std::size_t>(shift == 0 ? d : (d + n_ - 1) % n_);
      moved.push_back(2 * total - b[not_sent] - b[not_received]);
    }
    return moved;
  }

  // An all-gather of `width` columns whose rows feed linears, `linears(d, rows)` seconds on device
  // d for `rows` rows (Galaxy's overlap, as the executor runs it): device d runs them on its own
  // rows while the ring runs and then on each chunk as it lands (Plan::gather_chunks chunks per
  // part, gather_chunk_rows rows each), so each call reads the weights again, and only the call
  // on the last chunk to arrive (of part d+1) follows the transfers; every chunk beyond a part's
  // first costs each ring step one more message (the link's fixed cost of an exchange).
  template <typename F>
  void gather_into_linears(double width, F linears) {
    if (n_ == 1) return collective(0, {linears(0, static_cast<double>(tokens_))});
    const auto w = static_cast<std::int64_t>(width);
    const std::size_t row_bytes = wire_row_bytes(wire_, w);
    const std::int64_t largest = *std::max_element(rows_.begin(), rows_.end());
    const std::int64_t chunk =
        gather_chunk_rows(largest, plan_.gather_chunks, row_bytes, kRingChunkBytes);
    double message_s = 0;
    for (int d = 0; d < n_; ++d) {
      const LinkSpec& link = cluster_.link(ring_[static_cast<std::size_t>(d)],
                                           ring_[static_cast<std::size_t>((d + 1) % n_)]);
      message_s =
          std::max(message_s, link.duplex_latency_s > 0 ? link.duplex_latency_s : link.latency_s);
    }
    const std::int64_t extra_messages =
        std::max<std::int64_t>(0, (largest + chunk - 1) / chunk - 1);
    const double comm =
        all_gather(width) + static_cast<double>((n_ - 1) * extra_messages) * message_s;
    std::vector<double> inside, tail;
    for (int d = 0; d < n_; ++d) {
      double total = rows(d) > 0 ? linears(d, static_cast<double>(rows(d))) : 0.0;
      for (int p = 0; p < n_; ++p) {
        if (p == d) continue;
        for (std::int64_t b = 0; b < rows(p); b += chunk)
          total += linears(d, static_cast<double>(std::min(chunk, rows(p) - b)));
      }
      // The last part to arrive is d+1's: its last chunk's call follows the transfers.
      const int p = (d + 1) % n_;
      const std::int64_t last_rows = rows(p) == 0 ? 0 : rows(p) - (rows(p) - 1) / chunk * chunk;
      inside.push_back(total);
      tail.push_back(last_rows > 0 ? linears(d, static_cast<double>(last_rows)) : 0.0);
    }
    collective(comm, inside, tail, ring_moved(width, 0));
  }

  // The final rows reach device 0 (straight from each device when split by tokens), which
  // computes the LM head over the last row alone.
  void head_on_primary(bool tok) {
    const double H = static_cast<double>(c_.hidden);
    if (tok && n_ > 1) {
      double t = 0;
      for (int d = 1; d < n_; ++d) {
        const double bytes = static_cast<double>(rows(d)) * H * kF32Bytes;
        if (bytes > 0)
          t = std::max(
              t, cluster_.link(ring_[static_cast<std::size_t>(d)], ring_[0]).transfer_s(bytes));
      }
      collective(t, {});
    }
    if (f_.head_outputs > 0) {
      const double head =
          linear_time(0, BlockType::Connection, 1, 2 * H * static_cast<double>(f_.head_outputs));
      pending_[0] += head;
      devices_[0].compute_s += head;
    }
  }

  // The head split by Plan::vocab (lowering_engine.cpp's head_by_vocab): every device takes the
  // last row (all-gathered first when split by tokens), computes the logits of its vocabulary
  // rows, and sends them straight to device 0 (f32, transfers in parallel).
  void head_by_vocab(bool tok) {
    const double H = static_cast<double>(c_.hidden);
    if (tok && n_ > 1) collective(all_gather(H), {});
    const auto width = [&](int d) {
      const auto [b, e] = plan_.vocab[static_cast<std::size_t>(d)];
      return static_cast<double>(e - b);
    };
    each([&](int d) { return linear_time(d, BlockType::Connection, 1, 2 * H * width(d)); });
    double t = 0;
    for (int d = 1; d < n_; ++d) {
      t = std::max(t, cluster_.link(ring_[static_cast<std::size_t>(d)], ring_[0])
                          .transfer_s(width(d) * kF32Bytes));
    }
    if (n_ > 1) collective(t, {});
  }

  // Compute of a split block part, per device.
  template <typename F>
  std::vector<double> per_device(F seconds) const {
    std::vector<double> t;
    for (int d = 0; d < n_; ++d) t.push_back(seconds(d));
    return t;
  }

  // With several devices the embedding runs on device 0, which then scatters each device its
  // rows (token-split residual) or sends every device all rows (replicated), directly.
  void embedding(bool tok) {
    const double H = static_cast<double>(c_.hidden);
    const double flops = static_cast<double>(tokens_) * H * 2;  // token + position rows
    const double own = op_time(0, OpClass::Elementwise, BlockType::Connection, flops);
    pending_[0] += own;
    devices_[0].compute_s += own;
    if (n_ == 1) return;
    double t = 0;
    for (int d = 1; d < n_; ++d) {
      const double bytes = static_cast<double>(tok ? rows(d) : tokens_) * H * kF32Bytes;
      if (bytes > 0)
        t = std::max(t,
                     cluster_.link(ring_[0], ring_[static_cast<std::size_t>(d)]).transfer_s(bytes));
    }
    collective(t, {});
  }

  void attention(const LayerPlan& lp, bool tok) {
    const double H = static_cast<double>(c_.hidden), hd = c_.head_dim;
    const auto share = [&](int d) { return layer_share(lp, c_, d); };
    if (lp.attention == BlockSplit::Heads) {
      const auto qkv_rows = [&](int d, double rows) {
        const LayerShare s = share(d);
        const double width = static_cast<double>(s.heads + 2 * s.kv_heads) * hd;
        return linear_time(d, BlockType::Attention, rows, 2.0 * rows * H * width, 3);
      };
      if (tok) {
        gather_into_linears(H, qkv_rows);
      } else {
        each([&](int d) { return qkv_rows(d, static_cast<double>(tokens_)); });
      }
      each([&](int d) {
        const LayerShare s = share(d);
        const double T = static_cast<double>(tokens_), h = static_cast<double>(s.heads);
        return op_time(d, OpClass::Attention, BlockType::Attention,
                       4.0 * T * static_cast<double>(context_) * hd * h) +
               rope(d, T * static_cast<double>(s.heads + s.kv_heads) * hd);
      });
      const auto out = per_device([&](int d) {
        return linear_time(
            d, BlockType::Attention, static_cast<double>(tokens_),
            2.0 * static_cast<double>(tokens_) * static_cast<double>(share(d).heads) * hd * H);
      });
      if (tok) {
        collective(reduce_scatter(H), out, {}, ring_moved(H, 1));
      } else {
        each([&](int d) { return out[static_cast<std::size_t>(d)]; });
        collective(all_reduce(H), {});
      }
      return;
    }
    // Split by tokens: whole weights on own rows, keys and values of every token.
    const double q_width = c_.heads * hd, kv_width = c_.kv_heads * hd;
    each([&](int d) {
      const double r = static_cast<double>(rows(d));
      return linear_time(d, BlockType::Attention, r, 2.0 * r * H * (q_width + 2 * kv_width), 3) +
             rope(d, r * (q_width + kv_width));
    });
    if (is_per_element(wire_)) {
      collective(all_gather(2 * kv_width), {});  // one gather of k and v joined (lowering.cpp)
    } else {
      collective(all_gather(kv_width), {});
      collective(all_gather(kv_width), {});
    }
    each([&](int d) {
      const double r = static_cast<double>(rows(d));
      return op_time(d, OpClass::Attention, BlockType::Attention,
                     4.0 * r * static_cast<double>(context_) * q_width) +
             linear_time(d, BlockType::Attention, r, 2.0 * r * q_width * H);
    });
    if (!tok) collective(all_gather(H), {});
  }

  void mlp(const LayerPlan& lp, bool tok) {
    const double H = static_cast<double>(c_.hidden);
    const double in_linears = f_.gated_mlp ? 2.0 : 1.0;
    if (lp.mlp == BlockSplit::Columns) {
      const auto cols = [&](int d) { return static_cast<double>(layer_share(lp, c_, d).columns); };
      const double T = static_cast<double>(tokens_);
      const auto up_rows = [&](int d, double rows) {
        return linear_time(d, BlockType::Mlp, rows, 2.0 * rows * H * cols(d) * in_linears,
                           static_cast<int>(in_linears));
      };
      if (tok) {
        gather_into_linears(H, up_rows);
      } else {
        each([&](int d) { return up_rows(d, T); });
      }
      each([&](int d) {
        return op_time(d, OpClass::Elementwise, BlockType::Mlp,
                       kActivationFlops * T * cols(d) * in_linears, static_cast<int>(in_linears));
      });
      const auto down = per_device(
          [&](int d) { return linear_time(d, BlockType::Mlp, T, 2.0 * T * cols(d) * H); });
      if (tok) {
        collective(reduce_scatter(H), down, {}, ring_moved(H, 1));
      } else {
        each([&](int d) { return down[static_cast<std::size_t>(d)]; });
        collective(all_reduce(H), {});
      }
      return;
    }
    const double F = static_cast<double>(c_.ffn);
    each([&](int d) {
      const double r = static_cast<double>(rows(d));
      return linear_time(d, BlockType::Mlp, r, 2.0 * r * H * F * (in_linears + 1),
                         static_cast<int>(in_linears) + 1) +
             op_time(d, OpClass::Elementwise, BlockType::Mlp, kActivationFlops * r * F * in_linears,
                     static_cast<int>(in_linears));
    });
    if (!tok) collective(all_gather(H), {});
  }

  const ModelConfig& c_;
  const ModelFootprint& f_;
  bool rotary_;
  WireFormat wire_;
  const Plan& plan_;
  const ClusterSpec& cluster_;
  std::int64_t tokens_, context_;
  int n_ = 0;
  std::vector<int> ring_;
  std::vector<std::int64_t> rows_;
  std::vector<double> pending_;
  std::vector<DevicePrediction> devices_;
  double latency_ = 0;
};

}  // namespace

double ring_all_gather_s(const ClusterSpec& cluster, const std::vector<int>& ring,
                         const std::vector<double>& part_bytes) {
  return ring_time(cluster, ring, part_bytes, 0);
}

double ring_reduce_scatter_s(const ClusterSpec& cluster, const std::vector<int>& ring,
                             const std::vector<double>& part_bytes) {
  return ring_time(cluster, ring, part_bytes, 1);
}

double ring_all_reduce_s(const ClusterSpec& cluster, const std::vector<int>& ring,
                         double total_bytes) {
  const std::vector<double> parts(ring.size(), total_bytes / static_cast<double>(ring.size()));
  return ring_time(cluster, ring, parts, 1) + ring_time(cluster, ring, parts, 0);
}

int Prediction::first_over_budget(const ClusterSpec& cluster) const {
  for (std::size_t d = 0; d < devices.size(); ++d) {
    if (devices[d].memory.total() >
        cluster.device(cluster.index_of(devices[d].name)).memory_bytes) {
      return static_cast<int>(d);
    }
  }
  return -1;
}

CostModel::CostModel(const ModelConfig& config, const Graph& graph, WireFormat wire)
    : config_(config),
      wire_(wire),
      footprint_(ModelFootprint::of(graph, config)),
      unit_weight_bytes_(pipeline_unit_weight_bytes(graph, config)) {
  for (const Op& op : graph.ops()) rotary_ = rotary_ || op.kind == OpKind::Rope;
}

double CostModel::simulate_step(const Plan& plan, const ClusterSpec& cluster, std::int64_t tokens,
                                std::int64_t context,
                                std::vector<DevicePrediction>* devices) const {
  if (plan.pipelined()) {
    throw PlanError(
        "the step simulator does not model pipeline plans (the hpipe planner "
        "predicts them)");
  }
  HUDDLE_CHECK(tokens > 0 && context >= tokens && !plan.layers.empty());
  if (plan.tiled_2d()) {
    throw PlanError(
        "the cost model does not simulate 2d-tiled plans step by step (predict() "
        "estimates them)");
  }
  return Simulator(config_, footprint_, rotary_, wire_, plan, cluster, tokens, context)
      .run(devices);
}

CostModel::UnitFlops CostModel::unit_flops(std::int64_t tokens, std::int64_t context) const {
  const double T = static_cast<double>(tokens), C = static_cast<double>(context);
  const double H = static_cast<double>(config_.hidden), hd = config_.head_dim,
               F = static_cast<double>(config_.ffn);
  const double group = static_cast<double>(config_.heads / config_.kv_heads);
  const double in_linears = footprint_.gated_mlp ? 2.0 : 1.0;
  UnitFlops u;
  u.per_head = 2.0 * T * H * hd * (2.0 + 2.0 / group) + 4.0 * T * C * hd +
               kRopeFlops * T * hd * (1.0 + 1.0 / group);
  u.per_column = 2.0 * T * H * (in_linears + 1) + kActivationFlops * T * in_linears;
  u.conn_per_row = H * (2 * kNormFlops + 2 * kResidualFlops);
  const double q_width = config_.heads * hd, kv_width = config_.kv_heads * hd;
  u.attention_per_row = 2.0 * H * (2 * q_width + 2 * kv_width) + kRopeFlops * (q_width + kv_width) +
                        4.0 * C * q_width;
  u.mlp_per_row = 2.0 * H * F * (in_linears + 1) + kActivationFlops * F * in_linears;
  return u;
}

Prediction CostModel::predict_tiled_2d(const Plan& plan, const ClusterSpec& cluster,
                                       std::int64_t seq_len) const {
  HUDDLE_CHECK(plan.tiled_2d() && !plan.layers.empty());
  const ModelConfig& c = config_;
  const Grid grid = *plan.grid;
  const int n = plan.num_devices();
  const LayerPlan& first = plan.layers.front();
  std::vector<int> index;  // cluster index of each plan device
  for (const std::string& name : plan.devices) index.push_back(cluster.index_of(name));
  const auto device = [&](int d) -> const DeviceSpec& {
    return cluster.device(index[static_cast<std::size_t>(d)]);
  };
  const UnitFlops u = unit_flops(seq_len, seq_len);
  const double T = static_cast<double>(seq_len), H = static_cast<double>(c.hidden);
  Prediction p;
  double slowest = 0;
  for (int d = 0; d < n; ++d) {
    const auto [hb, he] = first.hidden[static_cast<std::size_t>(grid.row_of(d))];
    const auto [ab, ae] = first.heads[static_cast<std::size_t>(grid.col_of(d))];
    const auto [cb, ce] = first.columns[static_cast<std::size_t>(grid.col_of(d))];
    const double fr = static_cast<double>(he - hb) / H;
    const double fa = static_cast<double>(ae - ab) / c.heads,
                 fm = static_cast<double>(ce - cb) / static_cast<double>(c.ffn);
    DevicePrediction dp;
    dp.name = plan.devices[static_cast<std::size_t>(d)];
    dp.tokens = seq_len;
    dp.heads = ae - ab;
    dp.columns = ce - cb;
    const double flops =
        static_cast<double>(c.layers) * fr *
        (fa * u.per_head * c.heads + fm * u.per_column * static_cast<double>(c.ffn));
    dp.compute_s = flops / (device(d).gflops * 1e9) + static_cast<double>(c.layers) * T *
                                                          u.conn_per_row /
                                                          (device(d).connection_gflops * 1e9);
    dp.memory = device_memory(footprint_, c, plan, d, seq_len);
    slowest = std::max(slowest, dp.compute_s);
    p.devices.push_back(std::move(dp));
  }
  // Per layer, in device 0's column group: a reduce-scatter of q, all-reduces of k and v, an
  // all-gather of the attention output, a reduce-scatter per MLP input projection and an
  // all-gather of the activation, two all-gathers of the hidden columns; in its row group two
  // all-reduces of this row's hidden columns.
  const auto ring = [&](const std::vector<int>& ranks) {
    std::vector<int> out;
    for (const int r : ranks) out.push_back(index[static_cast<std::size_t>(r)]);
    return out;
  };
  const auto even = [&](const std::vector<int>& members, double bytes, bool gather) {
    const std::vector<double> parts(members.size(), bytes / static_cast<double>(members.size()));
    return gather ? ring_all_gather_s(cluster, members, parts)
                  : ring_reduce_scatter_s(cluster, members, parts);
  };
  const std::vector<int> column_group = ring(grid.column_group(0)),
                         row_group = ring(grid.row_group(0));
  const int group = c.heads / c.kv_heads;
  const double hd = c.head_dim;
  const auto [q_begin, q_end] = first.heads[0];
  const double q_bytes = T * hd * static_cast<double>(q_end - q_begin) * kF32Bytes;
  const double kv_bytes =
      T * hd * static_cast<double>((q_end - 1) / group + 1 - q_begin / group) * kF32Bytes;
  const double f_bytes =
      T * static_cast<double>(first.columns[0].second - first.columns[0].first) * kF32Bytes;
  const double h_bytes =
      T * static_cast<double>(first.hidden[0].second - first.hidden[0].first) * kF32Bytes;
  double comm = 0;
  if (grid.rows > 1) {
    comm += even(column_group, q_bytes, false) +
            2 * ring_all_reduce_s(cluster, column_group, kv_bytes) +
            even(column_group, q_bytes, true) +
            (footprint_.gated_mlp ? 2 : 1) * even(column_group, f_bytes, false) +
            even(column_group, f_bytes, true) + 2 * even(column_group, T * H * kF32Bytes, true);
  }
  if (grid.cols > 1) comm += 2 * ring_all_reduce_s(cluster, row_group, h_bytes);
  comm *= static_cast<double>(c.layers);
  for (DevicePrediction& dp : p.devices) dp.comm_s = dp.exposed_comm_s = comm;
  p.latency_s = slowest + comm;
  p.decode_s = 0;
  return p;
}

Prediction CostModel::predict(const Plan& plan, const ClusterSpec& cluster,
                              std::int64_t seq_len) const {
  if (seq_len < 1) throw UsageError(fmt::format("sequence length must be >= 1, got {}", seq_len));
  if (plan.tiled_2d()) return predict_tiled_2d(plan, cluster, seq_len);
  if (plan.pipelined()) return predict_pipeline_plan(*this, plan, cluster, seq_len);
  Prediction p;
  p.latency_s = simulate_step(plan, cluster, seq_len, seq_len, &p.devices);
  p.decode_s = simulate_step(plan, cluster, 1, seq_len + 1, nullptr);
  for (int d = 0; d < plan.num_devices(); ++d) {
    DevicePrediction& dp = p.devices[static_cast<std::size_t>(d)];
    dp.memory = device_memory(footprint_, config_, plan, d, seq_len);
    const LayerShare share = layer_share(plan.layers.front(), config_, d);
    dp.heads = share.heads;
    dp.columns = share.columns;
  }
  return p;
}

double CostModel::head_seconds(const DeviceSpec& device) const {
  if (footprint_.head_outputs <= 0) return 0;
  return device.linear_seconds(
      BlockType::Connection, 1,
      2.0 * static_cast<double>(config_.hidden) * static_cast<double>(footprint_.head_outputs), 1);
}

// Mirrors Simulator's ops for one device holding everything (a local plan), split by unit: the
// attention unit takes its layer's first norm, q/k/v, attention, RoPE, out projection and the
// residual add after it; the MLP unit the second norm, up/gate, activation, down and its residual.
double CostModel::unit_seconds(int unit, const DeviceSpec& device, std::int64_t tokens,
                               std::int64_t context, bool logits, double share) const {
  const std::int64_t L = config_.layers;
  if (unit < 0 || unit >= pipeline::unit_count(L)) {
    throw PlanError(fmt::format("pipeline unit {} out of range (the model has {} units)", unit,
                                pipeline::unit_count(L)));
  }
  HUDDLE_CHECK(tokens >= 1 && context >= 1 && share > 0 && share <= 1);
  const double T = static_cast<double>(tokens), C = static_cast<double>(context);
  const double H = static_cast<double>(config_.hidden), hd = config_.head_dim;
  const auto op = [&](OpClass cls, BlockType block, double flops, int ops) {
    return flops > 0 ? device.op_seconds(cls, block, flops, ops) : 0.0;
  };
  const auto linear = [&](BlockType block, double rows, double flops, int ops) {
    return flops > 0 ? device.linear_seconds(block, rows, flops, ops) : 0.0;
  };
  const auto elementwise = [&](BlockType block, double flops_per_row) {
    return op(OpClass::Elementwise, block, T * flops_per_row, 1);
  };
  switch (pipeline::unit_kind(unit, L)) {
    case pipeline::UnitKind::Embedding:
      return elementwise(BlockType::Connection, H * 2);  // token + position rows
    case pipeline::UnitKind::Head:
      return elementwise(BlockType::Connection, H * kNormFlops) +
             (logits ? head_seconds(device) : 0.0);
    case pipeline::UnitKind::Attention: {
      const double heads = config_.heads * share, kv = config_.kv_heads * share;
      const double width = (heads + 2 * kv) * hd;
      return elementwise(BlockType::Connection, H * kNormFlops) +
             linear(BlockType::Attention, T, 2.0 * T * H * width, 3) +
             op(OpClass::Attention, BlockType::Attention, 4.0 * T * C * hd * heads, 1) +
             (rotary_ ? op(OpClass::Elementwise, BlockType::Attention,
                           kRopeFlops * T * (heads + kv) * hd, 2)
                      : 0.0) +
             linear(BlockType::Attention, T, 2.0 * T * heads * hd * H, 1) +
             elementwise(BlockType::Connection, H * kResidualFlops);
    }
    case pipeline::UnitKind::Mlp:
      break;
  }
  const double F = static_cast<double>(config_.ffn) * share;
  const double in_linears = footprint_.gated_mlp ? 2.0 : 1.0;
  const int n_in = static_cast<int>(in_linears);
  return elementwise(BlockType::Connection, H * kNormFlops) +
         linear(BlockType::Mlp, T, 2.0 * T * H * F * in_linears, n_in) +
         op(OpClass::Elementwise, BlockType::Mlp, kActivationFlops * T * F * in_linears, n_in) +
         linear(BlockType::Mlp, T, 2.0 * T * F * H, 1) +
         elementwise(BlockType::Connection, H * kResidualFlops);
}

}  // namespace huddle
