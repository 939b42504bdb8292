// Convolution through oneDNN (Debian's libdnnl): the fast path of kernels::conv2d.
//
// Why oneDNN: measured on this project's VM (AMD EPYC, AVX-512, one thread), ResNet-50's 53
// convolutions take 53-58 ms through oneDNN's JIT kernels (NCHW in and out, its blocked layouts
// reordered inside each call) against ~110 ms for im2col + OpenBLAS sgemm: its kernels convolve
// in a blocked layout without im2col copies and fuse bias and activation. It dispatches on the CPU
// it finds at run time (AVX2 or AVX-512), like OpenBLAS.
//
// Row bands: the band's input rows are described to oneDNN as a strided view of the tensor that
// starts at the first row the band reads, with the padding rows above and below the band made
// explicit (zero where the band touches the image border, none inside it), so the same primitive
// math computes exactly output rows [out_begin, out_end).
//
// Primitives (and the weights reordered into their layout) are built once per shape and weight
// tensor and cached; building one takes milliseconds, running it microseconds to milliseconds.
#include "kernels/conv_dnnl.h"

#include "core/error.h"
#include "kernels/dnnl_context.h"
#include "kernels/thread_pool.h"

#include <omp.h>
#include <dnnl.hpp>

#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace huddle::kernels {
namespace {

using detail::dnnl_engine;
using detail::dnnl_scratchpad;
using detail::dnnl_stream;
using dnnl::memory;
using Dims = memory::dims;

// The band as a view of x: first input row, rows, and explicit top/bottom padding.
struct BandView {
  std::int64_t first = 0, rows = 0, pad_top = 0, pad_bottom = 0;
};

BandView band_view(const Window2d& win, const RowBand& band, std::int64_t held_rows) {
  const std::int64_t out_rows = band.out_end - band.out_begin;
  // Local row (in x) of output row 0's first tap, and of the last row the band reads.
  const std::int64_t off = band.out_begin * win.stride_h - win.pad_top - band.in_begin;
  const std::int64_t last =
      off + (out_rows - 1) * win.stride_h + (win.kernel_h - 1) * win.dilation_h;
  BandView v;
  v.first = std::max<std::int64_t>(0, off);
  v.pad_top = v.first - off;
  const std::int64_t end = std::min(held_rows, last + 1);
  v.rows = end - v.first;
  v.pad_bottom = last + 1 - end;
  return v;
}

struct Key {
  std::vector<std::int64_t> dims;  // shapes, window, band view, groups, channels-last, residual
  int act = 0, residual_act = 0;
  float a = 0, b = 0, residual_a = 0, residual_b = 0;
  const void* weights = nullptr;  // the weight tensor: its reordered copy is cached with it
  bool bias = false;
  auto tie() const {
    return std::tie(dims, act, a, b, residual_act, residual_a, residual_b, weights, bias);
  }
  bool operator<(const Key& o) const { return tie() < o.tie(); }
};

struct Conv {
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::convolution_forward prim;
  memory weights;                    // in the primitive's layout
  std::weak_ptr<const void> owner;   // of the weight tensor they were reordered from
  memory::desc src_view, dst_plain;  // what the caller's tensors are
  bool act_after = false;            // an activation oneDNN has no post-op for
  bool residual_act_after = false;   // the same, after the residual sum
};

// Appends the activation as a post-op; false when oneDNN has none for it.
bool post_op(const ActivationSpec& act, dnnl::post_ops& ops) {
  using dnnl::algorithm;
  switch (act.kind) {
    case Activation::None:
      return true;
    case Activation::Relu:
      ops.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
      return true;
    case Activation::Clip:
      ops.append_eltwise(1.0f, algorithm::eltwise_clip, act.a, act.b);
      return true;
    case Activation::Sigmoid:
      ops.append_eltwise(1.0f, algorithm::eltwise_logistic, 0.0f, 0.0f);
      return true;
    case Activation::HardSwish:
      ops.append_eltwise(1.0f, algorithm::eltwise_hardswish, 0.0f, 0.0f);
      return true;
    case Activation::Silu:
      ops.append_eltwise(1.0f, algorithm::eltwise_swish, 1.0f, 0.0f);
      return true;
    case Activation::HardSigmoid:
      return false;
  }
  return false;
}

// x's and y's dimensions as [N, C, H, W], whichever way they are stored.
Dims nchw_dims(const Tensor& t, bool channels_last) {
  return channels_last ? Dims{t.dim(0), t.dim(3), t.dim(1), t.dim(2)}
                       : Dims{t.dim(0), t.dim(1), t.dim(2), t.dim(3)};
}

std::shared_ptr<const Conv> build(const Tensor& x, const Tensor& w, const Tensor* bias,
                                  const Window2d& win, std::int64_t groups,
                                  const ActivationSpec& act, const BandView& v, const Tensor& y,
                                  bool channels_last, const ActivationSpec* residual_act) {
  const Dims xd = nchw_dims(x, channels_last), yd = nchw_dims(y, channels_last);
  const std::int64_t n = xd[0], c = xd[1], hx = xd[2], wx = xd[3];
  const std::int64_t o = w.dim(0), rows = yd[2], wo = yd[3];
  auto conv = std::make_shared<Conv>();
  // One image's batch stride is never used: the band's own extent there lets a channels-last
  // view equal the nhwc layout oneDNN's kernel takes (else every call would reorder).
  const std::int64_t image = n == 1 ? v.rows : hx;
  conv->src_view = memory::desc(
      {n, c, v.rows, wx}, memory::data_type::f32,
      channels_last ? Dims{image * wx * c, 1, wx * c, c} : Dims{c * hx * wx, hx * wx, wx, 1});
  conv->dst_plain =
      memory::desc({n, o, rows, wo}, memory::data_type::f32,
                   channels_last ? memory::format_tag::nhwc : memory::format_tag::nchw);
  const Dims wdims = groups == 1 ? Dims{o, c, win.kernel_h, win.kernel_w}
                                 : Dims{groups, o / groups, c / groups, win.kernel_h, win.kernel_w};
  const memory::desc w_any(wdims, memory::data_type::f32, memory::format_tag::any);
  const memory::desc b_md({o}, memory::data_type::f32, memory::format_tag::a);
  const Dims strides{win.stride_h, win.stride_w};
  const Dims dil{win.dilation_h - 1, win.dilation_w - 1};
  const Dims pad_l{v.pad_top, win.pad_left}, pad_r{v.pad_bottom, win.pad_right};
  dnnl::post_ops ops;
  conv->act_after = !post_op(act, ops);
  if (residual_act) {
    // y = residual_act(act(conv + bias) + y): the sum post-op adds what dst holds on entry.
    if (conv->act_after) return nullptr;
    ops.append_sum(1.0f);
    conv->residual_act_after = !post_op(*residual_act, ops);
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  // Scratch memory is given per call: primitives run on several threads at once (in-process
  // devices), and the library-managed scratchpad is shared.
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  auto primitive_desc = [&](memory::format_tag tag) {
    const memory::desc src_md({n, c, v.rows, wx}, memory::data_type::f32, tag);
    const memory::desc dst_md({n, o, rows, wo}, memory::data_type::f32, tag);
    const auto desc =
        bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                               dnnl::algorithm::convolution_direct, src_md, w_any,
                                               b_md, dst_md, strides, dil, pad_l, pad_r)
             : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference,
                                               dnnl::algorithm::convolution_direct, src_md, w_any,
                                               dst_md, strides, dil, pad_l, pad_r);
    return dnnl::convolution_forward::primitive_desc(desc, attr, dnnl_engine());
  };
  // Channels-last tensors are convolved in place where oneDNN has a JIT kernel for that layout
  // (its AVX-512 and AVX2 kernels take nhwc); otherwise, and for NCHW, oneDNN picks its layout
  // and the tensors are reordered in and out.
  conv->pd = primitive_desc(memory::format_tag::any);
  if (channels_last) {
    auto nhwc = primitive_desc(memory::format_tag::nhwc);
    if (std::string_view(nhwc.impl_info_str()).substr(0, 3) != "ref") conv->pd = std::move(nhwc);
  }
  conv->prim = dnnl::convolution_forward(conv->pd);
  // The weights, reordered once into the primitive's layout.
  const memory::desc w_plain(wdims, memory::data_type::f32,
                             groups == 1 ? memory::format_tag::oihw : memory::format_tag::goihw);
  memory user(w_plain, dnnl_engine(), const_cast<float*>(w.f32()));
  conv->weights = memory(conv->pd.weights_desc(), dnnl_engine());
  dnnl::stream s(dnnl_engine());
  dnnl::reorder(user, conv->weights).execute(s, user, conv->weights);
  s.wait();
  conv->owner = w.owner();
  return conv;
}

