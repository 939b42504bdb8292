// The F32 GEMM of linear layers through oneDNN's matmul.
//
// Why: OpenBLAS's sgemm packs the weight operand into its panel layout inside every call, and a
// linear reads its weight once per call, so that copy is a fixed share of the work (perf, gpt2
// at 128 tokens, one thread: sgemm_itcopy 21% of the prefill beside 59% in the kernel), and a
// larger one where a call has few rows (Galaxy's GEMMs on the chunks of an all-gather as they
// arrive pack the same weight once per chunk). oneDNN's JIT GEMM reads the weight as it is.
// Measured on one thread of an Intel Xeon with AVX-512 (Sapphire Rapids), ms, OpenBLAS 0.3.21
// sgemm / this, T x K x N, InOut weights (GPT-2): 62x768x384 0.31 / 0.22, 64x1536x768 1.36 /
// 0.90, 128x768x768 1.21 / 0.95; OutIn (Llama, BERT): 1.06-1.3x (docs/weights.md).
// oneDNN's own preferred weight layout for these shapes is the plain [K, N] one: a reordered
// copy would gain nothing over InOut in place, and would hold the weight twice or pin pages that
// are otherwise the checkpoint's, evictable under memory pressure.
//
// One primitive per (K, N, layout) serves every call: the row count and every row stride are
// run-time arguments (DNNL_RUNTIME_DIM_VAL), so any views multiply without a copy. On several
// threads the output columns split over the kernels' pool, one single-threaded call per part:
// oneDNN's own OpenMP team ran erratically beside the pool (20-130 GFLOP/s for gpt2's attention
// shapes on two threads, OpenBLAS 140-235), the split 176-258 (docs/weights.md).
#include "kernels/matmul_dnnl.h"

#include "kernels/dnnl_context.h"
#include "kernels/thread_pool.h"

#include <omp.h>
#include <dnnl.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>
#include <tuple>

namespace huddle::kernels::detail {
namespace {

using dnnl::memory;
constexpr memory::dim kRuntime = DNNL_RUNTIME_DIM_VAL;

struct Matmul {
  dnnl::matmul::primitive_desc pd;
  dnnl::matmul prim;
};

// The weight as the [K, N] matrix multiplied: InOut rows of N, OutIn its transpose.
memory::dims weight_strides(bool out_in, std::int64_t ld) {
  return out_in ? memory::dims{1, ld} : memory::dims{ld, 1};
}

// Null when oneDNN has only its reference implementation here (slower than OpenBLAS).
std::shared_ptr<const Matmul> build(std::int64_t k, std::int64_t n, bool out_in) {
  const memory::desc src({kRuntime, k}, memory::data_type::f32, memory::dims{kRuntime, 1});
  const memory::desc wei({k, n}, memory::data_type::f32, weight_strides(out_in, kRuntime));
  const memory::desc dst({kRuntime, n}, memory::data_type::f32, memory::dims{kRuntime, 1});
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // per call: runs on several threads
  try {
    auto m = std::make_shared<Matmul>();
    m->pd = dnnl::matmul::primitive_desc(dnnl::matmul::desc(src, wei, dst), attr, dnnl_engine());
    if (std::string_view(m->pd.impl_info_str()).find("ref") != std::string_view::npos) {
      return nullptr;
    }
    m->prim = dnnl::matmul(m->pd);
    return m;
  } catch (const dnnl::error&) {
    return nullptr;
  }
}

std::shared_ptr<const Matmul> cached(std::int64_t k, std::int64_t n, bool out_in) {
  static std::mutex mutex;
  static std::map<std::tuple<std::int64_t, std::int64_t, bool>, std::shared_ptr<const Matmul>>
      cache;
  const std::lock_guard lock(mutex);
  auto [it, fresh] = cache.try_emplace({k, n, out_in});
  if (fresh) it->second = build(k, n, out_in);
  return it->second;
}

bool matmul_one_call(ConstMat x, ConstMat w, bool out_in, std::int64_t t, std::int64_t k,
                     std::int64_t n, Mat y) {
  const std::shared_ptr<const Matmul> m = cached(k, n, out_in);
  if (!m) return false;
  omp_set_num_threads(1);
  dnnl::engine& e = dnnl_engine();
  const auto ld = [](std::int64_t stride) { return std::max<std::int64_t>(stride, 1); };
  memory src(memory::desc({t, k}, memory::data_type::f32, memory::dims{ld(x.stride), 1}), e,
             const_cast<float*>(x.data));
  memory wei(memory::desc({k, n}, memory::data_type::f32, weight_strides(out_in, ld(w.stride))), e,
             const_cast<float*>(w.data));
  memory dst(memory::desc({t, n}, memory::data_type::f32, memory::dims{ld(y.stride), 1}), e,
             y.data);
  dnnl::stream& stream = dnnl_stream();
  m->prim.execute(stream, {{DNNL_ARG_SRC, src},
                           {DNNL_ARG_WEIGHTS, wei},
                           {DNNL_ARG_DST, dst},
                           {DNNL_ARG_SCRATCHPAD, dnnl_scratchpad(m->pd.scratchpad_desc())}});
  stream.wait();
  return true;
}

}  // namespace

bool matmul_dnnl_takes(std::int64_t k, std::int64_t n, WeightLayout layout) {
  return cached(k, n, layout == WeightLayout::OutIn) != nullptr;
}

bool matmul_dnnl(ConstMat x, ConstMat w, WeightLayout layout, std::int64_t t, std::int64_t k,
                 std::int64_t n, Mat y) {
  const bool out_in = layout == WeightLayout::OutIn;
  // Parts of whole 64-column blocks, one per thread, where there are columns for them.
  constexpr std::int64_t kBlock = 64;
  const std::int64_t blocks = (n + kBlock - 1) / kBlock;
  const std::int64_t parts = std::min<std::int64_t>(threads_here(), blocks);
  if (parts <= 1) return matmul_one_call(x, w, out_in, t, k, n, y);
  const auto part_begin = [&](std::int64_t p) { return std::min(n, blocks * p / parts * kBlock); };
  for (std::int64_t p = 0; p < parts; ++p) {  // every part's primitive, before any writes y
    if (!cached(k, part_begin(p + 1) - part_begin(p), out_in)) return false;
  }
  parallel_for(0, parts, [&](std::int64_t p0, std::int64_t p1) {
    for (std::int64_t p = p0; p < p1; ++p) {
      const std::int64_t c0 = part_begin(p), c1 = part_begin(p + 1);
      // Output columns [c0, c1): InOut weight columns, OutIn weight rows.
      ConstMat wp = w;
      wp.data += out_in ? c0 * w.stride : c0;
      Mat yp = y;
      yp.data += c0;
      matmul_one_call(x, wp, out_in, t, k, c1 - c0, yp);
    }
  });
  return true;
}

}  // namespace huddle::kernels::detail
