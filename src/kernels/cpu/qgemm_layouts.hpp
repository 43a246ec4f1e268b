// The layouts the CPU backend packs Q4_0, Q8_0, Q4_1, Q5_0, Q5_1 and the K-quants into at load
// (Layout::cpu_packed): 16 weight rows per group, each row's bytes in one 32-bit lane of 64-byte
// vectors. One layout for every ISA: the AVX-512 tiles read a vector as 16 int32 lanes
// (qgemm_avx512.cpp, qgemm_kquant_avx512.cpp), the AVX2 ones as two halves of 8 (qgemm_avx2_impl.hpp,
// qgemm_kquant_avx2_impl.hpp), so a weight packed on one ISA runs on the other. Packing and unpacking
// are plain C++ here, compiled into each ISA's file with that file's flags: a CPU without AVX-512
// packs through its AVX2 kernel's pack(), which never meets an AVX-512 instruction. (The AVX-512
// file packs Q4_0, Q8_0, Q4_1, Q5_0 and Q5_1 with its own gathers, into the same bytes.)
#pragma once

#include <cassert>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/qgemm_tiles.hpp"
#include "quant/block_formats.hpp"

namespace infer::qgemm_layouts {
// Everything here has internal linkage (the anonymous namespace): each ISA's file keeps its own
// copy, compiled with its flags, which the linker cannot swap for another file's
// (tests/integration/isa_symbols.py).
namespace {

using namespace quant;

constexpr int64_t kGroup = 16;  // weight rows per packed group: one per 32-bit lane of a 64-byte vector

// Copies 4 bytes of row j's block to lane j of a packed 64-byte vector, or back.
inline void to_lane(uint8_t* vec, int64_t j, const uint8_t* src) { std::memcpy(vec + 4 * j, src, 4); }
inline void from_lane(const uint8_t* vec, int64_t j, uint8_t* dst) { std::memcpy(dst, vec + 4 * j, 4); }

// Block i of weight row j of a group whose rows are ws bytes apart; rows past count repeat the
// last one (packers give them zero scales, and their outputs are never stored).
template <class Block>
inline const Block& group_block(const void* w, int64_t ws, int64_t count, int64_t j, int64_t i) {
  return reinterpret_cast<const Block*>(static_cast<const uint8_t*>(w) + (j < count ? j : count - 1) * ws)[i];
}

// ---- Q4_0 ----
//
// Packed group, per block i (288 bytes, as many as the 16 rows' blocks in the file):
//   d    f16[16]      lane j: row j's scale (0 for the rows past count)
//   qs   u8[4][64]    vector k, lane j: row j's qs bytes 4k..4k+3, whose low nibbles are
//                     elements 4k..4k+3 and high nibbles elements 16+4k..16+4k+3
// Each ISA packs it with its own shuffles (qgemm_tiles::q4_0_unpack restores a row).
struct Q4Packed {
  uint16_t d[kGroup];
  uint8_t qs[4][64];
};
static_assert(sizeof(Q4Packed) == kGroup * sizeof(BlockQ4_0));

inline int64_t q4_packed_bytes(int64_t n) noexcept { return n / kQK * static_cast<int64_t>(sizeof(Q4Packed)); }

// ---- Q8_0, Q4_1: the 8 tinyBLAS / vec_dot chains of each row in lanes ----
//
// Q8_0, per block i (544 bytes, as many as the 16 rows' blocks in the file):
//   d    f16[16]      lane j: row j's scale (0 for the rows past count)
//   qs   u8[8][64]    vector p, lane j: row j's quants 4p..4p+3, each + 128 (w ^ 0x80)
// Q4_1, per block i (320 bytes, likewise):
//   d, m f16[16] each lane j: row j's scale and min (0 for the rows past count)
//   qs   u8[4][64]    vector k, lane j: row j's qs bytes 4k..4k+3 (low nibbles: elements
//                     4k..4k+3, high nibbles: 16 + 4k..16 + 4k + 3), as Q4_0's
// A tile's vector p of accumulators holds chain p (elements 4p..4p+3 of every block) of the 16
// rows. The AVX-512 kernels pack with gathers (qgemm_avx512.cpp); these loops are the AVX2
// kernels' packing, and both ISAs' unpacking.
struct Q8LanesPacked {
  uint16_t d[kGroup];
  uint8_t qs[8][64];
};
static_assert(sizeof(Q8LanesPacked) == kGroup * sizeof(BlockQ8_0));
struct Q41LanesPacked {
  uint16_t d[kGroup], m[kGroup];
  uint8_t qs[4][64];
};
static_assert(sizeof(Q41LanesPacked) == kGroup * sizeof(BlockQ4_1));

inline int64_t q8_lanes_packed_bytes(int64_t n) noexcept { return n / kQK * static_cast<int64_t>(sizeof(Q8LanesPacked)); }

inline void q8_lanes_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kQK == 0);
  auto* out = static_cast<Q8LanesPacked*>(packed);
  for (int64_t i = 0; i < n / kQK; ++i)
    for (int64_t j = 0; j < kGroup; ++j) {
      const auto& b = group_block<BlockQ8_0>(w, ws, count, j, i);
      out[i].d[j] = j < count ? b.d : 0;
      for (int p = 0; p < 8; ++p) {
        uint8_t q[4];
        for (int t = 0; t < 4; ++t) q[t] = static_cast<uint8_t>(b.qs[4 * p + t] ^ 0x80);
        to_lane(out[i].qs[p], j, q);
      }
    }
}