// Whether `conv`'s weights were reordered from the tensor that owns `w`'s data now (an address
// can be reused by another tensor once the first is freed).
bool same_weights(const Conv& conv, const Tensor& w) {
  const std::shared_ptr<const void>& now = w.owner();
  return now && !conv.owner.expired() && !conv.owner.owner_before(now) &&
         !now.owner_before(conv.owner);
}

// Every built convolution by its key, under a mutex. Shared pointers: a slot rebuilt for other
// weights must not free a primitive another thread is running.
struct ConvCache {
  std::mutex mutex;
  std::map<Key, std::shared_ptr<const Conv>> entries;
};
ConvCache& conv_cache() {
  static ConvCache cache;
  return cache;
}

std::shared_ptr<const Conv> cached(const Tensor& x, const Tensor& w, const Tensor* bias,
                                   const Window2d& win, std::int64_t groups,
                                   const ActivationSpec& act, const BandView& v, const Tensor& y,
                                   bool channels_last, const ActivationSpec* residual_act) {
  auto& [mutex, cache] = conv_cache();
  Key key;
  key.dims = {x.dim(0),
              x.dim(1),
              x.dim(2),
              x.dim(3),
              w.dim(0),
              w.dim(2),
              w.dim(3),
              y.dim(2),
              y.dim(3),
              groups,
              win.stride_h,
              win.stride_w,
              win.dilation_h,
              win.dilation_w,
              win.pad_left,
              win.pad_right,
              v.first,
              v.rows,
              v.pad_top,
              v.pad_bottom,
              channels_last ? 1 : 0,
              residual_act ? 1 : 0};
  key.act = static_cast<int>(act.kind);
  key.a = act.a;
  key.b = act.b;
  if (residual_act) {
    key.residual_act = static_cast<int>(residual_act->kind);
    key.residual_a = residual_act->a;
    key.residual_b = residual_act->b;
  }
  key.weights = w.f32();
  key.bias = bias != nullptr;
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = cache.find(key); it != cache.end() && same_weights(*it->second, w))
    return it->second;
  // A miss builds a primitive and a reordered copy of the weights: first drop every entry whose
  // weights are gone. Each session of a worker binds weights of its own, and without this the
  // copies of every session's weights stayed (a testbed board, 3 GB, was OOM-killed after ~20
  // VGG-16 sessions: ~35 MB more per session).
  std::erase_if(cache, [](const auto& entry) { return entry.second->owner.expired(); });
  std::shared_ptr<const Conv> conv =
      build(x, w, bias, win, groups, act, v, y, channels_last, residual_act);
  if (conv) cache[key] = conv;  // none: the caller falls back (asked again next time)
  return conv;
}

}  // namespace

