// The GGUF block layouts of the weight types libinfer computes with, and of the activation types
// the matmul quantizes its inputs to (Q8_0, Q8_1, Q8_K), as ggml defines them (ggml-common.h).
// Every multi-byte field is little-endian; `f16` fields are IEEE half floats. The structs contain
// only members whose sizes add up without padding: the static_asserts pin each size to the dtype
// table.
//
// "Legacy" types: 32 elements per block, one scale (and a min for the _1 types).
//
//   Q4_0 (18 B, 4.5 bpw)          x = d * (q - 8),  q = 4 bits
//     0  d   f16
//     2  qs  u8[16]   byte j: low nibble = element j, high nibble = element j + 16
//
//   Q4_1 (20 B, 5.0 bpw)          x = d * q + m
//     0  d   f16     2  m   f16
//     4  qs  u8[16]   as Q4_0
//
//   Q5_0 (22 B, 5.5 bpw)          x = d * (q - 16), q = 4 low bits | fifth bit << 4
//     0  d   f16
//     2  qh  u8[4]    u32 LE; bit j = fifth bit of element j (0..31)
//     6  qs  u8[16]   as Q4_0
//
//   Q5_1 (24 B, 6.0 bpw)          x = d * q + m
//     0  d   f16     2  m   f16
//     4  qh  u8[4]    as Q5_0
//     8  qs  u8[16]   as Q4_0
//
//   Q8_0 (34 B, 8.5 bpw)          x = d * q
//     0  d   f16
//     2  qs  i8[32]
//
//   Q8_1 (36 B, activations only)  x = d * q; s = d * Σq, rounded to F16 (the Q4_1/Q5_1 min term)
//     0  d   f16     2  s   f16
//     4  qs  i8[32]
//
// K-quants: super-blocks of 256 elements split into sub-blocks of 16 or 32 with their own
// small integer scales, themselves scaled by f16 super-block factors. Element e of a 2-bit or
// 3-bit super-block lives in byte 32*(e/128) + e%32 at bit shift 2*((e%128)/32): each 32-byte
// run of qs holds four 32-element slices, one per 2-bit position.
//
//   Q2_K (84 B, 2.625 bpw)        x = d*sc * q - dmin*m,  16 sub-blocks of 16
//     0  scales u8[16]   sub-block s: sc = low nibble, m = high nibble
//    16  qs     u8[64]   2-bit quants, placement above
//    80  d      f16
//    82  dmin   f16
//
//   Q3_K (110 B, 3.4375 bpw)      x = d*(sc - 32) * (q - (hbit ? 0 : 4)),  16 sub-blocks of 16
//     0  hmask  u8[32]   high bit of element e: bit (e/32) of byte e%32
//    32  qs     u8[64]   low 2 bits, placement above
//    96  scales u8[12]   16 six-bit scales:
//                          low 4 bits of s:  s < 8 ? byte s & 0xF : byte (s-8) >> 4
//                          high 2 bits of s: (byte 8 + s%4 >> 2*(s/4)) & 3
//   108  d      f16
//
//   Q4_K (144 B, 4.5 bpw)         x = d*sc * q - dmin*m,  8 sub-blocks of 32
//     0  d      f16
//     2  dmin   f16
//     4  scales u8[12]   8 six-bit (sc, m) pairs, see kquant_scale_min()
//    16  qs     u8[128]  32-byte chunk c: low nibbles = sub-block 2c, high nibbles = 2c+1
//
//   Q5_K (176 B, 5.5 bpw)         x = d*sc * q - dmin*m,  q = nibble | fifth bit << 4
//     0  d      f16
//     2  dmin   f16
//     4  scales u8[12]   as Q4_K
//    16  qh     u8[32]   fifth bit of element e: bit (e/32) of byte e%32
//    48  qs     u8[128]  as Q4_K
//
//   Q6_K (210 B, 6.5625 bpw)      x = d*sc * (q - 32),  q = 4 low bits | 2 high bits << 4
//     0  ql     u8[128]  per half h (128 elements): 64 bytes; byte l < 32 low nibble = element
//                        l, high nibble = l + 64; byte 32 + l: l + 32 and l + 96
//   128  qh     u8[64]   per half: 32 bytes; byte l bits 2k..2k+1 = element l + 32k
//   192  scales i8[16]   one per sub-block of 16
//   208  d      f16
//
//   Q8_K (292 B, activations only) x = d * q,  d a float (not F16)
//     0  d      f32
//     4  qs     i8[256]
//   260  bsums  i16[16]  Σq over each 16 elements (the K-quant min terms)
#pragma once

#include <cstdint>

#include "core/dtype.hpp"

namespace infer::quant {

inline constexpr int kQK = 32;    // elements per legacy block
inline constexpr int kQKK = 256;  // elements per K-quant super-block

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d;
  uint16_t dmin;
};
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  uint16_t d;
};
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qs[kQKK / 2];
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[12];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};

// Q8_K's float makes it 4-byte aligned; 292 is a multiple of 4, so arrays of it have no padding.
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};

// The dtype table (core/dtype.cpp) and these structs must agree byte for byte.
static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 &&
              sizeof(BlockQ5_1) == 24 && sizeof(BlockQ8_0) == 34 && sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockQ8_K) == 292);

// Q4_K / Q5_K scale byte map (12 bytes, 8 sub-blocks j, each a 6-bit scale and a 6-bit min):
//
//   byte 0..3    bits 0-5: sc[0..3]        bits 6-7: sc[4..7] bits 4-5
//   byte 4..7    bits 0-5: m[0..3]         bits 6-7: m[4..7]  bits 4-5
//   byte 8..11   bits 0-3: sc[4..7] 0-3    bits 4-7: m[4..7]  bits 0-3
struct ScaleMin {
  uint8_t sc;
  uint8_t m;
};
inline ScaleMin kquant_scale_min(const uint8_t* s, int j) {
  if (j < 4) return {static_cast<uint8_t>(s[j] & 63), static_cast<uint8_t>(s[j + 4] & 63)};
  return {static_cast<uint8_t>((s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4)),
          static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4))};
}

// The inverse of kquant_scale_min: the 12 bytes of 8 six-bit (sc, m) pairs.
inline void kquant_pack_scale_mins(const uint8_t* sc, const uint8_t* m, uint8_t* s) {
  for (int j = 0; j < 4; ++j) {
    s[j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
    s[j + 4] = static_cast<uint8_t>(m[j] | (m[j + 4] >> 4) << 6);
    s[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0x0F) | (m[j + 4] & 0x0F) << 4);
  }
}

// Q3_K's 16 six-bit scales, unpacked to signed values (stored value - 32).
inline int q3k_scale(const uint8_t* s, int i) {
  const int low = i < 8 ? (s[i] & 0x0F) : (s[i - 8] >> 4);
  const int high = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
  return (low | (high << 4)) - 32;
}

// The inverse of q3k_scale: the 12 bytes of 16 scales in -32..31.
inline void q3k_pack_scales(const int* scale, uint8_t* s) {
  for (int i = 0; i < 12; ++i) s[i] = 0;
  for (int i = 0; i < 16; ++i) {
    const int v = scale[i] + 32;
    s[i % 8] = static_cast<uint8_t>(s[i % 8] | (v & 0x0F) << (i < 8 ? 0 : 4));
    s[8 + i % 4] = static_cast<uint8_t>(s[8 + i % 4] | ((v >> 4) & 3) << (2 * (i / 4)));
  }
}

}  // namespace infer::quant
