# Warnings and sanitizers shared by every target of the project.
add_compile_options(-Wall -Wextra -Wno-missing-field-initializers)
if(HC_SANITIZE)
  # Both keep their own shadow of every byte: the runtimes refuse to be linked together.
  if(HC_SANITIZE MATCHES "thread" AND HC_SANITIZE MATCHES "address")
    message(FATAL_ERROR "HC_SANITIZE=${HC_SANITIZE}: ThreadSanitizer cannot be combined with "
                        "AddressSanitizer (use address,undefined or thread)")
  endif()
  add_compile_options(-fsanitize=${HC_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${HC_SANITIZE})
  # The runtime is linked into executables only, so a sanitized shared library (libhcclient, the
  # shims) leaves its __asan_/__ubsan_ calls undefined until the executable loads it; -z undefs
  # cancels their -Wl,--no-undefined. It must come after that option: the standard libraries end
  # the link line.
  string(APPEND CMAKE_CXX_STANDARD_LIBRARIES " -Wl,-z,undefs")
  string(APPEND CMAKE_C_STANDARD_LIBRARIES " -Wl,-z,undefs")
  # A finding that only prints would pass ctest: undefined behaviour stops the process.
  if(HC_SANITIZE MATCHES "undefined")
    add_compile_options(-fno-sanitize-recover=undefined)
  endif()
endif()
# HC_FUZZ: every library gets libFuzzer's coverage instrumentation, so that a fuzz target's
# coverage reaches into the parsers it calls; only the targets in tests/fuzz link libFuzzer
# itself (the sanitizer runtimes carry the hooks the other binaries need). libFuzzer is clang's.
set(HC_FUZZ_ACTIVE OFF)
if(HC_FUZZ)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    set(HC_FUZZ_ACTIVE ON)
    add_compile_options(-fsanitize=fuzzer-no-link)
  else()
    message(WARNING "HC_FUZZ needs clang (libFuzzer), this build uses ${CMAKE_CXX_COMPILER_ID}: "
                    "tests/fuzz is not built (configure with -DCMAKE_CXX_COMPILER=clang++-14)")
  endif()
endif()
