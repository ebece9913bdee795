// How the SIMD horizontal pass gathers its taps (see resample_simd.cc). Private to src/transform/.
//
// A vector of int32 lanes is cut into blocks of 4 lanes (128 bits each). A block's lanes are
//  - 4 consecutive output bytes (e.g. B0 R1 G1 B1), when the pixels they span start their taps
//    close together (downscaling by up to about 4x), or else
//  - one output pixel: R, G, B and an unused lane (larger downscales).
// For tap t a block needs the 4 samples at its lanes' first taps + t, i.e. 3 * t bytes further
// along the row than for tap 0. So a 16-byte window of the row, moved 3 bytes per tap, and a
// byte shuffle that is the same for every tap (pshufb, which also zero-extends each sample to
// int32: an index with bit 7 set gives 0) gather them. The windows come either
//  - from one load per vector shared by its blocks (when their windows lie within one vector's
//    width of the row), moved into the blocks by a permutation of 32-bit lanes that is also the
//    same for every tap; or
//  - from one 16-byte load per block.
// Lanes whose pixel has fewer taps than the busiest block of its vector get weight 0 for the
// extra taps.
//
// A plan is made for one vector width (blocks_per_vector = 1, 2 or 4 for 128, 256, 512 bits).
#pragma once

#include "resample_coeffs.h"

#include <cstdint>
#include <vector>

namespace prepfs::transform::detail {

struct HorizontalPlan {
  static constexpr int kLanes = 4;    // int32 lanes per block
  static constexpr int kWindow = 16;  // bytes a block picks its samples from

  int blocks_per_vector = 1;
  bool per_pixel = false;  // a block is one output pixel, else 4 consecutive output bytes
  int out_width = 0;       // output pixels
  int vectors = 0;         // vectors per output row
  int blocks = 0;          // vectors * blocks_per_vector
  int max_taps = 0;        // rows of `weights`
  int read_end = 0;        // the loads read bytes [0, read_end) of a source row, at most

  // Per vector.
  std::vector<std::int32_t> taps;           // taps of its busiest block
  std::vector<std::uint8_t> shared_window;  // 1: one load at window_base, else one per block
  std::vector<std::int32_t> window_base;    // byte offset of the shared window at tap 0
  // Per block.
  std::vector<std::int32_t> block_base;  // [blocks] byte offset of the block's own window at tap 0
  std::vector<std::int32_t> lane_index;  // [blocks][4] 32-bit lanes of the shared window it takes
  std::vector<std::uint8_t> byte_index;  // [blocks][16] shuffle control: lane i = byte [4i]
  std::vector<std::int32_t> weights;     // [max_taps][blocks][4]
};

HorizontalPlan horizontal_plan(const AxisCoeffs& c, int blocks_per_vector);

}  // namespace prepfs::transform::detail