inline void q8_lanes_unpack(const void* packed, int64_t j, int64_t n, void* row) noexcept {
  const auto* pk = static_cast<const Q8LanesPacked*>(packed);
  auto* out = static_cast<BlockQ8_0*>(row);
  for (int64_t i = 0; i < n / kQK; ++i) {
    out[i].d = pk[i].d[j];
    for (int p = 0; p < 8; ++p) {
      uint8_t q[4];
      from_lane(pk[i].qs[p], j, q);
      for (int t = 0; t < 4; ++t) out[i].qs[4 * p + t] = static_cast<int8_t>(q[t] ^ 0x80);
    }
  }
}

// ---- Q5_0, Q5_1: the same lanes, with the fifth bits ----
//
// Q5_0, per block i (352 bytes, as many as the 16 rows' blocks in the file):
//   d    f16[16]      lane j: row j's scale (0 for the rows past count)
//   qh   u32[16]      lane j: row j's fifth bits (bit e: element e's)
//   qs   u8[4][64]    as Q4_1's
// Q5_1 (384 bytes): d and m f16[16] each, as Q4_1's, then qh and qs as Q5_0's. Vector p of the
// unsigned quants (0..31) is the nibbles of qs vector p mod 4 (low for p < 4, high for p >= 4)
// with the fifth bits 4p..4p+3 of qh.
struct Q50LanesPacked {
  uint16_t d[kGroup];
  uint32_t qh[kGroup];
  uint8_t qs[4][64];
};
static_assert(sizeof(Q50LanesPacked) == kGroup * sizeof(BlockQ5_0));
struct Q51LanesPacked {
  uint16_t d[kGroup], m[kGroup];
  uint32_t qh[kGroup];
  uint8_t qs[4][64];
};
static_assert(sizeof(Q51LanesPacked) == kGroup * sizeof(BlockQ5_1));

// Q4_1, Q5_0 and Q5_1: their blocks' scales (and mins, and fifth bits) in lanes, the qs bytes as Q4_0's.
template <class Block>
using NibbleLanesPacked =
    std::conditional_t<std::is_same_v<Block, BlockQ4_1>, Q41LanesPacked,
                       std::conditional_t<std::is_same_v<Block, BlockQ5_1>, Q51LanesPacked, Q50LanesPacked>>;
template <class Block>
constexpr bool kHasMin = !std::is_same_v<Block, BlockQ5_0>;
template <class Block>
constexpr bool kHasFifth = !std::is_same_v<Block, BlockQ4_1>;

