// What the tile files of every ISA share (qgemm_avx512_util.hpp for the AVX-512 ones,
// qgemm_avx2_impl.hpp, qgemm_kquant_avx2_impl.hpp): plain C++, no intrinsics. Byte sizes, unaligned int32
// reads, the walk over activation rows, the decode prefetches, the empty side data, and the Q4_0
// row restored from a packed group.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "quant/block_formats.hpp"

namespace infer::qgemm_tiles {
// Everything here has internal linkage (the anonymous namespace): each ISA's file keeps its own
// copy, compiled with its flags, which the linker cannot swap for another file's
// (tests/integration/isa_symbols.py).
namespace {

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

// How far ahead a tile of fewer than 4 activation rows (a decode step, where each weight byte
// is read once, from memory) prefetches its weights. The hardware prefetcher alone left such
// tiles stalled on an Intel Xeon VM (TinyLlama shape, 2 threads, weights on huge pages, tokens/s:
// Q4_0 37.5-40.2 without, 42.1-42.5 at 1024 bytes ahead, 41.5-43.2 at 2048, 39.7 at 4096, 36.7
// at 6144; F16 12.0-12.6 without, 13.0 at 1024, 14.0 at 2048; Q4_K_M 35 either way).
constexpr int64_t kDecodePrefetchBytes = 2048;

// And how far ahead it also prefetches them into L2 only (prefetcht1): a tile spends many
// instructions on each cache line, so the L1 prefetches alone keep too few lines on their way.
// Intel Xeon VM (family 6 model 207), TinyLlama shape, 2 threads, tokens/s, two rounds each,
// without -> 8 KiB ahead: Q4_0 41.1-42.0 -> 51.6-52.1, Q8_0 25.4-25.9 -> 29.4-29.6, Q4_K_M
// 40.0-41.3 -> 48.8-51.3, F16 13.3-13.7 -> 14.8-15.6, Q2_K 52.8-53.4 -> 65.5-66.8; 4 KiB ahead
// 3-9% below 8 KiB, 16 KiB level with it or below. (A loop of 12 vector operations a cache line
// read 24.5-24.9 GB/s with the L1 prefetch, 30.6-31.2 with both.)
constexpr int64_t kDecodeL2PrefetchBytes = 8192;

// Prefetches the `bytes` bytes that lie kDecodePrefetchBytes past p into L1, and those
// kDecodeL2PrefetchBytes past it into L2 (hints: no result changes; prefetcht0 and prefetcht1).
template <int R>
inline void prefetch_ahead(const void* p, int64_t bytes) {
  if constexpr (R < 4) {
    const char* c = static_cast<const char*>(p) + kDecodePrefetchBytes;
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c + o, 0, 3);
    const char* c2 = static_cast<const char*>(p) + kDecodeL2PrefetchBytes;
    for (int64_t o = 0; o < bytes; o += 64) __builtin_prefetch(c2 + o, 0, 2);
  }
}

// Part `part` of kParts of prefetch_ahead over a packed block of the K-quant tiles (2-3 KiB),
// issued as the block's work goes: the whole block's 36-45 prefetches at once stalled the decode.
// TinyLlama shape, 2 threads, tokens/s, all at once -> in quarters: Q4_K_M 37.1-37.4 -> 41.9-42.3,
// Q5_K_M 31.6-31.7 -> 35.5, Q6_K 25.7 -> 30.3-30.6, Q2_K 52.0-52.4 -> 54.2-54.9; Q6_K in
// sixteenths 31.0-31.9 against 30.0-30.4 in quarters. (Whole cache lines per part, each line
// once, measured 4-9% slower than these byte ranges, whose edges some lines share.)
template <int R, int kParts, class Packed>
inline void prefetch_part(const Packed* block, int part) {
  constexpr int64_t kPart = (int64_t{sizeof(Packed)} + kParts - 1) / kParts;
  prefetch_ahead<R>(reinterpret_cast<const char*>(block) + part * kPart, kPart);
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

}  // namespace
}  // namespace infer::qgemm_tiles
