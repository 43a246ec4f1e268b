# Warnings, native code generation and sanitizers, applied through the interface target
# infer_build_flags so they reach our own targets only (never a consumer of the package).
add_library(infer_build_flags INTERFACE)

# -ffp-contract=off: the compiler never fuses a*b+c on its own, so scalar reference kernels compute
# exactly what they say and results do not change with -march; SIMD kernels fuse explicitly.
target_compile_options(infer_build_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-ffp-contract=off>
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wshadow -Wimplicit-fallthrough -Wno-missing-field-initializers>
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)

if(INFER_NATIVE)
  target_compile_options(infer_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-march=native>)
endif()

if(INFER_SANITIZE)
  if(INFER_SANITIZE STREQUAL "address,undefined" OR INFER_SANITIZE STREQUAL "address"
     OR INFER_SANITIZE STREQUAL "undefined" OR INFER_SANITIZE STREQUAL "thread")
    set(_san -fsanitize=${INFER_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
    target_compile_options(infer_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:${_san}>)
    # -O1 whatever the build type (after its -O2, so it wins), as the sanitizers' documentation
    # advises: GCC 12 spent 40% less time on engine.cpp under ASan+UBSan than at -O2 and 90% less
    # on the unrolled kernel files (qgemm_kquant_avx2.cpp: 14 s against 136, one AMD EPYC core), and
    # the sanitizer builds were most of CI's time. GCC 12 at -O1 with the sanitizers reports std::variant's and
    # std::function's members as maybe uninitialized (libstdc++'s code, 20 reports, all false).
    target_compile_options(infer_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-O1>)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(infer_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-Wno-maybe-uninitialized>)
    endif()
    target_link_options(infer_build_flags INTERFACE ${_san})
    # Sanitizer reports need line tables, not variable locations. GCC's variable tracking took
    # half the compile time of the unrolled kernel files under ASan+UBSan (qgemm_kquant_avx2.cpp:
    # 183 s, 90 s without), and the sanitizer builds are most of CI's build time.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(infer_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-fno-var-tracking-assignments>)
    endif()
  else()
    message(FATAL_ERROR "INFER_SANITIZE must be empty, 'address,undefined', 'address', "
                        "'undefined' or 'thread' (got '${INFER_SANITIZE}')")
  endif()
endif()

# Fuzzing builds instrument the library for coverage; the fuzz targets add -fsanitize=fuzzer.
if(INFER_FUZZ)
  target_compile_options(infer_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=fuzzer-no-link>)
endif()