template <class Block>
inline int64_t nibble_lanes_packed_bytes(int64_t n) noexcept {
  return n / kQK * static_cast<int64_t>(sizeof(NibbleLanesPacked<Block>));
}

template <class Block>
inline void nibble_lanes_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kQK == 0);
  auto* out = static_cast<NibbleLanesPacked<Block>*>(packed);
  for (int64_t i = 0; i < n / kQK; ++i)
    for (int64_t j = 0; j < kGroup; ++j) {
      const auto& b = group_block<Block>(w, ws, count, j, i);
      out[i].d[j] = j < count ? b.d : 0;
      if constexpr (kHasMin<Block>) out[i].m[j] = j < count ? b.m : 0;
      if constexpr (kHasFifth<Block>) std::memcpy(&out[i].qh[j], b.qh, 4);
      for (int k = 0; k < 4; ++k) to_lane(out[i].qs[k], j, b.qs + 4 * k);
    }
}

template <class Block>
inline void nibble_lanes_unpack(const void* packed, int64_t j, int64_t n, void* row) noexcept {
  const auto* pk = static_cast<const NibbleLanesPacked<Block>*>(packed);
  auto* out = static_cast<Block*>(row);
  for (int64_t i = 0; i < n / kQK; ++i) {
    out[i].d = pk[i].d[j];
    if constexpr (kHasMin<Block>) out[i].m = pk[i].m[j];
    if constexpr (kHasFifth<Block>) std::memcpy(out[i].qh, &pk[i].qh[j], 4);
    for (int k = 0; k < 4; ++k) from_lane(pk[i].qs[k], j, out[i].qs + 4 * k);
  }
}

// ---- Q4_K, Q5_K: 32-element sub-blocks ----
//
// Packed group, per super-block i (Q4_K 2368 bytes, 2.8% more than the 16 rows' blocks in the
// file; Q5_K 2880 bytes, 2.3% more):
//   d, dmin  f16[16] each     lane j: row j's scales
//   sc, m    u8[8][16] each   sub-block s, lane j: row j's six-bit scale and min (kquant_scale_min)
//   qs       u8[4][8][64]     (Q4_K) pair p, vector k, lane j: row j's qs bytes 32p+4k..32p+4k+3,
//                             whose low nibbles are elements 4k..4k+3 of sub-block 2p and high
//                             nibbles those of sub-block 2p+1
//   q        u8[8][5][64]     (Q5_K) vector k, lane j: the five-bit quants u_s of elements
//                             4k..4k+3 of the 8 sub-blocks s (nibble | qh bit s << 4) in five
//                             bytes each: v0 = u0 | (u3 & 7) << 5, v1 = u2 | (u3 >> 3) << 5 |
//                             (u7 >> 3 & 1) << 7, v2 = u4 | (u5 & 7) << 5, v3 = u6 | (u5 >> 3) << 5 |
//                             (u7 >> 4) << 7, v4 = u1 | (u7 & 7) << 5. Five quants are one AND
//                             away, u3 and u5 five operations, u7 eight, where the file's nibbles
//                             and qh bits took four or five a quant
struct Q4KPacked {
  uint16_t d[kGroup];
  uint16_t dmin[kGroup];
  uint8_t sc[8][kGroup];
  uint8_t m[8][kGroup];
  uint8_t qs[4][8][64];
};
static_assert(sizeof(Q4KPacked) == 2368);
struct Q5KPacked {
  uint16_t d[kGroup];
  uint16_t dmin[kGroup];
  uint8_t sc[8][kGroup];
  uint8_t m[8][kGroup];
  uint8_t q[8][5][64];
};
static_assert(sizeof(Q5KPacked) == 2880);

