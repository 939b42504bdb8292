# Third-party libraries, all from Debian packages (scripts/build installs them).

find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(CLI11 REQUIRED)
find_package(GTest REQUIRED)
find_package(benchmark REQUIRED)

# OpenBLAS (pthread build) provides cblas_sgemm / cblas_sgemv for the fast GEMM path.
pkg_check_modules(OPENBLAS REQUIRED IMPORTED_TARGET openblas)
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET libsodium)
# The channels' bulk cipher (net/aead.h says why OpenSSL's, beside libsodium's handshake).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
# cpp-httplib (Debian builds it as a shared library) for `huddle serve`.
pkg_check_modules(HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)

# ONNX import: the ONNX protobuf schema as Debian's libonnx-dev builds it (onnx_proto target;
# ONNX_NAMESPACE=onnx, ONNX_ML=1) over libprotobuf.
find_package(Protobuf REQUIRED)
find_package(ONNX REQUIRED)

