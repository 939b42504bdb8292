# Compiler flags shared by every Huddle target: warnings as errors, native code, sanitizers.

set(HUDDLE_SANITIZE "" CACHE STRING "Sanitizer build: empty, 'address' (address+undefined) or 'thread'")
option(HUDDLE_NATIVE "Compile for the build machine's CPU (-march=native)" ON)

add_library(huddle_flags INTERFACE)
target_compile_options(huddle_flags INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align -Wunused
  -Woverloaded-virtual -Wimplicit-fallthrough -Werror)
if(HUDDLE_NATIVE)
  target_compile_options(huddle_flags INTERFACE -march=native)
endif()
# GCC 12 (Debian 12 ships 12.2) miscompiles constant stores in basic-block SLP vectorisation when
# AVX-512 is enabled (-march=native here): std::vector<int>{5, 5, 5, 5, 0, 0, 0, 0} is built as
# eight 5s (a broadcast instead of a half-zero vector). Loop vectorisation is unaffected.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(huddle_flags INTERFACE -fno-tree-slp-vectorize)
endif()

if(HUDDLE_SANITIZE STREQUAL "address")
  # A target with the property HUDDLE_NO_UBSAN (the test executables, tests/CMakeLists.txt) is
  # compiled with ASan alone; the libraries it tests keep UBSan, and every link has its runtime.
  target_compile_options(huddle_flags INTERFACE -fsanitize=address -fno-omit-frame-pointer
    "$<$<NOT:$<BOOL:$<TARGET_PROPERTY:HUDDLE_NO_UBSAN>>>:-fsanitize=undefined;-fno-sanitize-recover=undefined>")
  target_link_options(huddle_flags INTERFACE -fsanitize=address,undefined)
  target_compile_definitions(huddle_flags INTERFACE HUDDLE_SANITIZER_BUILD=1)
elseif(HUDDLE_SANITIZE STREQUAL "thread")
  target_compile_options(huddle_flags INTERFACE -fsanitize=thread -fno-omit-frame-pointer)
  target_link_options(huddle_flags INTERFACE -fsanitize=thread)
  target_compile_definitions(huddle_flags INTERFACE HUDDLE_SANITIZER_BUILD=1)
elseif(NOT HUDDLE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "HUDDLE_SANITIZE must be empty, 'address' or 'thread', not '${HUDDLE_SANITIZE}'")
endif()

# libFuzzer builds (tests/fuzz, scripts/fuzz): every library is instrumented for coverage and
# built with AddressSanitizer+UBSan, so that the fuzz targets can link against them.
option(HUDDLE_FUZZ "Build the libFuzzer targets in tests/fuzz (needs clang)" OFF)
if(HUDDLE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "HUDDLE_FUZZ=ON needs clang (CMAKE_CXX_COMPILER=clang++), not ${CMAKE_CXX_COMPILER_ID}")
  endif()
  if(NOT HUDDLE_SANITIZE STREQUAL "")
    message(FATAL_ERROR "HUDDLE_FUZZ=ON brings its own sanitizers; leave HUDDLE_SANITIZE empty")
  endif()
  target_compile_options(huddle_flags INTERFACE -fsanitize=fuzzer-no-link,address,undefined
                                               -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  target_link_options(huddle_flags INTERFACE -fsanitize=address,undefined)
  target_compile_definitions(huddle_flags INTERFACE HUDDLE_SANITIZER_BUILD=1)
endif()

# huddle_module(NAME SOURCES... DEPS ...): one static library per src/ module.
function(huddle_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_library(huddle_${name} STATIC ${ARG_SOURCES})
  target_include_directories(huddle_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(huddle_${name} PUBLIC huddle_flags ${ARG_DEPS})
endfunction()