// Q5_K's five bytes of one element position <-> its 8 sub-blocks' quants (layout above).
inline void q5k_pack_bytes(const int* u, uint8_t* v) {
  v[0] = static_cast<uint8_t>(u[0] | (u[3] & 7) << 5);
  v[1] = static_cast<uint8_t>(u[2] | (u[3] >> 3) << 5 | (u[7] >> 3 & 1) << 7);
  v[2] = static_cast<uint8_t>(u[4] | (u[5] & 7) << 5);
  v[3] = static_cast<uint8_t>(u[6] | (u[5] >> 3) << 5 | (u[7] >> 4) << 7);
  v[4] = static_cast<uint8_t>(u[1] | (u[7] & 7) << 5);
}
inline void q5k_unpack_bytes(const uint8_t* v, int* u) {
  u[0] = v[0] & 31, u[2] = v[1] & 31, u[4] = v[2] & 31, u[6] = v[3] & 31, u[1] = v[4] & 31;
  u[3] = v[0] >> 5 | (v[1] >> 5 & 3) << 3;
  u[5] = v[2] >> 5 | (v[3] >> 5 & 3) << 3;
  u[7] = v[4] >> 5 | (v[1] >> 7) << 3 | (v[3] >> 7) << 4;
}

template <class Packed>
int64_t k32_packed_bytes(int64_t n) noexcept {
  return n / kQKK * static_cast<int64_t>(sizeof(Packed));
}

template <class Block, class Packed>
void k32_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kQKK == 0);
  auto* out = static_cast<Packed*>(packed);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    Packed& o = out[i];
    for (int64_t j = 0; j < kGroup; ++j) {
      const auto& b = group_block<Block>(w, ws, count, j, i);
      o.d[j] = j < count ? b.d : 0;
      o.dmin[j] = j < count ? b.dmin : 0;
      for (int s = 0; s < 8; ++s) {
        const ScaleMin sm = kquant_scale_min(b.scales, s);
        o.sc[s][j] = sm.sc;
        o.m[s][j] = sm.m;
      }
      if constexpr (std::is_same_v<Block, BlockQ5_K>) {
        for (int k = 0; k < 8; ++k) {
          uint8_t v[5][4];
          for (int t = 0; t < 4; ++t) {
            const int l = 4 * k + t;
            int u[8];
            for (int sb = 0; sb < 8; ++sb) u[sb] = (b.qs[32 * (sb / 2) + l] >> 4 * (sb % 2) & 15) | (b.qh[l] >> sb & 1) << 4;
            uint8_t bytes[5];
            q5k_pack_bytes(u, bytes);
            for (int x = 0; x < 5; ++x) v[x][t] = bytes[x];
          }
          for (int x = 0; x < 5; ++x) to_lane(o.q[k][x], j, v[x]);
        }
      } else {
        for (int p = 0; p < 4; ++p)
          for (int k = 0; k < 8; ++k) to_lane(o.qs[p][k], j, b.qs + 32 * p + 4 * k);
      }
    }
  }
}

template <class Block, class Packed>
void k32_unpack(const void* packed, int64_t j, int64_t n, void* row) noexcept {
  const auto* pk = static_cast<const Packed*>(packed);
  auto* out = static_cast<Block*>(row);
  for (int64_t i = 0; i < n / kQKK; ++i) {
    const Packed& b = pk[i];
    Block& o = out[i];
    o.d = b.d[j];
    o.dmin = b.dmin[j];
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; ++s) sc[s] = b.sc[s][j], m[s] = b.m[s][j];
    kquant_pack_scale_mins(sc, m, o.scales);
    if constexpr (std::is_same_v<Block, BlockQ5_K>) {
      for (int k = 0; k < 8; ++k) {
        uint8_t v[5][4];
        for (int x = 0; x < 5; ++x) from_lane(b.q[k][x], j, v[x]);
        for (int t = 0; t < 4; ++t) {
          const int l = 4 * k + t;
          const uint8_t bytes[5] = {v[0][t], v[1][t], v[2][t], v[3][t], v[4][t]};
          int u[8];
          q5k_unpack_bytes(bytes, u);
          o.qh[l] = 0;
          for (int sb = 0; sb < 8; ++sb) o.qh[l] = static_cast<uint8_t>(o.qh[l] | (u[sb] >> 4) << sb);
          for (int p = 0; p < 4; ++p) o.qs[32 * p + l] = static_cast<uint8_t>((u[2 * p] & 15) | (u[2 * p + 1] & 15) << 4);
        }
      }
    } else {
      for (int p = 0; p < 4; ++p)
        for (int k = 0; k < 8; ++k) from_lane(b.qs[p][k], j, o.qs + 32 * p + 4 * k);
    }
  }
}

