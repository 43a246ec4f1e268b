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
    # -Og whatever the build type (after its -O2, so it wins); src/CMakeLists.txt puts the kernels
    # and quantizers back at -O1, the level the sanitizers' documentation advises. The sanitizer
    # builds were most of CI's time: GCC 12 under ASan+UBSan spent 40% less time on engine.cpp at
    # -O1 than at -O2 and 90% less on the unrolled kernel files (qgemm_kquant_avx2.cpp: 14 s
    # against 136, one AMD EPYC core); -Og then halves the test files (test_kv_manager.cpp: 22 s
    # against 44) and takes a sixth off the rest, for code that runs a few percent slower. GCC 12
    # with the sanitizers reports std::variant's and std::function's members as maybe
    # uninitialized (libstdc++'s code, 20 reports, all false).
    target_compile_options(infer_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-Og>)
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
    # -g1 (after the build type's -g, so it wins): line tables and function names, all a report
    # prints, without the types and variables of full debug information. GCC 12 under ASan+UBSan:
    # engine.cpp 25 s against 31, hf_directory.cpp 21 against 26, test_kv_manager.cpp 36 against 42.
    target_compile_options(infer_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-g1>)
  else()
    message(FATAL_ERROR "INFER_SANITIZE must be empty, 'address,undefined', 'address', "
                        "'undefined' or 'thread' (got '${INFER_SANITIZE}')")
  endif()
endif()

# Fuzzing builds instrument the library for coverage; the fuzz targets add -fsanitize=fuzzer.
if(INFER_FUZZ)
  target_compile_options(infer_build_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-fsanitize=fuzzer-no-link>)
endif()