std::size_t conv_dnnl_cached() {
  ConvCache& cache = conv_cache();
  const std::lock_guard<std::mutex> lock(cache.mutex);
  return cache.entries.size();
}

bool conv2d_dnnl(const Tensor& x, const Tensor& w, const Tensor* bias, const Window2d& win,
                 std::int64_t groups, const ActivationSpec& act, const RowBand& band, Tensor& y,
                 bool channels_last, const ActivationSpec* residual_act) {
  const BandView v = band_view(win, band, channels_last ? x.dim(1) : x.dim(2));
  if (v.rows <= 0) return false;        // the band reads padding only: the plain path handles it
  omp_set_num_threads(threads_here());  // this thread's OpenMP teams: 1 in a serial scope
  const std::shared_ptr<const Conv> held =
      cached(x, w, bias, win, groups, act, v, y, channels_last, residual_act);
  if (!held) return false;  // oneDNN cannot fuse this residual
  const Conv& conv = *held;
  dnnl::engine& e = dnnl_engine();
  dnnl::stream& stream = dnnl_stream();
  const std::int64_t row_floats = channels_last ? x.dim(2) * x.dim(3) : x.dim(3);
  memory src(conv.src_view, e, const_cast<float*>(x.f32() + v.first * row_floats));
  memory dst(conv.dst_plain, e, y.f32());
  memory src_in = src, dst_out = dst;
  if (conv.pd.src_desc() != conv.src_view) {
    src_in = memory(conv.pd.src_desc(), e);
    dnnl::reorder(src, src_in).execute(stream, src, src_in);
  }
  if (conv.pd.dst_desc() != conv.dst_plain) {
    dst_out = memory(conv.pd.dst_desc(), e);
    if (residual_act) dnnl::reorder(dst, dst_out).execute(stream, dst, dst_out);  // the residual
  }
  std::unordered_map<int, memory> args = {
      {DNNL_ARG_SRC, src_in},
      {DNNL_ARG_WEIGHTS, conv.weights},
      {DNNL_ARG_DST, dst_out},
      {DNNL_ARG_SCRATCHPAD, dnnl_scratchpad(conv.pd.scratchpad_desc())}};
  if (bias) {
    args.emplace(DNNL_ARG_BIAS, memory(conv.pd.bias_desc(), e, const_cast<float*>(bias->f32())));
  }
  conv.prim.execute(stream, args);
  if (dst_out != dst) dnnl::reorder(dst_out, dst).execute(stream, dst_out, dst);
  stream.wait();
  if (conv.act_after) apply_activation(act, y.f32(), y.numel());
  if (conv.residual_act_after) apply_activation(*residual_act, y.f32(), y.numel());
  return true;
}

}  // namespace huddle::kernels
