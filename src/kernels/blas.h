// Raw single-precision BLAS (OpenBLAS, loaded at run time; see blas.cpp for why).
//
// Row-major throughout; leading dimensions (lda, ldb, ldc) are the row strides of the matrices as
// stored, in elements. These are thin wrappers for linear(), attention() and the benchmarks; model
// code calls kernels.h instead. The first call loads the library and throws LoadError (naming the
// library) if it cannot be loaded.
#pragma once

#include <cstdint>
#include <string>

namespace huddle::kernels {

enum class Trans : std::uint8_t { No, Yes };

// What an x86-64 CPU is, as far as OpenBLAS's kernel choice goes.
struct X86Cpu {
  bool avx512f = false;
  bool avx512bf16 = false;
};

// The OPENBLAS_CORETYPE to set on `cpu`, or null to let OpenBLAS choose. Debian's OpenBLAS
// (0.3.21) picks its kernels from the CPU models it knows, and takes newer AVX-512 cores for
// older ones: AMD's Zen 4 and later for AVX2 Zen cores (sgemm about 2x slower), and Intel's
// Sapphire Rapids (AVX-512 FP16) for Prescott, an SSE3 core (measured: 14 against 60-131
// GFLOP/s at 128x768x2304 on one thread). Every AVX-512 CPU gets the core of its instruction
// set, which is also what OpenBLAS picks on the cores it recognises: Cooperlake with AVX-512
// BF16, else SkylakeX. Every other CPU: null.
const char* openblas_coretype_for(const X86Cpu& cpu);

// Chooses OpenBLAS's kernels for this CPU (see blas.cpp): on x86-64 CPUs that Debian's OpenBLAS
// misdetects (openblas_coretype_for), sets OPENBLAS_CORETYPE unless the user has. Call it first
// thing in main(), before any thread exists or BLAS is used: setenv() races with getenv() on
// other threads. Elsewhere, and where it is not called, OpenBLAS picks its kernels itself.
// Idempotent; returns the value it set, or null.
const char* configure_blas_environment();

// C[m,n] = alpha · op(A)[m,k] · op(B)[k,n] + beta · C. A is stored [m,k] (Trans::No) or [k,m]
// (Trans::Yes); likewise B is stored [k,n] or [n,k]. Dimensions must fit in int (BLAS ABI).
void raw_sgemm(Trans ta, Trans tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
               const float* a, std::int64_t lda, const float* b, std::int64_t ldb, float beta,
               float* c, std::int64_t ldc);

// y = alpha · op(A) · x + beta · y with A stored [m,n]. Trans::No: x[n] -> y[m]; Trans::Yes:
// x[m] -> y[n].
void raw_sgemv(Trans ta, std::int64_t m, std::int64_t n, float alpha, const float* a,
               std::int64_t lda, const float* x, float beta, float* y);

// One line for benchmark reports, e.g. "OpenBLAS 0.3.21 ... core=Cooperlake
// (OPENBLAS_CORETYPE=Cooperlake set by huddle)". Loads the library.
std::string blas_description();

// Threads the BLAS library uses (n >= 1). Safe to call before the library is loaded: the count is
// applied when it loads. kernels::set_num_threads() calls this.
void blas_set_num_threads(int n);

// While a scope is alive, BLAS calls on every thread run on the calling thread only. For callers
// that run independent BLAS calls in parallel on their own threads (attention over heads): when
// several threads enter multi-threaded OpenBLAS at once, its shared worker pool serialises and
// spins (measured: causal attention, 12 heads, T = 512 on 2 threads, 7 ms alone -> 400 ms).
// Scopes nest and may overlap across threads; the configured count is restored when the last one
// ends. Loads the library.
class BlasSerialScope {
 public:
  BlasSerialScope();
  ~BlasSerialScope();
  BlasSerialScope(const BlasSerialScope&) = delete;
  BlasSerialScope& operator=(const BlasSerialScope&) = delete;
};

}  // namespace huddle::kernels
