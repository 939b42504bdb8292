// What the oneDNN paths (conv_dnnl.cpp, matmul_dnnl.cpp) share: the CPU engine, each calling
// thread's stream, and each calling thread's scratchpad. Their primitives are built with
// scratchpad_mode::user, so one primitive runs on several threads at once, each with its own.
// Built when oneDNN is (HUDDLE_WITH_DNNL).
#pragma once

#include <dnnl.hpp>

namespace huddle::kernels::detail {

dnnl::engine& dnnl_engine();
// This thread's stream on dnnl_engine().
dnnl::stream& dnnl_stream();
// This thread's scratch buffer, grown to `desc`'s size, as memory of that desc. Valid until the
// thread's next call; a primitive's execution must finish (stream wait) before another starts.
dnnl::memory dnnl_scratchpad(const dnnl::memory::desc& desc);

}  // namespace huddle::kernels::detail
