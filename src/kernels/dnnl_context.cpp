#include "kernels/dnnl_context.h"

#include <cstddef>
#include <vector>

namespace huddle::kernels::detail {

dnnl::engine& dnnl_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& dnnl_stream() {
  thread_local dnnl::stream stream(dnnl_engine());
  return stream;
}

dnnl::memory dnnl_scratchpad(const dnnl::memory::desc& desc) {
  thread_local std::vector<std::byte> scratch;
  if (scratch.size() < desc.get_size()) scratch.resize(desc.get_size());
  return dnnl::memory(desc, dnnl_engine(), scratch.data());
}

}  // namespace huddle::kernels::detail