// ---- Q2_K, Q3_K, Q6_K: 16-element sub-blocks ----
//
// Element 128h + 32k + 4c + t (half h, shift k = 0..3, chunk c = 0..7, t = 0..3) is in lane j's
// 4 bytes of chunk c of half h, at bit position k of the type's packing; its sub-block is
// 8h + 2k + (c >= 4). Each type's chunks are adjacent so that a tile reads one stream.
//
// Q6_K, per super-block (3360 bytes, exactly the 16 rows' blocks in the file):
//   d        f16[16]
//   sc       i8[16][16]       sub-block s, lane j: row j's scale
//   q        [2][8] chunks    half h, chunk c: three bytes {a, b, c} for the 4 quants q_k of
//                             file bytes 64h+4c.. (ql), 64h+32+4c.. (ql) and 32h+4c.. (qh):
//                             a = q_0 | (q_3 & 3) << 6, b = q_1 | (q_3 >> 2 & 3) << 6,
//                             c = q_2 | (q_3 >> 4) << 6, offset 32. Quants 0-2 are then one AND
//                             away and q_3 eight operations, where the file's nibbles and high
//                             pairs took 17 for the four (a 16-bit shift moves pairs of bytes: the
//                             masks keep each byte's own bits). One stream (three interleaved
//                             streams 512 bytes apart decoded at 9 GB/s against 22 for one, AVX-512)
// Q3_K (1824 bytes, 3.6% more: the scales are expanded):
//   d        f16[16]
//   sc       i8[16][16]       sub-block s, lane j: row j's scale (q3k_scale)
//   q        [8] chunks       chunk c: three bytes {x, y, z} for the 8 quants u_hk (half h,
//                             shift k) of file bytes 4c.. (qs, half 0), 32+4c.. (qs, half 1) and
//                             4c.. (hmask), u_hk = (qs >> 2k) & 3 | (hmask bit 4h+k) << 2, offset 4:
//                             x = u_00 | u_01 << 3 | (u_02 & 3) << 6, y the same of half 1,
//                             z = u_03 | u_13 << 3 | (u_02 >> 2) << 6 | (u_12 >> 2) << 7. Six quants
//                             are one or two operations away and u_h2 five, where the file's
//                             bits took four or five a quant
// Q2_K (1344 bytes, exactly the file's):
//   d, dmin  f16[16] each
//   sc       u8[16][16]       sub-block s, lane j: row j's scale byte (low nibble scale, high min)
//   q        [8] chunks       chunk c: {qs bytes 4c.. (half 0), qs bytes 32+4c.. (half 1)};
//                             quant (qs >> 2k) & 3
struct Q6KChunk {
  uint8_t a[64];
  uint8_t b[64];
  uint8_t c[64];
};
struct Q6KPacked {
  uint16_t d[kGroup];
  int8_t sc[16][kGroup];
  Q6KChunk q[2][8];
};
static_assert(sizeof(Q6KPacked) == kGroup * sizeof(BlockQ6_K));
struct Q3KChunk {
  uint8_t x[64];
  uint8_t y[64];
  uint8_t z[64];
};
struct Q3KPacked {
  uint16_t d[kGroup];
  int8_t sc[16][kGroup];
  Q3KChunk q[8];
};
static_assert(sizeof(Q3KPacked) == 1824);
struct Q2KPacked {
  uint16_t d[kGroup];
  uint16_t dmin[kGroup];
  uint8_t sc[8][kGroup][2];  // pair u, lane j: row j's scale bytes of sub-blocks 2u and 2u + 1
  uint8_t q[8][2][64];
};
static_assert(sizeof(Q2KPacked) == kGroup * sizeof(BlockQ2_K));

