// OpenBLAS, opened with dlopen() instead of linked.
//
// Why: Debian's OpenBLAS is built with DYNAMIC_ARCH and picks its kernels in a load-time
// constructor from the CPUID it recognises. It does not recognise recent AMD EPYC (Zen 4/5) CPUs as
// AVX-512 capable and falls back to Haswell/Zen kernels, which run sgemm about 2x slower
// (measured: 117 vs 220 GFLOP/s at 128x768x2304 on one thread), and takes an Intel Xeon with
// AVX-512 FP16 (Sapphire Rapids) for Prescott, an SSE3 core (14 vs 60-131 GFLOP/s). The only
// override is the environment variable OPENBLAS_CORETYPE, read by that constructor, so it must be
// set before the library is loaded — too late if the executable links it.
// configure_blas_environment() sets it (unless the user did) at the start of main(), and the
// library is loaded on first use. cblas.h is included for the prototypes only, so that the
// function-pointer types below are checked against the real ABI.
#include "kernels/blas.h"

#include "core/error.h"

#include <cblas.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <mutex>

namespace huddle::kernels {
namespace {

constexpr const char* kLibraries[] = {"libopenblas.so.0", "libopenblas.so"};

// Only when the user has not chosen, and only on the x86 CPUs Debian's OpenBLAS misdetects.
const char* choose_coretype() {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return nullptr;
  __builtin_cpu_init();
  return openblas_coretype_for(
      X86Cpu{__builtin_cpu_supports("avx512f") != 0, __builtin_cpu_supports("avx512bf16") != 0});
#else
  return nullptr;
#endif
}

// What configure_blas_environment() set (null: nothing, or it was not called).
std::atomic<const char*> g_coretype_set{nullptr};

class Blas {
 public:
  static Blas& get() {
    static Blas blas;  // a throwing constructor leaves it unset; the next call retries
    return blas;
  }

  decltype(&cblas_sgemm) sgemm = nullptr;
  decltype(&cblas_sgemv) sgemv = nullptr;
  decltype(&openblas_set_num_threads) set_threads = nullptr;
  decltype(&openblas_get_num_threads) get_threads = nullptr;
  std::string description;

 private:
  Blas() {
    const char* coretype = g_coretype_set.load();
    bool preloaded = false;
    for (const char* name : kLibraries) {
      if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
        preloaded = true;
        dlclose(h);
      }
    }
    std::string errors;
    for (const char* name : kLibraries) {
      handle_ = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (handle_ != nullptr) {
        library_ = name;
        break;
      }
      const char* err = dlerror();
      errors += fmt::format("\n  {}: {}", name, err != nullptr ? err : "unknown error");
    }
    if (handle_ == nullptr) {
      throw LoadError(fmt::format(
          "cannot load OpenBLAS (install Debian package libopenblas0-pthread):{}", errors));
    }
    sgemm = resolve<decltype(sgemm)>("cblas_sgemm");
    sgemv = resolve<decltype(sgemv)>("cblas_sgemv");
    set_threads = resolve<decltype(set_threads)>("openblas_set_num_threads");
    get_threads = resolve<decltype(get_threads)>("openblas_get_num_threads");

    std::string core = "?";
    std::string config = "?";
    if (auto* corename = reinterpret_cast<char* (*)()>(dlsym(handle_, "openblas_get_corename"))) {
      core = corename();
    }
    if (auto* get_config = reinterpret_cast<char* (*)()>(dlsym(handle_, "openblas_get_config"))) {
      config = get_config();
    }
    std::string how;
    if (preloaded) {
      how = " (library was already loaded; OPENBLAS_CORETYPE may not have taken effect)";
    } else if (coretype != nullptr) {
      how = fmt::format(" (OPENBLAS_CORETYPE={} set by huddle)", coretype);
    } else if (const char* user = std::getenv("OPENBLAS_CORETYPE")) {
      how = fmt::format(" (OPENBLAS_CORETYPE={} from the environment)", user);
    }
    description = fmt::format("{} [{}] core={}{}", library_, config, core, how);
  }

  template <typename Fn>
  Fn resolve(const char* symbol) {
    void* p = dlsym(handle_, symbol);
    if (p == nullptr) {
      throw LoadError(fmt::format("{} has no symbol {}", library_, symbol));
    }
    return reinterpret_cast<Fn>(p);
  }

