// What the tile files of every ISA share (qgemm_avx512_util.hpp for the AVX-512 ones,
// qgemm_avx2.cpp): plain C++, no intrinsics. Byte sizes, unaligned int32 reads, the walk over
// activation rows, the empty side data, and the Q4_0 row restored from a packed group.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "quant/block_formats.hpp"

namespace infer::qgemm_tiles {

inline int64_t round64(int64_t bytes) { return (bytes + 63) / 64 * 64; }

// The 4 bytes at p as an int32 (an unaligned, may_alias read).
using UnalignedI32 [[gnu::aligned(1), gnu::may_alias]] = int32_t;
inline int32_t load_i32(const void* p) { return *reinterpret_cast<const UnalignedI32*>(p); }

// Activation row r of a batch whose rows are as bytes apart.
template <class Act>
inline const Act* act_row(const void* a, int64_t as, int64_t r) {
  return reinterpret_cast<const Act*>(static_cast<const uint8_t*>(a) + r * as);
}

// For the tiles that read everything they need from the activation rows themselves.
inline int64_t no_side_bytes(int64_t) noexcept { return 0; }
inline void no_prepare_side(const void*, void*, int64_t) noexcept {}

// Calls tile(std::integral_constant<int, R>{}, r) for groups of R = 4 activation rows starting at
// r, then once for the 1 to 3 rows left.
template <class Tile>
inline void by_row_groups(int64_t n_a, Tile&& tile) {
  int64_t r = 0;
  for (; r + 4 <= n_a; r += 4) tile(std::integral_constant<int, 4>{}, r);
  switch (n_a - r) {
    case 3: return tile(std::integral_constant<int, 3>{}, r);
    case 2: return tile(std::integral_constant<int, 2>{}, r);
    case 1: return tile(std::integral_constant<int, 1>{}, r);
    default: return;
  }
}

// The side data of an activation row that meets Q4_0 tiles, per block: the correction of the
// unsigned nibbles, -8 Σa, and dA as a float.
struct Q4Side {
  int32_t c;
  float d;
};
inline int64_t q4_side_bytes(int64_t n) noexcept { return round64(n / quant::kQK * static_cast<int64_t>(sizeof(Q4Side))); }

// Row j of n elements from Q4_0 groups packed with the rows in 32-bit lanes: per block i,
// d[j] and qs[k] lane j (bytes 4k..4k+3 of row j's qs), whatever the number of lanes.
template <class Packed>
void q4_0_unpack(const void* packed, int64_t j, int64_t n, void* row) noexcept {
  const auto* pk = static_cast<const Packed*>(packed);
  auto* out = static_cast<quant::BlockQ4_0*>(row);
  for (int64_t i = 0; i < n / quant::kQK; ++i) {
    out[i].d = pk[i].d[j];
    for (int k = 0; k < 4; ++k) std::memcpy(out[i].qs + 4 * k, pk[i].qs[k] + 4 * j, 4);
  }
}

}  // namespace infer::qgemm_tiles