// Each 16-element type's block <-> lane j of its packed super-block.
struct Q6KLayout {
  using Block = BlockQ6_K;
  using Packed = Q6KPacked;
  static void pack(const Block& b, bool valid, int64_t j, Packed& o) {
    o.d[j] = valid ? b.d : 0;
    for (int s = 0; s < 16; ++s) o.sc[s][j] = b.scales[s];
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < 8; ++c) {
        uint8_t x[3][4];
        for (int t = 0; t < 4; ++t) {
          const uint8_t la = b.ql[64 * h + 4 * c + t], lb = b.ql[64 * h + 32 + 4 * c + t], hb = b.qh[32 * h + 4 * c + t];
          const int q0 = (la & 0x0F) | (hb & 3) << 4, q1 = (lb & 0x0F) | (hb >> 2 & 3) << 4;
          const int q2 = la >> 4 | (hb >> 4 & 3) << 4, q3 = lb >> 4 | (hb >> 6) << 4;
          x[0][t] = static_cast<uint8_t>(q0 | (q3 & 3) << 6);
          x[1][t] = static_cast<uint8_t>(q1 | (q3 >> 2 & 3) << 6);
          x[2][t] = static_cast<uint8_t>(q2 | (q3 >> 4) << 6);
        }
        to_lane(o.q[h][c].a, j, x[0]);
        to_lane(o.q[h][c].b, j, x[1]);
        to_lane(o.q[h][c].c, j, x[2]);
      }
  }
  static void unpack(const Packed& p, int64_t j, Block& o) {
    o.d = p.d[j];
    for (int s = 0; s < 16; ++s) o.scales[s] = p.sc[s][j];
    for (int h = 0; h < 2; ++h)
      for (int c = 0; c < 8; ++c) {
        uint8_t x[3][4];
        from_lane(p.q[h][c].a, j, x[0]);
        from_lane(p.q[h][c].b, j, x[1]);
        from_lane(p.q[h][c].c, j, x[2]);
        for (int t = 0; t < 4; ++t) {
          const int q0 = x[0][t] & 0x3F, q1 = x[1][t] & 0x3F, q2 = x[2][t] & 0x3F;
          const int q3 = x[0][t] >> 6 | (x[1][t] >> 6) << 2 | (x[2][t] >> 6) << 4;
          o.ql[64 * h + 4 * c + t] = static_cast<uint8_t>((q0 & 0x0F) | (q2 & 0x0F) << 4);
          o.ql[64 * h + 32 + 4 * c + t] = static_cast<uint8_t>((q1 & 0x0F) | (q3 & 0x0F) << 4);
          o.qh[32 * h + 4 * c + t] = static_cast<uint8_t>(q0 >> 4 | (q1 >> 4) << 2 | (q2 >> 4) << 4 | (q3 >> 4) << 6);
        }
      }
  }
};