  // Never closed: OpenBLAS keeps worker threads that must not outlive their code.
  void* handle_ = nullptr;
  const char* library_ = "";
};

// Thread settings, guarded by g_threads_mutex.
std::mutex g_threads_mutex;
int g_blas_threads = 0;   // requested by blas_set_num_threads(); 0: the library's own default
int g_serial_scopes = 0;  // live BlasSerialScopes
bool g_loaded = false;

// The thread count last given to the library. While it is above 1, calls are serialised on
// g_call_mutex: OpenBLAS's pthread pool is shared, and concurrent multi-threaded calls from several
// threads contend for it (measured: two threads each running 128x768x768 sgemm, 64 GFLOP/s in all
// vs 97 for one) while one multi-threaded call already uses every core. Single-threaded calls
// (BlasSerialScope, or set_num_threads(1)) run concurrently.
std::atomic<int> g_effective_threads{0};
std::mutex g_call_mutex;

// Called with g_threads_mutex held; waits for a multi-threaded call in flight to finish.
void apply_threads(Blas& blas, int n) {
  std::lock_guard call(g_call_mutex);
  blas.set_threads(n);
  g_effective_threads.store(n, std::memory_order_relaxed);
}

std::unique_lock<std::mutex> maybe_serialise() {
  std::unique_lock<std::mutex> lock(g_call_mutex, std::defer_lock);
  if (g_effective_threads.load(std::memory_order_relaxed) > 1) lock.lock();
  return lock;
}

Blas& loaded_blas() {
  // Fast path after the first call; the mutex orders loading against blas_set_num_threads().
  static Blas& blas = []() -> Blas& {
    Blas& b = Blas::get();
    std::lock_guard lock(g_threads_mutex);
    if (g_blas_threads == 0) g_blas_threads = b.get_threads();
    apply_threads(b, g_serial_scopes > 0 ? 1 : g_blas_threads);
    g_loaded = true;
    return b;
  }();
  return blas;
}

int as_blas_int(std::int64_t v, const char* what) {
  HUDDLE_CHECK(v >= 0 && v <= INT_MAX, "BLAS {} = {} does not fit in int", what, v);
  return static_cast<int>(v);
}

CBLAS_TRANSPOSE to_cblas(Trans t) {
  return t == Trans::Yes ? CblasTrans : CblasNoTrans;
}

}  // namespace

const char* openblas_coretype_for(const X86Cpu& cpu) {
  if (!cpu.avx512f) return nullptr;
  return cpu.avx512bf16 ? "Cooperlake" : "SkylakeX";
}

const char* configure_blas_environment() {
  static const char* const chosen = [] {
    const char* coretype = choose_coretype();
    if (coretype != nullptr) setenv("OPENBLAS_CORETYPE", coretype, /*overwrite=*/0);
    g_coretype_set.store(coretype);
    return coretype;
  }();
  return chosen;
}

void raw_sgemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
               float* c, std::int64_t ldc) {
  Blas& blas = loaded_blas();
  const auto serial = maybe_serialise();
  blas.sgemm(CblasRowMajor, to_cblas(ta), to_cblas(tb), as_blas_int(m, "m"), as_blas_int(n, "n"),
             as_blas_int(k, "k"), alpha, a, as_blas_int(lda, "lda"), b, as_blas_int(ldb, "ldb"),
             beta, c, as_blas_int(ldc, "ldc"));
}

void raw_sgemv(Trans ta, std::int64_t m, std::int64_t n, float alpha, const float* a,
               std::int64_t lda, const float* x, float beta, float* y) {
  Blas& blas = loaded_blas();
  const auto serial = maybe_serialise();
  blas.sgemv(CblasRowMajor, to_cblas(ta), as_blas_int(m, "m"), as_blas_int(n, "n"), alpha, a,
             as_blas_int(lda, "lda"), x, 1, beta, y, 1);
}

std::string blas_description() {
  return loaded_blas().description;
}

void blas_set_num_threads(int n) {
  HUDDLE_CHECK(n >= 1, "BLAS threads {}", n);
  std::lock_guard lock(g_threads_mutex);
  g_blas_threads = n;
  if (g_loaded && g_serial_scopes == 0) apply_threads(Blas::get(), n);
}

BlasSerialScope::BlasSerialScope() {
  Blas& blas = loaded_blas();
  std::lock_guard lock(g_threads_mutex);
  if (g_serial_scopes++ == 0 && g_blas_threads != 1) apply_threads(blas, 1);
}

BlasSerialScope::~BlasSerialScope() {
  std::lock_guard lock(g_threads_mutex);
  if (--g_serial_scopes == 0 && g_blas_threads != 1) apply_threads(Blas::get(), g_blas_threads);
}

}  // namespace huddle::kernels
