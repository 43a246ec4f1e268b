// The AVX2 tiles of Q4_0, Q8_0, Q5_0, Q4_1 and Q5_1 (qgemm_avx2_impl.hpp), compiled with AVX-VNNI
// as well (src/CMakeLists.txt: files named *_avxvnni.cpp): the kernels named *_avxvnni, which
// multiply 4 byte pairs into an int32 lane in one vpdpbusd.
#define INFER_AVX2_VNNI 1
#include "kernels/cpu/qgemm_avx2_impl.hpp"