struct Q3KLayout {
  using Block = BlockQ3_K;
  using Packed = Q3KPacked;
  static void pack(const Block& b, bool valid, int64_t j, Packed& o) {
    o.d[j] = valid ? b.d : 0;
    for (int s = 0; s < 16; ++s) o.sc[s][j] = static_cast<int8_t>(q3k_scale(b.scales, s));
    for (int c = 0; c < 8; ++c) {
      uint8_t x[4], y[4], z[4];
      for (int t = 0; t < 4; ++t) {
        int u[2][4];
        for (int h = 0; h < 2; ++h)
          for (int k = 0; k < 4; ++k) u[h][k] = (b.qs[32 * h + 4 * c + t] >> 2 * k & 3) | (b.hmask[4 * c + t] >> (4 * h + k) & 1) << 2;
        x[t] = static_cast<uint8_t>(u[0][0] | u[0][1] << 3 | (u[0][2] & 3) << 6);
        y[t] = static_cast<uint8_t>(u[1][0] | u[1][1] << 3 | (u[1][2] & 3) << 6);
        z[t] = static_cast<uint8_t>(u[0][3] | u[1][3] << 3 | (u[0][2] >> 2) << 6 | (u[1][2] >> 2) << 7);
      }
      to_lane(o.q[c].x, j, x);
      to_lane(o.q[c].y, j, y);
      to_lane(o.q[c].z, j, z);
    }
  }
  static void unpack(const Packed& p, int64_t j, Block& o) {
    o.d = p.d[j];
    int sc[16];
    for (int s = 0; s < 16; ++s) sc[s] = p.sc[s][j];
    q3k_pack_scales(sc, o.scales);
    for (int c = 0; c < 8; ++c) {
      uint8_t x[4], y[4], z[4];
      from_lane(p.q[c].x, j, x);
      from_lane(p.q[c].y, j, y);
      from_lane(p.q[c].z, j, z);
      for (int t = 0; t < 4; ++t) {
        const int u[2][4] = {{x[t] & 7, x[t] >> 3 & 7, x[t] >> 6 | (z[t] >> 6 & 1) << 2, z[t] & 7},
                             {y[t] & 7, y[t] >> 3 & 7, y[t] >> 6 | (z[t] >> 7) << 2, z[t] >> 3 & 7}};
        uint8_t hm = 0;
        for (int h = 0; h < 2; ++h) {
          o.qs[32 * h + 4 * c + t] = static_cast<uint8_t>((u[h][0] & 3) | (u[h][1] & 3) << 2 | (u[h][2] & 3) << 4 | (u[h][3] & 3) << 6);
          for (int k = 0; k < 4; ++k) hm = static_cast<uint8_t>(hm | (u[h][k] >> 2) << (4 * h + k));
        }
        o.hmask[4 * c + t] = hm;
      }
    }
  }
};

struct Q2KLayout {
  using Block = BlockQ2_K;
  using Packed = Q2KPacked;
  static void pack(const Block& b, bool valid, int64_t j, Packed& o) {
    o.d[j] = valid ? b.d : 0;
    o.dmin[j] = valid ? b.dmin : 0;
    for (int s = 0; s < 16; ++s) o.sc[s / 2][j][s % 2] = b.scales[s];
    for (int c = 0; c < 8; ++c) {
      to_lane(o.q[c][0], j, b.qs + 4 * c);
      to_lane(o.q[c][1], j, b.qs + 32 + 4 * c);
    }
  }
  static void unpack(const Packed& p, int64_t j, Block& o) {
    o.d = p.d[j];
    o.dmin = p.dmin[j];
    for (int s = 0; s < 16; ++s) o.scales[s] = p.sc[s / 2][j][s % 2];
    for (int c = 0; c < 8; ++c) {
      from_lane(p.q[c][0], j, o.qs + 4 * c);
      from_lane(p.q[c][1], j, o.qs + 32 + 4 * c);
    }
  }
};

// T: one of the layouts above (or a type built on one).
template <class T>
int64_t k16_packed_bytes(int64_t n) noexcept {
  return n / kQKK * static_cast<int64_t>(sizeof(typename T::Packed));
}

template <class T>
void k16_pack(const void* w, int64_t ws, int64_t count, int64_t n, void* packed) noexcept {
  assert(count >= 1 && count <= kGroup && n % kQKK == 0);
  auto* out = static_cast<typename T::Packed*>(packed);
  for (int64_t i = 0; i < n / kQKK; ++i)
    for (int64_t j = 0; j < kGroup; ++j) T::pack(group_block<typename T::Block>(w, ws, count, j, i), j < count, j, out[i]);
}

template <class T>
void k16_unpack(const void* packed, int64_t j, int64_t n, void* row) noexcept {
  const auto* pk = static_cast<const typename T::Packed*>(packed);
  auto* out = static_cast<typename T::Block*>(row);
  for (int64_t i = 0; i < n / kQKK; ++i) T::unpack(pk[i], j, out[i]);
}

}  // namespace
}  // namespace infer::qgemm_layouts
